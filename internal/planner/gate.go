package planner

import (
	"fmt"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
)

// gate runs the gate workflow on the target before it gets any traffic. It
// returns hold=true while the rollout must wait or has stopped. A target
// that already ramps passed its gate, unless a failure of it is observed:
// then its ramp is removed, which sends all new workflows back to the
// current version (Manual never writes routing, so it only reports).
func gate(v *view, p *plan) (prog progress, hold bool) {
	typ := v.in.Spec.GateWorkflowType
	if typ == "" {
		return progress{}, false
	}
	run := v.in.Gate
	if run != nil && (run.BuildID != v.target || run.Phase == GateCancelled) {
		// A run for an older target says nothing about this one, and a
		// cancelled run (the version stopped being the target for a
		// while) gave no verdict: it runs again.
		run = nil
	}
	ramping := v.status(v.target) == v1alpha1.VersionRamping

	if run != nil && run.Phase == GateFailed {
		msg := fmt.Sprintf("gate workflow %s failed on version %s: %s; fix the worker and change spec.template to roll out a new version",
			typ, v.target, run.Message)
		p.event(EventWarning, v1alpha1.ReasonGateFailed, msg)
		if ramping && v.in.Spec.Strategy != v1alpha1.StrategyManual {
			p.route(Routing{Op: RemoveRamp}, EventRemoveRamp, fmt.Sprintf("removing the ramp of version %s: its gate workflow failed", v.target))
		}
		return blockedBecause(v1alpha1.ReasonGateFailed, msg), true
	}
	if ramping {
		return progress{}, false
	}
	switch {
	case run == nil:
		p.res.StartGate = &StartGate{BuildID: v.target, WorkflowType: typ}
		p.event(EventNormal, EventStartGate, fmt.Sprintf("starting gate workflow %s pinned to version %s", typ, v.target))
		p.after(requeueTemporal)
		return movingBecause(v1alpha1.ReasonWaitingForPromotion, fmt.Sprintf("starting gate workflow %s on version %s", typ, v.target)), true
	case run.Phase == GateSucceeded:
		return progress{}, false
	default:
		p.after(backoff(v, run.StartedAt))
		return movingBecause(v1alpha1.ReasonWaitingForPromotion, fmt.Sprintf("gate workflow %s running on version %s", typ, v.target)), true
	}
}

// cancelStaleGate cancels a gate still running for a version that is no
// longer the target, after the spec dropped its gate, or while the TWD is
// deleted: nobody waits for its result any more, and it would keep that
// version draining.
func cancelStaleGate(v *view, p *plan) {
	run := v.in.Gate
	deleting := v.in.Deletion != nil
	if run == nil || run.Phase != GateRunning || !v.known() ||
		(!deleting && run.BuildID == v.target && v.in.Spec.GateWorkflowType != "") {
		return
	}
	why := fmt.Sprintf("version %s is no longer the target", run.BuildID)
	switch {
	case deleting:
		why = "the TemporalWorkerDeployment is being deleted"
	case run.BuildID == v.target:
		why = "spec.rollout.gate was removed"
	}
	p.res.CancelGate = &CancelGate{BuildID: run.BuildID}
	p.event(EventNormal, EventCancelGate, fmt.Sprintf("cancelling the gate workflow running on version %s: %s", run.BuildID, why))
	p.after(requeueTemporal)
}
