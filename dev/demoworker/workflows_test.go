package demoworker

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"
)

func newEnv(t *testing.T) *testsuite.TestWorkflowEnvironment {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.RegisterActivity(&Activities{BuildID: "v1"})
	return env
}

func TestLongFinishesOnSignal(t *testing.T) {
	env := newEnv(t)
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(FinishSignal, nil) }, time.Hour)
	env.ExecuteWorkflow(Long, LongInput{Tick: 10 * time.Minute})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	var res LongResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if res.StartedOn != "v1" || res.FinishedOn != "v1" {
		t.Fatalf("result = %+v", res)
	}
}

func TestLongEndsAfterDuration(t *testing.T) {
	env := newEnv(t)
	env.ExecuteWorkflow(Long, LongInput{Duration: 30 * time.Minute, Tick: 7 * time.Minute})
	if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil {
		t.Fatalf("completed=%v err=%v", env.IsWorkflowCompleted(), env.GetWorkflowError())
	}
}

func TestGate(t *testing.T) {
	env := newEnv(t)
	env.ExecuteWorkflow(RolloutGate, GateInput{})
	var msg string
	if err := env.GetWorkflowResult(&msg); err != nil || msg != "gate passed on v1" {
		t.Fatalf("passing gate: %q, %v", msg, err)
	}
	env = newEnv(t)
	env.ExecuteWorkflow(RolloutGate, GateInput{Fail: true, Message: "smoke test failed"})
	if err := env.GetWorkflowError(); err == nil || !strings.Contains(err.Error(), "smoke test failed") {
		t.Fatalf("failing gate: %v", err)
	}
}

// TestGateCancellation: RolloutGate ends when cancelled; IgnoreCancelGate
// does not, and still decides when the finish signal comes.
func TestGateCancellation(t *testing.T) {
	env := newEnv(t)
	env.RegisterDelayedCallback(env.CancelWorkflow, time.Minute)
	env.ExecuteWorkflow(RolloutGate, GateInput{Hang: true})
	var canceled *temporal.CanceledError
	if err := env.GetWorkflowError(); !errors.As(err, &canceled) {
		t.Fatalf("cancelled RolloutGate: %v, want cancelled", err)
	}

	env = newEnv(t)
	env.RegisterDelayedCallback(env.CancelWorkflow, time.Minute)
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(FinishSignal, nil) }, time.Hour)
	env.ExecuteWorkflow(IgnoreCancelGate, GateInput{})
	var msg string
	if err := env.GetWorkflowResult(&msg); err != nil || msg != "gate passed on v1" {
		t.Fatalf("IgnoreCancelGate after a cancellation and the finish signal: %q, %v", msg, err)
	}
}

// TestLongContinuesAsNewOnSignal: the continue-as-new signal ends the run
// with a continue-as-new that starts the next run on the current version
// (AutoUpgrade initial behavior) and carries the time left.
func TestLongContinuesAsNewOnSignal(t *testing.T) {
	env := newEnv(t)
	env.RegisterWorkflowWithOptions(Long, workflow.RegisterOptions{Name: LongPinnedWorkflow})
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(ContinueAsNewSignal, "please") }, 10*time.Minute)
	env.ExecuteWorkflow(LongPinnedWorkflow, LongInput{Duration: time.Hour, Tick: 7 * time.Minute})
	var can *workflow.ContinueAsNewError
	if err := env.GetWorkflowError(); !errors.As(err, &can) {
		t.Fatalf("workflow error = %v, want a continue-as-new", err)
	}
	if can.WorkflowType.Name != LongPinnedWorkflow || can.InitialVersioningBehavior != workflow.ContinueAsNewVersioningBehaviorAutoUpgrade {
		t.Fatalf("continue-as-new %s with initial behavior %v, want %s with AutoUpgrade", can.WorkflowType.Name, can.InitialVersioningBehavior, LongPinnedWorkflow)
	}
	var next LongInput
	if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &next); err != nil {
		t.Fatal(err)
	}
	if next.ContinuedFrom != "v1" || next.Duration != 50*time.Minute || next.Tick != 7*time.Minute {
		t.Fatalf("next run's input = %+v, want ContinuedFrom v1 and the 50m left", next)
	}
}

func TestFailShare(t *testing.T) {
	failed := 0
	for i := range 40 {
		env := newEnv(t)
		env.RegisterWorkflowWithOptions(failing(Hello, 0.5), workflow.RegisterOptions{Name: HelloWorkflow})
		env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: fmt.Sprintf("hello-%d", i)})
		env.ExecuteWorkflow(HelloWorkflow, "x")
		if env.GetWorkflowError() != nil {
			failed++
		}
	}
	if failed < 10 || failed > 30 {
		t.Fatalf("%d of 40 failed with DEMO_FAIL_SHARE=0.5", failed)
	}
	env := newEnv(t)
	env.RegisterWorkflowWithOptions(failing(Hello, 0), workflow.RegisterOptions{Name: HelloWorkflow})
	env.ExecuteWorkflow(HelloWorkflow, "x")
	if err := env.GetWorkflowError(); err != nil {
		t.Fatalf("share 0 failed: %v", err)
	}
}
