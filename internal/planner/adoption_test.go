package planner

import (
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
)

const incumbent = "temporal-worker-controller/temporal-system/7f3c"

// TestAdoptionPendingActsOnNothing: while the migrate command hands the
// incumbent's Deployments over, even a target without a Deployment gets
// none (it would be a second set of workers), and CD tools see a rollout
// in progress, never a failure.
func TestAdoptionPendingActsOnNothing(t *testing.T) {
	pending := func(in *Input) { in.Spec.AdoptionPending = true }
	for name, in := range map[string]Input{
		"target without its Deployment yet": with(base(), pending, func(in *Input) { in.Deployments = nil }),
		"drained version due for scale-down": with(base(), pending, func(in *Input) {
			in.Temporal.Versions = append(in.Temporal.Versions, TemporalVersion{BuildID: "v0", Status: v1alpha1.VersionDrained, Described: true, DrainedSince: ptr(t0.Add(-48 * 3600e9))})
			in.Deployments = append(in.Deployments, running("v0"))
		}),
		"incumbent manages, take-over asked": with(base(), pending, func(in *Input) {
			in.Spec.TakeManagerFrom = incumbent
			in.Temporal.ManagerIdentity = incumbent
		}),
	} {
		t.Run(name, func(t *testing.T) {
			res := Plan(in)
			if res.Acts() || res.BecomeManager {
				t.Errorf("acts while adoption is pending: %+v", res)
			}
			if res.Progressing.Reason != v1alpha1.ReasonAdoptionPending || res.Progressing.Status != metav1.ConditionTrue || res.State == StateBlocked {
				t.Errorf("Progressing %+v, state %s: want True/%s, not blocked", res.Progressing, res.State, v1alpha1.ReasonAdoptionPending)
			}
			if !strings.Contains(res.Progressing.Message, "kubectl rainbow migrate") {
				t.Errorf("message %q does not say what to run", res.Progressing.Message)
			}
		})
	}
	// Deleting the TWD mid-switch is a deletion like any other.
	del := with(base(), pending, func(in *Input) {
		in.Deletion = &Deletion{Object: "ns/w", RequestedAt: t0, Policy: v1alpha1.DeletionWaitForDrain, StatusShowedVersions: true}
	})
	if res := Plan(del); res.Progressing.Reason == v1alpha1.ReasonAdoptionPending {
		t.Errorf("a deletion waits for the adoption: %+v", res.Progressing)
	}
}

// TestTakeManagerRole: the role is taken from the one identity named, with
// an Event, and from no other; the incumbent's ramp is carried on as ours.
func TestTakeManagerRole(t *testing.T) {
	cases := []struct {
		name       string
		manager    string
		takeFrom   string
		wantTake   bool
		wantReason string
	}{
		{"the named incumbent manages", incumbent, incumbent, true, ""},
		{"another identity manages", "someone-else", incumbent, false, v1alpha1.ReasonManagedByOtherIdentity},
		{"nothing named", incumbent, "", false, v1alpha1.ReasonManagedByOtherIdentity},
		{"we manage already", "rainbow", incumbent, false, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := with(base(), func(in *Input) {
				in.Identity = "rainbow"
				in.Spec.TakeManagerFrom = tc.takeFrom
				in.Temporal.ManagerIdentity = tc.manager
			})
			res := Plan(in)
			if res.BecomeManager != tc.wantTake {
				t.Errorf("BecomeManager = %v, want %v", res.BecomeManager, tc.wantTake)
			}
			took := false
			for _, e := range res.Events {
				if e.Reason == EventTakeManagerRole {
					took = true
					for _, w := range []string{tc.takeFrom, v1alpha1.AnnotationTakeManagerFrom} {
						if !strings.Contains(e.Message, w) {
							t.Errorf("event %q does not say %q", e.Message, w)
						}
					}
				}
			}
			if took != tc.wantTake {
				t.Errorf("TakeManagerRole event: %v, want %v (%+v)", took, tc.wantTake, res.Events)
			}
			if tc.wantReason != "" && res.Progressing.Reason != tc.wantReason {
				t.Errorf("Progressing reason %s, want %s", res.Progressing.Reason, tc.wantReason)
			}
			if tc.wantTake && res.Routing == nil {
				t.Errorf("the rollout waits after taking the role: %+v", res.Progressing)
			}
		})
	}

	// A ramp the incumbent set on the target is the rollout Rainbow goes on
	// with, not a person's routing to respect.
	ramped := with(base(), func(in *Input) {
		in.Identity = "rainbow"
		in.Spec.TakeManagerFrom = incumbent
		in.Spec.Strategy = v1alpha1.StrategyProgressive
		in.Spec.Steps = []Step{{RampPercentage: 25, Pause: 60e9}, {RampPercentage: 75, Pause: 60e9}}
		in.Temporal.ManagerIdentity = incumbent
		in.Temporal.LastModifierIdentity = incumbent
		in.Temporal.RampingBuildID, in.Temporal.RampPercentage = "v2", 25
		in.Temporal.RoutingChangedAt = t0.Add(-10 * 60e9)
		in.Temporal.RampChangedAt = t0.Add(-10 * 60e9)
	})
	res := Plan(ramped)
	if res.Routing == nil || res.Routing.Op != SetRamp || res.Routing.RampPercentage != 75 || !res.BecomeManager {
		t.Errorf("after the incumbent's 25%% ramp: routing %+v, BecomeManager %v, %s", res.Routing, res.BecomeManager, fmt.Sprint(res.Progressing))
	}
}

// adoptionViolations: while adoption is pending the plan changes nothing in
// Kubernetes or Temporal, and CD tools read a rollout in progress.
func adoptionViolations(in Input, r Result) []error {
	var errs []error
	if r.Acts() || r.BecomeManager {
		errs = append(errs, fmt.Errorf("acts while adoption is pending: %+v", r))
	}
	if r.Progressing.Reason != v1alpha1.ReasonAdoptionPending || r.State == StateBlocked || r.RequeueAfter <= 0 {
		errs = append(errs, fmt.Errorf("adoption pending: Progressing %+v, state %s, requeue %s", r.Progressing, r.State, r.RequeueAfter))
	}
	return errs
}
