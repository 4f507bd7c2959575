package temporal

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	deploymentpb "go.temporal.io/api/deployment/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/rainbow-deploy/rainbow/internal/planner"
)

// drainingSince is when a version last stopped being current or ramping:
// Temporal's last deactivation time, which it clears when the version
// gets traffic again. Where a server does not send it, the start of the
// drainage it reports stands in.
func drainingSince(vs *deploymentpb.WorkerDeploymentInfo_WorkerDeploymentVersionSummary) *time.Time {
	if t := vs.GetLastDeactivationTime(); t != nil {
		return timePtr(t)
	}
	if d := vs.GetDrainageInfo(); d.GetStatus() == enumspb.VERSION_DRAINAGE_STATUS_DRAINING {
		return timePtr(d.GetLastChangedTime())
	}
	return nil
}

// The search attributes Temporal keeps on versioned workflows (server
// 1.32: service/history/workflow/mutable_state_impl.go). The version is
// written "<deployment name>:<build ID>" (the version of an override, or
// the one that completed the last workflow task), the behavior as the
// enum's short name.
const (
	saVersion  = "TemporalWorkerDeploymentVersion"
	saBehavior = "TemporalWorkflowVersioningBehavior"
)

// PinnedQuery is the visibility query for the open workflows pinned to a
// version, by their workflow code's versioning behavior or by a pinned
// override.
func PinnedQuery(deploymentName, buildID string) string {
	return fmt.Sprintf("%s = '%s' AND %s = 'Pinned' AND ExecutionStatus = 'Running'",
		saVersion, quote(deploymentName+":"+buildID), saBehavior)
}

// quote escapes a string for a single-quoted literal of a visibility query.
func quote(s string) string {
	return strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s)
}

// ListPinned lists the open pinned workflows of a version: one
// ListWorkflowExecutions page of at most limit runs, and only when there
// are more, one CountWorkflowExecutions for their number. Visibility lags
// the workflows by a second or so.
func (a *API) ListPinned(ctx context.Context, deploymentName, buildID string, limit int) (planner.PinnedListing, error) {
	l := planner.PinnedListing{BuildID: buildID}
	query := PinnedQuery(deploymentName, buildID)
	resp, err := a.c.WorkflowService().ListWorkflowExecutions(ctx, &workflowservice.ListWorkflowExecutionsRequest{
		Namespace: a.namespace,
		PageSize:  int32(limit),
		Query:     query,
	})
	if err != nil {
		return l, wrapErr("ListPinned", deploymentName, buildID, err)
	}
	for _, e := range resp.GetExecutions() {
		if len(l.Runs) == limit {
			break
		}
		l.Runs = append(l.Runs, planner.WorkflowRun{WorkflowID: e.GetExecution().GetWorkflowId(), RunID: e.GetExecution().GetRunId()})
	}
	l.Count = len(l.Runs)
	if len(resp.GetNextPageToken()) == 0 {
		return l, nil
	}
	count, err := a.c.WorkflowService().CountWorkflowExecutions(ctx, &workflowservice.CountWorkflowExecutionsRequest{
		Namespace: a.namespace,
		Query:     query,
	})
	if err != nil {
		return l, wrapErr("ListPinned", deploymentName, buildID, err)
	}
	l.Count = max(l.Count, int(count.GetCount()))
	return l, nil
}

// CancelRun requests the cancellation of one workflow run; reason is
// recorded in its history (the cancel request's cause). Temporal takes a
// second request on the same run, or one on a closed run, as done.
func (a *API) CancelRun(ctx context.Context, run planner.WorkflowRun, reason string) error {
	_, err := a.c.WorkflowService().RequestCancelWorkflowExecution(ctx, &workflowservice.RequestCancelWorkflowExecutionRequest{
		Namespace:         a.namespace,
		WorkflowExecution: &commonpb.WorkflowExecution{WorkflowId: run.WorkflowID, RunId: run.RunID},
		Identity:          a.identity,
		RequestId:         "rainbow-cancel-" + run.RunID,
		Reason:            reason,
	})
	return runErr("CancelRun", run, err)
}

// TerminateRun terminates one workflow run, with reason in its history. A
// run that has closed is ErrNotFound.
func (a *API) TerminateRun(ctx context.Context, run planner.WorkflowRun, reason string) error {
	_, err := a.c.WorkflowService().TerminateWorkflowExecution(ctx, &workflowservice.TerminateWorkflowExecutionRequest{
		Namespace:         a.namespace,
		WorkflowExecution: &commonpb.WorkflowExecution{WorkflowId: run.WorkflowID, RunId: run.RunID},
		Reason:            reason,
		Identity:          a.identity,
	})
	return runErr("TerminateRun", run, err)
}

// SignalRun sends a signal to one workflow run, once: its request ID is
// derived from the run and the signal, and Temporal drops a signal whose
// request ID the run has seen. input is the signal's JSON argument, or nil
// for none. A run that has closed is ErrNotFound.
func (a *API) SignalRun(ctx context.Context, run planner.WorkflowRun, signal string, input []byte) error {
	var payloads *commonpb.Payloads
	if input != nil {
		p, err := jsonPayload(input)
		if err != nil {
			return &Error{Op: "SignalRun", Kind: ErrRefused, Err: fmt.Errorf("workflow %s run %s: signal input: %w", run.WorkflowID, run.RunID, err)}
		}
		payloads = &commonpb.Payloads{Payloads: []*commonpb.Payload{p}}
	}
	_, err := a.c.WorkflowService().SignalWorkflowExecution(ctx, &workflowservice.SignalWorkflowExecutionRequest{
		Namespace:         a.namespace,
		WorkflowExecution: &commonpb.WorkflowExecution{WorkflowId: run.WorkflowID, RunId: run.RunID},
		SignalName:        signal,
		Input:             payloads,
		Identity:          a.identity,
		RequestId:         "rainbow-signal-" + run.RunID + "-" + signal,
	})
	return runErr("SignalRun", run, err)
}

// runErr is wrapErr for a call on one workflow run.
func runErr(op string, run planner.WorkflowRun, err error) error {
	if err == nil {
		return nil
	}
	return wrapErr(op, "", "", fmt.Errorf("workflow %s run %s: %w", run.WorkflowID, run.RunID, err))
}

// errInvalidJSON: a workflow input from the spec is not JSON.
var errInvalidJSON = errors.New("not valid JSON")
