package drain_test

import (
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/internal/fuzzsrc"
	"github.com/rainbow-deploy/rainbow/internal/planner/drain"
	"github.com/rainbow-deploy/rainbow/internal/planner/drain/draintest"
)

// FuzzDrain checks on arbitrary inputs that the drain only acts on
// workflows it may: of a version that drains (never the target, a
// current, ramping or unknown one, nor while another identity manages
// the worker deployment), runs this pass listed and not acted on before,
// past the deadline for the ends, within the rate limit.
func FuzzDrain(f *testing.F) {
	// v0 draining for three days, first seen then, listed with three
	// runs, past a one-minute Terminate deadline (TestFuzzSeedActs).
	f.Add(seedActs)
	f.Add([]byte("pinned workflows"))
	f.Fuzz(func(t *testing.T, data []byte) {
		in := fuzzInput(data)
		res := drain.Plan(in)
		for _, err := range drainViolations(in, res) {
			t.Error(err)
		}
		if !reflect.DeepEqual(res, drain.Plan(fuzzInput(data))) {
			t.Error("Plan is not deterministic")
		}
		if !reflect.DeepEqual(in, fuzzInput(data)) {
			t.Error("Plan modified its input")
		}
	})
}

// FuzzCrossCheck checks that a version's own drained report is believed
// only when it is current: made in the draining episode the summary shows,
// saying drained, for a version the summary calls draining and nobody
// routes to; and that only such versions are cross-checked, once due.
func FuzzCrossCheck(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("stale summary"))
	f.Add([]byte{1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31})
	f.Fuzz(func(t *testing.T, data []byte) {
		now, ss := fuzzSummaries(data)
		for _, err := range crossCheckViolations(now, ss) {
			t.Error(err)
		}
	})
}

var seedActs = []byte{1, 1, 1, 1, 3, 1, 1, 0, 2, 0, 1, 3, 0, 1, 2, 0, 0, 1, 0, 1, 0}

// TestFuzzSeedActs: the first seed is a case that acts.
func TestFuzzSeedActs(t *testing.T) {
	if w := drain.Plan(fuzzInput(seedActs)).Work; len(w) != 1 || w[0].Op != drain.OpTerminate || len(w[0].Runs) != 3 {
		t.Fatalf("work = %+v", w)
	}
}

// TestDrainRandom runs the invariants on many generated inputs as part of
// the normal test run.
func TestDrainRandom(t *testing.T) {
	acted, believed := 0, 0
	fuzzsrc.EachRandom(t, 88172645, 20000, 96, func(data []byte) []error {
		in := fuzzInput(data)
		res := drain.Plan(in)
		if len(res.Work) > 0 {
			acted++
		}
		now, ss := fuzzSummaries(data)
		for _, s := range ss {
			if _, ok := drain.OwnDrained(s); ok {
				believed++
			}
		}
		return slices.Concat(drainViolations(in, res), crossCheckViolations(now, ss))
	})
	if acted < 100 || believed < 100 {
		t.Fatalf("of 20000 inputs, %d planned work and %d believed an own report: the generator misses the interesting cases", acted, believed)
	}
}

var (
	t0           = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	fuzzBuilds   = []string{"v0", "v1", "v2", "v3"}
	fuzzStatuses = []v1alpha1.VersionStatus{v1alpha1.VersionDraining, v1alpha1.VersionDraining, v1alpha1.VersionCurrent,
		v1alpha1.VersionRamping, v1alpha1.VersionDrained, v1alpha1.VersionInactive, v1alpha1.VersionUnknown, v1alpha1.VersionNotRegistered}
)

func fuzzInput(data []byte) drain.Input {
	s := fuzzsrc.New(data)
	in := drain.Input{
		Now: t0, Known: s.Intn(5) != 0, Target: fuzzsrc.Pick(s, fuzzBuilds...), OtherManager: s.Intn(5) == 0,
		DeploymentName: "wd", Namespace: "ns", Name: "twd", Spec: draintest.Spec(s),
	}
	for _, b := range fuzzBuilds {
		if s.Intn(5) != 0 {
			in.Versions = append(in.Versions, drain.Version{BuildID: b, Status: fuzzsrc.Pick(s, fuzzStatuses...), DrainingSince: draintest.MaybeTime(s, t0)})
		}
		ls, rs := draintest.Observed(s, t0, b)
		in.Listings, in.Records = append(in.Listings, ls...), append(in.Records, rs...)
	}
	in.Listings = append(in.Listings, draintest.ManyRuns(s, fuzzBuilds)...)
	return in
}

// drainViolations restates, from the input alone, what the drain may do.
func drainViolations(in drain.Input, r drain.Result) []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	version := func(b string) (drain.Version, bool) {
		for _, v := range in.Versions {
			if v.BuildID == b {
				return v, true
			}
		}
		return drain.Version{}, false
	}
	record := func(b string) drain.Record {
		for _, d := range in.Records {
			if d.BuildID == b {
				return d
			}
		}
		return drain.Record{}
	}
	mayDrain := func(b string) (drain.Version, string) {
		v, ok := version(b)
		switch {
		case !in.Known:
			return v, "Temporal's state is unknown"
		case b == in.Target:
			return v, "it is the target"
		case !ok || v.Status != v1alpha1.VersionDraining:
			return v, fmt.Sprintf("it is %q, not draining", v.Status)
		case v.DrainingSince == nil:
			return v, "Temporal does not say since when it drains"
		case in.OtherManager:
			return v, "another identity manages the worker deployment"
		}
		return v, ""
	}
	on := in.Spec.Action != "" || in.Spec.Signal != ""
	for _, b := range drain.ToList(in) {
		if _, why := mayDrain(b); why != "" {
			bad("listed the pinned workflows of %s, but %s", b, why)
		}
		if !on {
			bad("listed %s without a drain deadline or signal", b)
		}
	}
	if !in.Known && !reflect.DeepEqual(r.Records, drain.Kept(in.Records)) {
		bad("records changed while Temporal's state is unknown")
	}
	for b := range r.Records {
		if v, _ := version(b); in.Known && (v.Status == v1alpha1.VersionCurrent || v.Status == v1alpha1.VersionRamping) {
			bad("kept a drain record for %s, which is %s", b, v.Status)
		}
	}

	total := 0
	seen := map[drain.Op]map[string]bool{}
	for _, w := range r.Work {
		v, why := mayDrain(w.BuildID)
		if why != "" {
			bad("%s on the pinned workflows of %s, but %s", w.Op, w.BuildID, why)
			continue
		}
		// The deadline counts from the later of Temporal's time and the
		// controller's first sight of this drain.
		from := v.DrainingSince.Truncate(time.Second)
		if rec := record(w.BuildID); rec.DrainingSince != nil && rec.DrainingSince.Equal(from) {
			if rec.SeenAt != nil && rec.SeenAt.After(from) {
				from = *rec.SeenAt
			}
		} else if seen := in.Now.Truncate(time.Second); seen.After(from) {
			from = seen
		}
		pastDeadline := in.Spec.Action != "" && !in.Now.Before(from.Add(in.Spec.MaxDuration))
		stopping := in.Spec.Action == v1alpha1.DrainCancel || in.Spec.Action == v1alpha1.DrainTerminate
		var done []string
		switch w.Op {
		case drain.OpCancel, drain.OpTerminate:
			if string(in.Spec.Action) != string(w.Op) || !pastDeadline {
				bad("%s on %s with drainAction %q, past the deadline: %v", w.Op, w.BuildID, in.Spec.Action, pastDeadline)
			}
			if w.Reason == "" {
				bad("%s on %s without a reason for the history", w.Op, w.BuildID)
			}
			done = record(w.BuildID).StoppedRuns
		case drain.OpSignal:
			if w.Signal == "" || w.Signal != in.Spec.Signal || (pastDeadline && stopping) {
				bad("signal %q to %s with spec signal %q, past a deadline that stops: %v", w.Signal, w.BuildID, in.Spec.Signal, pastDeadline && stopping)
			}
			done = record(w.BuildID).SignalledRuns
		default:
			bad("unknown drain op %q", w.Op)
		}
		var listing []drain.Run
		for _, l := range in.Listings {
			if l.BuildID == w.BuildID {
				listing = l.Runs
				break
			}
		}
		if seen[w.Op] == nil {
			seen[w.Op] = map[string]bool{}
		}
		for _, run := range w.Runs {
			switch {
			case !slices.Contains(listing, run):
				bad("%s on run %+v, which this pass did not list for %s", w.Op, run, w.BuildID)
			case slices.Contains(done, drain.RunKey(run.RunID)):
				bad("%s on run %s again", w.Op, run.RunID)
			case seen[w.Op][run.RunID]:
				bad("%s twice on run %s in one pass", w.Op, run.RunID)
			}
			seen[w.Op][run.RunID] = true
		}
		total += len(w.Runs)
	}
	if total > drain.MaxActionsPerPass {
		bad("%d workflow actions in one pass, more than %d", total, drain.MaxActionsPerPass)
	}
	if total > 0 {
		for _, d := range in.Records {
			if d.LastActionAt != nil && in.Now.Before(d.LastActionAt.Add(drain.ActionInterval)) {
				bad("acted on workflows %s after the last action, within %s", in.Now.Sub(*d.LastActionAt), drain.ActionInterval)
			}
		}
	}
	if r.RequeueAfter < 0 {
		bad("RequeueAfter %s is negative", r.RequeueAfter)
	}
	return errs
}

func fuzzSummaries(data []byte) (time.Time, []drain.Summary) {
	s := fuzzsrc.New(data)
	var out []drain.Summary
	for _, b := range fuzzBuilds {
		sum := drain.Summary{BuildID: b, Status: fuzzsrc.Pick(s, fuzzStatuses...), Routed: s.Intn(4) == 0, DrainingSince: draintest.MaybeTime(s, t0)}
		if s.Intn(3) != 0 {
			o := &drain.OwnDrainage{Drained: s.Intn(3) != 0, ChangedAt: t0.Add(draintest.Offset(s)), CheckedAt: t0.Add(draintest.Offset(s)), DrainingSince: t0.Add(draintest.Offset(s))}
			if sum.DrainingSince != nil && s.Intn(3) != 0 {
				o.DrainingSince = *sum.DrainingSince
			}
			sum.Own = o
		}
		out = append(out, sum)
	}
	return t0, out
}

// crossCheckViolations restates when an own report wins and when a
// version is cross-checked.
func crossCheckViolations(now time.Time, ss []drain.Summary) []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	sameEpisode := func(s drain.Summary) bool {
		return s.Own != nil && s.DrainingSince != nil && s.DrainingSince.Equal(s.Own.DrainingSince)
	}
	for _, s := range ss {
		since, ok := drain.OwnDrained(s)
		switch {
		case !ok:
		case s.Own == nil || !s.Own.Drained:
			bad("%s believed drained without its own drained report", s.BuildID)
		case !sameEpisode(s):
			bad("%s believed drained on a report from another draining episode", s.BuildID)
		case s.Routed || s.Status != v1alpha1.VersionDraining:
			bad("%s believed drained over a summary that says %s (routed: %v)", s.BuildID, s.Status, s.Routed)
		case !since.Equal(s.Own.ChangedAt):
			bad("%s drained since %s, not its own report's %s", s.BuildID, since, s.Own.ChangedAt)
		}
	}
	for _, b := range drain.ToCrossCheck(now, ss) {
		i := slices.IndexFunc(ss, func(s drain.Summary) bool { return s.BuildID == b })
		s := ss[i]
		switch {
		case s.Routed || s.Status != v1alpha1.VersionDraining || s.DrainingSince == nil:
			bad("cross-checked %s, which the summary calls %s (routed: %v, draining since %v)", b, s.Status, s.Routed, s.DrainingSince)
		case now.Before(s.DrainingSince.Add(drain.CrossCheckAfter)):
			bad("cross-checked %s, draining only %s", b, now.Sub(*s.DrainingSince))
		case sameEpisode(s) && now.Before(s.Own.CheckedAt.Add(drain.CrossCheckEvery)):
			bad("cross-checked %s again %s after the last check", b, now.Sub(s.Own.CheckedAt))
		}
	}
	return errs
}
