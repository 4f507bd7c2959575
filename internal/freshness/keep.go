package freshness

import (
	"time"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/internal/planner"
	"github.com/rainbow-deploy/rainbow/internal/temporal"
)

// Settles: the plan acts on nothing and waits on nothing but a person's
// change in Temporal (or the rollout is complete), no version drains and
// none waits to be deleted from Temporal (drainage and pollers show only in
// a describe). Such a state may be remembered for the list to vouch for.
func Settles(res planner.Result) bool {
	if res.Acts() || res.RoutingPropagating || (res.State != planner.StateComplete && res.WaitsFor == "") {
		return false
	}
	for _, v := range res.Versions {
		switch {
		case v.Status == v1alpha1.VersionDraining || v.Status == "":
			return false
		case v.Deployment == "" && v.Status != v1alpha1.VersionCurrent:
			// Its deletion from Temporal waits for its pollers to be
			// forgotten, which only a describe shows.
			return false
		}
	}
	return true
}

// SettledFor is how long a settled state stands: shorter while the TWD
// waits for the manager role, which only a describe shows handed back;
// watched (ManagerWake), the recheck is only a fallback.
func SettledFor(res planner.Result, watched bool) time.Duration {
	switch {
	case res.WaitsFor != planner.WaitManager:
		return SettledMaxAge
	case watched:
		return ManagerWatchedMaxAge
	}
	return ManagerMaxAge
}

// ManagerWake says whether a TWD waiting for the manager role, last
// described at describedAt, is described again after the namespace's runs
// query (answered: it did): Temporal continues a worker deployment's
// workflow as new after every change it accepts, the manager's included,
// so a run started since the describe (run, the latest start; zero: none)
// may hold the role handed back. Without an answer, it is described at
// the pace of an unwatched TWD (ManagerMaxAge).
func ManagerWake(describedAt, run time.Time, answered bool, now time.Time) bool {
	if !answered {
		return now.Sub(describedAt) >= ManagerMaxAge
	}
	return !run.IsZero() && !run.Before(describedAt.Add(-RunClockSlack))
}

// RunsSince is where the runs query starts for TWDs described at these
// times: early enough for each of them (RunClockSlack).
func RunsSince(describedAt []time.Time) time.Time {
	var since time.Time
	for i, t := range describedAt {
		if i == 0 || t.Before(since) {
			since = t
		}
	}
	return since.Add(-RunClockSlack)
}

// KeepRecent: a pass's fresh read may stand for the passes before its own
// look if it planned no write to Temporal (the next pass reads it back),
// waits on nobody, and nothing went wrong (troubled: a throttle, a failed
// action or drain listing, a retry soon). Never while deleting or with a
// gate, whose run shows only in Temporal.
func KeepRecent(in planner.Input, res planner.Result, troubled, gate bool) bool {
	return in.Temporal != nil && in.Deletion == nil && !troubled && !gate && !WritesTemporal(res) &&
		res.WaitsFor == "" && !res.RoutingPropagating
}

// RecentUntilAfterReuse is when a remembered state stops standing after a
// pass that reused it: at its own look if that pass deleted a retired
// version's Deployment, which starts a wait only Temporal shows the end of
// (its workers' polls forgotten). Other passes' looks are for Kubernetes or
// deadlines the state already covers.
func RecentUntilAfterReuse(until time.Time, res planner.Result, look time.Time) time.Time {
	if len(res.DeleteDeployments) > 0 && look.Before(until) {
		return look
	}
	return until
}

// WritesTemporal: the plan changes something in Temporal, which the next
// pass must read back.
func WritesTemporal(res planner.Result) bool {
	return res.BecomeManager || res.Routing != nil || len(res.DeleteTemporalVersions) > 0 || res.StartGate != nil ||
		res.CancelGate != nil || res.TerminateGate != nil || res.DeleteWorkerDeployment || len(res.DrainWork) > 0
}

// TargetStands: a TargetOnRecent pass builds on the last describe only if
// the target's fresh describe shows the status that describe did (or it was
// not registered then). A target that finished draining since would be
// taken for draining, which the planner rolls back to at once rather than
// through the steps (found by FuzzReuseSafety).
func TargetStands(remembered, described v1alpha1.VersionStatus) bool {
	return remembered == "" || remembered == v1alpha1.VersionNotRegistered || remembered == described
}

// PolledRecently: a version waiting to be deleted that was seen polled
// less than PollersRecheck ago counts as polled without a describe.
func PolledRecently(seen, now time.Time) bool {
	return !seen.IsZero() && now.Sub(seen) < PollersRecheck && !now.Before(seen)
}

// QueuesStand: the current version's task queues, read at, still stand.
// They only grow while it is current, and Temporal refuses a routing change
// to a version that lacks one, which makes the store forget them.
func QueuesStand(at, now time.Time) bool {
	return now.Sub(at) <= QueuesMaxAge
}

// OwnDrainageStands: a version's report of its own drainage stands only
// for the draining episode it was made in.
func OwnDrainageStands(v planner.TemporalVersion, own planner.OwnDrainage) bool {
	return v.Status == v1alpha1.VersionDraining && v.DrainingSince != nil && v.DrainingSince.Equal(own.DrainingSince)
}

// BacklogStands: a backlog read at stands for maxAge.
func BacklogStands(at, now time.Time, maxAge time.Duration) bool {
	return now.Sub(at) < maxAge
}

// ListStands: the namespace's list read at stands for maxAge; a failed
// list stands (as a failure: callers describe instead) until retryAt, so
// that nobody lists again before then.
func ListStands(at time.Time, failed bool, retryAt, now time.Time, maxAge time.Duration) bool {
	if failed {
		return now.Before(retryAt)
	}
	return now.Sub(at) < maxAge
}

// Watch is what a TWD waiting on a person's routing change saw: the list's
// view of its worker deployment (Seen: it was listed) and the routing its
// last describe showed.
type Watch struct {
	Summary   temporal.DeploymentSummary
	Seen      bool
	Described temporal.DeploymentSummary
}

// Wake says whether a new list (s, listed) shows the waiting TWD's routing
// changed; adopt: nothing changed, but the lagging list now shows the
// worker deployment as the describe did, and the TWD waits on its view.
func Wake(w Watch, s temporal.DeploymentSummary, listed bool) (wake, adopt bool) {
	switch {
	case listed == w.Seen && (!listed || SameRouting(s, w.Summary)):
		return false, false
	case listed && !w.Seen && s.CurrentBuildID == w.Described.CurrentBuildID &&
		s.RampingBuildID == w.Described.RampingBuildID && s.RampPercentage == w.Described.RampPercentage:
		return false, true
	}
	return true, false
}
