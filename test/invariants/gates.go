package invariants

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/rainbow-deploy/rainbow/internal/temporal"
)

// Gates is what Temporal's visibility lists of gate workflows.
type Gates struct {
	ByStatus map[string]int `json:"byStatus"`
	Problems []string       `json:"problems,omitempty"`
	// Unchecked are the lists that failed.
	Unchecked []string `json:"unchecked,omitempty"`
}

// CheckGates lists the gate workflows of the worker deployments: each
// version's gate (one workflow ID per version) may run at most once and,
// with ended, none may still run.
func CheckGates(ctx context.Context, c client.Client, namespace string, deployments []string, ended bool) Gates {
	g := Gates{ByStatus: map[string]int{}}
	seen := map[string]int{}
	for _, d := range deployments {
		prefix := strings.TrimSuffix(temporal.GateWorkflowID(d, "x"), "x")
		var token []byte
		for {
			resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
				Namespace: namespace, Query: fmt.Sprintf("WorkflowId STARTS_WITH '%s'", prefix), NextPageToken: token,
			})
			if err != nil {
				g.Unchecked = append(g.Unchecked, d+": "+err.Error())
				break
			}
			for _, e := range resp.GetExecutions() {
				st := e.GetStatus()
				g.ByStatus[strings.TrimPrefix(st.String(), "WORKFLOW_EXECUTION_STATUS_")]++
				seen[e.GetExecution().GetWorkflowId()]++
				if ended && st == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
					g.Problems = append(g.Problems, e.GetExecution().GetWorkflowId()+" still running at the end")
				}
			}
			if token = resp.GetNextPageToken(); len(token) == 0 {
				break
			}
		}
	}
	for _, id := range slices.Sorted(maps.Keys(seen)) {
		if seen[id] > 1 {
			g.Problems = append(g.Problems, fmt.Sprintf("%s ran %d times", id, seen[id]))
		}
	}
	return g
}
