package planner

import (
	"fmt"
	"time"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
)

// awaitPropagation reports a routing change Temporal accepted but has not
// applied to every task queue partition yet: until it has, a new workflow
// may still be routed as before (seen: a workflow started as soon as status
// showed v1 current ran on v0). So the target is not reported current or at
// its new ramp, and status keeps the routing it showed
// (Result.RoutingPropagating). Routing writes go on: Temporal orders them.
func awaitPropagation(v *view, p *plan, prog progress) progress {
	t := v.temporal()
	if !v.propagating() {
		return prog
	}
	p.res.RoutingPropagating = true
	p.after(propagationWait(v))
	if prog.state == blocked || (prog.state == done && v.in.TargetShownReady) {
		// Status showed the target current already: the change being
		// applied is another (a ramp on another version, say).
		return prog
	}
	var change string
	switch {
	case t.CurrentBuildID == v.target:
		change = fmt.Sprintf("version %s as current", v.target)
	case t.RampingBuildID == v.target:
		change = fmt.Sprintf("the ramp of %d%% to version %s", t.RampPercentage, v.target)
	default:
		return prog // not the target's change: what it waits on stands
	}
	return movingBecause(v1alpha1.ReasonWaitingForTemporal, fmt.Sprintf(
		"Temporal is applying %s to the task queues of worker deployment %s; status shows it once every task queue partition routes new workflows by it",
		change, v.deploymentName()))
}

// propagating: Temporal reports a routing change still being applied. A
// report that lasts TemporalOutageBound past the change is taken as stale:
// the soak saw Temporal keep IN_PROGRESS for good after a change its
// partitions had applied (the completion is a signal Temporal only logs
// when it fails), and waiting on it would hold every rollout and
// retirement of the worker deployment.
func (v *view) propagating() bool {
	t := v.temporal()
	if !v.known() || !t.RoutingPropagating {
		return false
	}
	return t.RoutingChangedAt.IsZero() || v.now().Sub(t.RoutingChangedAt) < TemporalOutageBound
}

// propagationWait paces the looks at a routing change being applied: the
// first propagationFirstLook after the change (at most that long from now,
// whatever the clocks say), then every requeuePropagation until
// propagationDue, then backing off from it.
func propagationWait(v *view) time.Duration {
	since := v.temporal().RoutingChangedAt
	if since.IsZero() {
		return backoff(v, since)
	}
	switch elapsed := v.now().Sub(since); {
	case elapsed < propagationFirstLook-requeuePropagation:
		return min(propagationFirstLook-elapsed, propagationFirstLook)
	case elapsed < propagationDue:
		return requeuePropagation
	}
	return backoff(v, since)
}
