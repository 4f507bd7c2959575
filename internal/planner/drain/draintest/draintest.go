// Package draintest draws the drain rules' inputs from fuzz bytes, for the
// fuzz tests of package drain and of the planner, which hands the drain
// the same listings and records. Only tests import it.
package draintest

import (
	"fmt"
	"time"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/internal/fuzzsrc"
	"github.com/rainbow-deploy/rainbow/internal/planner/drain"
)

// runIDs repeat r0 and hold an empty ID, which the rules must survive.
var runIDs = []string{"r0", "r1", "r2", "r3", "r4", "r5", "r6", "r7", "", "r0"}

// Spec draws a drain spec; Cancel comes twice as often as the others.
func Spec(s *fuzzsrc.Source) drain.Spec {
	return drain.Spec{
		MaxDuration: fuzzsrc.Pick(s, 0, time.Minute, time.Hour, 24*time.Hour),
		Action:      fuzzsrc.Pick[v1alpha1.DrainAction](s, "", v1alpha1.DrainDryRun, v1alpha1.DrainCancel, v1alpha1.DrainTerminate, v1alpha1.DrainCancel),
		Signal:      fuzzsrc.Pick(s, "", "nudge", "nudge"),
	}
}

// Offset is a time around now: seconds to days before, a little after.
func Offset(s *fuzzsrc.Source) time.Duration {
	return fuzzsrc.Pick(s, -72*time.Hour, -2*time.Hour, -time.Hour, -10*time.Minute, -5*time.Minute, -time.Minute,
		-10*time.Second, -5*time.Second, 0, 300*time.Millisecond, time.Minute)
}

// MaybeTime is now plus an Offset, or nil a third of the time.
func MaybeTime(s *fuzzsrc.Source, now time.Time) *time.Time {
	if s.Intn(3) == 0 {
		return nil
	}
	t := now.Add(Offset(s))
	return &t
}

// Observed draws what a pass may hold of build's pinned workflows: this
// pass's listing of its open runs and the drain record status kept, each
// sometimes.
func Observed(s *fuzzsrc.Source, now time.Time, build string) ([]drain.Listing, []drain.Record) {
	var ls []drain.Listing
	var rs []drain.Record
	if s.Intn(3) != 0 {
		runs := runs(s)
		ls = append(ls, drain.Listing{BuildID: build, Count: len(runs) + fuzzsrc.Pick(s, 0, 0, 1, 200), Runs: runs})
	}
	if s.Intn(2) == 0 {
		rs = append(rs, drain.Record{
			BuildID: build, DrainingSince: MaybeTime(s, now), SeenAt: MaybeTime(s, now), ListedAt: MaybeTime(s, now),
			LastActionAt: fuzzsrc.Pick(s, nil, ptr(now.Add(-5*time.Second)), ptr(now.Add(-time.Minute))),
			Overdue:      s.Intn(3), Pending: s.Intn(3), StoppedRuns: keys(s), SignalledRuns: keys(s),
		})
	}
	return ls, rs
}

// ManyRuns lists, a third of the time, 30 runs of builds one a listing,
// for the rate limit.
func ManyRuns(s *fuzzsrc.Source, builds []string) []drain.Listing {
	if s.Intn(3) != 0 {
		return nil
	}
	var out []drain.Listing
	for i := range 30 {
		out = append(out, drain.Listing{BuildID: fuzzsrc.Pick(s, builds...), Count: 1, Runs: []drain.Run{{WorkflowID: "many", RunID: fmt.Sprint("m", i)}}})
	}
	return out
}

func runs(s *fuzzsrc.Source) []drain.Run {
	var out []drain.Run
	for n := s.Intn(6); n > 0; n-- {
		id := fuzzsrc.Pick(s, runIDs...)
		out = append(out, drain.Run{WorkflowID: "wf-" + id, RunID: id})
	}
	return out
}

// keys are the runs a record remembers as done.
func keys(s *fuzzsrc.Source) []string {
	var out []string
	for n := s.Intn(4); n > 0; n-- {
		out = append(out, drain.RunKey(fuzzsrc.Pick(s, runIDs...)))
	}
	return out
}

func ptr[T any](v T) *T { return &v }
