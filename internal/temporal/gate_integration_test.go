package temporal

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rainbow-deploy/rainbow/dev/demoworker"
	"github.com/rainbow-deploy/rainbow/internal/planner"
	"github.com/rainbow-deploy/rainbow/test/harness"
)

// TestTerminateGate: a gate that ignores its cancellation keeps running
// until it is terminated; it then reads as cancelled (no verdict), not as
// failed. Terminating a closed gate is no error.
func TestTerminateGate(t *testing.T) {
	ht := needEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	api := newAPI(ht, "rainbow-test-"+ht.Suffix)
	name := "stubborn-gate-" + ht.Suffix
	tq := ht.TaskQueue("q")
	startWorker(ht, name, "v1", tq)

	id := startGateWhenPinnable(ctx, ht, api, name, "v1", tq, demoworker.IgnoreCancelGateWorkflow, nil, 0)
	if err := api.CancelGate(ctx, name, "v1", 0); err != nil {
		t.Fatal(err)
	}
	// Its worker has had the cancellation for a while and ignored it.
	time.Sleep(3 * time.Second)
	gs, err := api.GateResult(ctx, id)
	if err != nil || gs.Phase != planner.GateRunning {
		t.Fatalf("a gate ignoring its cancellation: %+v, %v; want still running", gs, err)
	}

	if err := api.TerminateGate(ctx, name, "v1", 0, "rainbow: test"); err != nil {
		t.Fatal(err)
	}
	ht.Eventually(20*time.Second, "the gate ended", func() (bool, string) {
		gs, err = api.GateResult(ctx, id)
		return err == nil && gs.Phase != planner.GateRunning, fmt.Sprintf("%+v %v", gs, err)
	})
	if gs.Phase != planner.GateCancelled || !strings.Contains(gs.Message, "terminated") {
		t.Fatalf("a gate terminated after its cancellation request = %+v, want Cancelled, saying it was terminated", gs)
	}
	if err := api.TerminateGate(ctx, name, "v1", 0, "rainbow: test"); err != nil {
		t.Fatalf("terminating a closed gate: %v", err)
	}
	if err := api.TerminateGate(ctx, name, "never-started", 0, "rainbow: test"); err != nil {
		t.Fatalf("terminating a gate never started: %v", err)
	}
}

// startGateWhenPinnable starts a gate on a version whose worker was just
// started: the task queue learns of the version a moment after its first
// poll, and Temporal refuses to pin to it until then. It returns the
// workflow ID.
func startGateWhenPinnable(ctx context.Context, ht *harness.T, api *API, deployment, build, taskQueue, workflowType string, input []byte, timeout time.Duration) string {
	ht.Helper()
	var id string
	ht.Eventually(20*time.Second, "gate "+workflowType+" started on "+build, func() (bool, string) {
		var err error
		id, _, err = api.StartGate(ctx, deployment, build, 0, taskQueue, workflowType, input, timeout)
		if err != nil && !errors.Is(err, ErrMissingTaskQueues) {
			ht.Fatalf("StartGate %s on %s: %v", workflowType, build, err)
		}
		return err == nil, fmt.Sprint(err)
	})
	return id
}
