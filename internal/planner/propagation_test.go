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
		"status showed the target Ready: it stands while reads fail for a moment": {
			in:   with(base(), failing(-5*time.Second, false), func(in *Input) { in.TargetShownReady = true }),
			want: ready(expect{Requeue: 10 * time.Second, Message: "version v2 is current as last read"}),
		},
		"but not past the bound": {
			in: with(base(), failing(-TemporalOutageBound, false), func(in *Input) { in.TargetShownReady = true }),
			want: expect{Ready: condFalse, Reason: v1alpha1.ReasonTemporalStateFetchFailed, Progressing: condFalse,
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
	applying := func(changed time.Duration) func(*Input) {
		return func(in *Input) {
			in.Temporal.RoutingPropagating, in.Temporal.RoutingChangedAt = true, t0.Add(changed)
		}
	}
	shownReady := func(in *Input) { in.TargetShownReady = true }
	// Pauses shorter than Temporal can take to apply a ramp under load.
	shortSteps := func(in *Input) {
		in.Spec.Strategy = v1alpha1.StrategyProgressive
		in.Spec.Steps = []Step{{RampPercentage: 10, Pause: 3 * time.Second}, {RampPercentage: 50, Pause: 3 * time.Second}}
	}
	oursRampsV1 := func(in *Input) {
		in.Temporal.RampingBuildID, in.Temporal.RampPercentage, in.Temporal.RampChangedAt = "v1", 20, t0.Add(-time.Hour)
		setVersion(in, version("v1", v1alpha1.VersionRamping))
	}
	// v1 drained two hours ago: due for scale-down (scaledownDelay 1h).
	v1Drained := func(in *Input) {
		v := version("v1", v1alpha1.VersionDrained)
		v.DrainedSince = at(-2 * time.Hour)
		setVersion(in, v)
	}
	// A change made 100 ms ago is first looked at when Temporal can have
	// applied it.
	firstLook := propagationFirstLook - 100*time.Millisecond
	cs := cases{
		"a second after the change: looked at every requeuePropagation": {
			in: with(base(), rolledOut, applying(-time.Second)),
			want: expect{Ready: condFalse, Reason: v1alpha1.ReasonWaitingForTemporal, Progressing: condTrue,
				Requeue: requeuePropagation, Message: "applying version v2 as current"},
		},
		"a change Temporal dates after our clock: first looked at no later than propagationFirstLook": {
			in: with(base(), rolledOut, applying(5*time.Second)),
			want: expect{Ready: condFalse, Reason: v1alpha1.ReasonWaitingForTemporal, Progressing: condTrue,
				Requeue: propagationFirstLook, Message: "applying version v2 as current"},
		},
		"the target current, still being applied: not Ready yet": {
			in: with(base(), rolledOut, applying(-100*time.Millisecond)),
			want: expect{Ready: condFalse, Reason: v1alpha1.ReasonWaitingForTemporal, Progressing: condTrue,
				Requeue: firstLook, Message: "applying version v2 as current"},
		},
		"applied: complete": {
			in:   with(base(), rolledOut),
			want: ready(expect{Requeue: time.Minute}),
		},
		"still being applied after seconds: the look backs off": {
			in: with(base(), rolledOut, applying(-8*time.Second)),
			want: expect{Ready: condFalse, Reason: v1alpha1.ReasonWaitingForTemporal, Progressing: condTrue,
				Requeue: 2 * time.Second},
		},
		"still reported a minute after the change: taken as stale (Temporal can keep it for good)": {
			in:   with(base(), rolledOut, applying(-TemporalOutageBound)),
			want: ready(expect{Requeue: time.Minute}),
		},
		"routing writes go on meanwhile: our ramp on another version is removed": {
			in: with(base(), rolledOut, oursRampsV1, applying(-100*time.Millisecond)),
			want: expect{Routing: &Routing{Op: RemoveRamp}, Ready: condFalse, Reason: v1alpha1.ReasonWaitingForTemporal, Progressing: condTrue,
				Requeue: firstLook, Events: []string{EventRemoveRamp}},
		},
		"status showed the target Ready: another change being applied leaves it Ready": {
			in:   with(base(), rolledOut, oursRampsV1, shownReady, applying(-100*time.Millisecond)),
			want: ready(expect{Routing: &Routing{Op: RemoveRamp}, Requeue: firstLook, Events: []string{EventRemoveRamp}}),
		},
		"the target's ramp being applied": {
			in: with(base(), progressiveSteps, func(in *Input) { rampingTarget(in, 10, -100*time.Millisecond) }, applying(-100*time.Millisecond)),
			want: expect{Ready: condFalse, Reason: v1alpha1.ReasonWaitingForTemporal, Progressing: condTrue,
				Requeue: firstLook, Message: "applying the ramp of 10% to version v2"},
		},
		"a step whose pause is over but whose ramp Temporal still applies does not end": {
			in: with(base(), shortSteps, func(in *Input) { rampingTarget(in, 10, -4*time.Second) }, applying(-4*time.Second)),
			want: expect{Ready: condFalse, Reason: v1alpha1.ReasonWaitingForTemporal, Progressing: condTrue,
				Requeue: time.Second, Message: "applying the ramp of 10% to version v2"},
		},
		"nor does the last step: no promotion before its ramp is applied": {
			in: with(base(), shortSteps, func(in *Input) { rampingTarget(in, 50, -4*time.Second) }, applying(-4*time.Second)),
			want: expect{Ready: condFalse, Reason: v1alpha1.ReasonWaitingForTemporal, Progressing: condTrue,
				Requeue: time.Second, Message: "applying the ramp of 50% to version v2"},
		},
		"once applied, the step whose pause is over ends": {
			in: with(base(), shortSteps, func(in *Input) { rampingTarget(in, 10, -4*time.Second) }),
			want: expect{Routing: &Routing{Op: SetRamp, BuildID: "v2", RampPercentage: 50}, Ready: condFalse, Reason: v1alpha1.ReasonRamping,
				Progressing: condTrue, Requeue: time.Second, Events: []string{EventRamp}},
		},
		"a ramp still reported applying a minute after its change is taken as applied: the step ends": {
			in: with(base(), shortSteps, func(in *Input) { rampingTarget(in, 10, -TemporalOutageBound) }, applying(-TemporalOutageBound)),
			want: expect{Routing: &Routing{Op: SetRamp, BuildID: "v2", RampPercentage: 50}, Ready: condFalse, Reason: v1alpha1.ReasonRamping,
				Progressing: condTrue, Requeue: time.Second, Events: []string{EventRamp}},
		},
		"someone else's change being applied while the target's workers start: that wait stands": {
			in: with(base(), applying(-time.Hour), func(in *Input) { in.Deployments[1].Available = false }),
			want: expect{Ready: condFalse, Reason: v1alpha1.ReasonWaitingForPollers, Progressing: condTrue,
				Requeue: 30 * time.Second},
		},
		"a drained version is retired once nothing is being applied": {
			in: with(base(), rolledOut, v1Drained),
			want: ready(expect{Scale: []Scale{{Name: "worker-v1", BuildID: "v1", Replicas: 0, Reason: ScaleSunset}},
				Requeue: 30 * time.Second, Events: []string{EventScaleDown}}),
		},
		"but not while a change is being applied: a partition may still send it work": {
			in:   with(base(), rolledOut, v1Drained, shownReady, applying(-100*time.Millisecond)),
			want: ready(expect{Requeue: firstLook}),
		},
	}
	for name, tc := range cs {
		t.Run(name, func(t *testing.T) {
			got := check(t, tc.in, tc.want)
			want := tc.in.Temporal.RoutingPropagating && t0.Sub(tc.in.Temporal.RoutingChangedAt) < TemporalOutageBound
			if got.RoutingPropagating != want {
				t.Errorf("Result.RoutingPropagating = %v, want %v", got.RoutingPropagating, want)
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

// TestStepsEndOnlyOnceApplied walks a Progressive rollout's states around
// a step's end: every step and pause, ramps changed and reported applying
// at various times. A step ends when its pause is over and Temporal no
// longer reports its ramp being applied (or reported it for longer than
// TemporalOutageBound), and never otherwise.
func TestStepsEndOnlyOnceApplied(t *testing.T) {
	ago := []time.Duration{0, time.Second, 3 * time.Second, 10 * time.Second, TemporalOutageBound - time.Second, TemporalOutageBound, time.Hour}
	for _, pause := range []time.Duration{0, time.Second, 5 * time.Second, time.Minute} {
		for step := range 2 {
			for _, rampAgo := range ago {
				for _, changeAgo := range append([]time.Duration{-1}, ago...) {
					for _, applying := range []bool{false, true} {
						in := with(base(), func(in *Input) {
							in.Spec.Strategy = v1alpha1.StrategyProgressive
							in.Spec.Steps = []Step{{RampPercentage: 10, Pause: pause}, {RampPercentage: 50, Pause: pause}}
							rampingTarget(in, in.Spec.Steps[step].RampPercentage, -rampAgo)
							in.Temporal.RoutingPropagating = applying
							if changeAgo >= 0 {
								in.Temporal.RoutingChangedAt = t0.Add(-changeAgo)
							}
						})
						r := Plan(in)
						stillApplying := applying && (changeAgo < 0 || changeAgo < TemporalOutageBound)
						ends := r.Routing != nil && r.Routing.BuildID == "v2" &&
							(r.Routing.Op == SetCurrent || (r.Routing.Op == SetRamp && r.Routing.RampPercentage > in.Temporal.RampPercentage))
						if want := rampAgo >= pause && !stillApplying; ends != want {
							t.Errorf("step %d%% (pause %s) changed %s ago, applying %v (reported for %s): step ends = %v (%+v), want %v",
								in.Temporal.RampPercentage, pause, rampAgo, applying, changeAgo, ends, r.Routing, want)
						}
						for _, err := range violations(in, r) {
							t.Errorf("step %d%%, pause %s, changed %s ago, applying %v (%s): %v", in.Temporal.RampPercentage, pause, rampAgo, applying, changeAgo, err)
						}
					}
				}
			}
		}
	}
}
