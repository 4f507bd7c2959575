package planner

import (
	"fmt"
	"strings"
	"time"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
)

// Analysis is spec.rollout.analysis.
type Analysis struct {
	Checks   []Check
	Interval time.Duration
	DryRun   bool
}

// Check is one check of the analysis.
type Check struct {
	Name string
	Kind v1alpha1.AnalysisCheckKind
	// MaxPercent bounds a failure rate; nil with CompareCurrent.
	MaxPercent *int32
	// CompareCurrent bounds a failure rate by the current version's rate
	// over the same window plus MarginPercent.
	CompareCurrent bool
	MarginPercent  int32
	// MaxAge bounds a BacklogAge check.
	MaxAge       time.Duration
	MinSamples   int64
	FailureLimit int32
	// Prometheus is a Prometheus check's query and bounds.
	Prometheus *PromCheck
}

// AnalysisRecord is status.analysis: the last evaluation of the target.
type AnalysisRecord struct {
	BuildID     string
	EvaluatedAt time.Time
	WindowStart time.Time
	Checks      []CheckRecord
	// Aborted is the evidence of the abort; empty if none.
	Aborted   string
	AbortedAt time.Time
}

// CheckRecord is a check's verdict in the record.
type CheckRecord struct {
	Name                string
	Result              v1alpha1.AnalysisResult
	ConsecutiveFailures int32
	Message             string
}

// Reading is what observe read from Temporal for one check.
type Reading struct {
	Check string
	// Err: the read failed; the check is inconclusive.
	Err string
	// Closed and Failed count the target's workflows started in the
	// window that closed, and those that closed Failed, TimedOut or
	// Terminated; Current* the same for the current version.
	Closed, Failed               int64
	CurrentClosed, CurrentFailed int64
	// OnTarget counts the workflows on the target (any start time: an
	// auto-upgrade workflow moved onto it replays there), Stuck those
	// among them running with a workflow task that keeps failing.
	OnTarget, Stuck int64
	// BacklogAge is the oldest waiting task of the target's task queues.
	BacklogAge time.Duration
	// Prometheus is a Prometheus check's answer.
	Prometheus PromReading
}

// AnalysisObserved is the analysis part of Input.
type AnalysisObserved struct {
	// Last is status.analysis; nil if none.
	Last *AnalysisRecord
	// Readings are this pass's reads (AnalysisToRead); nil if none were
	// made: not due, or deferred by the namespace's read budget.
	Readings []Reading
	// Deferred: an evaluation was due, but the namespace's read budget
	// had no room for it, so nothing was read. BudgetWait is when a
	// reservation made for it will have room; 0 if none was made (an
	// evaluation that can only abort waits for spare budget).
	Deferred   bool
	BudgetWait time.Duration
}

// AnalysisRead says what observe reads for the analysis.
type AnalysisRead struct {
	BuildID, CurrentBuildID string
	// Since is the window's start: when the target started ramping.
	Since time.Time
	// EndsStep: the verdict may end the step (its pause is over, the
	// rollout is not paused, not a dry run), so the read waits for its
	// turn in the namespace's budget. Otherwise it can only abort, and
	// takes only budget no step-ending evaluation waits for.
	EndsStep bool
}

// AnalysisToRead is the read this pass makes for the analysis, if one is
// due: only while a Progressive rollout ramps its target, never for idle
// TWDs, and at most once per spec.rollout.analysis.interval (sooner when
// the window changed: a retried rollout starts afresh).
func AnalysisToRead(in Input) (AnalysisRead, bool) {
	v := newView(in)
	since, ok := analysing(v)
	if !ok {
		return AnalysisRead{}, false
	}
	if last := lastRecord(v, since); last != nil && !last.EvaluatedAt.IsZero() &&
		in.Now.Before(last.EvaluatedAt.Add(in.Spec.Analysis.Interval)) {
		return AnalysisRead{}, false
	}
	return AnalysisRead{BuildID: v.target, CurrentBuildID: v.temporal().CurrentBuildID, Since: since, EndsStep: verdictEndsStep(v)}, true
}

// verdictEndsStep: a passing verdict would end the target's step now.
// During the pause, while the step's gate has not succeeded, while paused,
// or in a dry run a verdict can only abort.
func verdictEndsStep(v *view) bool {
	if v.in.Spec.Paused || v.in.Spec.Analysis.DryRun {
		return false
	}
	i := stepIndex(v.in.Spec.Steps, v.temporal().RampPercentage)
	return i < 0 || stepOver(v, v.in.Spec.Steps[i]) && stepGateSucceeded(v, v.in.Spec.Steps[i])
}

// stepGateSucceeded: the step names no gate, or its run for the target
// succeeded.
func stepGateSucceeded(v *view, s Step) bool {
	run := v.in.Gate
	return s.Gate == nil || run != nil && run.BuildID == v.target && run.Step == s.RampPercentage && run.Phase == GateSucceeded
}

// deferredRetry is when a TWD whose evaluation the budget deferred asks
// again: when its reservation has room, or, with none (an evaluation
// that can only abort), an interval later, as after a read.
func deferredRetry(a *Analysis, o AnalysisObserved) time.Duration {
	if o.BudgetWait > 0 {
		return o.BudgetWait
	}
	return a.Interval
}

// budgetHold says why a deferred evaluation holds the step: the last
// verdict is older than an interval, too old to end a step on.
const budgetHold = "the evaluation due waits for its turn in the namespace's analysis read budget (--analysis-visibility-rps)"

// analysing: the target ramps under a Progressive rollout with checks;
// since is when it started ramping.
func analysing(v *view) (time.Time, bool) {
	a := v.in.Spec.Analysis
	if a == nil || len(a.Checks) == 0 || v.in.Spec.Strategy != v1alpha1.StrategyProgressive || !v.known() ||
		v.in.Deletion != nil || v.in.ClaimedBy != nil || v.in.Spec.AdoptionPending || v.target == "" {
		return time.Time{}, false
	}
	t := v.temporal()
	if t.RampingBuildID != v.target || t.CurrentBuildID == v.target || v.in.Spec.AbortedBuildID == v.target {
		return time.Time{}, false
	}
	if s := v.tvs[v.target].RampingSince; s != nil {
		return *s, true
	}
	return time.Time{}, true // unknown: every check is inconclusive
}

// lastRecord is the record of this target and window, if any.
func lastRecord(v *view, since time.Time) *AnalysisRecord {
	l := v.in.Analysis.Last
	// Status keeps whole seconds.
	if l == nil || l.BuildID != v.target || !l.WindowStart.Truncate(time.Second).Equal(since.Truncate(time.Second)) {
		return nil
	}
	return l
}

// Judge gives one check's verdict on a reading, with its evidence. Pure.
func Judge(c Check, r Reading, since time.Time) (v1alpha1.AnalysisResult, string) {
	if c.Kind == v1alpha1.CheckPrometheus {
		return judgePrometheus(c, r, since)
	}
	window := "the window's start is unknown"
	if !since.IsZero() {
		window = "since " + since.UTC().Format(time.RFC3339)
	}
	if r.Err != "" {
		return v1alpha1.AnalysisInconclusive, fmt.Sprintf("%s: could not read Temporal (%s); holding the step", c.Name, r.Err)
	}
	if since.IsZero() {
		return v1alpha1.AnalysisInconclusive, fmt.Sprintf("%s: Temporal did not report when the target started ramping, so there is no window to count in", c.Name)
	}
	switch c.Kind {
	case v1alpha1.CheckBacklogAge:
		msg := fmt.Sprintf("%s: oldest waiting task of the target is %s old, bound %s", c.Name, r.BacklogAge.Round(time.Second), c.MaxAge)
		if r.BacklogAge > c.MaxAge {
			return v1alpha1.AnalysisFailed, msg
		}
		return v1alpha1.AnalysisPassed, msg
	case v1alpha1.CheckWorkflowTaskFailures:
		return judgeStuck(c, r)
	case v1alpha1.CheckWorkflowFailureRate:
	default:
		return v1alpha1.AnalysisInconclusive, fmt.Sprintf("%s: unknown kind %q", c.Name, c.Kind)
	}
	rate := func(failed, closed int64) float64 { return 100 * float64(failed) / float64(max(closed, 1)) }
	got := fmt.Sprintf("%s: %d of %d workflows closed on the target failed, timed out or were terminated (%.1f%%) %s",
		c.Name, r.Failed, r.Closed, rate(r.Failed, r.Closed), window)
	if r.Closed < c.MinSamples {
		return v1alpha1.AnalysisInconclusive, fmt.Sprintf("%s; fewer than minSamples (%d): holding the step until more close", got, c.MinSamples)
	}
	// Integers, so that a rate equal to its bound passes: failed/closed
	// above maxPercent/100, or above currentFailed/currentClosed plus
	// margin/100.
	boundText := fmt.Sprintf("maxPercent %d%%", ptrValue(c.MaxPercent))
	above := r.Failed*100 > int64(ptrValue(c.MaxPercent))*r.Closed
	if c.CompareCurrent {
		if r.CurrentClosed < c.MinSamples {
			return v1alpha1.AnalysisInconclusive, fmt.Sprintf("%s; only %d closed on the current version, fewer than minSamples (%d): holding the step",
				got, r.CurrentClosed, c.MinSamples)
		}
		boundText = fmt.Sprintf("the current version's %.1f%% (%d of %d) plus a margin of %d points",
			rate(r.CurrentFailed, r.CurrentClosed), r.CurrentFailed, r.CurrentClosed, c.MarginPercent)
		above = 100*r.Failed*r.CurrentClosed > (100*r.CurrentFailed+int64(c.MarginPercent)*r.CurrentClosed)*r.Closed
	}
	if above {
		return v1alpha1.AnalysisFailed, got + "; above " + boundText
	}
	return v1alpha1.AnalysisPassed, got + "; within " + boundText
}

// judgeStuck judges a WorkflowTaskFailures check: the share of the
// target's workflows whose workflow task keeps failing, against maxPercent.
func judgeStuck(c Check, r Reading) (v1alpha1.AnalysisResult, string) {
	got := fmt.Sprintf("%s: %d of %d workflows on the target are stuck on a workflow task that keeps failing or timing out (%.1f%%)",
		c.Name, r.Stuck, r.OnTarget, 100*float64(r.Stuck)/float64(max(r.OnTarget, 1)))
	if r.OnTarget < c.MinSamples {
		return v1alpha1.AnalysisInconclusive, fmt.Sprintf("%s; fewer than minSamples (%d): holding the step until more run there", got, c.MinSamples)
	}
	bound := fmt.Sprintf("maxPercent %d%%", ptrValue(c.MaxPercent))
	if r.Stuck*100 > int64(ptrValue(c.MaxPercent))*r.OnTarget {
		return v1alpha1.AnalysisFailed, got + "; above " + bound
	}
	return v1alpha1.AnalysisPassed, got + "; within " + bound
}

// evaluate is the record of this pass: fresh verdicts from the readings,
// consecutive failures counted on from the last record of the same window,
// or the last record as it was when nothing was read.
func evaluate(v *view, since time.Time) AnalysisRecord {
	last := lastRecord(v, since)
	readings := v.in.Analysis.Readings
	if readings == nil {
		if last != nil {
			return *last
		}
		return AnalysisRecord{BuildID: v.target, WindowStart: since}
	}
	rec := AnalysisRecord{BuildID: v.target, EvaluatedAt: v.now(), WindowStart: since}
	for _, c := range v.in.Spec.Analysis.Checks {
		r := Reading{Check: c.Name, Err: "not read"}
		for _, x := range readings {
			if x.Check == c.Name {
				r = x
			}
		}
		res, msg := Judge(c, r, since)
		cr := CheckRecord{Name: c.Name, Result: res, Message: msg}
		// A pass starts the count again; an inconclusive evaluation (a
		// failed read) neither counts nor forgives.
		prev := int32(0)
		if last != nil {
			for _, l := range last.Checks {
				if l.Name == c.Name {
					prev = l.ConsecutiveFailures
				}
			}
		}
		switch res {
		case v1alpha1.AnalysisFailed:
			cr.ConsecutiveFailures = prev + 1
		case v1alpha1.AnalysisInconclusive:
			cr.ConsecutiveFailures = prev
		}
		rec.Checks = append(rec.Checks, cr)
	}
	return rec
}

// beyondLimit is the first check whose failures in a row exceed its limit.
func beyondLimit(a *Analysis, rec AnalysisRecord) (CheckRecord, bool) {
	for _, c := range a.Checks {
		for _, r := range rec.Checks {
			if r.Name == c.Name && r.Result == v1alpha1.AnalysisFailed && r.ConsecutiveFailures > c.FailureLimit {
				return r, true
			}
		}
	}
	return CheckRecord{}, false
}

func isBeyond(a *Analysis, rec AnalysisRecord) bool {
	_, beyond := beyondLimit(a, rec)
	return beyond
}

// unpassed says why the analysis holds the step: a check that did not
// pass, or no evaluation yet. Empty when every check passed.
func unpassed(a *Analysis, rec AnalysisRecord) string {
	if rec.EvaluatedAt.IsZero() {
		return "the analysis has not been evaluated yet in this ramp"
	}
	var why []string
	for _, r := range rec.Checks {
		if r.Result != v1alpha1.AnalysisPassed {
			why = append(why, fmt.Sprintf("check %s is %s (%s)", r.Name, r.Result, r.Message))
		}
	}
	if len(rec.Checks) < len(a.Checks) {
		why = append(why, "not every check was evaluated")
	}
	return strings.Join(why, "; ")
}

// judgeRamp runs the analysis on a ramping target: it records the
// evaluation for status, aborts on failures beyond a check's limit (unless
// dryRun), and tells progressive whether the step may end: not while a check
// fails or is inconclusive.
func judgeRamp(v *view, p *plan) (prog progress, stop bool, hold string) {
	since, ok := analysing(v)
	if !ok {
		return progress{}, false, ""
	}
	a := v.in.Spec.Analysis
	rec := evaluate(v, since)
	fresh := v.in.Analysis.Readings != nil
	p.res.Analysis = &rec
	switch {
	case v.in.Analysis.Deferred && !fresh:
		p.after(deferredRetry(a, v.in.Analysis))
	case !rec.EvaluatedAt.IsZero():
		p.afterDeadline(v.now(), rec.EvaluatedAt.Add(a.Interval))
	default:
		p.after(requeueWatch)
	}
	if fresh {
		for _, r := range rec.Checks {
			p.res.AnalysisResults = append(p.res.AnalysisResults, CheckOutcome{Check: r.Name, Result: r.Result})
		}
	}
	failed, beyond := beyondLimit(a, rec)
	switch {
	case beyond && a.DryRun:
		if last := lastRecord(v, since); fresh && (last == nil || !isBeyond(a, *last)) {
			// Once when the failures go beyond the limit, not every
			// interval while they stay there (each message differs, so
			// the recorder would not fold them into one Event).
			// Normal: Warnings are only emitted when Ready changes.
			p.event(EventNormal, v1alpha1.ReasonAnalysisFailed, fmt.Sprintf(
				"dry run: the rollout of version %s would be aborted: %s (spec.rollout.analysis.dryRun aborts nothing)", v.target, failed.Message))
		}
		return progress{}, false, ""
	case beyond:
		return abortByAnalysis(v, p, &rec, failed), true, ""
	case a.DryRun:
		return progress{}, false, ""
	case v.in.Analysis.Deferred && !fresh:
		// The step ends only on a verdict at most an interval old.
		return progress{}, false, joinHolds(budgetHold, unpassed(a, rec))
	}
	return progress{}, false, unpassed(a, rec)
}

// abortByAnalysis aborts the rollout the way a person does (the abort
// annotation names the target, so kubectl rainbow retry takes it up
// again): the ramp we set goes, and the target keeps its workers for the
// workflows pinned to it.
func abortByAnalysis(v *view, p *plan, rec *AnalysisRecord, failed CheckRecord) progress {
	evidence := fmt.Sprintf("check %s failed %d time(s) in a row, more than its failureLimit: %s", failed.Name, failed.ConsecutiveFailures, failed.Message)
	rec.Aborted, rec.AbortedAt = evidence, v.now()
	return abortRamp(v, p, v1alpha1.ReasonAnalysisFailed, "the analysis", evidence)
}

// abortRamp aborts a ramping target's rollout on who's evidence, with a
// Warning Event of reason.
func abortRamp(v *view, p *plan, reason, who, evidence string) progress {
	p.res.AbortRollout = &AbortRollout{BuildID: v.target, Evidence: evidence}
	msg := fmt.Sprintf("%s aborted the rollout of version %s: %s", who, v.target, evidence)
	t := v.temporal()
	if v.ours(t.LastModifierIdentity) && v.canWriteRouting() {
		p.route(Routing{Op: RemoveRamp}, EventRemoveRamp, fmt.Sprintf("removing the ramp of version %s: %s aborted its rollout", v.target, who))
		msg += "; removing its ramp"
	} else {
		msg += fmt.Sprintf("; its ramp of %d%% was set by %q and stays", t.RampPercentage, t.LastModifierIdentity)
	}
	p.event(EventWarning, reason, msg)
	return blockedBecause(v1alpha1.ReasonRolloutAborted, msg+abortAdvice(v))
}

func abortAdvice(v *view) string {
	return fmt.Sprintf("; new workflows go to the current version and version %s keeps its workers for its pinned workflows. "+
		"To retry: kubectl rainbow retry %s (removes annotation %s); to roll back, set spec.template back", v.target, v.in.Name, v1alpha1.AnnotationAbortRollout)
}

// abortEvidence is the analysis' evidence for an aborted target, if the
// analysis aborted it.
func abortEvidence(v *view) string {
	if l := v.in.Analysis.Last; l != nil && l.BuildID == v.target && l.Aborted != "" {
		return l.Aborted
	}
	return ""
}

// keptRecord is the record status keeps when no evaluation runs: the
// target's last one, so that the evidence of an abort stays.
func keptRecord(v *view) *AnalysisRecord {
	if l := v.in.Analysis.Last; l != nil && l.BuildID == v.target {
		c := *l
		return &c
	}
	return nil
}

// AbortRollout records that the analysis aborted the target's rollout:
// the executor sets v1alpha1.AnnotationAbortRollout to BuildID.
type AbortRollout struct {
	BuildID  string
	Evidence string
}

// CheckOutcome is one fresh verdict, for the metrics.
type CheckOutcome struct {
	Check  string
	Result v1alpha1.AnalysisResult
}
