package planner

import (
	"testing"
	"time"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
)

// TestAfterRouting: the state after each routing write a plan makes is one
// the next plan accepts as done once Temporal applied it: no routing
// again, and the statuses Temporal reports.
func TestAfterRouting(t *testing.T) {
	for name, tc := range map[string]struct {
		in      Input
		ready   bool
		current string
		ramping string
		status  map[string]v1alpha1.VersionStatus
	}{
		"AllAtOnce makes the target current": {
			in:      base(),
			ready:   true,
			current: "v2",
			status:  map[string]v1alpha1.VersionStatus{"v1": v1alpha1.VersionDraining, "v2": v1alpha1.VersionCurrent},
		},
		"Progressive ramps the first step": {
			in: with(base(), func(in *Input) {
				in.Spec.Strategy = v1alpha1.StrategyProgressive
				in.Spec.Steps = []Step{{RampPercentage: 25, Pause: time.Minute}}
			}),
			ramping: "v2",
			current: "v1",
			status:  map[string]v1alpha1.VersionStatus{"v1": v1alpha1.VersionCurrent, "v2": v1alpha1.VersionRamping},
		},
	} {
		t.Run(name, func(t *testing.T) {
			res := Plan(tc.in)
			if res.Routing == nil {
				t.Fatalf("the plan writes no routing: %+v", res.Ready)
			}
			after := tc.in
			after.Temporal = AfterRouting(tc.in.Temporal, *res.Routing, me, t0)
			again := Plan(after)
			if again.Routing != nil {
				t.Errorf("after the write the plan routes again: %+v", *again.Routing)
			}
			if again.Ready.Status == "True" || !again.RoutingPropagating {
				t.Errorf("Ready = %s, RoutingPropagating = %v while Temporal still applies the write; want not Ready", again.Ready.Status, again.RoutingPropagating)
			}
			// The next describe: Temporal applied it.
			applied := after
			applied.Temporal = copyOf(after.Temporal)
			applied.Temporal.RoutingPropagating = false
			again = Plan(applied)
			if again.Routing != nil {
				t.Errorf("once applied the plan routes again: %+v", *again.Routing)
			}
			if got := again.Ready.Status == "True"; got != tc.ready {
				t.Errorf("Ready = %s (%s), want ready %v", again.Ready.Status, again.Ready.Message, tc.ready)
			}
			if after.Temporal.CurrentBuildID != tc.current || after.Temporal.RampingBuildID != tc.ramping {
				t.Errorf("current %q ramping %q, want %q and %q", after.Temporal.CurrentBuildID, after.Temporal.RampingBuildID, tc.current, tc.ramping)
			}
			for b, want := range tc.status {
				if v, _ := versionIn(after.Temporal, b); v.Status != want {
					t.Errorf("version %s is %s, want %s", b, v.Status, want)
				}
			}
			if after.Temporal.LastModifierIdentity != me {
				t.Errorf("last modifier %q, want %q", after.Temporal.LastModifierIdentity, me)
			}
			if tc.in.Temporal.CurrentBuildID != "v1" {
				t.Errorf("AfterRouting changed its input")
			}
		})
	}
}

func TestAfterDeletions(t *testing.T) {
	in := base()
	setVersion(&in, version("v0", drained))
	after := AfterDeletions(in.Temporal, []string{"v0"})
	if _, ok := versionIn(after, "v0"); ok {
		t.Errorf("v0 still listed after its deletion")
	}
	if _, ok := versionIn(in.Temporal, "v0"); !ok {
		t.Errorf("AfterDeletions changed its input")
	}
	if len(after.Versions) != len(in.Temporal.Versions)-1 {
		t.Errorf("versions %v, want all but v0 of %v", after.Versions, in.Temporal.Versions)
	}
}

func copyOf(s *TemporalState) *TemporalState {
	c := *s
	return &c
}
