package planner

import (
	"fmt"
	"testing"
	"time"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/internal/fuzzsrc"
)

// fuzzAnalysis gives some inputs an analysis, a last record and readings.
func fuzzAnalysis(s *fuzzsrc.Source, in *Input) {
	if s.Intn(3) != 0 {
		return
	}
	a := &Analysis{Interval: fuzzsrc.Pick(s, 5*time.Second, 30*time.Second, time.Hour), DryRun: s.Intn(4) == 0}
	for n := 1 + s.Intn(2); n > 0; n-- {
		c := Check{Name: fuzzsrc.Pick(s, "failures", "backlog", "vs-current"), Kind: fuzzsrc.Pick(s, v1alpha1.CheckWorkflowFailureRate, v1alpha1.CheckBacklogAge, v1alpha1.CheckWorkflowTaskFailures, v1alpha1.CheckPrometheus),
			MinSamples: int64(fuzzsrc.Pick(s, 1, 20)), FailureLimit: int32(s.Intn(3)), MaxAge: time.Minute}
		if s.Bool() && c.Kind != v1alpha1.CheckWorkflowTaskFailures {
			c.CompareCurrent, c.MarginPercent = true, int32(s.Intn(10))
		} else {
			c.MaxPercent = ptr(int32(s.Intn(101)))
		}
		if c.Kind == v1alpha1.CheckPrometheus {
			c.Prometheus = fuzzPromCheck(s).Prometheus
		}
		a.Checks = append(a.Checks, c)
	}
	in.Spec.Analysis = a
	if s.Bool() {
		last := &AnalysisRecord{BuildID: fuzzsrc.Pick(s, in.Spec.TargetBuildID, "a"), EvaluatedAt: fuzzsrc.Pick(s, time.Time{}, t0.Add(-time.Second), t0.Add(-time.Hour)),
			WindowStart: t0.Add(offset(s)), Aborted: fuzzsrc.Pick(s, "", "evidence")}
		for _, c := range a.Checks {
			last.Checks = append(last.Checks, CheckRecord{Name: c.Name, Result: fuzzsrc.Pick(s, v1alpha1.AnalysisPassed, v1alpha1.AnalysisFailed, v1alpha1.AnalysisInconclusive),
				ConsecutiveFailures: int32(s.Intn(4))})
		}
		in.Analysis.Last = last
	}
	if s.Intn(3) == 0 {
		in.Analysis.Deferred, in.Analysis.BudgetWait = true, fuzzsrc.Pick(s, 0, time.Second, time.Hour)
	} else if s.Bool() {
		in.Analysis.Readings = []Reading{}
		for _, c := range a.Checks {
			in.Analysis.Readings = append(in.Analysis.Readings, Reading{Check: c.Name, Err: fuzzsrc.Pick(s, "", "", "boom"),
				Closed: int64(s.Intn(50)), Failed: int64(s.Intn(50)), CurrentClosed: int64(s.Intn(50)), CurrentFailed: int64(s.Intn(50)),
				OnTarget: int64(s.Intn(50)), Stuck: int64(s.Intn(5)), BacklogAge: fuzzsrc.Pick(s, 0, time.Second, time.Hour), Prometheus: fuzzPromReading(s).Prometheus})
		}
	}
}

// analysisViolations: while the analysis judges a ramping target, it never
// advances a step or promotes unless every check passed (dry run aside);
// an abort names the target, never happens in a dry run, and scales down
// or deletes nothing (the target keeps its workers for its pinned
// workflows); AnalysisToRead reads only for a ramping target; an
// evaluation the budget deferred advances nothing (and, in the
// rollouts of TestAnalysisInvariants, asks again in time).
func analysisViolations(in Input, r Result) []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	v := newView(in)
	_, judging := analysing(v)
	if rd, due := AnalysisToRead(in); due && (!judging || rd.BuildID != in.Spec.TargetBuildID || in.Temporal.RampingBuildID != rd.BuildID) {
		bad("AnalysisToRead reads %+v while the target does not ramp under analysis", rd)
	}
	if rd, due := AnalysisToRead(in); due && rd.EndsStep && (in.Spec.Paused || in.Spec.Analysis.DryRun) {
		bad("an evaluation of a paused or dry-run rollout waits for the budget as if it could end a step")
	}
	if a := r.AbortRollout; a != nil {
		if (in.Spec.Analysis == nil || in.Spec.Analysis.DryRun || a.BuildID != in.Spec.TargetBuildID || !judging) && !stepGateFailed(in) {
			bad("abort %+v: not a target judged by an analysis that may abort, nor one whose step gate failed", a)
		}
		for _, s := range r.Scale {
			if d, ok := v.deps[s.BuildID]; ok && s.Replicas < d.Replicas {
				bad("an abort scales Deployment %s down to %d", s.Name, s.Replicas)
			}
		}
		for _, d := range r.DeleteDeployments {
			if d.BuildID == in.Spec.TargetBuildID {
				bad("an abort deletes the target's Deployment %s", d.Name)
			}
		}
		if rt := r.Routing; rt != nil && rt.Op != RemoveRamp {
			bad("an abort routes %+v", rt)
		}
	}
	if !judging || in.Spec.Analysis.DryRun || r.Routing == nil || hasEvent(r, EventRolledBack) {
		return errs
	}
	rt := r.Routing
	advances := rt.BuildID == in.Spec.TargetBuildID &&
		(rt.Op == SetCurrent || (rt.Op == SetRamp && rt.RampPercentage > in.Temporal.RampPercentage))
	if advances && (r.Analysis == nil || unpassed(in.Spec.Analysis, *r.Analysis) != "") {
		bad("the plan advances %+v while the analysis has not passed: %+v", rt, r.Analysis)
	}
	if advances && in.Analysis.Deferred && in.Analysis.Readings == nil {
		bad("the plan advances %+v on a verdict older than an interval, its evaluation deferred", rt)
	}
	return errs
}

// TestAnalysisInvariants runs analysisViolations on generated inputs, and
// on ramping rollouts with every kind of reading: random inputs seldom
// ramp the target.
func TestAnalysisInvariants(t *testing.T) {
	eachRandomInput(t, 4242, 20000, func(in Input) []error { return analysisViolations(in, Plan(in)) })
	// The generated inputs' bytes run out before their analysis, so the
	// rollouts take theirs from bytes of their own.
	fuzzsrc.EachRandom(t, 777, 5000, 64, func(data []byte) []error {
		s := fuzzsrc.New(data)
		r := with(base(), analysed)
		r.Temporal.RampPercentage = fuzzsrc.Pick(s, int32(10), 50, 30)
		r.Spec.Paused = s.Intn(4) == 0
		if s.Intn(4) == 0 {
			r.Temporal.RampChangedAt = t0 // within the step's pause
		}
		fuzzAnalysis(fuzzsrc.New(append([]byte{0}, data[8:]...)), &r) // 0: with an analysis
		res := Plan(r)
		errs := analysisViolations(r, res)
		// These rollouts reach the analysis (random inputs mostly wait
		// on something before it).
		if again := deferredRetry(r.Spec.Analysis, r.Analysis); r.Analysis.Deferred && r.Analysis.Readings == nil && res.RequeueAfter > again {
			errs = append(errs, fmt.Errorf("a deferred evaluation asks again in %s, later than %s", res.RequeueAfter, again))
		}
		return errs
	})
}
