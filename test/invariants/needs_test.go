package invariants

import (
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

func at(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }

func TestRoutingNeeds(t *testing.T) {
	reads := []Routing{
		{At: at(1), Current: "v1", CurrentSince: at(0)},
		{At: at(10), Current: "v1", CurrentSince: at(0), Ramping: "v2", RampingSince: at(8), Percentage: 25},
		{At: at(20), Current: "v2", CurrentSince: at(18), RampingSince: at(18)},
		{At: at(30), Current: "v2", CurrentSince: at(18)},
	}
	got := RoutingNeeds("d", reads)
	want := []struct {
		build    string
		from, to time.Time
		role     string
	}{
		{"v1", at(0), at(18), "current"},
		{"v2", at(18), time.Time{}, "current"},
		{"v2", at(8), at(18), "ramping"},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d needs, want %d: %+v", len(got), len(want), got)
	}
	for i, w := range want {
		g := got[i]
		if g.Version.BuildID != w.build || !g.From.Equal(w.from) || !g.To.Equal(w.to) || !strings.Contains(g.Why, w.role) {
			t.Errorf("need %d = %s %s..%s %q, want %s %s..%s %s", i, g.Version.BuildID, g.From, g.To, g.Why, w.build, w.from, w.to, w.role)
		}
	}
}

func TestViolations(t *testing.T) {
	v1, v2 := Version{"d", "v1"}, Version{"d", "v2"}
	needs := []Need{
		{Version: v1, From: at(0), To: at(18), Why: "current"},
		{Version: v1, From: at(5), To: at(40), Why: "pinned workflow w"},
		{Version: v2, From: at(18), Why: "current"},
	}
	for name, tc := range map[string]struct {
		removal Removal
		bad     bool
	}{
		"after every need":           {Removal{v1, at(41), "scaled to 0"}, false},
		"exactly when the need ends": {Removal{v1, at(40), "scaled to 0"}, false},
		"while pinned work is open":  {Removal{v1, at(30), "deleted"}, true},
		"while still routed":         {Removal{v2, at(100), "scaled to 0"}, true},
		"before it was needed":       {Removal{v2, at(10), "scaled to 0"}, false},
	} {
		got := Violations([]Removal{tc.removal}, needs)
		if (len(got) > 0) != tc.bad {
			t.Errorf("%s: violations %v, want any=%v", name, got, tc.bad)
		}
	}
}

// v1 was current until v2 took over at 12, which no read saw; the next
// read shows v3 current since 25. Temporal's record of v1's last
// deactivation (12) ends v1's span; a later deactivation ends nothing
// early, and an earlier one (before the span) is of another activation.
func TestEndAtDeactivation(t *testing.T) {
	reads := []Routing{
		{At: at(1), Current: "v1", CurrentSince: at(0)},
		{At: at(30), Current: "v3", CurrentSince: at(25)},
	}
	v := func(b string) Version { return Version{"d", b} }
	needs := RoutingNeeds("d", reads)
	got := EndAtDeactivation(needs, map[Version]Need{v("v1"): {Version: v("v1"), From: at(0), To: at(12)}})
	if !got[0].To.Equal(at(12)) || !needs[0].To.Equal(at(25)) {
		t.Errorf("v1's span ends at %s (reads alone: %s), want 12 s in (25 s)", got[0].To.Sub(t0), needs[0].To.Sub(t0))
	}
	for name, deactivated := range map[string]time.Time{"later": at(40), "before the span": at(-5)} {
		got := EndAtDeactivation(needs, map[Version]Need{v("v1"): {Version: v("v1"), To: deactivated}})
		if !got[0].To.Equal(at(25)) {
			t.Errorf("deactivation %s: v1's span ends at %s, want 25 s", name, got[0].To.Sub(t0))
		}
	}
	if got := EndAtDeactivation(needs, nil); !got[1].To.IsZero() {
		t.Errorf("v3's open span got an end: %s", got[1].To)
	}
}
