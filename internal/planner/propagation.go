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
// A change not applied after TemporalOutageBound blocks the rollout
// (RoutingNotApplied), so that no CD tool waits on it forever.
func awaitPropagation(v *view, p *plan, prog progress) progress {
	t := v.temporal()
	if !v.known() || !t.RoutingPropagating {
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
	if at := t.RoutingChangedAt; !at.IsZero() && v.now().Sub(at) >= TemporalOutageBound {
		return blockedBecause(v1alpha1.ReasonRoutingNotApplied, fmt.Sprintf(
			"Temporal accepted %s in worker deployment %s at %s but has not reported it applied to every task queue partition since, "+
				"so new workflows may still be routed as before; check Temporal's health, and its routingConfigUpdateState with: "+
				"temporal worker deployment describe --name %s (this clears once it is COMPLETED)",
			change, v.deploymentName(), at.UTC().Format(time.RFC3339), v.deploymentName()))
	}
	return movingBecause(v1alpha1.ReasonWaitingForTemporal, fmt.Sprintf(
		"Temporal is applying %s to the task queues of worker deployment %s; status shows it once every task queue partition routes new workflows by it",
		change, v.deploymentName()))
}

// propagationWait paces the looks at a routing change being applied:
// every requeuePropagation for propagationDue after the change, then
// backing off from it.
func propagationWait(v *view) time.Duration {
	since := v.temporal().RoutingChangedAt
	if !since.IsZero() && v.now().Sub(since) < propagationDue {
		return requeuePropagation
	}
	return backoff(v, since)
}
