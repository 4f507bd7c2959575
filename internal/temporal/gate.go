package temporal

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/internal/planner"
)

// maxGateMessage bounds what a gate's result or failure puts in a
// condition message.
const maxGateMessage = 1024

// GateWorkflowID is the gate's workflow ID for a version. It is a pure
// function of its arguments, so a restarted controller finds the run it
// started. The deployment name is hashed: it may be long and hold any
// character.
func GateWorkflowID(deploymentName, buildID string) string {
	h := sha256.Sum256([]byte(deploymentName))
	return "rainbow-gate-" + hex.EncodeToString(h[:8]) + "-" + buildID
}

// StepGateWorkflowID is the workflow ID of the gate of a ramp step (its
// rampPercentage), or of spec.rollout.gate for step 0. Build IDs hold no
// '/', so no build's rollout gate shares it.
func StepGateWorkflowID(deploymentName, buildID string, step int32) string {
	if step == 0 {
		return GateWorkflowID(deploymentName, buildID)
	}
	return fmt.Sprintf("%s/step-%d", GateWorkflowID(deploymentName, buildID), step)
}

// StartGate starts the gate workflow pinned to the version, so it runs on
// that build's workers whatever the routing says. input is the workflow's
// single argument as JSON, or nil for none. Starting again returns the
// existing run, running or completed: a gate runs once per version (until
// Temporal's retention removes the closed run); a run that did not complete
// is replaced.
// timeout, when positive, is the run's execution timeout: Temporal ends a
// run that has not finished by then, and it reads as a failed gate.
func (a *API) StartGate(ctx context.Context, deploymentName, buildID string, step int32, taskQueue, workflowType string, input []byte, timeout time.Duration) (workflowID, runID string, err error) {
	workflowID = StepGateWorkflowID(deploymentName, buildID, step)
	var args []any
	if input != nil {
		p, err := jsonPayload(input)
		if err != nil {
			return workflowID, "", &Error{Op: "StartGate", Deployment: deploymentName, BuildID: buildID, Kind: ErrRefused, Err: fmt.Errorf("gate input: %w", err)}
		}
		args = append(args, converter.NewRawValue(p))
	}
	run, err := a.c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                       workflowID,
		TaskQueue:                taskQueue,
		WorkflowExecutionTimeout: timeout,
		// A running gate is joined. A completed one is not run again; one
		// that did not complete (failed, timed out, cancelled) may be, but
		// the planner starts one again only after a cancellation.
		WorkflowIDConflictPolicy:                 enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		WorkflowIDReusePolicy:                    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE_FAILED_ONLY,
		WorkflowExecutionErrorWhenAlreadyStarted: true,
		VersioningOverride: &client.PinnedVersioningOverride{
			Version: worker.WorkerDeploymentVersion{DeploymentName: deploymentName, BuildID: buildID},
		},
	}, workflowType, args...)
	if err == nil {
		return workflowID, run.GetRunID(), nil
	}
	var started *serviceerror.WorkflowExecutionAlreadyStarted
	if !errors.As(err, &started) {
		return workflowID, "", wrapErr("StartGate", deploymentName, buildID, err)
	}
	if started.RunId != "" {
		return workflowID, started.RunId, nil
	}
	desc, err := a.c.DescribeWorkflowExecution(ctx, workflowID, "")
	if err != nil {
		return workflowID, "", wrapErr("StartGate", deploymentName, buildID, err)
	}
	return workflowID, desc.GetWorkflowExecutionInfo().GetExecution().GetRunId(), nil
}

// jsonPayload passes JSON from the spec through as it is, so the
// controller needs no Go type for it.
func jsonPayload(input []byte) (*commonpb.Payload, error) {
	if !json.Valid(input) {
		return nil, errInvalidJSON
	}
	return &commonpb.Payload{
		Metadata: map[string][]byte{converter.MetadataEncoding: []byte(converter.MetadataEncodingJSON)},
		Data:     input,
	}, nil
}

// CancelGate requests cancellation of the gate run of a version. A gate
// that is gone or already closed is no error.
func (a *API) CancelGate(ctx context.Context, deploymentName, buildID string, step int32) error {
	return endGate("CancelGate", deploymentName, buildID, step, func(id string) error { return a.c.CancelWorkflow(ctx, id, "") })
}

// TerminateGate terminates the gate run of a version, reason going into
// its history. A gate that is gone or already closed is no error.
func (a *API) TerminateGate(ctx context.Context, deploymentName, buildID string, step int32, reason string) error {
	return endGate("TerminateGate", deploymentName, buildID, step, func(id string) error { return a.c.TerminateWorkflow(ctx, id, "", reason) })
}

// endGate calls end with the gate's workflow ID. Without a run ID it
// reaches the latest run, continue-as-new followed; only the controller
// starts runs under that ID, and never while one is being ended.
func endGate(op, deploymentName, buildID string, step int32, end func(workflowID string) error) error {
	err := end(StepGateWorkflowID(deploymentName, buildID, step))
	var nf *serviceerror.NotFound
	if err == nil || errors.As(err, &nf) {
		return nil
	}
	return wrapErr(op, deploymentName, buildID, err)
}

// GateStatus is a gate run as the planner's GateRun needs it.
type GateStatus struct {
	Phase planner.GatePhase
	// Message is the result (Succeeded) or the failure (Failed).
	Message string
	RunID   string
	// BuildID is the version the run is on, as Temporal reports it.
	BuildID string
	// StartedAt is when the run started.
	StartedAt time.Time
}

// GateResult reads the latest run of a gate: one DescribeWorkflowExecution,
// and for a closed run one history read for its result or failure. An
// unknown workflow is ErrNotFound.
func (a *API) GateResult(ctx context.Context, workflowID string) (GateStatus, error) {
	desc, err := a.c.DescribeWorkflowExecution(ctx, workflowID, "")
	if err != nil {
		return GateStatus{}, wrapErr("GateResult", "", "", err)
	}
	info := desc.GetWorkflowExecutionInfo()
	gs := GateStatus{
		StartedAt: info.GetStartTime().AsTime(),
		RunID:     info.GetExecution().GetRunId(),
		BuildID:   info.GetVersioningInfo().GetDeploymentVersion().GetBuildId(),
	}
	switch info.GetStatus() {
	// Describe without a run ID follows continue-as-new to the latest run;
	// a paused run is not closed.
	case enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, enumspb.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW,
		enumspb.WORKFLOW_EXECUTION_STATUS_PAUSED:
		gs.Phase = planner.GateRunning
		return gs, nil
	}
	if info.GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED {
		gs.Phase = planner.GateSucceeded
		// The result only decorates the message; one that is not JSON
		// (say, raw bytes) still means success.
		var result json.RawMessage
		if err := a.c.GetWorkflow(ctx, workflowID, gs.RunID).Get(ctx, &result); err == nil {
			gs.Message = resultText(result)
		}
		return gs, nil
	}
	if st := info.GetStatus(); st == enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED || desc.GetWorkflowExtendedInfo().GetCancelRequested() {
		// The controller cancels a gate nobody needs any more, and
		// terminates it if it goes on: however it then ended, it is no
		// verdict on the version, which gets a new run if it is the
		// target again.
		gs.Phase, gs.Message = planner.GateCancelled, "the gate workflow was cancelled"
		if st != enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED {
			gs.Message = fmt.Sprintf("the gate workflow ended (%s) after its cancellation was requested", strings.ToLower(st.String()))
		}
		return gs, nil
	}
	err = a.c.GetWorkflow(ctx, workflowID, gs.RunID).Get(ctx, nil)
	if ctx.Err() != nil {
		return GateStatus{}, wrapErr("GateResult", "", "", ctx.Err())
	}
	if err == nil {
		// Closed, not completed, yet no error: should not happen.
		err = fmt.Errorf("workflow closed with status %s", info.GetStatus())
	}
	gs.Phase = planner.GateFailed
	gs.Message = truncate(failureText(info.GetStatus(), err))
	return gs, nil
}

// resultText shows a string result unquoted and anything else as JSON.
func resultText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return truncate(s)
	}
	return truncate(string(raw))
}

// failureText is the innermost meaningful message: the workflow's own
// error for a failure, else the kind of ending.
func failureText(st enumspb.WorkflowExecutionStatus, err error) string {
	switch st {
	case enumspb.WORKFLOW_EXECUTION_STATUS_TIMED_OUT:
		return "the gate workflow did not finish within spec.rollout.gate.timeout"
	case enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED:
		return "the gate workflow was terminated: " + err.Error()
	}
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		return app.Message()
	}
	var wee *temporal.WorkflowExecutionError
	if errors.As(err, &wee) && errors.Unwrap(wee) != nil {
		err = errors.Unwrap(wee)
	}
	return fmt.Sprintf("gate workflow %s: %v", strings.ToLower(st.String()), err)
}

func truncate(s string) string { return v1alpha1.BoundMessage(s, maxGateMessage) }
