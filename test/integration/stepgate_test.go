package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/dev/demoworker"
	"github.com/rainbow-deploy/rainbow/internal/planner"
	"github.com/rainbow-deploy/rainbow/internal/temporal"
)

// TestStepGates runs one TWD through two Progressive rollouts whose first
// step (30%) names the demo worker's RolloutGate: for v2 the gate passes,
// ran pinned to v2 once its ramp was set, and v2 becomes current; for v3 it
// fails, so the rollout is aborted as a failed analysis aborts it (the
// abort annotation, RolloutAborted with the gate's failure, a GateFailed
// Event) and routing goes back to v2 alone, v3 keeping its workers; a
// retry runs the failed gate again.
func TestStepGates(t *testing.T) {
	parallel(t)
	r := newRollout(env.NewTest(t), "step-gates")
	twd := r.Spec("v1")
	twd.Spec.Rollout = v1alpha1.RolloutSpec{Strategy: v1alpha1.StrategyProgressive, Steps: steps([]int32{30, 70}, 3*time.Second)}
	twd.Spec.Rollout.Steps[0].Gate = &v1alpha1.GateWorkflow{WorkflowType: demoworker.GateWorkflow, Input: gateInput(t, false, "step smoke test passed"),
		Timeout: &metav1.Duration{Duration: 2 * time.Minute}}
	v1 := r.Create(twd)
	r.WaitCurrent(5*time.Minute, v1)

	// (1) A passing step gate lets the rollout go on.
	v2 := r.SetImage("v2")
	got := r.WaitCurrent(4*time.Minute, v2)
	gateID := temporal.StepGateWorkflowID(r.DeploymentName(), v2, 30)
	desc, err := r.Env.Temporal.DescribeWorkflowExecution(context.Background(), gateID, "")
	if err != nil {
		t.Fatalf("the gate of step 30%% never ran on %s: %v", v2, err)
	}
	info := desc.GetWorkflowExecutionInfo()
	if st := info.GetStatus(); st != enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED {
		t.Fatalf("the gate of step 30%% on %s ended %s", v2, st)
	}
	if b := info.GetVersioningInfo().GetDeploymentVersion().GetBuildId(); b != v2 {
		t.Fatalf("the step gate ran on version %q, want %s", b, v2)
	}
	if g := got.Status.Gate; g == nil || g.BuildID != v2 || g.Step != 30 || g.Result != string(planner.GateSucceeded) {
		t.Fatalf("status.gate after %s rolled out: %+v, want step 30 Succeeded", v2, g)
	}
	r.Logf("%s current after the gate of its first step passed", v2)

	// (2) A failing step gate aborts, and routing goes back to v2 alone.
	r.Update(func(t *v1alpha1.TemporalWorkerDeployment) {
		t.Spec.Template.Spec.Containers[0].Image = "rainbow.local/demo-worker:v3"
		t.Spec.Rollout.Steps[0].Gate.Input = gateInput(r.T.T, true, "step smoke test failed")
	})
	v3 := r.BuildID()
	got = r.waitFor(4*time.Minute, "the rollout of "+v3+" aborted by its step gate", func(twd *v1alpha1.TemporalWorkerDeployment) bool {
		return hasCondition(twd, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonRolloutAborted)
	})
	if a := got.Annotations[v1alpha1.AnnotationAbortRollout]; a != v3 {
		t.Fatalf("annotation %s = %q, want %s (what kubectl rainbow retry removes)", v1alpha1.AnnotationAbortRollout, a, v3)
	}
	if g := got.Status.Gate; g == nil || g.BuildID != v3 || g.Step != 30 || g.Result != string(planner.GateFailed) ||
		!strings.Contains(g.Message, "step smoke test failed") {
		t.Fatalf("status.gate does not show the failed gate of step 30%%: %+v", g)
	}
	if msg := findCondition(got, v1alpha1.ConditionReady).Message; !strings.Contains(msg, "step smoke test failed") || !strings.Contains(msg, "kubectl rainbow retry") {
		t.Fatalf("Ready message lacks the gate's failure or how to retry: %s", msg)
	}
	r.Eventually(time.Minute, "routing back on "+v2+" alone", func() (bool, string) {
		cur, ramping, _ := r.routing()
		return cur == v2 && ramping == "", fmt.Sprintf("current %s, ramping %q", cur, ramping)
	})
	r.waitEvent(time.Minute, v1alpha1.ReasonGateFailed)
	if d := r.deployment(v3); d == nil || d.Spec.Replicas == nil || *d.Spec.Replicas == 0 {
		t.Fatalf("the aborted version's Deployment was scaled down or deleted: %v", d)
	}

	// (3) A retry (what kubectl rainbow retry does: remove the annotation)
	// ramps the step again and runs its gate anew, which fails again.
	first := got.Status.Gate.StartedAt
	if first == nil {
		t.Fatalf("status.gate has no startedAt: %+v", got.Status.Gate)
	}
	r.Update(func(t *v1alpha1.TemporalWorkerDeployment) { delete(t.Annotations, v1alpha1.AnnotationAbortRollout) })
	again := r.waitFor(3*time.Minute, "the retried rollout of "+v3+" aborted again by a new run of its step gate", func(twd *v1alpha1.TemporalWorkerDeployment) bool {
		g := twd.Status.Gate
		return twd.Annotations[v1alpha1.AnnotationAbortRollout] == v3 && g != nil && g.Step == 30 &&
			g.Result == string(planner.GateFailed) && g.StartedAt != nil && g.StartedAt.After(first.Time)
	})
	r.Logf("retry of %s aborted again by run %s", v3, again.Status.Gate.RunID)
}
