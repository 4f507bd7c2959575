// Package demoworker holds the demo worker's workflows: a short one, and
// long-running ones that are pinned or auto-upgrade, so that rollouts and
// drainage can be shown and tested with real executions.
package demoworker

import (
	"context"
	"fmt"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/workflow"
)

// Names that clients use to start workflows and send signals.
const (
	HelloWorkflow           = "Hello"
	LongPinnedWorkflow      = "LongPinned"
	LongAutoUpgradeWorkflow = "LongAutoUpgrade"
	GateWorkflow            = "RolloutGate"
	FinishSignal            = "finish"
	BuildIDQuery            = "build-id"
)

// LongInput parameterises the long-running workflows.
type LongInput struct {
	// Duration ends the workflow by timer; zero waits for the finish signal only.
	Duration time.Duration
	// Tick makes the workflow run an activity this often, so that an
	// auto-upgrade workflow shows which build serves it over time.
	Tick time.Duration
}

// LongResult tells which builds served the workflow.
type LongResult struct {
	StartedOn  string
	FinishedOn string
}

// GateInput decides the gate's verdict, so tests and demos can fail a rollout.
type GateInput struct {
	Fail    bool
	Message string
	// Hang makes the gate wait for FinishSignal before its verdict, so
	// tests can see a gate time out or be cancelled.
	Hang bool
}

// Activities run on the worker's build, which makes them the witness of
// where a workflow ran.
type Activities struct {
	BuildID string
}

// WhoAmI returns the build ID of the worker running the activity.
func (a *Activities) WhoAmI(ctx context.Context) (string, error) {
	activity.GetLogger(ctx).Debug("who am i", "buildID", a.BuildID)
	return a.BuildID, nil
}

func whoAmI(ctx workflow.Context) (string, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 30 * time.Second})
	var id string
	err := workflow.ExecuteActivity(ctx, (*Activities).WhoAmI).Get(ctx, &id)
	return id, err
}

// Hello is the short workflow.
func Hello(ctx workflow.Context, name string) (string, error) {
	id, err := whoAmI(ctx)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("hello %s from %s", name, id), nil
}

// Long runs until the finish signal or its duration, calling WhoAmI at the
// start, on every tick and at the end.
func Long(ctx workflow.Context, in LongInput) (LongResult, error) {
	var res LongResult
	var err error
	if res.StartedOn, err = whoAmI(ctx); err != nil {
		return res, err
	}
	last := res.StartedOn
	if err := workflow.SetQueryHandler(ctx, BuildIDQuery, func() (string, error) { return last, nil }); err != nil {
		return res, err
	}
	finish := workflow.GetSignalChannel(ctx, FinishSignal)
	deadline := workflow.Now(ctx).Add(in.Duration)
	for done := false; !done; {
		sel := workflow.NewSelector(ctx)
		sel.AddReceive(finish, func(c workflow.ReceiveChannel, _ bool) {
			c.Receive(ctx, nil)
			done = true
		})
		wait := in.Tick
		if in.Duration > 0 {
			left := deadline.Sub(workflow.Now(ctx))
			if left <= 0 {
				break
			}
			if wait == 0 || left < wait {
				wait = left
			}
		}
		if wait > 0 {
			sel.AddFuture(workflow.NewTimer(ctx, wait), func(workflow.Future) {})
		}
		sel.Select(ctx)
		if !done && in.Tick > 0 {
			if last, err = whoAmI(ctx); err != nil {
				return res, err
			}
		}
	}
	res.FinishedOn, err = whoAmI(ctx)
	return res, err
}

// RolloutGate is a gate workflow: it succeeds unless told to fail.
func RolloutGate(ctx workflow.Context, in GateInput) (string, error) {
	id, err := whoAmI(ctx)
	if err != nil {
		return "", err
	}
	if in.Hang {
		workflow.GetSignalChannel(ctx, FinishSignal).Receive(ctx, nil)
	}
	if in.Fail {
		return "", fmt.Errorf("gate failed on %s: %s", id, in.Message)
	}
	return "gate passed on " + id, nil
}
