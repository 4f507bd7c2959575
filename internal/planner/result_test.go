package planner

import (
	"reflect"
	"testing"
)

// TestActsCoversEveryAction: a new action field of Result must make Acts
// true, or the controller would take a plan that acts for an idle one.
func TestActsCoversEveryAction(t *testing.T) {
	report := map[string]bool{"State": true, "Versions": true, "Ready": true, "Progressing": true, "Events": true,
		"RequeueAfter": true, "SkipDrainage": true, "WaitsFor": true, "OwnedResourceStatus": true, "RoutingPropagating": true,
		"TargetCompleted": true, "Projected": true, "Analysis": true, "AnalysisResults": true}
	typ := reflect.TypeFor[Result]()
	for i := range typ.NumField() {
		f := typ.Field(i)
		var r Result
		field := reflect.ValueOf(&r).Elem().Field(i)
		switch field.Kind() {
		case reflect.Bool:
			field.SetBool(true)
		case reflect.Pointer:
			field.Set(reflect.New(f.Type.Elem()))
		case reflect.Slice:
			field.Set(reflect.MakeSlice(f.Type, 1, 1))
		default:
			if !report[f.Name] {
				t.Errorf("Result.%s has kind %s: teach this test to set it", f.Name, field.Kind())
			}
			continue
		}
		if r.Acts() == report[f.Name] {
			t.Errorf("Acts() = %v with only Result.%s set; status-only fields: %v", r.Acts(), f.Name, report)
		}
	}
}

// TestWaitsFor: the states only a person's change in Temporal ends say
// which change, so the controller knows what to watch.
func TestWaitsFor(t *testing.T) {
	cases := map[string]struct {
		in   Input
		want PersonWait
	}{
		"Manual waits for a promotion":   {with(base(), func(in *Input) { in.Spec.Strategy = "Manual" }), WaitRouting},
		"another manager holds the role": {with(base(), func(in *Input) { in.Temporal.ManagerIdentity = "alice" }), WaitManager},
		"someone else took the traffic": {with(base(), rolledOut, func(in *Input) {
			in.Temporal.CurrentBuildID, in.Temporal.LastModifierIdentity = "v1", "alice"
			in.TargetHadCompleted = true
		}), WaitRouting},
		"AllAtOnce promotes: nobody to wait": {base(), ""},
	}
	for name, c := range cases {
		if got := Plan(c.in).WaitsFor; got != c.want {
			t.Errorf("%s: WaitsFor = %q, want %q", name, got, c.want)
		}
	}
}
