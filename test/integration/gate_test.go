package integration

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	deploymentpb "go.temporal.io/api/deployment/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/dev/demoworker"
	"github.com/rainbow-deploy/rainbow/internal/planner"
	"github.com/rainbow-deploy/rainbow/internal/temporal"
)

// TestSupersededGateIgnoringCancellationIsTerminated: the spec moves on
// while a gate workflow that ignores cancellation runs on v2. The
// controller asks it to cancel; it does not end, so once the grace period
// has passed the controller terminates it, with a reason in its history.
// It then no longer keeps v2 draining, and the new target's own gate runs.
func TestSupersededGateIgnoringCancellationIsTerminated(t *testing.T) {
	parallel(t)
	r := newRollout(env.NewTest(t), "stubborn-gate")
	v1 := r.Create(r.Spec("v1"))
	r.WaitCurrent(5*time.Minute, v1)

	r.Update(func(t *v1alpha1.TemporalWorkerDeployment) {
		t.Spec.Template.Spec.Containers[0].Image = "rainbow.local/demo-worker:v2"
		t.Spec.Rollout.Gate = &v1alpha1.GateWorkflow{WorkflowType: demoworker.IgnoreCancelGateWorkflow}
	})
	v2 := r.BuildID()
	r.waitFor(2*time.Minute, "the gate running on "+v2, func(twd *v1alpha1.TemporalWorkerDeployment) bool {
		g := twd.Status.Gate
		return g != nil && g.BuildID == v2 && g.Result == string(planner.GateRunning)
	})
	gateID := temporal.GateWorkflowID(r.DeploymentName(), v2)

	r.Update(func(t *v1alpha1.TemporalWorkerDeployment) {
		t.Spec.Template.Spec.Containers[0].Image = "rainbow.local/demo-worker:v3"
		t.Spec.Rollout.Gate = &v1alpha1.GateWorkflow{WorkflowType: demoworker.GateWorkflow, Input: gateInput(r.T.T, false, "")}
	})
	v3 := r.BuildID()

	// Generous bounds: the grace period, then a pass of a busy controller.
	r.Eventually(3*time.Minute, "the gate workflow on "+v2+" terminated", func() (bool, string) {
		desc, err := r.Env.Temporal.DescribeWorkflowExecution(context.Background(), gateID, "")
		if err != nil {
			return false, err.Error()
		}
		st := desc.GetWorkflowExecutionInfo().GetStatus()
		return st == enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED, fmt.Sprintf("gate %s; status: %s", st, describe(r.Get()))
	})
	requested, terminated := gateEnding(r, gateID)
	if requested.at.IsZero() {
		t.Fatalf("the gate workflow was terminated without a cancellation request first")
	}
	if wait := terminated.at.Sub(requested.at); wait < planner.GateCancelGrace {
		t.Fatalf("the gate workflow was terminated %s after its cancellation request, before the grace period of %s", wait, planner.GateCancelGrace)
	}
	if !strings.Contains(terminated.cause, v2) || !strings.Contains(terminated.cause, "cancellation") {
		t.Fatalf("termination reason %q does not say which version's gate and why", terminated.cause)
	}
	r.waitEvent(time.Minute, planner.EventTerminateGate)

	// The run no longer keeps v2 draining (Temporal may also have deleted
	// the version by now), and the new target's own gate lets it through.
	r.Eventually(4*time.Minute, "version "+v2+" not draining in Temporal", func() (bool, string) {
		st, err := temporalVersionStatus(r, v2)
		if err != nil {
			return false, err.Error()
		}
		return st != enumspb.WORKER_DEPLOYMENT_VERSION_STATUS_DRAINING, st.String()
	})
	got := r.WaitCurrent(3*time.Minute, v3)
	if g := got.Status.Gate; g == nil || g.BuildID != v3 || g.Result != string(planner.GateSucceeded) {
		t.Fatalf("gate status after %s rolled out: %+v", v3, g)
	}
}

// gateEnding reads a workflow's history for its cancellation request and
// its termination; a zero stop for either that is missing.
func gateEnding(r *rollout, workflowID string) (requested, terminated stop) {
	r.Helper()
	it := r.Env.Temporal.GetWorkflowHistory(context.Background(), workflowID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			r.Fatalf("history of %s: %v", workflowID, err)
		}
		if a := e.GetWorkflowExecutionCancelRequestedEventAttributes(); a != nil && requested.at.IsZero() {
			requested = stop{cause: a.GetCause(), identity: a.GetIdentity(), at: e.GetEventTime().AsTime()}
		}
		if a := e.GetWorkflowExecutionTerminatedEventAttributes(); a != nil {
			terminated = stop{cause: a.GetReason(), identity: a.GetIdentity(), at: e.GetEventTime().AsTime()}
		}
	}
	return requested, terminated
}

// temporalVersionStatus is what Temporal itself reports of a version;
// a deleted version reads as Drained.
func temporalVersionStatus(r *rollout, build string) (enumspb.WorkerDeploymentVersionStatus, error) {
	resp, err := r.Env.Temporal.WorkflowService().DescribeWorkerDeploymentVersion(context.Background(), &workflowservice.DescribeWorkerDeploymentVersionRequest{
		Namespace:         r.Env.Info.TemporalNamespace,
		DeploymentVersion: &deploymentpb.WorkerDeploymentVersion{DeploymentName: r.DeploymentName(), BuildId: build},
	})
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return enumspb.WORKER_DEPLOYMENT_VERSION_STATUS_DRAINED, nil
	}
	if err != nil {
		return 0, err
	}
	return resp.GetWorkerDeploymentVersionInfo().GetStatus(), nil
}
