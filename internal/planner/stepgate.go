package planner

import (
	"fmt"
	"strings"
	"time"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
)

// StepGate is spec.rollout.steps[].gate.
type StepGate struct {
	WorkflowType string
	// Timeout bounds a run; 0 is no bound.
	Timeout time.Duration
	// Input is read only while the step's gate may start.
	Input GateInput
}

// gatedStep is the step the target ramps at, if that step names a gate:
// only under a Progressive rollout we route, while the target ramps.
func gatedStep(v *view) (Step, bool) {
	t := v.temporal()
	if !v.known() || v.in.Spec.Strategy != v1alpha1.StrategyProgressive || v.target == "" ||
		t.RampingBuildID != v.target || t.CurrentBuildID == v.target {
		return Step{}, false
	}
	i := stepIndex(v.in.Spec.Steps, t.RampPercentage)
	if i < 0 || v.in.Spec.Steps[i].Gate == nil {
		return Step{}, false
	}
	return v.in.Spec.Steps[i], true
}

// GateWanted is the gate run the target needs now: the gate of the step
// it ramps at, where that step names one, else spec.rollout.gate (step
// 0). Observe looks up this run; any other run still open is ended.
func GateWanted(in Input) (step int32, ok bool) {
	return wantedGate(newView(in))
}

func wantedGate(v *view) (int32, bool) {
	if s, ok := gatedStep(v); ok {
		return s.RampPercentage, true
	}
	return 0, v.in.Spec.GateWorkflowType != ""
}

// gateNeeded: the run of build and step is the one the target needs now.
func gateNeeded(v *view, build string, step int32) bool {
	want, ok := wantedGate(v)
	return ok && build == v.target && want == step
}

// gateName names a gate in messages.
func gateName(step int32) string {
	if step == 0 {
		return "gate workflow"
	}
	return fmt.Sprintf("gate workflow of step %d%%", step)
}

// stepGate runs the gate of the step the target ramps at. The step may
// not end (hold) until the gate succeeded; a failed or timed-out gate
// aborts the rollout as a failed analysis does (stop). A run that failed
// before this step's ramp was last set belongs to an earlier attempt (the
// rollout was retried): it runs again.
func stepGate(v *view, p *plan) (prog progress, stop bool, hold string) {
	st, ok := gatedStep(v)
	if !ok || v.in.Spec.AbortedBuildID == v.target {
		return progress{}, false, ""
	}
	g, pct := st.Gate, st.RampPercentage
	run := v.in.Gate
	if run != nil && run.Phase == GateRunning && (run.BuildID != v.target || run.Step != pct || !run.CancelRequestedAt.IsZero()) {
		// One gate run at a time (status records one): the run being
		// ended (cancelStaleGate) goes first.
		p.after(requeueTemporal)
		return progress{}, false, fmt.Sprintf("waiting for the %s on version %s to end (%s) before starting the %s",
			gateName(run.Step), run.BuildID, endingNote(run), gateName(pct))
	}
	if run != nil && (run.BuildID != v.target || run.Step != pct || run.Phase == GateCancelled || earlierAttempt(v, run)) {
		run = nil
	}
	switch {
	case run == nil:
		return progress{}, false, startStepGate(v, p, g, pct)
	case run.Phase == GateSucceeded:
		return progress{}, false, ""
	case run.Phase == GateFailed:
		evidence := fmt.Sprintf("gate workflow %s of step %d%% failed on version %s: %s", g.WorkflowType, pct, v.target, run.Message)
		return abortRamp(v, p, v1alpha1.ReasonGateFailed, "the step gate", evidence), true, ""
	default:
		p.after(backoff(v, run.StartedAt))
		return progress{}, false, fmt.Sprintf("gate workflow %s of step %d%% is running on version %s", g.WorkflowType, pct, v.target)
	}
}

// earlierAttempt: a failed run started before the step's ramp was last
// set (whole seconds, as status keeps them). A run of unknown start
// counts: better a second abort than a step passed on no verdict.
func earlierAttempt(v *view, run *GateRun) bool {
	start, ok := rampStart(v)
	return run.Phase == GateFailed && ok && !run.StartedAt.IsZero() &&
		run.StartedAt.Truncate(time.Second).Before(start.Truncate(time.Second))
}

// startStepGate starts the step's gate on the target's workflow task
// queue, as the rollout gate starts, and returns why the step holds.
func startStepGate(v *view, p *plan, g *StepGate, pct int32) string {
	name := fmt.Sprintf("gate workflow %s of step %d%%", g.WorkflowType, pct)
	if msg := g.Input.Problem; msg != "" {
		p.after(requeueWatch)
		return fmt.Sprintf("cannot start %s on version %s: %s", name, v.target, msg)
	}
	queue := v.tvs[v.target].WorkflowTaskQueue
	if queue == "" {
		p.after(requeueWatch)
		return fmt.Sprintf("cannot start %s yet: the workers of version %s poll no workflow task queue for it to run on", name, v.target)
	}
	p.res.StartGate = &StartGate{BuildID: v.target, Step: pct, WorkflowType: g.WorkflowType, TaskQueue: queue, Input: g.Input.Data, Timeout: g.Timeout}
	p.eventOn(v.target, EventNormal, EventStartGate, fmt.Sprintf("starting %s pinned to version %s", name, v.target))
	p.after(requeueTemporal)
	return fmt.Sprintf("starting %s on version %s", name, v.target)
}

// joinHolds joins the reasons a step holds.
func joinHolds(holds ...string) string {
	var out []string
	for _, h := range holds {
		if h != "" {
			out = append(out, h)
		}
	}
	return strings.Join(out, "; ")
}

// stepGateEvidence is the failure of the target's step gate that aborted
// its rollout, if one did.
func stepGateEvidence(v *view) string {
	if r := v.in.Gate; r != nil && r.BuildID == v.target && r.Step != 0 && r.Phase == GateFailed {
		return fmt.Sprintf("the gate workflow of step %d%% failed: %s", r.Step, r.Message)
	}
	return ""
}
