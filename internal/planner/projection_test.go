package planner

import (
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
)

// TestProjection: a plan that writes routing or deletes versions carries
// the report of the state after Temporal accepts them, so status shows
// them at once; one that writes neither carries none.
func TestProjection(t *testing.T) {
	t.Run("AllAtOnce: the target is being made current, not yet Ready", func(t *testing.T) {
		res := Plan(base())
		p := res.Projected
		if res.Routing == nil || p == nil {
			t.Fatalf("routing %+v, projection %+v: want both", res.Routing, p)
		}
		if !p.RoutingPropagating || p.Ready.Status == metav1.ConditionTrue || p.State != StateMoving || p.Routes {
			t.Errorf("projection %+v: want the change being applied, not Ready, moving, no routing again", p)
		}
		if p.Progressing.Reason != v1alpha1.ReasonWaitingForTemporal {
			t.Errorf("Progressing reason %q, want %q", p.Progressing.Reason, v1alpha1.ReasonWaitingForTemporal)
		}
	})
	t.Run("taking the manager role counts as taken", func(t *testing.T) {
		res := Plan(with(base(), func(in *Input) { in.Temporal.ManagerIdentity = "" }))
		if !res.BecomeManager || res.Projected == nil || res.Projected.WaitsFor != "" {
			t.Errorf("BecomeManager %v, projection %+v: want the role taken and nobody waited for", res.BecomeManager, res.Projected)
		}
	})
	t.Run("deleted versions leave the report", func(t *testing.T) {
		v1 := version("v1", drained)
		v1.HasPollers = false
		in := with(base(), rolledOut, func(in *Input) { setVersion(in, v1); dropDep(in, "v1") })
		res := Plan(in)
		if len(res.DeleteTemporalVersions) != 1 || res.Projected == nil {
			t.Fatalf("deletions %v, projection %+v: want v1 deleted and a projection", res.DeleteTemporalVersions, res.Projected)
		}
		if res.Projected.RequeueAfter <= res.RequeueAfter {
			t.Errorf("projected requeue %s, want the idle look, later than the plan's %s (which looks to show the deletion)", res.Projected.RequeueAfter, res.RequeueAfter)
		}
		for _, v := range res.Projected.Versions {
			for _, b := range res.DeleteTemporalVersions {
				if v.BuildID == b {
					t.Errorf("version %s deleted from Temporal is still reported", b)
				}
			}
		}
	})
	t.Run("nothing written: no projection", func(t *testing.T) {
		res := Plan(with(base(), rolledOut))
		if res.Routing != nil || len(res.DeleteTemporalVersions) > 0 || res.Projected != nil {
			t.Errorf("routing %+v, deletions %v, projection %+v: want none", res.Routing, res.DeleteTemporalVersions, res.Projected)
		}
	})
}

// TestTargetCompleted: the plan says when the target's rollout is over, so
// status can record it rather than the controller reading reasons back.
func TestTargetCompleted(t *testing.T) {
	for name, c := range map[string]struct {
		in   Input
		want bool
	}{
		"current":                    {with(base(), rolledOut), true},
		"waiting to be made current": {base(), false},
		"someone else took its traffic": {with(base(), rolledOut, func(in *Input) {
			in.Temporal.CurrentBuildID, in.Temporal.LastModifierIdentity = "v1", "alice"
			in.TargetHadCompleted = true
		}), true},
	} {
		if got := Plan(c.in).TargetCompleted; got != c.want {
			t.Errorf("%s: TargetCompleted = %v, want %v", name, got, c.want)
		}
	}
}

// FuzzProjection: the projection exists exactly when the plan writes
// routing or deletes versions (outside a deletion), and never shows the
// target Ready because of a routing write Temporal has still to apply.
func FuzzProjection(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("rainbow projection"))
	f.Fuzz(func(t *testing.T, data []byte) {
		in := fuzzInput(data)
		for _, err := range projectionViolations(in, Plan(in)) {
			t.Error(err)
		}
	})
}

func TestProjectionRandom(t *testing.T) {
	eachRandomInput(t, 88172645, 5000, func(in Input) []error { return projectionViolations(in, Plan(in)) })
}

func projectionViolations(in Input, res Result) []error {
	var errs []error
	writes := (res.Routing != nil || len(res.DeleteTemporalVersions) > 0) && in.Temporal != nil && in.Deletion == nil
	if (res.Projected != nil) != writes {
		errs = append(errs, fmt.Errorf("projection %+v with routing %+v, deletions %v, deleting %v", res.Projected, res.Routing, res.DeleteTemporalVersions, in.Deletion != nil))
	}
	p := res.Projected
	if p == nil {
		return errs
	}
	if p.RequeueAfter <= 0 {
		errs = append(errs, fmt.Errorf("projected requeue %s", p.RequeueAfter))
	}
	r := res.Routing
	if r != nil && r.Op == SetCurrent && r.BuildID == in.Spec.TargetBuildID && !in.TargetShownReady && p.Ready.Status == metav1.ConditionTrue {
		errs = append(errs, fmt.Errorf("projection shows the target Ready right after the write that makes it current: %+v", p.Ready))
	}
	return errs
}
