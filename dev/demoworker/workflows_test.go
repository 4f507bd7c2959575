package demoworker

import (
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/testsuite"
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
