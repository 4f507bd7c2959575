package planner

import (
	"testing"
	"time"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
)

// TestRampWithoutWorkersIsRemoved: a ramping target whose workers stopped
// polling loses its ramp, so no new workflow waits for absent workers.
func TestRampWithoutWorkersIsRemoved(t *testing.T) {
	runCases(t, cases{
		"pollers gone: ramp removed": {
			in: with(base(), progressiveSteps, func(in *Input) {
				rampingTarget(in, 10, -time.Minute)
				tv := version("v2", ramping)
				tv.HasPollers = false
				setVersion(in, tv)
			}),
			want: expect{Routing: &Routing{Op: RemoveRamp}, Ready: condFalse, Reason: v1alpha1.ReasonWaitingForPollers,
				Progressing: condTrue, Requeue: time.Second, Events: []string{EventRemoveRamp}, Message: "any more"},
		},
		"Manual: a person's ramp is left alone": {
			in: with(base(), func(in *Input) {
				in.Spec.Strategy = v1alpha1.StrategyManual
				rampingTarget(in, 10, -time.Minute)
				tv := version("v2", ramping)
				tv.HasPollers = false
				setVersion(in, tv)
			}),
			want: expect{Ready: condFalse, Reason: v1alpha1.ReasonWaitingForPollers, Progressing: condTrue, Requeue: time.Second},
		},
	})
}
