package freshness

import (
	"strings"
	"testing"
	"time"

	"github.com/rainbow-deploy/rainbow/internal/planner"
	"github.com/rainbow-deploy/rainbow/internal/temporal"
)

var t0 = time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)

// TestDecide lists which remembered state each kind of pass believes, and
// says why in the reason.
func TestDecide(t *testing.T) {
	owner := Owner{UID: "u", Generation: 2, ConnKey: "conn", Deployments: "b=1"}
	summary := temporal.DeploymentSummary{Name: "ns/w", CurrentBuildID: "b", RoutingChangedAt: t0.Add(-time.Hour), LatestBuildID: "b"}
	settled := &SettledState{Owner: owner, DescribedAt: t0.Add(-time.Minute), MaxAge: SettledMaxAge, Summary: summary, HasSummary: true}
	recent := &RecentState{Owner: owner, State: &planner.TemporalState{Exists: true, CurrentBuildID: "a"}, Until: t0.Add(time.Second),
		DescribedAt: t0.Add(-5 * time.Second)}
	pass := Pass{Owner: owner, Input: planner.Input{Spec: planner.Spec{TargetBuildID: "b"}}}
	same := &Listing{Summary: summary, Listed: true}
	moved := summary
	moved.RampingBuildID, moved.RampPercentage = "c", 5
	for _, tc := range []struct {
		name   string
		m      Remembered
		p      Pass
		want   Use
		reason string
	}{
		{"nothing remembered, Deployments of other versions", Remembered{}, pass, Describe, "described"},
		{"settled: ask the list first", Remembered{Settled: settled}, pass, ListForSettled, "list"},
		{"settled, list unchanged", Remembered{Settled: settled, SettledList: same}, pass, Settled, "routing and latest version unchanged"},
		{"settled, list shows a ramp", Remembered{Settled: settled, SettledList: &Listing{Summary: moved, Listed: true}}, pass, Describe, "does not vouch"},
		{"settled, list failed", Remembered{Settled: settled, SettledList: &Listing{Failed: true}}, pass, Describe, "does not vouch"},
		{"settled, not in the list", Remembered{Settled: settled, SettledList: &Listing{}}, pass, Describe, "does not vouch"},
		{"settled, but a gate runs", Remembered{Settled: settled, SettledList: same}, with(pass, func(p *Pass) { p.GateRunning = true }), Describe, "does not vouch"},
		{"settled, too old", Remembered{Settled: &SettledState{Owner: owner, DescribedAt: t0.Add(-SettledMaxAge - time.Second), MaxAge: SettledMaxAge, HasSummary: true}}, pass, Describe, "described"},
		{"settled, waiting for the manager: a minute", Remembered{Settled: &SettledState{Owner: owner, DescribedAt: t0.Add(-2 * time.Minute), MaxAge: ManagerMaxAge, HasSummary: true}}, pass, Describe, "described"},
		{"settled, the runs query saw no change", Remembered{Settled: quietSince(settled, t0.Add(-ListMaxAge+time.Second))}, pass, Settled, "runs query"},
		{"settled, the runs query's word too old", Remembered{Settled: quietSince(settled, t0.Add(-ListMaxAge))}, pass, ListForSettled, "list"},
		{"settled, the runs query saw no change, but a gate runs", Remembered{Settled: quietSince(settled, t0), SettledList: same},
			with(pass, func(p *Pass) { p.GateRunning = true }), Describe, "does not vouch"},
		{"settled, the list never showed it", Remembered{Settled: &SettledState{Owner: owner, DescribedAt: t0, MaxAge: SettledMaxAge}}, pass, Describe, "described"},
		{"settled, a Deployment changed", Remembered{Settled: settled}, with(pass, func(p *Pass) { p.Owner.Deployments = "b=2" }), Describe, "described"},
		{"settled, a new generation", Remembered{Settled: settled}, with(pass, func(p *Pass) { p.Owner.Generation = 3 }), Describe, "described"},
		{"settled, but deleting", Remembered{Settled: settled, SettledList: same}, with(pass, func(p *Pass) { p.Input.Deletion = &planner.Deletion{} }), Describe, "deleted"},
		{"recent, before its look", Remembered{Recent: recent}, pass, Recent, "before the look"},
		{"recent, at its look", Remembered{Recent: recent}, pass, Describe, "described"},
		{"recent, may route", Remembered{Recent: recent}, with(pass, func(p *Pass) { p.TargetAvailable = true }), TargetOnRecent, "target described"},
		{"recent, may route, last describe too old", Remembered{Recent: &RecentState{Owner: owner, State: recent.State, Until: t0.Add(time.Second), DescribedAt: t0.Add(-RoutingMaxAge - time.Second)}},
			with(pass, func(p *Pass) { p.TargetAvailable = true }), Describe, "described"},
		{"recent, target was available already", Remembered{Recent: &RecentState{Owner: owner, State: recent.State, Until: t0.Add(time.Second), DescribedAt: t0, TargetAvailable: true}},
			with(pass, func(p *Pass) { p.TargetAvailable = true }), Describe, "described"},
		{"recent, target current and available", Remembered{Recent: &RecentState{Owner: owner, State: &planner.TemporalState{CurrentBuildID: "b"}, Until: t0.Add(time.Second)}},
			with(pass, func(p *Pass) { p.TargetAvailable = true }), Recent, "before the look"},
		{"recent, abort annotation changed", Remembered{Recent: recent}, with(pass, func(p *Pass) { p.Owner.Abort = "b" }), Describe, "described"},
		{"recent, other connection", Remembered{Recent: recent}, with(pass, func(p *Pass) { p.Owner.ConnKey = "other" }), Describe, "described"},
		{"new TWD: ask the list", Remembered{}, with(pass, newTWD), ListForAbsence, "list"},
		{"new TWD, not listed", Remembered{AbsenceList: &Listing{}}, with(pass, newTWD), Unlisted, "not in the namespace's list"},
		{"new TWD, listed", Remembered{AbsenceList: &Listing{Listed: true}}, with(pass, newTWD), Describe, "described"},
		{"new TWD, list throttled", Remembered{AbsenceList: &Listing{Failed: true, Busy: true}}, with(pass, newTWD), Wait, "throttles"},
		{"new TWD, list failed", Remembered{AbsenceList: &Listing{Failed: true}}, with(pass, newTWD), Describe, "described"},
		{"status showed the worker deployment", Remembered{}, with(pass, func(p *Pass) { newTWD(p); p.StatusShowsVersions = true }), Describe, "described"},
		{"a drain in status", Remembered{}, with(pass, func(p *Pass) { newTWD(p); p.Input.Drains = []planner.DrainRecord{{BuildID: "a"}} }), Describe, "described"},
	} {
		now := t0
		if tc.name == "recent, at its look" {
			now = recent.Until
		}
		d := Decide(tc.m, tc.p, now)
		if d.Use != tc.want || !strings.Contains(d.Reason, tc.reason) {
			t.Errorf("%s: %d %q, want %d with %q", tc.name, d.Use, d.Reason, tc.want, tc.reason)
		}
		if d.Reuses() != (tc.want == Settled || tc.want == Recent || tc.want == Unlisted || tc.want == TargetOnRecent) {
			t.Errorf("%s: Reuses = %v", tc.name, d.Reuses())
		}
	}
}

func with(p Pass, f func(*Pass)) Pass {
	f(&p)
	return p
}

func newTWD(p *Pass) { p.OnlyTarget = true }

func TestPolledAndQueues(t *testing.T) {
	if !PolledRecently(t0, t0.Add(PollersRecheck-time.Millisecond)) || PolledRecently(t0, t0.Add(PollersRecheck)) ||
		PolledRecently(time.Time{}, t0) || PolledRecently(t0.Add(time.Second), t0) {
		t.Error("PolledRecently: polled less than PollersRecheck ago, never from the future or never")
	}
	if !QueuesStand(t0, t0.Add(QueuesMaxAge)) || QueuesStand(t0, t0.Add(QueuesMaxAge+time.Nanosecond)) {
		t.Error("QueuesStand: for QueuesMaxAge")
	}
}

func TestListStands(t *testing.T) {
	for _, tc := range []struct {
		name    string
		failed  bool
		age     time.Duration
		retryIn time.Duration
		want    bool
	}{
		{"young list", false, ListMaxAge - time.Second, 0, true},
		{"old list", false, ListMaxAge, 0, false},
		{"failure before its retry time: callers describe, nobody lists", true, time.Hour, time.Second, true},
		{"failure due for a retry", true, 0, 0, false},
	} {
		if got := ListStands(t0.Add(-tc.age), tc.failed, t0.Add(tc.retryIn), t0, ListMaxAge); got != tc.want {
			t.Errorf("%s: ListStands = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestWake(t *testing.T) {
	at := t0.Add(-time.Hour)
	seen := temporal.DeploymentSummary{Name: "ns/w", CurrentBuildID: "a", RoutingChangedAt: at, LatestBuildID: "b", LatestCreatedAt: at}
	promoted := seen
	promoted.CurrentBuildID, promoted.RoutingChangedAt = "b", t0
	described := temporal.DeploymentSummary{CurrentBuildID: "a"}
	for _, tc := range []struct {
		name        string
		w           Watch
		s           temporal.DeploymentSummary
		listed      bool
		wake, adopt bool
	}{
		{"unchanged", Watch{Summary: seen, Seen: true}, seen, true, false, false},
		{"still not listed", Watch{Described: described}, temporal.DeploymentSummary{}, false, false, false},
		{"promoted by a person", Watch{Summary: seen, Seen: true}, promoted, true, true, false},
		{"gone from the list", Watch{Summary: seen, Seen: true}, temporal.DeploymentSummary{}, false, true, false},
		{"listed at last, as described", Watch{Described: described}, seen, true, false, true},
		{"listed at last, changed since the describe", Watch{Described: described}, promoted, true, true, false},
	} {
		wake, adopt := Wake(tc.w, tc.s, tc.listed)
		if wake != tc.wake || adopt != tc.adopt {
			t.Errorf("%s: Wake = %v, %v; want %v, %v", tc.name, wake, adopt, tc.wake, tc.adopt)
		}
	}
}

func quietSince(s *SettledState, at time.Time) *SettledState {
	c := *s
	c.QuietAt = at
	return &c
}
