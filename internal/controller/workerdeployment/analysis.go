package workerdeployment

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"golang.org/x/time/rate"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/internal/planner"
)

// The analysis' own read budget: the reads of one evaluation are bounded
// in time, and each Temporal namespace gets at most DefaultAnalysisRPS
// visibility counts a second (--analysis-visibility-rps) across all its
// TWDs, so that many rollouts at once leave room for the namespace's other
// visibility queries. Temporal's default limit is 10 a second per
// namespace and frontend, bursts of 10 (frontend.namespaceRPS.visibility,
// frontend.namespaceBurstRatio.visibility 1; bursts of 20 got
// ResourceExhausted in make bench): half of it stays for the rest, and the
// burst holds one evaluation's counts (at most 4), so that a second never
// takes more than 9.
const (
	analysisReadTimeout = 5 * time.Second
	DefaultAnalysisRPS  = 5
	analysisBurst       = 4
)

var (
	analysisEvaluations = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rainbow_analysis_evaluations_total",
		Help: "Evaluations of a rollout analysis check, by result (Passed, Failed, Inconclusive).",
	}, []string{"namespace", "name", "check", "result"})
	analysisAborts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rainbow_analysis_aborts_total",
		Help: "Rollouts the analysis aborted (reason AnalysisFailed).",
	}, []string{"namespace", "name"})
	analysisDeferrals = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rainbow_analysis_deferrals_total",
		Help: "Passes whose due analysis evaluation the namespace's read budget deferred, by wait: Turn (it may end a step and holds a reservation) or Spare (it can only abort and waits for counts nobody reserved).",
	}, []string{"namespace", "name", "wait"})
)

func init() { metrics.Registry.MustRegister(analysisEvaluations, analysisAborts, analysisDeferrals) }

// analysisBudget rate-limits the analysis' reads per Temporal namespace.
// Evaluations that may end a step take a turn in a queue (a reservation
// each TWD keeps until it comes back for it), so that they are served in
// the order they asked; the others only take counts nobody waits for.
// Counts go out at the budget's pace whenever the TWDs get to run: turns
// that come due while the work queue is busy would otherwise go out at once.
type analysisBudget struct {
	mu sync.Mutex
	// rps is the rate per namespace; 0 means DefaultAnalysisRPS.
	rps   float64
	conns map[string]*connBudget
	held  map[types.NamespacedName]heldCounts
}

// connBudget is one namespace's: the queue of turns, and the pace of the
// counts actually sent.
type connBudget struct{ queue, pace *rate.Limiter }

// heldCounts is a TWD's turn: n counts of conn's budget, due at at.
type heldCounts struct {
	conn string
	n    int
	at   time.Time
	r    *rate.Reservation
}

func (b *analysisBudget) conn(key string) *connBudget {
	if b.conns == nil {
		b.conns, b.held = map[string]*connBudget{}, map[types.NamespacedName]heldCounts{}
	}
	c, ok := b.conns[key]
	if !ok {
		l := rate.Limit(DefaultAnalysisRPS)
		if b.rps > 0 {
			l = rate.Limit(b.rps)
		}
		c = &connBudget{queue: rate.NewLimiter(l, analysisBurst), pace: rate.NewLimiter(l, analysisBurst)}
		b.conns[key] = c
	}
	return c
}

// paced takes n counts of the pace now, or says how long until it can.
func (c *connBudget) paced(n int, now time.Time) time.Duration {
	if c.pace.AllowN(now, n) {
		return 0
	}
	r := c.pace.ReserveN(now, n)
	defer r.CancelAt(now)
	return max(r.DelayFrom(now), 10*time.Millisecond)
}

// take asks for n counts of conn's budget for twd's evaluation: ok to read
// now, or else wait until it may ask again (0: an evaluation that cannot
// end a step, which only takes spare counts, holds no turn).
func (b *analysisBudget) take(twd types.NamespacedName, conn string, n int, endsStep bool, now time.Time) (wait time.Duration, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	c := b.conn(conn)
	if h, found := b.held[twd]; found {
		if h.conn == conn && h.n == n {
			if now.Before(h.at) {
				return h.at.Sub(now), false
			}
			if d := c.paced(n, now); d > 0 {
				return d, false // keeps its turn
			}
			delete(b.held, twd)
			return 0, true
		}
		h.r.CancelAt(now)
		delete(b.held, twd)
	}
	if !endsStep {
		// Turns hold the queue's tokens below n while anyone waits.
		if c.queue.TokensAt(now) < float64(n) || c.pace.TokensAt(now) < float64(n) {
			return 0, false
		}
		c.queue.AllowN(now, n)
		c.pace.AllowN(now, n)
		return 0, true
	}
	r := c.queue.ReserveN(now, n)
	if !r.OK() {
		return 0, false // more than the burst: never; visibilityCounts' test keeps it within
	}
	at := now.Add(r.DelayFrom(now))
	wait = at.Sub(now)
	if wait == 0 {
		wait = c.paced(n, now)
	}
	if wait > 0 {
		b.held[twd] = heldCounts{conn: conn, n: n, at: at, r: r}
		return wait, false
	}
	return 0, true
}

// release gives back twd's reservation, if it holds one it no longer
// needs (its evaluation is no longer due, or the TWD is gone).
func (b *analysisBudget) release(twd types.NamespacedName, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if h, found := b.held[twd]; found {
		h.r.CancelAt(now)
		delete(b.held, twd)
	}
}

// observeAnalysis reads what the analysis needs when the planner says an
// evaluation is due (planner.AnalysisToRead): the failure counts of the
// target and, for checks comparing with it, of the current version, and
// the target's backlog age. A read that fails makes its checks
// inconclusive, which holds the step. An evaluation the namespace's budget
// has no room for reads nothing (Deferred): the planner says when to ask
// again, and releasing a reservation no longer needed gives it back.
func (r *Reconciler) observeAnalysis(ctx context.Context, o *observation) {
	if o.api == nil || o.input.Temporal == nil || o.retryBusy > 0 {
		return
	}
	key := keyOf(o.twd)
	rd, due := planner.AnalysisToRead(o.input)
	if !due {
		r.analysis.release(key, r.Clock.Now())
		return
	}
	checks := o.input.Spec.Analysis.Checks
	if counts := visibilityCounts(checks); counts > 0 {
		wait, ok := r.analysis.take(key, o.connKey, counts, rd.EndsStep, r.Clock.Now())
		if !ok {
			o.input.Analysis.Deferred, o.input.Analysis.BudgetWait = true, wait
			kind := "Spare"
			if wait > 0 {
				kind = "Turn"
			}
			analysisDeferrals.WithLabelValues(o.twd.Namespace, o.twd.Name, kind).Inc()
			logf.FromContext(ctx).V(1).Info("rollout analysis deferred by the read budget", "build", rd.BuildID, "endsStep", rd.EndsStep, "wait", wait)
			return
		}
	}
	ctx, cancel := context.WithTimeout(ctx, analysisReadTimeout)
	defer cancel()
	type outcome struct {
		closed, failed int64
		err            string
	}
	memo := map[string]outcome{}
	count := func(build string) outcome {
		if out, ok := memo[build]; ok {
			return out
		}
		var out outcome
		switch {
		case build == "":
			out.err = "no version is current to compare with"
		default:
			var err error
			out.closed, out.failed, err = o.api.Outcomes(ctx, o.deploymentName, build, rd.Since)
			if err != nil {
				out.err = err.Error()
			}
		}
		memo[build] = out
		return out
	}
	var stuckRead *planner.Reading
	stuck := func() planner.Reading {
		if stuckRead == nil {
			stuckRead = &planner.Reading{}
			var err error
			if stuckRead.OnTarget, stuckRead.Stuck, err = o.api.StuckWorkflows(ctx, o.deploymentName, rd.BuildID); err != nil {
				stuckRead.Err = err.Error()
			}
		}
		return *stuckRead
	}
	readings := make([]planner.Reading, 0, len(checks))
	for _, c := range checks {
		rg := planner.Reading{Check: c.Name}
		switch c.Kind {
		case v1alpha1.CheckWorkflowFailureRate:
			t := count(rd.BuildID)
			rg.Closed, rg.Failed, rg.Err = t.closed, t.failed, t.err
			if c.CompareCurrent && rg.Err == "" {
				cur := count(rd.CurrentBuildID)
				rg.CurrentClosed, rg.CurrentFailed, rg.Err = cur.closed, cur.failed, cur.err
			}
		case v1alpha1.CheckWorkflowTaskFailures:
			t := stuck()
			rg.OnTarget, rg.Stuck, rg.Err = t.OnTarget, t.Stuck, t.Err
		case v1alpha1.CheckBacklogAge:
			d, ok := o.details[rd.BuildID]
			if !ok {
				var err error
				if d, err = o.api.DescribeVersionNoPollers(ctx, o.deploymentName, rd.BuildID); err != nil {
					rg.Err = err.Error()
					break
				}
				o.details[rd.BuildID] = d
			}
			age, ok := d.OldestTask()
			if !ok {
				rg.Err = "the server reports no task queue statistics"
			}
			rg.BacklogAge = age
		case v1alpha1.CheckPrometheus:
			rg = r.readPrometheus(ctx, o, rd, c)
		}
		readings = append(readings, rg)
	}
	o.input.Analysis.Readings = readings
	logf.FromContext(ctx).V(1).Info("rollout analysis read", "build", rd.BuildID, "since", rd.Since, "readings", readings)
}

// visibilityCounts is how many CountWorkflowExecutions an evaluation of
// checks makes: one for the target's outcomes and one for the current
// version's, shared by the failure-rate checks, and two shared by the
// workflow-task checks.
func visibilityCounts(checks []planner.Check) int {
	var target, current, stuck bool
	for _, c := range checks {
		switch c.Kind {
		case v1alpha1.CheckWorkflowFailureRate:
			target, current = true, current || c.CompareCurrent
		case v1alpha1.CheckWorkflowTaskFailures:
			stuck = true
		}
	}
	n := 0
	for _, b := range []bool{target, current} {
		if b {
			n++
		}
	}
	if stuck {
		n += 2
	}
	return n
}

// analysisSpec is spec.rollout.analysis for the planner, with the CRD's
// defaults for objects written before they existed.
func analysisSpec(a *v1alpha1.AnalysisSpec) *planner.Analysis {
	if a == nil || len(a.Checks) == 0 {
		return nil
	}
	out := &planner.Analysis{Interval: 30 * time.Second, DryRun: a.DryRun}
	if a.Interval != nil {
		out.Interval = a.Interval.Duration
	}
	for _, c := range a.Checks {
		pc := planner.Check{Name: c.Name, Kind: c.Kind, MaxPercent: c.MaxPercent, CompareCurrent: c.Compare == v1alpha1.CompareCurrent,
			MinSamples: int64(c.MinSamples), FailureLimit: c.FailureLimit}
		if pc.MinSamples <= 0 {
			pc.MinSamples = 20 // the CRD's default
		}
		if c.MarginPercent != nil {
			pc.MarginPercent = *c.MarginPercent
		}
		if c.MaxAge != nil {
			pc.MaxAge = c.MaxAge.Duration
		}
		pc.Prometheus = promCheck(c.Prometheus)
		out.Checks = append(out.Checks, pc)
	}
	return out
}

// analysisRecord is status.analysis for the planner.
func analysisRecord(s *v1alpha1.AnalysisStatus) *planner.AnalysisRecord {
	if s == nil {
		return nil
	}
	rec := &planner.AnalysisRecord{BuildID: s.BuildID, Aborted: s.Aborted}
	if s.EvaluatedAt != nil {
		rec.EvaluatedAt = s.EvaluatedAt.Time
	}
	if s.WindowStart != nil {
		rec.WindowStart = s.WindowStart.Time
	}
	if s.AbortedAt != nil {
		rec.AbortedAt = s.AbortedAt.Time
	}
	for _, c := range s.Checks {
		rec.Checks = append(rec.Checks, planner.CheckRecord{Name: c.Name, Result: c.Result, ConsecutiveFailures: c.ConsecutiveFailures, Message: c.Message})
	}
	return rec
}

// analysisStatus is the planner's record as status shows it.
func analysisStatus(rec *planner.AnalysisRecord) *v1alpha1.AnalysisStatus {
	if rec == nil {
		return nil
	}
	s := &v1alpha1.AnalysisStatus{BuildID: rec.BuildID, Aborted: rec.Aborted}
	stamp := func(t time.Time) *metav1.Time {
		if t.IsZero() {
			return nil
		}
		m := metav1.NewTime(t.Truncate(time.Second))
		return &m
	}
	s.EvaluatedAt, s.WindowStart, s.AbortedAt = stamp(rec.EvaluatedAt), stamp(rec.WindowStart), stamp(rec.AbortedAt)
	for _, c := range rec.Checks {
		s.Checks = append(s.Checks, v1alpha1.AnalysisCheckStatus{Name: c.Name, Result: c.Result, ConsecutiveFailures: c.ConsecutiveFailures, Message: c.Message})
	}
	return s
}

// recordAbort sets the abort annotation to the target the analysis
// aborted, as kubectl rainbow abort does, so that kubectl rainbow retry
// (removing it) takes the rollout up again.
func recordAbort(ctx context.Context, c client.Client, twd *v1alpha1.TemporalWorkerDeployment, a *planner.AbortRollout) error {
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, v1alpha1.AnnotationAbortRollout, a.BuildID)
	obj := &v1alpha1.TemporalWorkerDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: twd.Namespace, Name: twd.Name}}
	if err := c.Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return fmt.Errorf("record the abort of version %s (annotation %s): %w", a.BuildID, v1alpha1.AnnotationAbortRollout, err)
	}
	analysisAborts.WithLabelValues(twd.Namespace, twd.Name).Inc()
	return nil
}

// countEvaluations feeds the evaluations metric.
func countEvaluations(twd *v1alpha1.TemporalWorkerDeployment, res planner.Result) {
	for _, e := range res.AnalysisResults {
		analysisEvaluations.WithLabelValues(twd.Namespace, twd.Name, e.Check, string(e.Result)).Inc()
	}
}
