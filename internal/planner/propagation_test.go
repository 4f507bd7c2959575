package planner

import (
	"testing"
	"time"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
)

func TestReadsFailingForAMoment(t *testing.T) {
	failing := func(since time.Duration, throttled bool) func(*Input) {
		return func(in *Input) {
			in.Temporal = nil
			// Both would be sunset if Temporal said they were drained.
			in.Deployments = append(in.Deployments, scaledDown("v0", -72*time.Hour), running("va"))
			in.TemporalError = &Problem{Reason: v1alpha1.ReasonTemporalStateFetchFailed, Message: "rpc error: Unavailable",
				Since: t0.Add(since), Throttled: throttled}
		}
	}
	runCases(t, cases{
		"failing for seconds: waiting, nothing routed, scaled down or deleted": {
			in: with(base(), failing(-5*time.Second, false)),
			want: expect{Ready: condFalse, Reason: v1alpha1.ReasonWaitingForTemporal, Progressing: condTrue,
				Requeue: 10 * time.Second, Message: "reported as an outage (TemporalStateFetchFailed) if reads still fail at 2026-03-01T12:00:55Z"},
		},
		"close to the bound: looked at again when it is reached": {
			in: with(base(), failing(-57*time.Second, false)),
			want: expect{Ready: condFalse, Reason: v1alpha1.ReasonWaitingForTemporal, Progressing: condTrue,
				Requeue: 3 * time.Second},
		},
		"past the bound: an outage, blocked": {
			in: with(base(), failing(-TemporalOutageBound, false)),
			want: expect{Ready: condFalse, Reason: v1alpha1.ReasonTemporalStateFetchFailed, Progressing: condFalse,
				Requeue: 10 * time.Second, Message: "Unavailable"},
		},
		"throttled for an hour: still waiting, never blocked": {
			in: with(base(), failing(-time.Hour, true)),
			want: expect{Ready: condFalse, Reason: v1alpha1.ReasonWaitingForTemporal, Progressing: condTrue,
				Requeue: 10 * time.Second},
		},
		"no connection: blocked at once": {
			in: with(base(), failing(-time.Second, false), func(in *Input) {
				in.TemporalError.Reason = v1alpha1.ReasonTemporalClientCreationFailed
			}),
			want: expect{Ready: condFalse, Reason: v1alpha1.ReasonTemporalClientCreationFailed, Progressing: condFalse,
				Requeue: 10 * time.Second},
		},
		"a new target is still created while waiting": {
			in: with(base(), failing(-time.Second, true), func(in *Input) { dropDep(in, "v2") }),
			want: expect{Create: &CreateDeployment{BuildID: "v2", Replicas: 3},
				Ready: condFalse, Reason: v1alpha1.ReasonWaitingForTemporal, Progressing: condTrue,
				Requeue: 10 * time.Second, Events: []string{EventCreateDeployment}},
		},
	})
}

func TestRoutingPropagation(t *testing.T) {
	applying := func(in *Input) { in.Temporal.RoutingPropagating = true }
	currentAt := func(d time.Duration) func(*Input) {
		return func(in *Input) {
			v := version("v2", v1alpha1.VersionCurrent)
			v.CurrentSince = at(d)
			setVersion(in, v)
		}
	}
	cs := cases{
		"the target current, still being applied: not Ready yet": {
			in: with(base(), rolledOut, currentAt(-100*time.Millisecond), applying),
			want: expect{Ready: condFalse, Reason: v1alpha1.ReasonWaitingForTemporal, Progressing: condTrue,
				Requeue: requeuePropagation, Message: "Ready once every task queue partition routes new workflows to it"},
		},
		"applied: complete": {
			in:   with(base(), rolledOut, currentAt(-100*time.Millisecond)),
			want: ready(expect{Requeue: 5 * time.Second}),
		},
		"still applied after seconds: the look backs off": {
			in: with(base(), rolledOut, currentAt(-8*time.Second), applying),
			want: expect{Ready: condFalse, Reason: v1alpha1.ReasonWaitingForTemporal, Progressing: condTrue,
				Requeue: 2 * time.Second},
		},
		"a ramp being applied: no other routing is written": {
			in: with(base(), rolledOut, currentAt(-time.Hour), applying, func(in *Input) {
				// Ours to remove once the target is current, but not
				// before Temporal has applied the last change.
				in.Temporal.RampingBuildID, in.Temporal.RampPercentage, in.Temporal.RampChangedAt = "v1", 20, t0.Add(-100*time.Millisecond)
				setVersion(in, version("v1", v1alpha1.VersionRamping))
			}),
			want: expect{Ready: condFalse, Reason: v1alpha1.ReasonWaitingForTemporal, Progressing: condTrue,
				Requeue: requeuePropagation},
		},
		"the target's ramp being applied: status keeps the previous ramp": {
			in: with(base(), progressiveSteps, func(in *Input) { rampingTarget(in, 10, -100*time.Millisecond) }, applying),
			want: expect{Ready: condFalse, Reason: v1alpha1.ReasonWaitingForTemporal, Progressing: condTrue,
				Requeue: requeuePropagation, Message: "applying the ramp of 10% to version v2"},
		},
		"someone else's change being applied while the target's workers start: that wait stands": {
			in: with(base(), applying, func(in *Input) { in.Deployments[1].Available = false }),
			want: expect{Ready: condFalse, Reason: v1alpha1.ReasonWaitingForPollers, Progressing: condTrue,
				Requeue: 30 * time.Second},
		},
	}
	for name, tc := range cs {
		t.Run(name, func(t *testing.T) {
			got := check(t, tc.in, tc.want)
			if got.RoutingPropagating != tc.in.Temporal.RoutingPropagating {
				t.Errorf("Result.RoutingPropagating = %v, want %v", got.RoutingPropagating, tc.in.Temporal.RoutingPropagating)
			}
		})
	}
}

func TestAfterRoutingIsStillBeingApplied(t *testing.T) {
	in := base()
	s := AfterRouting(in.Temporal, Routing{Op: SetCurrent, BuildID: "v2"}, me, t0)
	if !s.RoutingPropagating || in.Temporal.RoutingPropagating {
		t.Fatalf("AfterRouting: RoutingPropagating = %v (input %v), want true and the input unchanged", s.RoutingPropagating, in.Temporal.RoutingPropagating)
	}
	res := Plan(with(in, func(in *Input) { in.Temporal = s }))
	if res.Ready.Status == condTrue || res.Ready.Reason != v1alpha1.ReasonWaitingForTemporal || !res.RoutingPropagating {
		t.Errorf("the plan right after the write: Ready %s/%s, RoutingPropagating %v; want not Ready until Temporal applied it",
			res.Ready.Status, res.Ready.Reason, res.RoutingPropagating)
	}
}
