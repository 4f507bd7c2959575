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
