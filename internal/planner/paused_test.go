package planner

import (
	"testing"
	"time"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
)

// TestPaused: spec.rollout.paused holds every routing change that advances
// the rollout, and nothing that keeps versions up or rolls back.
func TestPaused(t *testing.T) {
	paused := func(in *Input) { in.Spec.Paused, in.Name = true, "worker" }
	const reason = v1alpha1.ReasonPaused
	hold := func(msg string) expect {
		return expect{Ready: condFalse, Reason: reason, Progressing: condTrue, Requeue: time.Minute, Message: msg}
	}
	runCases(t, cases{
		"AllAtOnce: not made current": {
			in:   with(base(), paused),
			want: hold("spec.rollout.paused holds version v2 with no traffic; resume with: kubectl rainbow resume"),
		},
		"Progressive: no first step": {
			in:   with(base(), progressiveSteps, paused),
			want: hold("holds version v2 with no traffic"),
		},
		"Progressive: a step whose pause ran out stays": {
			in:   with(base(), progressiveSteps, paused, func(in *Input) { rampingTarget(in, 10, -time.Hour) }),
			want: hold("holds version v2 ramping 10%"),
		},
		"Progressive: the last step is not promoted": {
			in:   with(base(), progressiveSteps, paused, func(in *Input) { rampingTarget(in, 50, -time.Hour) }),
			want: hold("ramping 50%"),
		},
		"Manual: Paused rather than waiting for a person": {
			in:   with(base(), paused, func(in *Input) { in.Spec.Strategy = v1alpha1.StrategyManual }),
			want: hold("kubectl rainbow resume worker"),
		},
		"the target still gets its Deployment": {
			in: with(base(), paused, func(in *Input) {
				in.Spec.TargetBuildID = "v3"
			}),
			want: expect{Create: &CreateDeployment{BuildID: "v3", Replicas: 3},
				Ready: condFalse, Reason: v1alpha1.ReasonWaitingForPollers, Progressing: condTrue, Requeue: 30 * time.Second,
				Events: []string{EventCreateDeployment}},
		},
		"an abort still removes our ramp": {
			in: with(base(), progressiveSteps, paused, func(in *Input) {
				in.Spec.AbortedBuildID = "v2"
				rampingTarget(in, 10, -time.Minute)
			}),
			want: expect{Routing: &Routing{Op: RemoveRamp}, Ready: condFalse, Reason: v1alpha1.ReasonRolloutAborted, Progressing: condFalse,
				Requeue: time.Second, Events: []string{EventRemoveRamp}},
		},
		"a rollback to a recently current version still happens": {
			in: with(base(), paused, func(in *Input) {
				in.Spec.TargetBuildID = "v1"
				in.Temporal.CurrentBuildID = "v2"
				setVersion(in, version("v2", current))
				setVersion(in, version("v1", draining))
			}),
			want: expect{Routing: &Routing{Op: SetCurrent, BuildID: "v1"}, Ready: condFalse, Reason: v1alpha1.ReasonWaitingForPromotion,
				Progressing: condTrue, Requeue: time.Second, Events: []string{EventRolledBack}},
		},
		"a complete rollout stays Ready": {
			in:   with(base(), rolledOut, paused),
			want: ready(expect{Requeue: time.Minute}),
		},
	})
}
