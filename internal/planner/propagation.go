package planner

import (
	"fmt"
	"time"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
)

// awaitPropagation holds the rollout while Temporal applies an accepted
// routing change to the task queues' partitions. Until every partition has
// it, a new workflow may still be routed as before (seen: a workflow started
// as soon as status showed v1 current ran on v0). So the target is not
// reported current or at its new ramp, status keeps the routing it showed
// (Result.RoutingPropagating), and no further routing change is written
// (plan.route); everything else is planned as usual.
func awaitPropagation(v *view, p *plan, prog progress) progress {
	t := v.temporal()
	if !v.known() || !t.RoutingPropagating {
		return prog
	}
	p.res.RoutingPropagating = true
	p.after(propagationWait(v))
	var msg string
	switch {
	case prog.state == blocked:
		return prog
	case t.CurrentBuildID == v.target:
		msg = fmt.Sprintf("Temporal is applying version %s as current to the task queues of worker deployment %s; "+
			"Ready once every task queue partition routes new workflows to it", v.target, v.deploymentName())
	case t.RampingBuildID == v.target:
		msg = fmt.Sprintf("Temporal is applying the ramp of %d%% to version %s to the task queues of worker deployment %s; "+
			"status shows the ramp once every task queue partition applies it", t.RampPercentage, v.target, v.deploymentName())
	case prog.state == done:
		msg = fmt.Sprintf("Temporal is applying a routing change to the task queues of worker deployment %s", v.deploymentName())
	default:
		return prog // the change is not the target's: what it waits on stands
	}
	return movingBecause(v1alpha1.ReasonWaitingForTemporal, msg)
}

// propagationWait paces the looks at a routing change being applied:
// every requeuePropagation at first, then backing off from the change.
func propagationWait(v *view) time.Duration {
	since := routingChangedAt(v)
	if since.IsZero() || v.now().Sub(since) < propagationDue {
		return requeuePropagation
	}
	return backoff(v, since)
}

// routingChangedAt is the latest routing change time Temporal reports.
func routingChangedAt(v *view) time.Time {
	t := v.temporal()
	at := t.RampChangedAt
	if cur, ok := v.tvs[t.CurrentBuildID]; ok && cur.CurrentSince != nil && cur.CurrentSince.After(at) {
		at = *cur.CurrentSince
	}
	return at
}
