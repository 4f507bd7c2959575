package workerdeployment

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	sdkclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/types/known/timestamppb"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/internal/temporal"
)

// gateStub holds the gate runs Temporal knows, by workflow ID; an unknown
// ID is NotFound.
type gateStub struct {
	runs map[string]gateRunStub
	// reasons are the termination reasons given, by workflow ID.
	reasons map[string]string
}

type gateRunStub struct {
	status          enumspb.WorkflowExecutionStatus
	cancelRequested bool
}

func (c stubSDK) DescribeWorkflowExecution(_ context.Context, id, _ string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	run, ok := c.svc.gate.runs[id]
	if !ok {
		return nil, serviceerror.NewNotFound("workflow not found")
	}
	return &workflowservice.DescribeWorkflowExecutionResponse{
		WorkflowExecutionInfo: &workflowpb.WorkflowExecutionInfo{
			Execution: &commonpb.WorkflowExecution{WorkflowId: id, RunId: "run-" + id},
			Status:    run.status,
			StartTime: timestamppb.New(time.Date(2026, 3, 1, 11, 0, 0, 0, time.UTC)),
		},
		WorkflowExtendedInfo: &workflowpb.WorkflowExecutionExtendedInfo{CancelRequested: run.cancelRequested},
	}, nil
}

// ExecuteWorkflow records a gate's start: its type, task queue, ID, the
// version it is pinned to, input and timeout.
func (c stubSDK) ExecuteWorkflow(_ context.Context, o sdkclient.StartWorkflowOptions, workflow any, args ...any) (sdkclient.WorkflowRun, error) {
	pinned := ""
	if p, ok := o.VersioningOverride.(*sdkclient.PinnedVersioningOverride); ok {
		pinned = p.Version.BuildID
	}
	input := ""
	for _, a := range args {
		if raw, ok := a.(converter.RawValue); ok {
			input += string(raw.Payload().GetData())
		}
	}
	c.svc.write("ExecuteWorkflow %v queue=%s id=%s pinned=%s input=%s timeout=%s", workflow, o.TaskQueue, o.ID, pinned, input, o.WorkflowExecutionTimeout)
	return stubRun{id: o.ID}, nil
}

type stubRun struct {
	sdkclient.WorkflowRun
	id string
}

func (r stubRun) GetRunID() string { return "run-" + r.id }

func (c stubSDK) TerminateWorkflow(_ context.Context, id, _, reason string, _ ...any) error {
	c.svc.write("TerminateWorkflow %s", id)
	if c.svc.gate.reasons == nil {
		c.svc.gate.reasons = map[string]string{}
	}
	c.svc.gate.reasons[id] = reason
	return nil
}

// TestGateEndingWrites: a gate run nobody needs is asked to cancel, the
// time of the request kept in status; a run still running
// planner.GateCancelGrace later is terminated, by whatever controller
// process reads that status; an ended run is recorded once.
func TestGateEndingWrites(t *testing.T) {
	id := temporal.GateWorkflowID("shop/orders", "v0")
	now := newFixture(t).now
	// asked: the cancellation is requested in this pass (the fixture's
	// clock stands still).
	const asked = -1
	// gate is status.gate of v0's run; requested is how long ago its
	// cancellation was requested, 0 if it was not.
	gate := func(result, runID, message string, requested time.Duration) v1alpha1.GateStatus {
		g := v1alpha1.GateStatus{BuildID: "v0", WorkflowID: id, RunID: runID, Result: result, Message: message}
		switch {
		case requested == asked:
			g.CancelRequestedAt = &metav1.Time{Time: now}
		case requested > 0:
			g.CancelRequestedAt = &metav1.Time{Time: now.Add(-requested)}
		}
		return g
	}
	run := func(st enumspb.WorkflowExecutionStatus, cancelRequested bool) *gateRunStub {
		return &gateRunStub{status: st, cancelRequested: cancelRequested}
	}
	const (
		running    = enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING
		canceled   = enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED
		terminated = enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED
		legacy     = "cancelled: version v0 no longer needs it"
	)
	cases := map[string]struct {
		before *gateRunStub // Temporal's run; nil: unknown to Temporal
		status v1alpha1.GateStatus
		tmprl  []string
		// after is status.gate after the pass, but for its message, which
		// must contain message.
		after   v1alpha1.GateStatus
		message string
	}{
		"a run for an older version: its cancellation is requested, and when": {
			before: run(running, false), status: gate("Running", "", "", 0),
			tmprl: []string{"CancelWorkflow " + id}, after: gate("Running", "", "", asked),
			message: "cancellation requested: version v0 is no longer the target; terminated at 2026-03-01T12:00:30Z if still running",
		},
		"asked to cancel 10s ago, still running: nothing written, status kept": {
			before: run(running, true), status: gate("Running", "", "cancellation requested", 10*time.Second),
			after: gate("Running", "run-"+id, "", 10*time.Second), message: "cancellation requested",
		},
		"asked to cancel 31s ago by a process since restarted, still running: terminated": {
			before: run(running, true), status: gate("Running", "", "", 31*time.Second),
			tmprl: []string{"TerminateWorkflow " + id}, after: gate("Cancelled", "run-"+id, "", 31*time.Second),
			message: "terminated: it did not end within 30s of its cancellation request",
		},
		"asked to cancel, since ended: recorded, nothing written": {
			before: run(canceled, true), status: gate("Running", "", "", 5*time.Second),
			after: gate("Cancelled", "run-"+id, "", 5*time.Second), message: "the gate workflow was cancelled",
		},
		"asked to cancel, then terminated by someone else: no verdict, recorded as cancelled": {
			before: run(terminated, true), status: gate("Running", "", "", 5*time.Second),
			after: gate("Cancelled", "run-"+id, "", 5*time.Second), message: "ended (terminated) after its cancellation was requested",
		},
		"asked to cancel, gone from Temporal: ended": {
			status: gate("Running", "r", "", time.Hour),
			after:  gate("Cancelled", "r", "", time.Hour), message: "gone from Temporal",
		},
		"marked cancelled by an earlier version, still running: asked again, now with a time": {
			before: run(running, true), status: gate("Cancelled", "", legacy, 0),
			tmprl: []string{"CancelWorkflow " + id}, after: gate("Running", "run-"+id, "", asked), message: "cancellation requested",
		},
		"marked cancelled by an earlier version, ended: looked at once, recorded": {
			before: run(canceled, true), status: gate("Cancelled", "", legacy, 0),
			after: gate("Cancelled", "run-"+id, "", 0), message: "the gate workflow was cancelled",
		},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			f.runningDeployment()
			f.registered(true, enumspb.WORKER_DEPLOYMENT_VERSION_STATUS_CURRENT)
			f.twd.Status.Gate = c.status.DeepCopy()
			if c.before != nil {
				f.temporal.gate.runs = map[string]gateRunStub{id: *c.before}
			}
			_, tmprl, _ := f.reconcile()
			if !reflect.DeepEqual(tmprl, c.tmprl) {
				t.Errorf("Temporal writes = %q, want %q", tmprl, c.tmprl)
			}
			if r := f.temporal.gate.reasons[id]; len(c.tmprl) > 0 && strings.HasPrefix(c.tmprl[0], "Terminate") &&
				(!strings.Contains(r, "v0") || !strings.Contains(r, "cancellation request")) {
				t.Errorf("termination reason %q does not say which gate and why", r)
			}
			var got v1alpha1.TemporalWorkerDeployment
			if err := f.client.Get(context.Background(), client.ObjectKeyFromObject(f.twd), &got); err != nil {
				t.Fatal(err)
			}
			g := got.Status.Gate
			if g == nil || !strings.Contains(g.Message, c.message) {
				t.Fatalf("status.gate = %+v, want a message containing %q", g, c.message)
			}
			gc := *g
			gc.Message = ""
			if gc.CancelRequestedAt != nil {
				gc.CancelRequestedAt = &metav1.Time{Time: gc.CancelRequestedAt.UTC()}
			}
			if !reflect.DeepEqual(gc, c.after) {
				t.Errorf("status.gate = %+v (at %v), want %+v (at %v)", gc, gc.CancelRequestedAt, c.after, c.after.CancelRequestedAt)
			}
		})
	}
}

// TestCancelRequestRoundsUp: status keeps whole seconds; the request's time
// is rounded up, so the grace period is never cut short by the rounding.
func TestCancelRequestRoundsUp(t *testing.T) {
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	if got := ceilSecond(at); !got.Equal(at) {
		t.Errorf("ceilSecond(%s) = %s, want it unchanged", at, got)
	}
	if got := ceilSecond(at.Add(230 * time.Millisecond)); !got.Equal(at.Add(time.Second)) {
		t.Errorf("ceilSecond(%s) = %s, want %s", at.Add(230*time.Millisecond), got, at.Add(time.Second))
	}
}

// A step's gate counts as a gate: its runs are read every pass, never
// taken from a remembered state (TestStepGates failed without it).
func TestHasGate(t *testing.T) {
	twd := &v1alpha1.TemporalWorkerDeployment{}
	twd.Spec.Rollout.Steps = []v1alpha1.RolloutStep{{RampPercentage: 10}, {RampPercentage: 50}}
	if hasGate(twd) {
		t.Fatal("no gate named, yet hasGate")
	}
	twd.Spec.Rollout.Steps[1].Gate = &v1alpha1.GateWorkflow{WorkflowType: "G"}
	if !hasGate(twd) {
		t.Fatal("a step's gate is not counted")
	}
	twd.Spec.Rollout.Steps[1].Gate, twd.Spec.Rollout.Gate = nil, &v1alpha1.GateWorkflow{WorkflowType: "G"}
	if !hasGate(twd) {
		t.Fatal("spec.rollout.gate is not counted")
	}
}
