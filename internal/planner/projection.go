package planner

import "time"

// Report is what status shows of a plan: where the rollout stands and why,
// and the versions.
type Report struct {
	State State
	// WaitsFor is set when only a person's change in Temporal moves the
	// plan on, and says what shows that change.
	WaitsFor PersonWait
	// Versions, sorted by build ID.
	Versions []Version
	// RoutingPropagating: Temporal still applies a routing change, so
	// status keeps showing the routing (current, ramping, ramp) it showed
	// before: status promises what new workflows get.
	RoutingPropagating bool
	// TargetCompleted: the target's rollout is over, as status records it
	// (WorkerVersion.CompletedAt): it is current, or someone else changed
	// routing after it had traffic, which the controller does not undo.
	TargetCompleted bool
	// Routes: the plan of this state writes routing, so the pass after
	// it may finish the rollout.
	Routes      bool
	Ready       Condition
	Progressing Condition
	// RequeueAfter is always positive.
	RequeueAfter time.Duration
}

// requeueAtOnce: the projected state routes again (the next ramp step,
// say); the next pass should not wait.
const requeueAtOnce = 10 * time.Millisecond

// Report is the plan's report of the state it was given.
func (r Result) Report() Report {
	return Report{State: r.State, WaitsFor: r.WaitsFor, Versions: r.Versions, RoutingPropagating: r.RoutingPropagating,
		TargetCompleted: r.TargetCompleted, Routes: r.Routing != nil, Ready: r.Ready, Progressing: r.Progressing, RequeueAfter: r.RequeueAfter}
}

// project is the report of the state after Temporal accepts every
// Temporal write of res: the routing write (with the manager role taken
// first) and the version deletions. Status shows it at once rather than
// after the next pass reads it back. Nil when res writes neither, or
// deletes the TWD (whose status then only counts down).
func project(in Input, res Result) *Report {
	if (res.Routing == nil && len(res.DeleteTemporalVersions) == 0) || in.Temporal == nil || in.Deletion != nil {
		return nil
	}
	after := in
	if res.Routing != nil {
		after.Temporal = AfterRouting(in.Temporal, *res.Routing, in.Identity, in.Now)
		if res.BecomeManager {
			after.Temporal.ManagerIdentity = in.Identity
		}
	}
	after.Temporal = AfterDeletions(after.Temporal, res.DeleteTemporalVersions)
	rep := decide(after).Report()
	if rep.Routes {
		rep.RequeueAfter = requeueAtOnce
	}
	return &rep
}
