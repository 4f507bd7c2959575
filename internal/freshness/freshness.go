// Package freshness decides which Temporal state a reconcile pass believes:
// a state remembered from an earlier read, or a read of its own. Temporal's
// worker-deployment reads are rate limited per namespace, so the controller
// spares the reads that could only repeat the last one; a wrong "reuse"
// could make the planner scale down, delete or route on a stale picture.
// Decide is pure: the executor's stores hold what was read, Decide says
// whether it stands, and why.
package freshness

import (
	"time"

	"github.com/rainbow-deploy/rainbow/internal/planner"
	"github.com/rainbow-deploy/rainbow/internal/temporal"
)

const (
	// ListMaxAge: one list of the namespace's worker deployments serves
	// every settled TWD of the namespace this long.
	ListMaxAge = 30 * time.Second
	// SettledMaxAge: a settled TWD is still described this often, for
	// what the list does not show (manager identity, a version's status).
	SettledMaxAge = 10 * time.Minute
	// ManagerMaxAge: a TWD waiting for the manager role to be handed back
	// is described this often, since only a describe shows the manager,
	// unless the namespace's runs query watches it (ManagerWake); then
	// only ManagerWatchedMaxAge, in case that query no longer sees the
	// changes (it reads Temporal's internals).
	ManagerMaxAge        = time.Minute
	ManagerWatchedMaxAge = 5 * time.Minute
	// RunClockSlack: a run of a worker deployment's workflow that started
	// this little before a TWD's describe may hold a change the describe
	// missed: the controller's and Temporal's clocks differ a little.
	RunClockSlack = 2 * time.Second
	// AbsentListMaxAge: a TWD waiting for the first poll of its worker
	// deployment learns of it from a list this fresh at most, or, while a
	// newer one is fetched, AbsentListStaleAge.
	AbsentListMaxAge   = 2 * time.Second
	AbsentListStaleAge = 10 * time.Second
	// RoutingMaxAge bounds the age of the describe a routing pass builds on.
	RoutingMaxAge = 30 * time.Second
	// QueuesMaxAge bounds how long a current version's task queues are
	// trusted without a refusal to say otherwise.
	QueuesMaxAge = 10 * time.Minute
	// PollersRecheck: a version waiting to be deleted that Temporal
	// reported polled is not described again before this long. Temporal
	// forgets a stopped worker's polls only after its poller history TTL
	// (5 minutes by default, 10 s in the local environment).
	PollersRecheck = 10 * time.Second
)

// Use is where a pass takes Temporal's state from.
type Use int

const (
	// Describe the worker deployment and the versions the planner asks for.
	Describe Use = iota
	// Settled: the state remembered for a settled TWD, the namespace's
	// list showing its routing and latest version unchanged.
	Settled
	// Recent: the state the last pass read, before the look it asked for.
	Recent
	// Unlisted: no worker deployment yet; the namespace's list lacks it.
	Unlisted
	// TargetOnRecent: the last describe, with the target described afresh.
	TargetOnRecent
	// Wait: the list Temporal throttled decides; describing TWD by TWD
	// would only add to its load.
	Wait
	// ListForSettled and ListForAbsence: read the namespace's list
	// (ListMaxAge, or AbsentListMaxAge served up to AbsentListStaleAge),
	// put it in Remembered and decide again.
	ListForSettled
	ListForAbsence
)

// Decision is what a pass believes, and why, for its log line.
type Decision struct {
	Use    Use
	Reason string
}

// Reuses: the pass takes some of Temporal's state from an earlier read.
func (d Decision) Reuses() bool {
	return d.Use == Settled || d.Use == Recent || d.Use == Unlisted || d.Use == TargetOnRecent
}

// Owner identifies what a remembered state was read for: a TWD at one
// spec, abort annotation, connection and set of Deployments.
type Owner struct {
	UID         string
	Generation  int64
	Abort       string
	ConnKey     string
	Deployments string
}

// Pass is what this pass knows before reading Temporal.
type Pass struct {
	Owner Owner
	// Input is the planner's input, Temporal's state not yet filled.
	Input planner.Input
	// GateRunning: status shows a gate run of ours going on.
	GateRunning bool
	// TargetAvailable: the target's Deployment is available, so the pass
	// may route to it.
	TargetAvailable bool
	// OnlyTarget: no versioned Deployment but the target's.
	OnlyTarget bool
	// StatusShowsVersions: status ever showed the worker deployment.
	StatusShowsVersions bool
}

// SettledState is what the settled store remembers of a TWD.
type SettledState struct {
	Owner       Owner
	DescribedAt time.Time
	MaxAge      time.Duration
	// Summary is the list's view of the worker deployment, read after
	// the describe; without it the list cannot vouch for the state.
	Summary    temporal.DeploymentSummary
	HasSummary bool
	// QuietAt: the namespace's runs query showed, then, no change of the
	// worker deployment since the describe (ManagerWake); it vouches for
	// the state as a list would, for as long.
	QuietAt time.Time
}

// RecentState is what the rollout store remembers of a TWD's last read.
type RecentState struct {
	Owner Owner
	State *planner.TemporalState
	// Until is a little before the look the last plan asked for.
	Until       time.Time
	DescribedAt time.Time
	// TargetAvailable: the target's Deployment was available then.
	TargetAvailable bool
}

// Listing is the namespace's list as this pass read it.
type Listing struct {
	// Failed: no list could be had; Busy: Temporal throttled it.
	Failed, Busy bool
	Summary      temporal.DeploymentSummary
	Listed       bool
}

// Remembered is everything the stores hold for this pass.
type Remembered struct {
	Settled *SettledState
	Recent  *RecentState
	// The lists read this pass, once Decide asked for them.
	SettledList, AbsenceList *Listing
}

// Decide says where the pass takes Temporal's state from. It asks for a
// list (ListForSettled, ListForAbsence) when only a list can tell; the
// caller reads it into m and asks again.
func Decide(m Remembered, p Pass, now time.Time) Decision {
	if p.Input.Deletion != nil {
		return Decision{Describe, "described: the TWD is being deleted"}
	}
	why := "described"
	if settledMatches(m.Settled, p, now) {
		l := m.SettledList
		switch {
		case quiet(m.Settled, now) && !p.GateRunning:
			return Decision{Settled, "remembered: settled, the namespace's runs query shows no change since"}
		case l == nil:
			return Decision{ListForSettled, "the list vouches for a settled state"}
		case !l.Failed && l.Listed && SameRouting(l.Summary, m.Settled.Summary) && !p.GateRunning:
			return Decision{Settled, "remembered: settled, the namespace's list shows the routing and latest version unchanged"}
		}
		why = "described: the namespace's list does not vouch for the settled state"
	}
	if recentStands(m.Recent, p, now) {
		return Decision{Recent, "remembered: read by the last pass, before the look it asked for"}
	}
	if mayBeUnlisted(p) {
		l := m.AbsenceList
		switch {
		case l == nil:
			return Decision{ListForAbsence, "the list may show no worker deployment yet"}
		case l.Busy:
			return Decision{Wait, "none: Temporal throttles the namespace's list"}
		case !l.Failed && !l.Listed:
			return Decision{Unlisted, "not in the namespace's list: no worker polled yet"}
		}
	}
	if targetOnRecent(m.Recent, p, now) {
		return Decision{TargetOnRecent, "target described on the last describe: its Deployment just became available"}
	}
	return Decision{Describe, why}
}

// settledMatches: the settled state was read for this TWD as it is, is
// young enough, and the list vouched for it when it was remembered.
func settledMatches(s *SettledState, p Pass, now time.Time) bool {
	return s != nil && s.Owner.UID == p.Owner.UID && s.Owner.Generation == p.Owner.Generation &&
		s.Owner.Deployments == p.Owner.Deployments && now.Sub(s.DescribedAt) <= s.MaxAge && s.HasSummary
}

// quiet: the runs query vouched for the settled state less than
// ListMaxAge ago.
func quiet(s *SettledState, now time.Time) bool {
	return !s.QuietAt.IsZero() && now.Sub(s.QuietAt) < ListMaxAge && !now.Before(s.QuietAt)
}

// recentStands: nothing the pass waits on shows in Temporal before the
// look the last plan asked for, so a describe would repeat the last one.
// Never for a pass that may route (the target is available and not
// current), nor one whose drain rules list pinned workflows.
func recentStands(e *RecentState, p Pass, now time.Time) bool {
	if !recentMatches(e, p) || !now.Before(e.Until) {
		return false
	}
	if p.TargetAvailable && e.State.CurrentBuildID != p.Input.Spec.TargetBuildID {
		return false
	}
	in := p.Input
	in.Temporal = e.State
	return len(planner.DrainVersionsToList(in)) == 0
}

// targetOnRecent: the first pass since the target's Deployment became
// available builds on the last describe, if recent, and describes the
// target itself (registration, task queues, pollers). Its writes carry
// that describe's conflict token, which Temporal refuses once the routing
// or the manager changed since.
func targetOnRecent(e *RecentState, p Pass, now time.Time) bool {
	return recentMatches(e, p) && now.Sub(e.DescribedAt) <= RoutingMaxAge && !e.TargetAvailable && p.TargetAvailable &&
		e.State.CurrentBuildID != p.Input.Spec.TargetBuildID
}

func recentMatches(e *RecentState, p Pass) bool {
	return e != nil && e.State != nil && e.Owner.UID == p.Owner.UID && e.Owner.Generation == p.Owner.Generation &&
		e.Owner.Abort == p.Owner.Abort && e.Owner.ConnKey == p.Owner.ConnKey
}

// mayBeUnlisted: a TWD whose worker deployment no worker may have polled
// yet asks the namespace's shared list rather than describing: thousands
// of TWDs created at once would otherwise describe, find nothing and
// describe again until Temporal throttled them all (docs/performance.md).
// Only while its sole Deployment is its target's and status never showed
// the worker deployment: the list lags writes and may miss a worker
// deployment around its workflow's continue-as-new, and one taken for
// absent must never make another version look unregistered (which would
// scale it down) nor status forget routing and drains it showed. Nor the
// target, once a missed progress deadline may scale it down.
func mayBeUnlisted(p Pass) bool {
	return p.OnlyTarget && !p.StatusShowsVersions && len(p.Input.Drains) == 0 && !planner.AbortDue(p.Input)
}

// SameRouting: the list shows nothing that can move a settled worker
// deployment: routing and the latest registered version.
func SameRouting(a, b temporal.DeploymentSummary) bool {
	return a.CurrentBuildID == b.CurrentBuildID && a.RampingBuildID == b.RampingBuildID &&
		a.RampPercentage == b.RampPercentage && a.RoutingChangedAt.Equal(b.RoutingChangedAt) &&
		a.LatestBuildID == b.LatestBuildID && a.LatestCreatedAt.Equal(b.LatestCreatedAt)
}
