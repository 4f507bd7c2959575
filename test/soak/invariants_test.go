package soak

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

func TestCheckFlat(t *testing.T) {
	samples := func(pid int, from, n int, bytes func(i int) int64) []RSSSample {
		var s []RSSSample
		for i := 0; i < n; i++ {
			s = append(s, RSSSample{At: at(from + 10*i), PID: pid, Bytes: bytes(i)})
		}
		return s
	}
	steady := func(i int) int64 { return 60*mib + int64(i%3)*mib }
	growing := func(i int) int64 { return 60*mib + int64(i)*mib }
	// An earlier process's samples, even huge ones, do not count.
	old := samples(1, 0, 10, func(int) int64 { return 900 * mib })

	f := CheckFlat(append(old, samples(2, 100, 60, steady)...), time.Minute, 5*time.Minute)
	if !f.Evaluated || !f.Flat || f.PID != 2 || f.Samples != 54 {
		t.Errorf("steady memory: %+v", f)
	}
	f = CheckFlat(samples(2, 100, 60, growing), time.Minute, 5*time.Minute)
	if !f.Evaluated || f.Flat || f.SlopeMiBPerHour < 300 {
		t.Errorf("growing memory: %+v", f)
	}
	f = CheckFlat(samples(2, 100, 10, steady), time.Minute, 5*time.Minute)
	if f.Evaluated {
		t.Errorf("a 30s window was evaluated: %+v", f)
	}
}

func TestSummarize(t *testing.T) {
	var d []time.Duration
	for i := 10; i >= 1; i-- {
		d = append(d, time.Duration(i)*time.Second)
	}
	if p := Summarize(d); p.N != 10 || p.P50 != 5 || p.P90 != 9 || p.Max != 10 {
		t.Errorf("Summarize = %+v", p)
	}
}
