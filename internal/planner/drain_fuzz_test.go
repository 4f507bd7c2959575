package planner

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/rainbow-deploy/rainbow/internal/fuzzsrc"
	"github.com/rainbow-deploy/rainbow/internal/planner/drain/draintest"
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
	acted := 0
	fuzzsrc.EachRandom(t, 88172645, 20000, 160, func(data []byte) []error {
		in := fuzzDrainInput(data)
		res := Plan(in)
		if len(res.DrainWork) > 0 {
			acted++
		}
		return violations(in, res)
	})
	if acted < 100 {
		t.Fatalf("only %d of 20000 inputs planned drain work: the generator misses the interesting cases", acted)
	}
}

// fuzzDrainInput is fuzzInput with the drain's inputs, drawn as package
// drain's fuzz test draws them, added from the second half of data.
func fuzzDrainInput(data []byte) Input {
	in := fuzzInput(data)
	s := fuzzsrc.New(data[len(data)/2:])
	in.Spec.Drain = draintest.Spec(s)
	if in.Temporal != nil {
		for i := range in.Temporal.Versions {
			if s.Intn(4) != 0 {
				in.Temporal.Versions[i].DrainingSince = at(offset(s))
			}
		}
	}
	for _, b := range fuzzBuilds {
		ls, rs := draintest.Observed(s, t0, b)
		in.Pinned, in.Drains = append(in.Pinned, ls...), append(in.Drains, rs...)
	}
	in.Pinned = append(in.Pinned, draintest.ManyRuns(s, fuzzBuilds)...)
	if in.ClaimedBy != nil && s.Intn(4) != 0 {
		in.ClaimedBy = nil // few enough that most inputs still drain
	}
	if in.Spec.AdoptionPending || in.Spec.TakeManagerFrom != "" {
		in.Spec.AdoptionPending, in.Spec.TakeManagerFrom = false, "" // the main fuzz covers them with the drain
		if in.Temporal != nil && strings.HasPrefix(in.Temporal.ManagerIdentity, "twc/") {
			in.Temporal.ManagerIdentity = ""
		}
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

// drainViolations restates, from the input alone, which versions the
// planner lets the drain rules act on: package drain's own fuzz
// invariants check what they do there (deadline, runs, rate limit).
func drainViolations(in Input, r Result) []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	ts := in.Temporal
	dep := func(b string) (Deployment, bool) {
		for _, d := range in.Deployments {
			if d.BuildID == b {
				return d, true
			}
		}
		return Deployment{}, false
	}
	// mayDrain: the rules' common ground for listing and acting.
	mayDrain := func(b string) string {
		v, ok := versionIn(ts, b)
		d, hasDep := dep(b)
		switch {
		case ts == nil:
			return "Temporal's state is unknown"
		case in.Deletion != nil:
			return "the TWD is being deleted"
		case b == in.Spec.TargetBuildID:
			return "it is the target"
		case b == ts.CurrentBuildID || b == ts.RampingBuildID:
			return "it is current or ramping"
		case !ok || v.Status != draining:
			return "Temporal does not report it draining"
		case v.DrainingSince == nil:
			return "Temporal does not say since when it drains"
		case ts.ManagerIdentity != "" && ts.ManagerIdentity != in.Identity && !takesManagerRole(in):
			return "another identity manages the worker deployment"
		case hasDep && otherServer(in, d):
			return "its workers use another server"
		}
		return ""
	}
	for _, b := range DrainVersionsToList(Input{Now: in.Now, Identity: in.Identity, Spec: in.Spec, Deployments: in.Deployments, Temporal: ts, Deletion: in.Deletion, Server: in.Server, Drains: in.Drains}) {
		if why := mayDrain(b); why != "" {
			bad("listed the pinned workflows of %s, but %s", b, why)
		}
	}
	for _, w := range r.DrainWork {
		if why := mayDrain(w.BuildID); why != "" {
			bad("%s on the pinned workflows of %s, but %s", w.Op, w.BuildID, why)
		}
	}
	if len(r.DrainWork) > 0 && !r.Acts() {
		bad("a plan with DrainWork does not act")
	}
	return errs
}
