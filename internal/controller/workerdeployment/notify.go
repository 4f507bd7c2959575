package workerdeployment

import (
	"slices"
	"time"

	"github.com/rainbow-deploy/rainbow/internal/notify"
	"github.com/rainbow-deploy/rainbow/internal/planner"
)

// notification is the notification of an Event the pass records, if its
// reason has one (notify.Reasons) and what it reports took effect: a
// routing change Temporal accepted, a Deployment created or deleted. An
// action that failed is planned, and notified, again by a later pass.
func notification(o *observation, e planner.Event, out outcome, now time.Time) (notify.Event, bool) {
	typ, ok := notify.Reasons[e.Reason]
	if !ok {
		return notify.Event{}, false
	}
	switch typ {
	case notify.RolloutStarted:
		ok = out.created
	case notify.RolloutStep, notify.RolloutPromoted:
		ok = out.routed != nil
	case notify.VersionRetired:
		ok = slices.Contains(out.deletedDeployments, e.BuildID)
	}
	if !ok {
		return notify.Event{}, false
	}
	n := notify.Event{Type: typ, Time: now.UTC(), Namespace: o.twd.Namespace, Name: o.twd.Name, BuildID: e.BuildID,
		TargetBuildID: o.targetBuildID, Reason: e.Reason, Message: e.Message}
	if n.BuildID == "" && typ != notify.VersionRetired {
		n.BuildID = o.targetBuildID
	}
	if t := o.input.Temporal; t != nil {
		n.CurrentBuildID, n.RampingBuildID, n.RampPercentage = routingAfter(*t, out.routed)
	}
	return n, true
}

// routingAfter is Temporal's routing once the pass's routing write, if
// any, took effect.
func routingAfter(t planner.TemporalState, routed *planner.Routing) (current, ramping string, ramp int32) {
	current, ramping, ramp = t.CurrentBuildID, t.RampingBuildID, t.RampPercentage
	if routed == nil {
		return current, ramping, ramp
	}
	switch routed.Op {
	case planner.SetCurrent:
		current = routed.BuildID
		if ramping == current {
			ramping, ramp = "", 0
		}
	case planner.SetRamp:
		ramping, ramp = routed.BuildID, routed.RampPercentage
	case planner.RemoveRamp:
		ramping, ramp = "", 0
	}
	return current, ramping, ramp
}
