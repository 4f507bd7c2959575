package workerdeployment

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	deploymentpb "go.temporal.io/api/deployment/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/timestamppb"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/internal/planner"
)

// drainStub answers the visibility list and the calls on workflow runs.
type drainStub struct {
	// pinned are the open pinned runs by build ID.
	pinned map[string][]string
	// closed runs answer NotFound; failWith makes every call on a run (or
	// the list, with failList) fail.
	closed   map[string]bool
	failWith error
	failList error
}

func (s *stubTemporal) ListWorkflowExecutions(_ context.Context, req *workflowservice.ListWorkflowExecutionsRequest, _ ...grpc.CallOption) (*workflowservice.ListWorkflowExecutionsResponse, error) {
	if s.drain.failList != nil {
		return nil, s.drain.failList
	}
	resp := &workflowservice.ListWorkflowExecutionsResponse{}
	for build, runs := range s.drain.pinned {
		if !strings.Contains(req.GetQuery(), "'shop/orders:"+build+"'") {
			continue
		}
		for _, r := range runs {
			resp.Executions = append(resp.Executions, &workflowpb.WorkflowExecutionInfo{Execution: &commonpb.WorkflowExecution{WorkflowId: "wf-" + r, RunId: r}})
		}
	}
	return resp, nil
}

func (s *stubTemporal) run(e *commonpb.WorkflowExecution) error {
	switch {
	case s.drain.failWith != nil:
		return s.drain.failWith
	case s.drain.closed[e.GetRunId()]:
		return serviceerror.NewNotFound("workflow execution already completed")
	}
	return nil
}

func (s *stubTemporal) RequestCancelWorkflowExecution(_ context.Context, req *workflowservice.RequestCancelWorkflowExecutionRequest, _ ...grpc.CallOption) (*workflowservice.RequestCancelWorkflowExecutionResponse, error) {
	if err := s.run(req.GetWorkflowExecution()); err != nil {
		return nil, err
	}
	s.write("RequestCancelWorkflowExecution %s %s (%s)", req.GetWorkflowExecution().GetWorkflowId(), req.GetWorkflowExecution().GetRunId(), req.GetReason())
	return &workflowservice.RequestCancelWorkflowExecutionResponse{}, nil
}

func (s *stubTemporal) TerminateWorkflowExecution(_ context.Context, req *workflowservice.TerminateWorkflowExecutionRequest, _ ...grpc.CallOption) (*workflowservice.TerminateWorkflowExecutionResponse, error) {
	if err := s.run(req.GetWorkflowExecution()); err != nil {
		return nil, err
	}
	s.write("TerminateWorkflowExecution %s", req.GetWorkflowExecution().GetRunId())
	return &workflowservice.TerminateWorkflowExecutionResponse{}, nil
}

func (s *stubTemporal) SignalWorkflowExecution(_ context.Context, req *workflowservice.SignalWorkflowExecutionRequest, _ ...grpc.CallOption) (*workflowservice.SignalWorkflowExecutionResponse, error) {
	if err := s.run(req.GetWorkflowExecution()); err != nil {
		return nil, err
	}
	s.write("SignalWorkflowExecution %s %s input=%s request=%s", req.GetWorkflowExecution().GetRunId(), req.GetSignalName(),
		req.GetInput().GetPayloads()[0].GetData(), req.GetRequestId())
	return &workflowservice.SignalWorkflowExecutionResponse{}, nil
}

// drainingV0: the target is current; version v0 (no Deployment left)
// has drained for two hours with the runs r1 and r2 pinned to it.
func drainingV0(f *fixture) {
	f.runningDeployment()
	f.registered(true, enumspb.WORKER_DEPLOYMENT_VERSION_STATUS_CURRENT)
	f.temporal.state.VersionSummaries = append(f.temporal.state.VersionSummaries, &deploymentpb.WorkerDeploymentInfo_WorkerDeploymentVersionSummary{
		DeploymentVersion:    &deploymentpb.WorkerDeploymentVersion{DeploymentName: "shop/orders", BuildId: "v0"},
		Status:               enumspb.WORKER_DEPLOYMENT_VERSION_STATUS_DRAINING,
		CreateTime:           timestamppb.New(f.now.Add(-48 * time.Hour)),
		LastDeactivationTime: timestamppb.New(f.now.Add(-2 * time.Hour)),
	})
	f.temporal.drain.pinned = map[string][]string{"v0": {"r1", "r2"}}
	// The controller has seen v0 drain since it began.
	since := metav1.NewTime(f.now.Add(-2 * time.Hour))
	f.twd.Status.DeprecatedVersions = append(f.twd.Status.DeprecatedVersions, v1alpha1.WorkerVersion{BuildID: "v0", Drain: &v1alpha1.VersionDrain{DrainingSince: &since, SeenAt: &since}})
}

func maxDrain(d time.Duration, a v1alpha1.DrainAction) func(*fixture) {
	return func(f *fixture) {
		f.twd.Spec.Sunset.MaxDrainDuration, f.twd.Spec.Sunset.DrainAction = &metav1.Duration{Duration: d}, a
	}
}

// again makes the next pass start from the status this one wrote, at
// now+d.
func (f *fixture) again(d time.Duration) {
	f.t.Helper()
	var got v1alpha1.TemporalWorkerDeployment
	if err := f.client.Get(context.Background(), client.ObjectKeyFromObject(f.twd), &got); err != nil {
		f.t.Fatal(err)
	}
	f.twd, f.now = &got, f.now.Add(d)
	f.temporal.writes, f.kube = nil, nil
}

func (f *fixture) drainStatus(build string) *v1alpha1.VersionDrain {
	f.t.Helper()
	var got v1alpha1.TemporalWorkerDeployment
	if err := f.client.Get(context.Background(), client.ObjectKeyFromObject(f.twd), &got); err != nil {
		f.t.Fatal(err)
	}
	for _, v := range append([]*v1alpha1.WorkerVersion{got.Status.TargetVersion, got.Status.CurrentVersion}, ptrs(got.Status.DeprecatedVersions)...) {
		if v != nil && v.BuildID == build {
			return v.Drain
		}
	}
	return nil
}

func (f *fixture) ready() metav1.Condition {
	var got v1alpha1.TemporalWorkerDeployment
	if err := f.client.Get(context.Background(), client.ObjectKeyFromObject(f.twd), &got); err != nil {
		f.t.Fatal(err)
	}
	return findCond(got.Status.Conditions, v1alpha1.ConditionReady)
}

func findCond(cs []metav1.Condition, typ string) metav1.Condition {
	for _, c := range cs {
		if c.Type == typ {
			return c
		}
	}
	return metav1.Condition{}
}

// TestDrainDeadlineWrites: past the deadline each pinned run of the
// draining version is cancelled once, with the reason; status records
// them, so later passes neither cancel them again nor list them before
// their time.
func TestDrainDeadlineWrites(t *testing.T) {
	f := newFixture(t)
	drainingV0(f)
	maxDrain(time.Hour, v1alpha1.DrainCancel)(f)
	_, tmprl, res := f.reconcile()
	reason := "(rainbow: version v0 of worker deployment shop/orders has been draining for 2h0m0s, longer than spec.sunset.maxDrainDuration (1h0m0s) of TemporalWorkerDeployment shop/orders)"
	want := []string{"RequestCancelWorkflowExecution wf-r1 r1 " + reason, "RequestCancelWorkflowExecution wf-r2 r2 " + reason}
	if fmt.Sprint(tmprl) != fmt.Sprint(want) {
		t.Fatalf("Temporal writes = %q, want %q", tmprl, want)
	}
	d := f.drainStatus("v0")
	if d == nil || d.CancelRequested != 2 || d.Overdue != 2 || d.PinnedWorkflows != 2 || len(d.StoppedRuns) != 2 ||
		d.LastActionAt == nil || !d.Deadline.Time.Equal(f.now.Add(-time.Hour)) || d.Pending != 0 {
		t.Fatalf("status drain = %+v", d)
	}
	if res.RequeueAfter > time.Minute {
		t.Fatalf("requeue %s", res.RequeueAfter)
	}
	before := drainActionsCount("shop", "orders", "cancel")

	// Within the listing interval (a quarter of the drain so far, at most
	// ten minutes): not even a list.
	f.again(9 * time.Minute)
	f.temporal.drain.failList = serviceerror.NewUnavailable("must not list")
	if _, tmprl, _ = f.reconcile(); len(tmprl) != 0 || f.ready().Reason != v1alpha1.ReasonRolloutComplete {
		t.Fatalf("a pass 9m later: writes %q, Ready %+v", tmprl, f.ready())
	}
	// Listed again later: the same runs are not cancelled twice.
	f.again(time.Minute)
	f.temporal.drain.failList = nil
	if _, tmprl, _ = f.reconcile(); len(tmprl) != 0 {
		t.Fatalf("the same runs listed again: writes %q", tmprl)
	}
	if d := f.drainStatus("v0"); d.CancelRequested != 2 || !d.ListedAt.Time.Equal(f.now) {
		t.Fatalf("status drain after the second listing = %+v", d)
	}
	if got := drainActionsCount("shop", "orders", "cancel") - before; got != 0 {
		t.Fatalf("rainbow_drain_workflows_total grew by %v without an action", got)
	}
}

func TestDrainDryRunWrites(t *testing.T) {
	f := newFixture(t)
	drainingV0(f)
	maxDrain(time.Hour, "")(f) // DryRun is the default
	if _, tmprl, _ := f.reconcile(); len(tmprl) != 0 {
		t.Fatalf("DryRun wrote to Temporal: %q", tmprl)
	}
	if d := f.drainStatus("v0"); d == nil || d.Overdue != 2 || d.CancelRequested != 0 {
		t.Fatalf("status drain = %+v", d)
	}
	if got := drainOverdueValue("shop", "orders"); got != 2 {
		t.Fatalf("rainbow_drain_overdue_workflows = %v, want 2", got)
	}
}

func TestContinueAsNewSignalWrites(t *testing.T) {
	f := newFixture(t)
	drainingV0(f)
	f.twd.Spec.Sunset.ContinueAsNewSignal = &v1alpha1.ContinueAsNewSignal{Name: "continue-as-new", Input: &apiextensionsv1.JSON{Raw: []byte(`{"why":"drain"}`)}}
	f.temporal.drain.closed = map[string]bool{"r1": true}
	_, tmprl, _ := f.reconcile()
	want := []string{`SignalWorkflowExecution r2 continue-as-new input={"why":"drain"} request=rainbow-signal-r2-continue-as-new`}
	if fmt.Sprint(tmprl) != fmt.Sprint(want) {
		t.Fatalf("Temporal writes = %q, want %q", tmprl, want)
	}
	if d := f.drainStatus("v0"); d == nil || d.Signalled != 1 || len(d.SignalledRuns) != 1 || d.SignalledRuns[0] != planner.RunKey("r2") || d.Deadline != nil {
		t.Fatalf("status drain = %+v", d)
	}
}

func TestDrainFailures(t *testing.T) {
	for name, c := range map[string]struct {
		setup  func(*fixture)
		reason string
	}{
		"a throttled cancel is retried, no failure": {func(f *fixture) {
			f.temporal.drain.failWith = serviceerror.NewResourceExhausted(enumspb.RESOURCE_EXHAUSTED_CAUSE_RPS_LIMIT, "slow down")
		}, v1alpha1.ReasonRolloutComplete},
		"a refused cancel is reported": {func(f *fixture) {
			f.temporal.drain.failWith = serviceerror.NewPermissionDenied("not allowed", "")
		}, v1alpha1.ReasonPlanExecutionFailed},
		"a failed listing is reported": {func(f *fixture) {
			f.temporal.drain.failList = serviceerror.NewInvalidArgument("unknown search attribute")
		}, v1alpha1.ReasonPlanExecutionFailed},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			drainingV0(f)
			maxDrain(time.Hour, v1alpha1.DrainCancel)(f)
			c.setup(f)
			if _, tmprl, _ := f.reconcile(); len(tmprl) != 0 {
				t.Fatalf("writes %q", tmprl)
			}
			if r := f.ready(); r.Reason != c.reason {
				t.Fatalf("Ready = %+v, want reason %s", r, c.reason)
			}
			if d := f.drainStatus("v0"); d != nil && (d.CancelRequested != 0 || len(d.StoppedRuns) != 0) {
				t.Fatalf("status counts runs not cancelled: %+v", d)
			}
		})
	}
}

func drainActionsCount(namespace, name, action string) float64 {
	return value(drainActions.WithLabelValues(namespace, name, action))
}

func drainOverdueValue(namespace, name string) float64 {
	return value(drainOverdue.WithLabelValues(namespace, name))
}
