package workerdeployment

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/internal/planner"
	"github.com/rainbow-deploy/rainbow/internal/temporal"
)

// observeGate finds the run of the gate the target needs now
// (planner.GateWanted): spec.rollout.gate, or the gate of the step it
// ramps at. A finished run recorded in status is final (a gate runs once
// per version and step), so it costs no RPC. When the gate may start, its
// input is read for the plan.
func observeGate(ctx context.Context, c client.Reader, o *observation) error {
	step, wanted := planner.GateWanted(o.input)
	stale, err := staleGate(ctx, o, !wanted)
	if err != nil || stale {
		// A stale run is ended first; the target's own run is looked up
		// once it has.
		return err
	}
	prev := o.gate
	finished := prev != nil && prev.BuildID == o.targetBuildID &&
		(prev.Result == string(planner.GateSucceeded) || prev.Result == string(planner.GateFailed))
	aborted := o.twd.Annotations[v1alpha1.AnnotationAbortRollout] == o.targetBuildID
	if finished && (!wanted || aborted || prev.Step == step) {
		// Also the evidence of an abort by a step gate, while it stands.
		o.input.Gate = recordedGate(prev)
		if wanted && !aborted && prev.Step != 0 && prev.Result == string(planner.GateFailed) {
			// Failed in an earlier attempt, it runs again (planner).
			setGateInput(o, step, readGateInput(ctx, c, o.twd.Namespace, gateSpec(o.twd, step), step))
		}
		return nil
	}
	if !wanted || aborted {
		return nil
	}
	if _, registered := o.details[o.targetBuildID]; !registered {
		return nil // current, or no worker polled yet: no gate to ask about
	}
	g := gateSpec(o.twd, step)
	id := temporal.StepGateWorkflowID(o.deploymentName, o.targetBuildID, step)
	res, err := o.api.GateResult(ctx, id)
	if errors.Is(err, temporal.ErrNotFound) {
		setGateInput(o, step, readGateInput(ctx, c, o.twd.Namespace, g, step))
		return nil
	}
	if err != nil {
		return err
	}
	run := &planner.GateRun{BuildID: o.targetBuildID, Step: step, Phase: res.Phase, Message: res.Message, StartedAt: res.StartedAt}
	if res.Phase == planner.GateCancelled || res.Phase == planner.GateFailed {
		// It may run again: cancelled, or failed in an earlier attempt.
		setGateInput(o, step, readGateInput(ctx, c, o.twd.Namespace, g, step))
	}
	o.input.Gate = run
	o.gate = &v1alpha1.GateStatus{BuildID: o.targetBuildID, Step: step, WorkflowID: id, RunID: res.RunID, Result: string(res.Phase), Message: res.Message}
	if !res.StartedAt.IsZero() {
		o.gate.StartedAt = &metav1.Time{Time: res.StartedAt}
	}
	return nil
}

// hasGate: the spec names a gate, for the rollout or a step. Its runs are
// read each pass (observeGate), so no remembered state stands in for them.
func hasGate(twd *v1alpha1.TemporalWorkerDeployment) bool {
	return twd.Spec.Rollout.Gate != nil || slices.ContainsFunc(twd.Spec.Rollout.Steps, func(s v1alpha1.RolloutStep) bool { return s.Gate != nil })
}

// recordedGate is the run status records, for the planner.
func recordedGate(g *v1alpha1.GateStatus) *planner.GateRun {
	run := &planner.GateRun{BuildID: g.BuildID, Step: g.Step, Phase: planner.GatePhase(g.Result), Message: g.Message}
	if g.StartedAt != nil {
		run.StartedAt = g.StartedAt.Time
	}
	return run
}

// gateSpec is spec.rollout.gate (step 0) or the gate of the step with
// that rampPercentage.
func gateSpec(twd *v1alpha1.TemporalWorkerDeployment, step int32) *v1alpha1.GateWorkflow {
	if step == 0 {
		return twd.Spec.Rollout.Gate
	}
	for _, s := range twd.Spec.Rollout.Steps {
		if s.RampPercentage == step {
			return s.Gate
		}
	}
	return nil
}

// setGateInput hands the gate's input to the planner.
func setGateInput(o *observation, step int32, in planner.GateInput) {
	if step == 0 {
		o.input.Spec.GateInput = in
		return
	}
	for i := range o.input.Spec.Steps {
		if s := &o.input.Spec.Steps[i]; s.RampPercentage == step && s.Gate != nil {
			s.Gate.Input = in
		}
	}
}

// staleGate hands the planner the gate run status shows, when it is to be
// ended: one still running for a version that no longer needs it (not the
// target, the spec dropped its gate, or the TWD is deleted), so that it is
// cancelled; and one whose cancellation the controller requested
// (status.gate.cancelRequestedAt, which survives restarts), read afresh
// from Temporal, so that it is terminated once planner.GateCancelGrace has
// passed. Status keeps such a run until Temporal shows it ended; it is
// the only record of it. It reports whether the planner got a run to end.
func staleGate(ctx context.Context, o *observation, unneeded bool) (bool, error) {
	prev := o.twd.Status.Gate
	switch {
	case prev == nil:
		return false, nil
	case prev.Result == string(planner.GateRunning) && prev.CancelRequestedAt != nil:
		return cancelledGate(ctx, o, prev)
	case unconfirmedCancel(prev):
		return unconfirmedGate(ctx, o, prev)
	case prev.Result != string(planner.GateRunning) || (prev.BuildID == o.targetBuildID && !unneeded && prev.Step == wantedStep(o)):
		return false, nil
	}
	o.gate = prev.DeepCopy()
	o.input.Gate = &planner.GateRun{BuildID: prev.BuildID, Step: prev.Step, Phase: planner.GateRunning}
	return true, nil
}

// wantedStep is the step whose gate the target needs now (0: the rollout
// gate, or none).
func wantedStep(o *observation) int32 {
	step, _ := planner.GateWanted(o.input)
	return step
}

// cancelledGate reads a run whose cancellation was requested: still
// running, the planner decides whether to terminate it; ended, status
// records how (a run gone from Temporal has ended too).
func cancelledGate(ctx context.Context, o *observation, prev *v1alpha1.GateStatus) (bool, error) {
	res, err := readGate(ctx, o, prev)
	if err != nil {
		return false, err
	}
	g := prev.DeepCopy()
	g.RunID = res.RunID
	o.gate = g
	if res.Phase == planner.GateRunning {
		o.input.Gate = &planner.GateRun{BuildID: g.BuildID, Step: g.Step, Phase: planner.GateRunning, StartedAt: res.StartedAt,
			CancelRequestedAt: prev.CancelRequestedAt.Time}
		return true, nil
	}
	g.Result, g.Message = string(res.Phase), res.Message
	o.input.Gate = &planner.GateRun{BuildID: g.BuildID, Step: g.Step, Phase: res.Phase, Message: res.Message}
	return false, nil
}

// readGate reads the latest run of a gate status records; one gone from
// Temporal (retention, or the namespace was reset) has ended.
func readGate(ctx context.Context, o *observation, prev *v1alpha1.GateStatus) (temporal.GateStatus, error) {
	res, err := o.api.GateResult(ctx, prev.WorkflowID)
	if errors.Is(err, temporal.ErrNotFound) {
		return temporal.GateStatus{Phase: planner.GateCancelled, Message: "the gate workflow is gone from Temporal", RunID: prev.RunID}, nil
	}
	return res, err
}

// legacyCancelMessage starts the message with which controllers before
// status.gate.cancelRequestedAt marked a run Cancelled as soon as they had
// requested its cancellation, whether it then ended or not.
const legacyCancelMessage = "cancelled: version "

// unconfirmedCancel: status says Cancelled only because a cancellation was
// requested, by an earlier controller version.
func unconfirmedCancel(g *v1alpha1.GateStatus) bool {
	return g.Result == string(planner.GateCancelled) && g.CancelRequestedAt == nil && strings.HasPrefix(g.Message, legacyCancelMessage)
}

// unconfirmedGate looks once at a run an earlier controller version asked
// to cancel and took for ended. Still running, it is handed to the
// planner as running, so that it is cancelled again, now with a time to
// terminate it at; ended, status records how, and it is not looked at
// again.
func unconfirmedGate(ctx context.Context, o *observation, prev *v1alpha1.GateStatus) (bool, error) {
	res, err := readGate(ctx, o, prev)
	if err != nil {
		return false, err
	}
	g := prev.DeepCopy()
	g.RunID, g.Result, g.Message = res.RunID, string(res.Phase), res.Message
	o.gate = g
	if res.Phase != planner.GateRunning {
		return false, nil
	}
	o.input.Gate = &planner.GateRun{BuildID: g.BuildID, Step: g.Step, Phase: planner.GateRunning, StartedAt: res.StartedAt}
	return true, nil
}

// gateOpen: status records a gate run that has not ended. An idle TWD's
// remembered state is not reused then: those passes look at no gate, and
// this run must be seen ending or terminated on time.
func gateOpen(g *v1alpha1.GateStatus) bool {
	return g != nil && g.Result == string(planner.GateRunning)
}

// endGate requests the cancellation of a gate run nobody needs, or
// terminates one that ignored the request, and records it in status: the
// time of the request, which the planner's grace period counts from
// across restarts, and the termination.
func (r *Reconciler) endGate(ctx context.Context, o *observation, res planner.Result, out *outcome) {
	if c := res.CancelGate; c != nil {
		if err := o.api.CancelGate(ctx, o.deploymentName, c.BuildID, c.Step); err != nil {
			out.fail(err)
		} else if g := out.gate; g != nil && g.BuildID == c.BuildID && g.Step == c.Step {
			// Taken after Temporal recorded the request, and rounded up to
			// the second status keeps, so the grace period is never
			// shorter than the run's history shows.
			at := ceilSecond(r.Clock.Now())
			g.Result, g.CancelRequestedAt = string(planner.GateRunning), &metav1.Time{Time: at}
			g.Message = fmt.Sprintf("cancellation requested: %s; terminated at %s if still running", c.Reason,
				at.Add(planner.GateCancelGrace).UTC().Format(time.RFC3339))
		}
	}
	if t := res.TerminateGate; t != nil {
		if err := o.api.TerminateGate(ctx, o.deploymentName, t.BuildID, t.Step, t.Reason); err != nil {
			out.fail(err)
		} else if g := out.gate; g != nil && g.BuildID == t.BuildID && g.Step == t.Step {
			g.Result = string(planner.GateCancelled)
			g.Message = fmt.Sprintf("terminated: it did not end within %s of its cancellation request", planner.GateCancelGrace)
		}
	}
}

// ceilSecond rounds t up to a whole second (metav1.Time keeps seconds).
func ceilSecond(t time.Time) time.Time {
	if s := t.Truncate(time.Second); !s.Equal(t) {
		return s.Add(time.Second)
	}
	return t
}

// readGateInput is a gate's input for the plan, or why it cannot be read.
func readGateInput(ctx context.Context, c client.Reader, namespace string, g *v1alpha1.GateWorkflow, step int32) planner.GateInput {
	field := "spec.rollout.gate"
	if step != 0 {
		field = fmt.Sprintf("spec.rollout.steps[rampPercentage=%d].gate", step)
	}
	data, err := gateInput(ctx, c, namespace, g, field)
	if err != nil {
		return planner.GateInput{Problem: err.Error()}
	}
	return planner.GateInput{Data: data}
}

// gateInput is the gate's JSON input from the spec, a ConfigMap or a Secret.
func gateInput(ctx context.Context, c client.Reader, namespace string, g *v1alpha1.GateWorkflow, field string) ([]byte, error) {
	switch {
	case g == nil:
		return nil, nil
	case g.Input != nil:
		return g.Input.Raw, nil
	case g.InputFrom == nil:
		return nil, nil
	case g.InputFrom.ConfigMapKeyRef != nil:
		ref := g.InputFrom.ConfigMapKeyRef
		var cm corev1.ConfigMap
		if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: ref.Name}, &cm); err != nil {
			return nil, fmt.Errorf("%s.inputFrom.configMapKeyRef: get ConfigMap %s: %w", field, ref.Name, err)
		}
		if v, ok := cm.Data[ref.Key]; ok {
			return []byte(v), nil
		}
		if v, ok := cm.BinaryData[ref.Key]; ok {
			return v, nil
		}
		return nil, fmt.Errorf("%s.inputFrom.configMapKeyRef: ConfigMap %s has no key %q", field, ref.Name, ref.Key)
	default:
		ref := g.InputFrom.SecretKeyRef
		var s corev1.Secret
		if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: ref.Name}, &s); err != nil {
			return nil, fmt.Errorf("%s.inputFrom.secretKeyRef: get Secret %s: %w", field, ref.Name, err)
		}
		v, ok := s.Data[ref.Key]
		if !ok {
			return nil, fmt.Errorf("%s.inputFrom.secretKeyRef: Secret %s has no key %q", field, ref.Name, ref.Key)
		}
		return v, nil
	}
}
