package temporal

import (
	"context"
	"fmt"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/converter"
)

// OutcomeQuery is the visibility query that counts, by status, the
// workflows that started on a version since a time: one
// CountWorkflowExecutions with GROUP BY ExecutionStatus. Gate runs count
// too: leaving them out takes NOT STARTS_WITH, which Temporal's documented
// list filters do not name, and a refused query would hold every step.
func OutcomeQuery(deploymentName, buildID string, since time.Time) string {
	return fmt.Sprintf("%s = '%s' AND StartTime >= '%s' GROUP BY ExecutionStatus",
		saVersion, quote(deploymentName+":"+buildID), since.UTC().Format(time.RFC3339Nano))
}

// Outcomes counts the workflows that started on a version since a time and
// closed, and those among them that closed Failed, TimedOut or Terminated,
// from Temporal's visibility records (one RPC; visibility lags the
// workflows by a second or so).
func (a *API) Outcomes(ctx context.Context, deploymentName, buildID string, since time.Time) (closed, failed int64, err error) {
	resp, err := a.c.WorkflowService().CountWorkflowExecutions(ctx, &workflowservice.CountWorkflowExecutionsRequest{
		Namespace: a.namespace,
		Query:     OutcomeQuery(deploymentName, buildID, since),
	})
	if err != nil {
		return 0, 0, wrapErr("CountWorkflowExecutions", deploymentName, buildID, err)
	}
	for _, g := range resp.GetGroups() {
		if len(g.GetGroupValues()) != 1 {
			return 0, 0, fmt.Errorf("CountWorkflowExecutions grouped by ExecutionStatus returned %d values per group", len(g.GetGroupValues()))
		}
		var status string
		if err := converter.GetDefaultDataConverter().FromPayload(g.GetGroupValues()[0], &status); err != nil {
			return 0, 0, fmt.Errorf("CountWorkflowExecutions: read a group's status: %w", err)
		}
		switch status {
		case "Running":
			continue
		case "Failed", "TimedOut", "Terminated":
			failed += g.GetCount()
		}
		closed += g.GetCount()
	}
	return closed, failed, nil
}

// OldestTask is the age of the oldest task waiting in any of the version's
// task queues, from a describe's statistics; false when it has none.
func (d VersionDetail) OldestTask() (time.Duration, bool) {
	if d.Backlog == nil {
		return 0, false
	}
	var oldest time.Duration
	for _, b := range d.Backlog {
		oldest = max(oldest, b.Age)
	}
	return oldest, true
}

// StuckQuery is the visibility query that counts the running workflows on
// a version stuck on a workflow task: Temporal marks them with the
// TemporalReportedProblems search attribute once as many workflow tasks in
// a row failed or timed out as the namespace's
// system.numConsecutiveWorkflowTaskProblemsToTriggerSearchAttribute says
// (5 unless set; 0 turns the marks off). The mark's cause is the last
// problem's, which is seldom the first: the SDKs report a failing task
// once and let its retries time out (Go SDK: internal_task_pollers.go),
// so both categories count.
func StuckQuery(deploymentName, buildID string) string {
	return fmt.Sprintf("%s = '%s' AND ExecutionStatus = 'Running' AND %s IN ('category=WorkflowTaskFailed', 'category=WorkflowTaskTimedOut')",
		saVersion, quote(deploymentName+":"+buildID), saProblems)
}

const saProblems = "TemporalReportedProblems"

// StuckWorkflows counts the workflows on a version (of any start time: an
// auto-upgrade workflow moved onto it counts) and those among them stuck on
// a workflow task (StuckQuery): two CountWorkflowExecutions.
func (a *API) StuckWorkflows(ctx context.Context, deploymentName, buildID string) (onVersion, stuck int64, err error) {
	count := func(q string) (int64, error) {
		resp, err := a.c.WorkflowService().CountWorkflowExecutions(ctx, &workflowservice.CountWorkflowExecutionsRequest{Namespace: a.namespace, Query: q})
		if err != nil {
			return 0, wrapErr("CountWorkflowExecutions", deploymentName, buildID, err)
		}
		return resp.GetCount(), nil
	}
	if onVersion, err = count(fmt.Sprintf("%s = '%s'", saVersion, quote(deploymentName+":"+buildID))); err != nil {
		return 0, 0, err
	}
	if stuck, err = count(StuckQuery(deploymentName, buildID)); err != nil {
		return 0, 0, err
	}
	return onVersion, stuck, nil
}
