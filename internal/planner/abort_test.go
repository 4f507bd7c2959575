package planner

import (
	"testing"
	"time"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
)

func TestAbortRollout(t *testing.T) {
	aborted := func(in *Input) { in.Spec.AbortedBuildID = "v2" }
	const reason = v1alpha1.ReasonRolloutAborted
	runCases(t, cases{
		"an aborted target is not promoted": {
			in:   with(base(), aborted),
			want: expect{Ready: condFalse, Reason: reason, Progressing: condFalse, Requeue: time.Minute, Message: "aborted"},
		},
		"the ramp we set on an aborted target goes": {
			in: with(base(), progressiveSteps, aborted, func(in *Input) { rampingTarget(in, 10, -time.Minute) }),
			want: expect{Routing: &Routing{Op: RemoveRamp}, Ready: condFalse, Reason: reason, Progressing: condFalse,
				Requeue: time.Second, Events: []string{EventRemoveRamp}, Message: "removing its ramp"},
		},
		"someone else's ramp on an aborted target stays": {
			in: with(base(), progressiveSteps, aborted, func(in *Input) {
				rampingTarget(in, 10, -time.Minute)
				in.Temporal.LastModifierIdentity = "alice"
			}),
			want: expect{Ready: condFalse, Reason: reason, Progressing: condFalse, Requeue: time.Minute, Message: `set by "alice" and stays`},
		},
		"an abort of an earlier target does not hold a new one": {
			in:   with(base(), func(in *Input) { in.Spec.AbortedBuildID = "v1-old" }),
			want: expect{Routing: &Routing{Op: SetCurrent, BuildID: "v2"}, Ready: condFalse, Reason: v1alpha1.ReasonWaitingForPromotion, Progressing: condTrue, Requeue: time.Second, Events: []string{EventPromote}},
		},
		"an abort after the rollout completed changes nothing": {
			in:   with(base(), rolledOut, aborted),
			want: ready(expect{Requeue: time.Minute}),
		},
	})
}
