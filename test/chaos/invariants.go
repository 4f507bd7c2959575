package chaos

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/internal/temporal"
	"github.com/rainbow-deploy/rainbow/test/harness"
	"github.com/rainbow-deploy/rainbow/test/invariants"
)

// Invariants checks the safety rules (see the package comment) for one TWD
// while a scenario runs, and the gate rule at Finish.
type Invariants struct {
	s       *Scenario
	twd     *harness.Rollout
	traffic *Traffic
	api     *temporal.API
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	// removals calls checkRemoval for each version losing its workers.
	removals *invariants.Removals

	mu sync.Mutex
	// routing is every distinct routing Temporal reported, in order.
	routing []RoutingState
	// retired are builds that were current and then replaced.
	retired map[string]bool
	// allowBack are builds the scenario rolls back to on purpose.
	allowBack map[string]bool
	// Checks counts the checks made, by rule, so a run shows they ran.
	checks map[string]int
}

// RoutingState is one routing Temporal reported.
type RoutingState struct {
	At      time.Time
	Current string
	Ramping string
	Percent float32
}

func (r RoutingState) String() string {
	if r.Ramping == "" {
		return "current=" + r.Current
	}
	return fmt.Sprintf("current=%s ramping=%s@%g%%", r.Current, r.Ramping, r.Percent)
}

// WatchInvariants starts watching twd's Deployments and routing; traffic
// (may be nil) tells which pinned workflows are open. Call Finish at the
// end of the scenario.
func (s *Scenario) WatchInvariants(twd *harness.Rollout, traffic *Traffic) *Invariants {
	ctx, cancel := context.WithCancel(context.Background())
	inv := &Invariants{
		s: s, twd: twd, traffic: traffic, cancel: cancel,
		api:     temporal.NewAPI(s.Env.Temporal, s.Env.Info.TemporalNamespace, "rainbow-chaos-observer"),
		retired: map[string]bool{}, allowBack: map[string]bool{}, checks: map[string]int{},
	}
	// A removal check runs to its end even while Finish stops the watch:
	// Stop waits for it, and a check cut short would fail the run.
	removals, err := invariants.WatchRemovals(context.Background(), s.Env.Clients, s.Namespace,
		func(string) string { return twd.DeploymentName() },
		func(r invariants.Removal) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			inv.checkRemoval(ctx, r.Version.BuildID, r.What)
		})
	if err != nil {
		s.Fatalf("watch Deployments: %v", err)
	}
	inv.removals = removals
	inv.wg.Add(1)
	go inv.watchRouting(ctx)
	s.Cleanup(func() { removals.Stop(); cancel(); inv.wg.Wait() })
	return inv
}

// StartOrders creates the TWD "orders" with opts at v1 and, once v1 is
// current, starts traffic on it and the invariant checker: how the kill,
// failover and API fault scenarios begin.
func (s *Scenario) StartOrders(opts ...harness.TWDOption) (*harness.Rollout, *Traffic, *Invariants) {
	s.Helper()
	tw := s.NewRollout("orders", opts...)
	tw.WaitCurrent(4*time.Minute, tw.Create(tw.Spec("v1")))
	traffic := s.StartTraffic(tw.TaskQueue)
	return tw, traffic, s.WatchInvariants(tw, traffic)
}

// AllowBack lets build become current again (a rollback the scenario asks for).
func (inv *Invariants) AllowBack(build string) {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	inv.allowBack[build] = true
}

// Routing returns the routing history seen so far.
func (inv *Invariants) Routing() []RoutingState {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	return slices.Clone(inv.routing)
}

func (inv *Invariants) count(rule string) {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	inv.checks[rule]++
}

// checkRemoval: at the moment a version loses its workers, Temporal must
// neither route it work nor report it draining, and no workflow the
// traffic started pinned on it may still run. A check counts only when
// every read it needs was answered; one that could not be made fails the
// run rather than passing unseen.
func (inv *Invariants) checkRemoval(ctx context.Context, build, what string) {
	at := time.Now()
	unchecked := func(read string, err error) {
		inv.count("removal-unchecked")
		inv.s.Errorf("could not check %s at %s: %s: %v", what, at.Format(time.TimeOnly), read, err)
	}
	cur, ramp, pct, err := inv.routingNow(ctx)
	if err != nil {
		unchecked("reading routing", err)
		return
	}
	if cur == build || ramp == build {
		inv.s.Violation("%s at %s while Temporal routes it work (current=%s ramping=%s@%g%%)", what, at.Format(time.TimeOnly), cur, ramp, pct)
	}
	var v temporal.VersionDetail
	err = retried(ctx, func(ctx context.Context) (err error) {
		v, err = inv.api.DescribeVersionNoPollers(ctx, inv.twd.DeploymentName(), build)
		return err
	})
	switch {
	case isNotFound(err): // deleted from Temporal: nothing drains there
	case err != nil:
		unchecked("describing the version", err)
		return
	case v.Drainage != nil && v.Drainage.Status == v1alpha1.VersionDraining:
		inv.s.Violation("%s at %s while Temporal reports the version draining (since %s)", what, at.Format(time.TimeOnly), v.Drainage.ChangedAt.Format(time.TimeOnly))
	}
	if inv.traffic != nil {
		for _, r := range inv.traffic.open() {
			if !r.Pinned() {
				continue
			}
			pinned, running, err := inv.pinnedTo(ctx, r)
			if err != nil {
				unchecked("describing workflow "+r.id, err)
				return
			}
			if running && pinned == build {
				inv.s.Violation("%s at %s while workflow %s pinned on it still runs", what, at.Format(time.TimeOnly), r.id)
			}
		}
	}
	inv.count("removal")
}

// pinnedTo describes a traffic run: the build it is pinned on and whether
// it still runs.
func (inv *Invariants) pinnedTo(ctx context.Context, r *trafficRun) (build string, running bool, err error) {
	var resp *workflowservice.DescribeWorkflowExecutionResponse
	err = retried(ctx, func(ctx context.Context) (err error) {
		resp, err = inv.s.Env.Temporal.DescribeWorkflowExecution(ctx, r.id, r.runID)
		return err
	})
	if isNotFound(err) {
		return "", false, nil // gone past retention: it does not run
	}
	if err != nil {
		return "", false, err
	}
	info := resp.GetWorkflowExecutionInfo()
	return info.GetVersioningInfo().GetDeploymentVersion().GetBuildId(),
		info.GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, nil
}

// retried calls read up to eight times, backing off from 200ms, each
// within 10s: the checker's reads go to Temporal directly, not through a
// fault proxy, so a read that fails for about 10 s is a real failure to
// check.
func retried(ctx context.Context, read func(context.Context) error) error {
	var err error
	wait := 200 * time.Millisecond
	for i := 0; i < 8; i++ {
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err = read(rctx)
		cancel()
		if err == nil || isNotFound(err) {
			return err
		}
		// Temporal throttles reads of one worker deployment for seconds
		// after routing changes, which is when removals happen.
		time.Sleep(wait)
		wait = min(2*wait, 2*time.Second)
	}
	return err
}

func isNotFound(err error) bool {
	var nf *serviceerror.NotFound
	return errors.As(err, &nf)
}

func (inv *Invariants) routingNow(ctx context.Context) (cur, ramp string, pct float32, err error) {
	err = retried(ctx, func(ctx context.Context) (err error) {
		cur, ramp, pct, err = inv.twd.Routing(ctx)
		return err
	})
	return
}

// watchRouting polls Temporal's routing every 300ms and checks each
// change: a ramp that drops for the same target, or a retired version made
// current again, is a write from a stale plan; a new current or ramping
// version must have pollers.
func (inv *Invariants) watchRouting(ctx context.Context) {
	defer inv.wg.Done()
	for ctx.Err() == nil {
		cur, ramp, pct, err := inv.twd.Routing(ctx)
		if err == nil && (cur != "" || ramp != "") {
			inv.observeRouting(ctx, RoutingState{At: time.Now(), Current: cur, Ramping: ramp, Percent: pct})
		}
		select {
		case <-ctx.Done():
		case <-time.After(300 * time.Millisecond):
		}
	}
}

func (inv *Invariants) observeRouting(ctx context.Context, now RoutingState) {
	inv.mu.Lock()
	var prev RoutingState
	if n := len(inv.routing); n > 0 {
		prev = inv.routing[n-1]
	}
	if prev.Current == now.Current && prev.Ramping == now.Ramping && prev.Percent == now.Percent {
		inv.mu.Unlock()
		return
	}
	inv.routing = append(inv.routing, now)
	var violations []string
	if prev.Current != "" && prev.Current != now.Current {
		inv.retired[prev.Current] = true
	}
	if now.Current != "" && inv.retired[now.Current] && !inv.allowBack[now.Current] {
		violations = append(violations, fmt.Sprintf("retired version %s became current again (%s after %s)", now.Current, now, prev))
	}
	if now.Ramping != "" && now.Ramping == prev.Ramping && now.Percent < prev.Percent {
		violations = append(violations, fmt.Sprintf("ramp of %s dropped from %g%% to %g%%", now.Ramping, prev.Percent, now.Percent))
	}
	var fresh []string
	for _, b := range []string{now.Current, now.Ramping} {
		if b != "" && b != prev.Current && b != prev.Ramping {
			fresh = append(fresh, b)
		}
	}
	inv.checks["routing-change"]++
	inv.mu.Unlock()
	for _, v := range violations {
		inv.s.Violation("%s", v)
	}
	for _, b := range fresh {
		var v temporal.VersionDetail
		err := retried(ctx, func(ctx context.Context) (err error) {
			v, err = inv.api.DescribeVersion(ctx, inv.twd.DeploymentName(), b)
			return err
		})
		if err != nil {
			inv.count("routed-has-pollers-unchecked")
			inv.s.Errorf("could not check that %s, routed to (%s), has pollers: %v", b, now, err)
			continue
		}
		inv.count("routed-has-pollers")
		if !v.HasPollers {
			inv.s.Violation("routing moved to %s (%s) but none of its workers poll", b, now)
		}
	}
}

// Finish stops watching and checks that each version ran at most one gate
// workflow (by its deterministic ID, in Temporal's visibility). It returns
// how many checks each rule made.
func (inv *Invariants) Finish() map[string]int {
	inv.removals.Stop()
	inv.cancel()
	inv.wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	g := invariants.CheckGates(ctx, inv.s.Env.Temporal, inv.s.Env.Info.TemporalNamespace, []string{inv.twd.DeploymentName()}, false)
	for _, e := range g.Unchecked {
		inv.s.Errorf("could not check the gate runs: %s", e)
	}
	for _, p := range g.Problems {
		inv.s.Violation("gate: %s", p)
	}
	inv.mu.Lock()
	defer inv.mu.Unlock()
	for _, n := range g.ByStatus {
		inv.checks["gate-runs"] += n
	}
	return inv.checks
}
