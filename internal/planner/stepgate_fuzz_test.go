package planner

import (
	"fmt"
	"testing"
	"time"

	"github.com/rainbow-deploy/rainbow/internal/fuzzsrc"
)

// fuzzStepGates gives some steps a gate, and some gate runs a step.
func fuzzStepGates(s *fuzzsrc.Source, in *Input) {
	for i := range in.Spec.Steps {
		if s.Intn(3) == 0 {
			in.Spec.Steps[i].Gate = &StepGate{WorkflowType: "G", Input: GateInput{Problem: fuzzsrc.Pick(s, "", "", "no key")}}
		}
	}
	if g := in.Gate; g != nil && len(in.Spec.Steps) > 0 && s.Bool() {
		g.Step = in.Spec.Steps[s.Intn(len(in.Spec.Steps))].RampPercentage
		g.StartedAt = t0.Add(fuzzsrc.Pick(s, time.Duration(0), -time.Second, -time.Hour, -48*time.Hour))
	}
}

// stepGateFailed: the target ramps at a step whose gate's run, in this
// attempt, failed.
func stepGateFailed(in Input) bool {
	v := newView(in)
	st, ok := gatedStep(v)
	r := in.Gate
	return ok && r != nil && r.BuildID == v.target && r.Step == st.RampPercentage && r.Phase == GateFailed && !earlierAttempt(v, r)
}

// stepGateViolations: the target never leaves a gated step (next ramp or
// promotion) unless that step's gate succeeded; a step gate starts only on
// the target ramping at that step, on a workflow task queue, while no
// other run is open.
func stepGateViolations(in Input, r Result) []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	v := newView(in)
	st, gated := gatedStep(v)
	if rt := r.Routing; gated && rt != nil && !hasEvent(r, EventRolledBack) && rt.BuildID == v.target &&
		(rt.Op == SetCurrent || (rt.Op == SetRamp && rt.RampPercentage > in.Temporal.RampPercentage)) {
		if g := in.Gate; g == nil || g.BuildID != v.target || g.Step != st.RampPercentage || g.Phase != GateSucceeded {
			bad("the plan advances %+v past step %d%% whose gate did not pass (run %+v)", rt, st.RampPercentage, in.Gate)
		}
	}
	if sg := r.StartGate; sg != nil && sg.Step != 0 {
		if !gated || sg.Step != st.RampPercentage || sg.BuildID != v.target || sg.TaskQueue == "" {
			bad("step gate %+v started while the target does not ramp at that gated step", sg)
		}
		if g := in.Gate; g != nil && g.Phase == GateRunning && (g.BuildID != sg.BuildID || g.Step != sg.Step || !g.CancelRequestedAt.IsZero()) {
			bad("step gate %+v started while run %+v is still open", sg, g)
		}
	}
	return errs
}

// TestStepGateInvariants runs stepGateViolations on ramping rollouts with
// gated steps and every kind of run: random inputs seldom ramp the target.
func TestStepGateInvariants(t *testing.T) {
	fuzzsrc.EachRandom(t, 2828, 5000, 32, func(data []byte) []error {
		s := fuzzsrc.New(data)
		in := with(base(), progressiveSteps)
		in.Temporal.RampingBuildID, in.Temporal.RampPercentage = "v2", fuzzsrc.Pick(s, int32(10), 50, 30)
		in.Temporal.RampChangedAt = t0.Add(fuzzsrc.Pick(s, -time.Hour, -time.Minute, -2*time.Second))
		in.Temporal.LastModifierIdentity = fuzzsrc.Pick(s, me, "alice")
		in.Spec.Paused = s.Intn(4) == 0
		if s.Intn(4) == 0 {
			in.Spec.AbortedBuildID = "v2"
		}
		if s.Bool() {
			in.Gate = &GateRun{BuildID: fuzzsrc.Pick(s, "v2", "v1"), Phase: fuzzsrc.Pick(s, GateRunning, GateSucceeded, GateFailed, GateCancelled), Message: "m"}
			if s.Intn(4) == 0 {
				in.Gate.CancelRequestedAt = t0.Add(-time.Second)
			}
		}
		fuzzStepGates(s, &in)
		res := Plan(in)
		return append(stepGateViolations(in, res), analysisViolations(in, res)...)
	})
}

// ownGateAsked: the spec asks the target for the gate of step (0:
// spec.rollout.gate) now: a ramp step's gate while it ramps at that step,
// the rollout gate otherwise.
func ownGateAsked(in Input, step int32) bool {
	st, gated := gatedStep(newView(in))
	if gated {
		return step == st.RampPercentage
	}
	return step == 0 && in.Spec.GateWorkflowType != ""
}
