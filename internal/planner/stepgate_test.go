package planner

import (
	"strings"
	"testing"
	"time"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
)

// gatedFirstStep gives the 10% step a gate.
func gatedFirstStep(in *Input) {
	progressiveSteps(in)
	in.Spec.Steps[0].Gate = &StepGate{WorkflowType: "Check", Timeout: time.Minute, Input: GateInput{Data: []byte(`{"a":1}`)}}
}

func stepRun(phase GatePhase, started time.Duration) func(*Input) {
	return func(in *Input) {
		in.Gate = &GateRun{BuildID: "v2", Step: 10, Phase: phase, Message: "said " + string(phase), StartedAt: t0.Add(started)}
	}
}

func TestStepGate(t *testing.T) {
	pauseOver := func(in *Input) { rampingTarget(in, 10, -time.Hour) }
	pauseOn := func(in *Input) { rampingTarget(in, 10, -time.Minute) }
	for name, tc := range map[string]struct {
		in          Input
		wantRouting *Routing
		wantStart   *StartGate
		wantAbort   bool
		wantReason  string
		wantMessage string
		wantEvent   string
	}{
		"the step's ramp starts its gate on the target's workflow task queue": {
			in:          with(base(), gatedFirstStep, pauseOn),
			wantStart:   &StartGate{BuildID: "v2", Step: 10, WorkflowType: "Check", TaskQueue: "orders", Input: []byte(`{"a":1}`), Timeout: time.Minute},
			wantReason:  v1alpha1.ReasonRamping,
			wantMessage: "ramping 10%",
			wantEvent:   EventStartGate,
		},
		"a step whose pause is over does not advance before its gate started": {
			in:          with(base(), gatedFirstStep, pauseOver),
			wantStart:   &StartGate{BuildID: "v2", Step: 10, WorkflowType: "Check", TaskQueue: "orders", Input: []byte(`{"a":1}`), Timeout: time.Minute},
			wantReason:  v1alpha1.ReasonRamping,
			wantMessage: "holding the 10% ramp of version v2: starting gate workflow Check of step 10%",
		},
		"a running step gate holds the step past its pause": {
			in:          with(base(), gatedFirstStep, pauseOver, stepRun(GateRunning, -time.Minute)),
			wantReason:  v1alpha1.ReasonRamping,
			wantMessage: "gate workflow Check of step 10% is running",
		},
		"a passed step gate lets the step end": {
			in:          with(base(), gatedFirstStep, pauseOver, stepRun(GateSucceeded, -time.Minute)),
			wantRouting: &Routing{Op: SetRamp, BuildID: "v2", RampPercentage: 50},
			wantReason:  v1alpha1.ReasonRamping,
		},
		"a passed step gate does not cut the step's pause short": {
			in:          with(base(), gatedFirstStep, pauseOn, stepRun(GateSucceeded, -time.Minute)),
			wantReason:  v1alpha1.ReasonRamping,
			wantMessage: "next step (50%)",
		},
		"a failed step gate aborts: the ramp goes, the abort is recorded": {
			in:          with(base(), gatedFirstStep, pauseOn, stepRun(GateFailed, -30*time.Second)),
			wantRouting: &Routing{Op: RemoveRamp},
			wantAbort:   true,
			wantReason:  v1alpha1.ReasonRolloutAborted,
			wantMessage: "the step gate aborted the rollout of version v2: gate workflow Check of step 10% failed on version v2: said Failed; removing its ramp",
			wantEvent:   v1alpha1.ReasonGateFailed,
		},
		"a failed step gate aborts a paused rollout too": {
			in: with(base(), gatedFirstStep, pauseOn, stepRun(GateFailed, -30*time.Second),
				func(in *Input) { in.Spec.Paused = true }),
			wantRouting: &Routing{Op: RemoveRamp},
			wantAbort:   true,
			wantReason:  v1alpha1.ReasonRolloutAborted,
		},
		"someone else's ramp stays when a step gate fails": {
			in: with(base(), gatedFirstStep, pauseOn, stepRun(GateFailed, -30*time.Second),
				func(in *Input) { in.Temporal.LastModifierIdentity = "alice" }),
			wantAbort:   true,
			wantReason:  v1alpha1.ReasonRolloutAborted,
			wantMessage: `set by "alice" and stays`,
		},
		"a step gate that failed in an earlier attempt runs again (retry)": {
			in:         with(base(), gatedFirstStep, pauseOn, stepRun(GateFailed, -time.Hour)),
			wantStart:  &StartGate{BuildID: "v2", Step: 10, WorkflowType: "Check", TaskQueue: "orders", Input: []byte(`{"a":1}`), Timeout: time.Minute},
			wantReason: v1alpha1.ReasonRamping,
		},
		"an aborted step gate's evidence stays in the condition": {
			in: with(base(), gatedFirstStep, stepRun(GateFailed, -time.Minute),
				func(in *Input) { in.Spec.AbortedBuildID = "v2" }),
			wantReason:  v1alpha1.ReasonRolloutAborted,
			wantMessage: "a step gate aborted the rollout of version v2 (annotation temporal.io/abort-rollout): the gate workflow of step 10% failed: said Failed",
		},
		"a step gate without a workflow task queue holds the step with a message": {
			in: with(base(), gatedFirstStep, pauseOver, func(in *Input) {
				tv := version("v2", v1alpha1.VersionRamping)
				tv.WorkflowTaskQueue = ""
				setVersion(in, tv)
			}),
			wantReason:  v1alpha1.ReasonRamping,
			wantMessage: "cannot start gate workflow Check of step 10% yet: the workers of version v2 poll no workflow task queue",
		},
		"a step gate whose input cannot be read holds the step with the problem": {
			in: with(base(), gatedFirstStep, pauseOver, func(in *Input) {
				in.Spec.Steps[0].Gate.Input = GateInput{Problem: "ConfigMap gate-input has no key \"in\""}
			}),
			wantReason:  v1alpha1.ReasonRamping,
			wantMessage: "cannot start gate workflow Check of step 10% on version v2: ConfigMap gate-input has no key",
		},
		"a step without a gate is not held by another step's": {
			in:          with(base(), gatedFirstStep, func(in *Input) { rampingTarget(in, 50, -time.Hour) }),
			wantRouting: &Routing{Op: SetCurrent, BuildID: "v2"},
			wantReason:  v1alpha1.ReasonWaitingForPromotion,
		},
		"the gate of the last step holds the promotion": {
			in: with(base(), progressiveSteps, func(in *Input) {
				in.Spec.Steps[1].Gate = &StepGate{WorkflowType: "Check"}
				rampingTarget(in, 50, -time.Hour)
				in.Gate = &GateRun{BuildID: "v2", Step: 50, Phase: GateRunning, StartedAt: t0.Add(-time.Minute)}
			}),
			wantReason:  v1alpha1.ReasonRamping,
			wantMessage: "gate workflow Check of step 50% is running",
		},
		"the rollout gate's run does not pass a step's gate": {
			in: with(base(), gatedFirstStep, pauseOver, func(in *Input) {
				in.Spec.GateWorkflowType = "Check"
				in.Gate = &GateRun{BuildID: "v2", Phase: GateSucceeded}
			}),
			wantStart:  &StartGate{BuildID: "v2", Step: 10, WorkflowType: "Check", TaskQueue: "orders", Input: []byte(`{"a":1}`), Timeout: time.Minute},
			wantReason: v1alpha1.ReasonRamping,
		},
	} {
		t.Run(name, func(t *testing.T) {
			res := Plan(tc.in)
			if !equalRouting(res.Routing, tc.wantRouting) {
				t.Errorf("routing = %+v, want %+v", res.Routing, tc.wantRouting)
			}
			if got, want := res.StartGate, tc.wantStart; (got == nil) != (want == nil) ||
				(got != nil && (got.BuildID != want.BuildID || got.Step != want.Step || got.WorkflowType != want.WorkflowType ||
					got.TaskQueue != want.TaskQueue || string(got.Input) != string(want.Input) || got.Timeout != want.Timeout)) {
				t.Errorf("start gate = %+v, want %+v", got, want)
			}
			if (res.AbortRollout != nil) != tc.wantAbort {
				t.Errorf("abort = %+v, want %v", res.AbortRollout, tc.wantAbort)
			}
			if res.AbortRollout != nil && (res.AbortRollout.BuildID != "v2" || !strings.Contains(res.AbortRollout.Evidence, "said Failed")) {
				t.Errorf("abort = %+v, want v2 with the gate's failure as evidence", res.AbortRollout)
			}
			if res.Ready.Reason != tc.wantReason || !strings.Contains(res.Ready.Message, tc.wantMessage) {
				t.Errorf("ready = %s %q, want %s containing %q", res.Ready.Reason, res.Ready.Message, tc.wantReason, tc.wantMessage)
			}
			if tc.wantEvent != "" && !hasEvent(res, tc.wantEvent) {
				t.Errorf("events = %+v, want one %s", res.Events, tc.wantEvent)
			}
		})
	}
}

// A step gate run nobody needs any more is ended with the machinery of
// the rollout gate, naming its step.
func TestStepGateCancel(t *testing.T) {
	for name, in := range map[string]Input{
		"the ramp was removed": with(base(), gatedFirstStep, stepRun(GateRunning, -time.Minute)),
		"the step lost its gate": with(base(), progressiveSteps, func(in *Input) { rampingTarget(in, 10, -time.Minute) },
			stepRun(GateRunning, -time.Minute)),
		"another target": with(base(), gatedFirstStep, func(in *Input) {
			in.Gate = &GateRun{BuildID: "v1-old", Step: 10, Phase: GateRunning}
		}),
	} {
		t.Run(name, func(t *testing.T) {
			res := Plan(in)
			if c := res.CancelGate; c == nil || c.BuildID != in.Gate.BuildID || c.Step != 10 {
				t.Errorf("cancel = %+v, want the step 10 run of %s", c, in.Gate.BuildID)
			}
		})
	}
	res := Plan(with(base(), gatedFirstStep, func(in *Input) { rampingTarget(in, 10, -time.Minute) }, stepRun(GateRunning, -time.Minute),
		func(in *Input) { in.Gate.CancelRequestedAt = t0.Add(-time.Minute) }))
	if tg := res.TerminateGate; tg == nil || tg.Step != 10 {
		t.Errorf("terminate = %+v, want the step 10 run once the grace passed", tg)
	}
	if res.StartGate != nil || res.Routing != nil {
		t.Errorf("start %+v, routing %+v while the old run is ended: want neither", res.StartGate, res.Routing)
	}
}

func equalRouting(a, b *Routing) bool {
	return (a == nil) == (b == nil) && (a == nil || (a.Op == b.Op && a.BuildID == b.BuildID && a.RampPercentage == b.RampPercentage))
}
