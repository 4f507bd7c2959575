package planner

import (
	"fmt"
	"reflect"
	"testing"
	"time"
)

// pausedViolations: a paused rollout never routes further (no ramp step,
// no promotion but a rollback to a version that was current), and pausing
// changes nothing else: the same Deployments are created, scaled and
// deleted, the same versions deleted, the same gate work done.
func pausedViolations(in Input, r Result) []error {
	if !in.Spec.Paused || in.Deletion != nil {
		return nil
	}
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if rt := r.Routing; rt != nil {
		switch rt.Op {
		case SetRamp:
			bad("paused, the plan ramps %+v", rt)
		case SetCurrent:
			if rt.BuildID == "" { // back to unversioned workers: not the rollout's target
				break
			}
			if v, ok := versionIn(in.Temporal, rt.BuildID); !ok || v.LastCurrentAt == nil {
				bad("paused, the plan makes version %s current, which was never current (not a rollback)", rt.BuildID)
			}
		}
	}
	unpaused := in
	unpaused.Spec.Paused = false
	o := Plan(unpaused)
	for name, pair := range map[string][2]any{
		"CreateDeployment":       {r.CreateDeployment, o.CreateDeployment},
		"UpdateDeployment":       {r.UpdateDeployment, o.UpdateDeployment},
		"Scale":                  {r.Scale, o.Scale},
		"DeleteDeployments":      {r.DeleteDeployments, o.DeleteDeployments},
		"DeleteTemporalVersions": {r.DeleteTemporalVersions, o.DeleteTemporalVersions},
		"StartGate":              {r.StartGate, o.StartGate},
		"CancelGate":             {r.CancelGate, o.CancelGate},
		"DrainWork":              {r.DrainWork, o.DrainWork},
	} {
		if !reflect.DeepEqual(pair[0], pair[1]) {
			bad("pausing changed %s: %+v (unpaused: %+v)", name, pair[0], pair[1])
		}
	}
	return errs
}

// TestPausedNeverRoutesFurther runs pausedViolations on generated inputs,
// each paused, and on rollouts at every stage: random inputs seldom get
// as far as a promotion.
func TestPausedNeverRoutesFurther(t *testing.T) {
	eachRandomInput(t, 977, 20000, func(in Input) []error {
		in.Spec.Paused = true
		return pausedViolations(in, Plan(in))
	})
	stages := map[string]Input{"AllAtOnce": base(), "Progressive start": with(base(), progressiveSteps)}
	for _, pct := range []int32{10, 30, 50, 80} { // 30 and 80: the steps changed mid-ramp
		stages[fmt.Sprintf("ramping %d%%, its pause over", pct)] = with(base(), progressiveSteps, func(in *Input) { rampingTarget(in, pct, -time.Hour) })
	}
	for name, in := range stages {
		if o := Plan(in); o.Routing == nil || o.Routing.Op == RemoveRamp {
			t.Fatalf("%s: unpaused, the plan should route further, got %+v", name, o.Routing)
		}
		in.Spec.Paused = true
		for _, err := range pausedViolations(in, Plan(in)) {
			t.Errorf("%s: %v", name, err)
		}
	}
}
