package planner

import (
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
)

// FuzzDrainSafety checks the drain deadline's and the continue-as-new
// signal's rules on arbitrary inputs: the fuzz inputs of FuzzPlanSafety
// with a drain spec, drain records and listings added.
func FuzzDrainSafety(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("drain deadline and nudge"))
	f.Add([]byte{7, 1, 2, 3, 255, 254, 0, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 1, 3, 5, 7, 9, 11, 13, 200, 100, 50, 25})
	f.Fuzz(func(t *testing.T, data []byte) {
		in := fuzzDrainInput(data)
		res := Plan(in)
		for _, err := range violations(in, res) {
			t.Error(err)
		}
		if !reflect.DeepEqual(res, Plan(fuzzDrainInput(data))) {
			t.Error("Plan is not deterministic")
		}
	})
}

// TestDrainSafetyRandom runs the drain invariants on many generated inputs
// as part of the normal test run.
func TestDrainSafetyRandom(t *testing.T) {
	data := make([]byte, 160)
	x := uint32(88172645)
	acted := 0
	for n := 0; n < 20000; n++ {
		fillRandom(data, &x)
		in := fuzzDrainInput(data)
		res := Plan(in)
		for _, err := range violations(in, res) {
			t.Fatalf("input %x: %v", data, err)
		}
		if len(res.DrainWork) > 0 {
			acted++
		}
	}
	if acted < 100 {
		t.Fatalf("only %d of 20000 inputs planned drain work: the generator misses the interesting cases", acted)
	}
}

// fillRandom fills data from the xorshift generator state x.
func fillRandom(data []byte, x *uint32) {
	for i := range data {
		*x ^= *x << 13
		*x ^= *x >> 17
		*x ^= *x << 5
		data[i] = byte(*x)
	}
}

var fuzzRunIDs = []string{"r0", "r1", "r2", "r3", "r4", "r5", "r6", "r7", "", "r0"}

// fuzzDrainInput is fuzzInput with the drain's inputs added from the second
// half of data.
func fuzzDrainInput(data []byte) Input {
	in := fuzzInput(data)
	s := &byteSource{b: data[len(data)/2:]}
	in.Spec.Drain = DrainSpec{
		MaxDuration: pick(s, 0, time.Minute, time.Hour, 24*time.Hour),
		Action:      pick[v1alpha1.DrainAction](s, "", v1alpha1.DrainDryRun, v1alpha1.DrainCancel, v1alpha1.DrainTerminate, v1alpha1.DrainCancel),
		Signal:      pick(s, "", "nudge", "nudge"),
	}
	if in.Temporal != nil {
		for i := range in.Temporal.Versions {
			if s.intn(4) != 0 {
				in.Temporal.Versions[i].DrainingSince = at(s.offset())
			}
		}
	}
	runs := func() []WorkflowRun {
		var out []WorkflowRun
		for n := s.intn(6); n > 0; n-- {
			id := pick(s, fuzzRunIDs...)
			out = append(out, WorkflowRun{WorkflowID: "wf-" + id, RunID: id})
		}
		return out
	}
	keys := func() []string {
		var out []string
		for n := s.intn(4); n > 0; n-- {
			out = append(out, RunKey(pick(s, fuzzRunIDs...)))
		}
		return out
	}
	for _, b := range fuzzBuilds {
		if s.intn(3) != 0 {
			rs := runs()
			in.Pinned = append(in.Pinned, PinnedListing{BuildID: b, Count: len(rs) + pick(s, 0, 0, 1, 200), Runs: rs})
		}
		if s.bool() {
			in.Drains = append(in.Drains, DrainRecord{
				BuildID: b, DrainingSince: s.maybeTime(), ListedAt: s.maybeTime(), LastActionAt: pick(s, nil, at(-5*time.Second), at(-time.Minute)),
				Overdue: s.intn(3), Pending: s.intn(3), StoppedRuns: keys(), SignalledRuns: keys(),
			})
		}
	}
	if s.intn(3) == 0 {
		// Many runs, for the rate limit.
		for i := range 30 {
			in.Pinned = append(in.Pinned, PinnedListing{BuildID: pick(s, fuzzBuilds...), Count: 1, Runs: []WorkflowRun{{WorkflowID: "many", RunID: fmt.Sprint("m", i)}}})
		}
	}
	if in.ClaimedBy != nil && s.intn(4) != 0 {
		in.ClaimedBy = nil // few enough that most inputs still drain
	}
	return in
}

// versionIn is build's version in Temporal's state, if any.
func versionIn(ts *TemporalState, build string) (TemporalVersion, bool) {
	if ts == nil {
		return TemporalVersion{}, false
	}
	for _, v := range ts.Versions {
		if v.BuildID == build {
			return v, true
		}
	}
	return TemporalVersion{}, false
}

// drainViolations restates, from the input alone, when pinned workflows
// may be cancelled, terminated or signalled.
func drainViolations(in Input, r Result) []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	ts := in.Temporal
	tv := func(b string) (TemporalVersion, bool) { return versionIn(ts, b) }
	dep := func(b string) (Deployment, bool) {
		for _, d := range in.Deployments {
			if d.BuildID == b {
				return d, true
			}
		}
		return Deployment{}, false
	}
	record := func(b string) DrainRecord {
		for _, d := range in.Drains {
			if d.BuildID == b {
				return d
			}
		}
		return DrainRecord{}
	}
	// mayDrain: the rules' common ground for listing and acting.
	mayDrain := func(b string) (TemporalVersion, string) {
		v, ok := tv(b)
		d, hasDep := dep(b)
		switch {
		case ts == nil:
			return v, "Temporal's state is unknown"
		case in.Deletion != nil:
			return v, "the TWD is being deleted"
		case b == in.Spec.TargetBuildID:
			return v, "it is the target"
		case b == ts.CurrentBuildID || b == ts.RampingBuildID:
			return v, "it is current or ramping"
		case !ok || v.Status != draining:
			return v, "Temporal does not report it draining"
		case v.DrainingSince == nil:
			return v, "Temporal does not say since when it drains"
		case ts.ManagerIdentity != "" && ts.ManagerIdentity != in.Identity:
			return v, "another identity manages the worker deployment"
		case hasDep && otherServer(in, d):
			return v, "its workers use another server"
		}
		return v, ""
	}
	for _, b := range DrainVersionsToList(Input{Now: in.Now, Identity: in.Identity, Spec: in.Spec, Deployments: in.Deployments, Temporal: ts, Deletion: in.Deletion, Server: in.Server, Drains: in.Drains}) {
		if _, why := mayDrain(b); why != "" {
			bad("listed the pinned workflows of %s, but %s", b, why)
		}
		if !in.Spec.Drain.on() {
			bad("listed %s without a drain deadline or signal", b)
		}
	}

	total := 0
	seen := map[DrainOp]map[string]bool{}
	for _, w := range r.DrainWork {
		v, why := mayDrain(w.BuildID)
		if why != "" {
			bad("%s on the pinned workflows of %s, but %s", w.Op, w.BuildID, why)
			continue
		}
		// The deadline counts from the later of Temporal's time and the
		// controller's first sight of this drain (now, if status has no
		// record of it): a clock ahead of Temporal's never brings it on.
		from := v.DrainingSince.Truncate(time.Second)
		if rec := record(w.BuildID); rec.DrainingSince != nil && rec.DrainingSince.Equal(from) {
			if rec.SeenAt != nil && rec.SeenAt.After(from) {
				from = *rec.SeenAt
			}
		} else if seen := in.Now.Truncate(time.Second); seen.After(from) {
			from = seen
		}
		pastDeadline := in.Spec.Drain.Action != "" && !in.Now.Before(from.Add(in.Spec.Drain.MaxDuration))
		stopping := in.Spec.Drain.Action == v1alpha1.DrainCancel || in.Spec.Drain.Action == v1alpha1.DrainTerminate
		var done []string
		switch w.Op {
		case DrainOpCancel, DrainOpTerminate:
			if string(in.Spec.Drain.Action) != string(w.Op) || !pastDeadline {
				bad("%s on %s with drainAction %q, past the deadline: %v", w.Op, w.BuildID, in.Spec.Drain.Action, pastDeadline)
			}
			if w.Reason == "" {
				bad("%s on %s without a reason for the history", w.Op, w.BuildID)
			}
			done = record(w.BuildID).StoppedRuns
		case DrainOpSignal:
			if w.Signal == "" || w.Signal != in.Spec.Drain.Signal || (pastDeadline && stopping) {
				bad("signal %q to %s with spec signal %q, past a deadline that stops: %v", w.Signal, w.BuildID, in.Spec.Drain.Signal, pastDeadline && stopping)
			}
			done = record(w.BuildID).SignalledRuns
		default:
			bad("unknown drain op %q", w.Op)
		}
		var listing []WorkflowRun
		for _, l := range in.Pinned {
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
			case slices.Contains(done, RunKey(run.RunID)):
				bad("%s on run %s again", w.Op, run.RunID)
			case seen[w.Op][run.RunID]:
				bad("%s twice on run %s in one pass", w.Op, run.RunID)
			}
			seen[w.Op][run.RunID] = true
		}
		total += len(w.Runs)
	}
	if total > maxDrainActionsPerPass {
		bad("%d workflow actions in one pass, more than %d", total, maxDrainActionsPerPass)
	}
	if total > 0 {
		for _, d := range in.Drains {
			if d.LastActionAt != nil && in.Now.Before(d.LastActionAt.Add(drainActionInterval)) {
				bad("acted on workflows %s after the last action, within %s", in.Now.Sub(*d.LastActionAt), drainActionInterval)
			}
		}
		if !r.Acts() {
			bad("a plan with DrainWork does not act")
		}
	}
	return errs
}
