package chaos

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/dev/faultproxy"
	"github.com/rainbow-deploy/rainbow/test/harness"
)

// pollTemporalDown is how often the controller tries Temporal again while
// it cannot read it (the planner's requeue for that case, which the
// planner's table tests check). It bounds the status writes a fault may
// cause; how soon Temporal is read again after a fault is recorded, not
// asserted.
const pollTemporalDown = 10 * time.Second

// temporalFaults is a scenario whose controller reaches Temporal and the
// API server through fault proxies, with a TWD at v1, traffic and the
// invariants running.
type temporalFaults struct {
	s         *Scenario
	temporal  *faultproxy.Temporal
	kube      *faultproxy.Kube
	c         *Controller
	tw        *harness.Rollout
	traffic   *Traffic
	inv       *Invariants
	changes   *DeploymentWatch
	reasons   *reasonLog
	baseline  map[string]int // Deployment writes per Deployment in a rollout without faults
	yardstick time.Duration
}

// slowRamp is a Progressive rollout whose ramp steps last long enough for
// a fault to land in the middle of one.
func slowRamp(twd *v1alpha1.TemporalWorkerDeployment) {
	twd.Spec.Rollout = v1alpha1.RolloutSpec{
		Strategy: v1alpha1.StrategyProgressive,
		Steps: []v1alpha1.RolloutStep{
			{RampPercentage: 25, PauseDuration: metav1.Duration{Duration: 15 * time.Second}},
			{RampPercentage: 75, PauseDuration: metav1.Duration{Duration: 5 * time.Second}},
		},
	}
}

func startTemporalFaults(t *testing.T, name string) *temporalFaults {
	s := run.Scenario(t, name)
	f := &temporalFaults{s: s}
	f.temporal = s.TemporalProxy()
	var kubeconfig string
	f.kube, kubeconfig = s.KubeProxy()
	f.c = s.StartController(kubeconfig)
	f.tw = s.NewRollout("orders", slowRamp)
	f.changes = s.WatchDeployments()
	f.reasons = s.watchReasons(f.tw)
	f.tw.Create(f.tw.Spec("v1"))
	f.tw.WaitCurrent(4*time.Minute, f.tw.BuildIDOf("v1"))
	f.traffic = s.StartTraffic(f.tw.TaskQueue)
	f.inv = s.WatchInvariants(f.tw, f.traffic)

	// One rollout without faults: the yardstick for time and writes.
	start := time.Now()
	f.tw.WaitCurrent(4*time.Minute, f.tw.SetImage("v2"))
	f.yardstick = time.Since(start)
	f.baseline = writesPerDeployment(deploymentWrites(f.kube.Requests(), start, time.Now()))
	s.Note("a rollout without faults took %s; Deployment writes %v", f.yardstick.Round(100*time.Millisecond), f.baseline)
	return f
}

// waitRamping waits until Temporal ramps traffic to build: the middle of
// a rollout.
func (f *temporalFaults) waitRamping(build string) {
	f.s.Helper()
	f.s.Eventually(3*time.Minute, "Temporal ramps to "+build, func() (bool, string) {
		cur, ramp, pct, err := f.tw.Routing(context.Background())
		if err != nil {
			return false, err.Error()
		}
		return ramp == build, fmt.Sprintf("current=%s ramping=%s@%g%%", cur, ramp, pct)
	})
}

// noDeploymentTouched fails the test if a Deployment's spec or metadata
// changed, or the controller wrote one, in [from, to).
func (f *temporalFaults) noDeploymentTouched(what string, from, to time.Time) {
	f.s.Helper()
	for _, c := range f.changes.Between(from, to) {
		f.s.Violation("Deployment %s %s at %s during %s", c.Name, c.What, c.At.Format("15:04:05.000"), what)
	}
	for _, r := range deploymentWrites(f.kube.Requests(), from, to) {
		f.s.Violation("the controller wrote Deployment %s (%s %s -> %d) at %s during %s", r.Name, r.Verb, r.Sub, r.Code, r.Start.Format("15:04:05.000"), what)
	}
}

// fewStatusWrites fails the test if the controller wrote the TWD's status
// more often during a fault than a pass per poll: each status write wakes
// the TWD at once, so a status that changes with every pass makes a hot
// loop past any backoff.
func (f *temporalFaults) fewStatusWrites(what string, from, to time.Time) {
	f.s.Helper()
	n := 0
	for _, r := range f.kube.Requests() {
		if r.Resource == "temporalworkerdeployments" && r.Sub == "status" && r.Write() && !r.Start.Before(from) && r.Start.Before(to) {
			n++
		}
	}
	if bound := 3 + int(to.Sub(from)/pollTemporalDown); n > bound {
		f.s.Violation("%d status writes in %s of %s (at most %d expected): the controller loops", n, to.Sub(from).Round(time.Second), what, bound)
	}
}

// finish lets the traffic end and runs the final checks.
func (f *temporalFaults) finish(last string) {
	f.s.Helper()
	counts := f.traffic.Finish(f.s.Length(3*time.Minute, 5*time.Minute))
	f.s.Logf("workflows: %+v", counts)
	waitOnlyVersion(f.s, last)
	f.s.Logf("invariant checks: %v", f.inv.Finish())
	stale, routes, failed := staleRoutingWrites(f.kube.Requests(), f.temporal.Calls())
	for _, v := range stale {
		f.s.Violation("routing write from a stale plan: %s", v)
	}
	f.s.Logf("stale plan check: %d routing writes, %d failed Kubernetes writes", routes, failed)
}

// TestTemporalOutage stops Temporal (the proxy refuses every connection,
// the controller's and the workers' alike) in the middle of a ramp: no
// Deployment may be touched, the conditions must say that Temporal cannot
// be read and what to check, and once Temporal is back the controller
// must read it again and finish the rollout. How soon it reads it again
// is noted in the report, not asserted.
func TestTemporalOutage(t *testing.T) {
	t.Parallel()
	f := startTemporalFaults(t, "temporal-outage")
	s := f.s
	rounds := s.Count(1, 2)
	var last string
	for i := 0; i < rounds; i++ {
		w := f.midRamp(fmt.Sprintf("v%d", 3+i), "temporal-outage", faultproxy.TemporalFault{Down: true}, s.Length(20*time.Second, 5*time.Minute),
			"Ready and Progressing say Temporal cannot be read", func(ready, prog metav1.Condition, _ time.Time) bool {
				// Waiting for the first minute of failing reads, an outage
				// after: either way not Ready, and the message names what
				// to check.
				waiting := prog.Reason == v1alpha1.ReasonWaitingForTemporal && prog.Status == metav1.ConditionTrue
				blocked := outageReason(prog.Reason) && prog.Status == metav1.ConditionFalse
				return (waiting || blocked) && ready.Status != metav1.ConditionTrue &&
					strings.Contains(prog.Message, "TemporalConnection") // names what to check
			})
		last = w.build
		back := w.back

		s.Eventually(3*time.Minute, "the controller reads Temporal again", func() (bool, string) {
			_, ok := firstOK(f.temporal.Calls(), "DescribeWorkerDeployment", back)
			return ok, ""
		})
		first, _ := firstOK(f.temporal.Calls(), "DescribeWorkerDeployment", back)
		readAgain := first.Start.Sub(back)
		f.tw.WaitCurrent(4*time.Minute, last)
		done := w.fault.from(back).Converged()
		s.Note("outage %d (%s): conditions said so after %s (%q); Temporal read again %s after it returned, rollout complete %s after",
			i+1, w.length, w.reported.Round(100*time.Millisecond), w.message, readAgain.Round(100*time.Millisecond), done.Round(100*time.Millisecond))
	}
	f.finish(last)
}

// TestSlowTemporal delays every worker deployment call of the controller
// by seconds for a whole rollout: the rollout must still complete, no
// Deployment be written more often than without the delay, the conditions
// must not claim that Temporal is down, and the calls stay paced.
func TestSlowTemporal(t *testing.T) {
	t.Parallel()
	f := startTemporalFaults(t, "temporal-slow")
	s := f.s
	delay := s.Length(3*time.Second, 5*time.Second)
	rounds := s.Count(1, 3)
	var last string
	for i := 0; i < rounds; i++ {
		fault := s.Fault("temporal-slow")
		from := time.Now()
		f.temporal.Set(faultproxy.TemporalFault{Delay: delay, Match: faultproxy.WorkerDeploymentAPIs})
		last = f.tw.SetImage(fmt.Sprintf("v%d", 3+i))
		f.tw.WaitCurrent(10*time.Minute, last)
		took := fault.Converged()
		to := time.Now()
		f.temporal.Pass()

		writes := writesPerDeployment(deploymentWrites(f.kube.Requests(), from, to))
		f.noChurn(writes)
		describes, _ := callsBetween(f.temporal.Calls(), "DescribeWorkerDeployment", from, to)
		s.Note("rollout %d with every worker deployment call %s slower: %s (without: %s); %d Describes; Deployment writes %v",
			i+1, delay, took.Round(100*time.Millisecond), f.yardstick.Round(100*time.Millisecond), describes, writes)
		for _, r := range f.reasons.between(from, to) {
			if outageReason(r) {
				s.Errorf("a slow Temporal was reported as %s", r)
			}
		}
	}
	f.finish(last)
}

// TestTemporalResourceExhausted answers every worker deployment call of the
// controller with ResourceExhausted in the middle of a ramp: nothing may
// be touched, the status must say that Temporal throttles, the controller
// must back off (no more than a call a second on average), and the rollout
// completes once Temporal answers again.
func TestTemporalResourceExhausted(t *testing.T) {
	t.Parallel()
	f := startTemporalFaults(t, "temporal-exhausted")
	s := f.s
	rounds := s.Count(1, 2)
	var last string
	for i := 0; i < rounds; i++ {
		w := f.midRamp(fmt.Sprintf("v%d", 3+i), "temporal-resource-exhausted",
			faultproxy.TemporalFault{Exhausted: true, Match: faultproxy.WorkerDeploymentAPIs}, s.Length(40*time.Second, 3*time.Minute),
			"Progressing says Temporal throttles since the fault began", func(_, prog metav1.Condition, from time.Time) bool {
				// Temporal itself throttles reads for a moment after the
				// ramp write just before the fault, and one throttle runs
				// into the other; a note from an earlier round is minutes old.
				since, ok := throttledSince(prog.Message)
				return ok && !since.Before(from.Add(-10*time.Second).Truncate(time.Second))
			})
		last = w.build
		from, back := w.from, w.back
		calls, refused := callsBetween(f.temporal.Calls(), "DescribeWorkerDeployment", from, back)
		if rate := float64(calls) / back.Sub(from).Seconds(); rate > 1 {
			s.Errorf("%d Describes in %s of ResourceExhausted (%.1f/s): the controller does not back off", calls, back.Sub(from).Round(time.Second), rate)
		}

		f.tw.WaitCurrent(4*time.Minute, last)
		done := w.fault.from(back).Converged()
		first, _ := firstOK(f.temporal.Calls(), "DescribeWorkerDeployment", back)
		s.Note("ResourceExhausted %d (%s): %d Describes (%d refused), status said so after %s (%q); read again %s after, rollout complete %s after",
			i+1, w.length, calls, refused, w.reported.Round(100*time.Millisecond), w.message, first.Start.Sub(back).Round(100*time.Millisecond), done.Round(100*time.Millisecond))
	}
	f.finish(last)
}

// faultWindow is one fault held for a while in the middle of a ramp.
type faultWindow struct {
	fault    *Fault
	build    string
	length   time.Duration
	from     time.Time
	back     time.Time
	reported time.Duration // from the fault to the status saying so
	message  string        // what Progressing said then
}

// midRamp rolls out tag and, once Temporal ramps to it, switches the
// proxy to fault for length; the status must report it (reports) within
// that time. Then it lifts the fault and checks that no Deployment was
// touched and the status was not rewritten in a loop meanwhile.
func (f *temporalFaults) midRamp(tag, kind string, fault faultproxy.TemporalFault, length time.Duration, expected string,
	reports func(ready, progressing metav1.Condition, from time.Time) bool) faultWindow {
	f.s.Helper()
	w := faultWindow{build: f.tw.SetImage(tag), length: length}
	f.waitRamping(w.build)
	w.fault = f.s.Fault(kind)
	w.from = time.Now()
	f.temporal.Set(fault)
	f.s.Eventually(length, expected, func() (bool, string) {
		twd, err := f.tw.Read()
		if err != nil {
			return false, err.Error()
		}
		ready, prog := conditionsSay(twd)
		w.message = prog.Message
		return reports(ready, prog, w.from), fmt.Sprintf("Ready=%s/%s Progressing=%s/%s %q", ready.Status, ready.Reason, prog.Status, prog.Reason, prog.Message)
	})
	w.reported = time.Since(w.from)
	time.Sleep(time.Until(w.from.Add(length)))
	w.back = time.Now()
	f.temporal.Pass()
	f.noDeploymentTouched(kind, w.from, w.back)
	f.fewStatusWrites(kind, w.from, w.back)
	return w
}

// noChurn fails the test if a rollout under faults wrote some Deployment
// more often than its life needs (created, its template hash recorded,
// scaled to zero, deleted: at most three of these fall in one rollout) or
// than the rollout without faults wrote any.
func (f *temporalFaults) noChurn(writes map[string]int) {
	f.s.Helper()
	limit := 3
	for _, n := range f.baseline {
		limit = max(limit, n)
	}
	for name, n := range writes {
		if n > limit {
			f.s.Violation("Deployment %s was written %d times in one rollout under faults; at most %d expected", name, n, limit)
		}
	}
}

// throttledSince reads the start of the throttle a condition message
// reports, if it reports one.
func throttledSince(msg string) (time.Time, bool) {
	const note = "Temporal has throttled reads of this worker deployment since "
	i := strings.Index(msg, note)
	if i < 0 {
		return time.Time{}, false
	}
	rest := msg[i+len(note):]
	// The time is in UTC: it ends with the first "Z".
	if k := strings.Index(rest, "Z"); k > 0 {
		rest = rest[:k+1]
	}
	t, err := time.Parse(time.RFC3339, rest)
	return t, err == nil
}

// outageReason reports whether a reason says Temporal cannot be reached.
func outageReason(r string) bool {
	return r == v1alpha1.ReasonTemporalStateFetchFailed || r == v1alpha1.ReasonTemporalClientCreationFailed
}

// from moves the start of a fault's convergence to when the fault ended:
// for a fault that lasts, convergence counts from its end.
func (f *Fault) from(t time.Time) *Fault {
	f.at = t
	return f
}

// reasonLog keeps every Progressing reason a TWD showed, polled.
type reasonLog struct {
	mu   sync.Mutex
	seen []reasonAt
}

type reasonAt struct {
	at     time.Time
	reason string
}

func (s *Scenario) watchReasons(tw *harness.Rollout) *reasonLog {
	l := &reasonLog{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			if twd, err := tw.Read(); err == nil {
				_, prog := conditionsSay(twd)
				l.mu.Lock()
				if n := len(l.seen); prog.Reason != "" && (n == 0 || l.seen[n-1].reason != prog.Reason) {
					l.seen = append(l.seen, reasonAt{time.Now(), prog.Reason})
				}
				l.mu.Unlock()
			}
			select {
			case <-ctx.Done():
			case <-time.After(500 * time.Millisecond):
			}
		}
	}()
	s.Cleanup(func() { cancel(); <-done })
	return l
}

// between is the reasons that appeared in [from, to).
func (l *reasonLog) between(from, to time.Time) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, r := range within(l.seen, func(r reasonAt) time.Time { return r.at }, from, to) {
		out = append(out, r.reason)
	}
	return out
}
