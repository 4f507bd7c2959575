// Package demoworker holds the demo worker's workflows: a short one, and
// long-running ones that are pinned or auto-upgrade, so that rollouts and
// drainage can be shown and tested with real executions.
package demoworker

import (
	"context"
	"fmt"
	"hash/fnv"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// Names that clients use to start workflows and send signals.
const (
	HelloWorkflow           = "Hello"
	LongPinnedWorkflow      = "LongPinned"
	LongAutoUpgradeWorkflow = "LongAutoUpgrade"
	GateWorkflow            = "RolloutGate"
	WorkWorkflow            = "Work" // one Work activity: load to autoscale on
	FinishSignal            = "finish"
	BuildIDQuery            = "build-id"
	// ContinueAsNewSignal makes a long workflow continue as new onto the
	// current version (spec.sunset.continueAsNewSignal's name in examples).
	ContinueAsNewSignal = "continue-as-new"
	// IgnoreCancelGateWorkflow is a gate that ignores cancellation.
	IgnoreCancelGateWorkflow = "IgnoreCancelGate"
)

// LongInput parameterises the long-running workflows.
type LongInput struct {
	// Duration ends the workflow by timer; zero waits for the finish signal only.
	Duration time.Duration
	// Tick makes the workflow run an activity this often, so that an
	// auto-upgrade workflow shows which build serves it over time.
	Tick time.Duration
	// ContinuedFrom is the build of the run that continued as new into
	// this one, after ContinueAsNewSignal; empty for a first run.
	ContinuedFrom string
	// TargetChanged: that run saw Temporal's "target version changed"
	// flag when it continued as new.
	TargetChanged bool
}

// LongResult tells which builds served the workflow.
type LongResult struct {
	StartedOn  string
	FinishedOn string
	// ContinuedFrom and TargetChanged are the input's: the run this one
	// continued from, and what that run saw.
	ContinuedFrom string
	TargetChanged bool
}

// GateInput decides the gate's verdict, so tests and demos can fail a rollout.
type GateInput struct {
	Fail    bool
	Message string
	// Hang makes RolloutGate wait for FinishSignal (or its
	// cancellation) before its verdict, so tests can see a gate time out
	// or be cancelled.
	Hang bool
}

// WorkInput is the load one Work workflow puts on a worker.
type WorkInput struct {
	// Sleep holds an activity slot this long: with few slots per worker
	// (DEMO_MAX_CONCURRENT_ACTIVITIES) the activity tasks of many Work
	// workflows wait in the task queue's backlog.
	Sleep time.Duration
	// Burn keeps one CPU busy this long, for autoscaling on CPU.
	Burn time.Duration
}

// Activities run on the worker's build, which makes them the witness of
// where a workflow ran.
type Activities struct {
	BuildID string
	// FailShare of the Hello workflow's WhoAmI attempts fail, retryably.
	FailShare float64
}

// WhoAmI returns the build ID of the worker running the activity.
func (a *Activities) WhoAmI(ctx context.Context) (string, error) {
	info := activity.GetInfo(ctx)
	activity.GetLogger(ctx).Debug("who am i", "buildID", a.BuildID)
	if a.FailShare > 0 && info.WorkflowType != nil && info.WorkflowType.Name == HelloWorkflow &&
		shareHit(fmt.Sprintf("%s/%d", info.WorkflowExecution.ID, info.Attempt), a.FailShare) {
		return "", temporal.NewApplicationError(fmt.Sprintf("demo activity failure: DEMO_ACTIVITY_FAIL_SHARE=%g", a.FailShare), "DemoActivityFailure")
	}
	return a.BuildID, nil
}

// Work sleeps, then burns CPU, as the input says, and returns the build ID.
func (a *Activities) Work(ctx context.Context, in WorkInput) (string, error) {
	select {
	case <-time.After(in.Sleep):
	case <-ctx.Done():
		return "", ctx.Err()
	}
	for end := time.Now().Add(in.Burn); time.Now().Before(end) && ctx.Err() == nil; {
		for i := 0; i < 1_000_000; i++ {
			spin ^= uint64(i) * 2654435761
		}
	}
	return a.BuildID, ctx.Err()
}

// spin is where Work burns CPU; a package variable, so the loop is not
// optimized away.
var spin uint64

// Work runs the Work activity once.
func Work(ctx workflow.Context, in WorkInput) (string, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: in.Sleep + in.Burn + time.Minute})
	var id string
	err := workflow.ExecuteActivity(ctx, (*Activities).Work, in).Get(ctx, &id)
	return id, err
}

func whoAmI(ctx workflow.Context) (string, error) {
	// Retries no further apart than 2s: a failed attempt
	// (DEMO_ACTIVITY_FAIL_SHARE) delays the workflow little.
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 30 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: 500 * time.Millisecond, MaximumInterval: 2 * time.Second}})
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

// failing makes a share of the workflow's runs fail.
func failing(wf func(workflow.Context, string) (string, error), share float64) func(workflow.Context, string) (string, error) {
	if share <= 0 {
		return wf
	}
	return func(ctx workflow.Context, name string) (string, error) {
		if shareHit(workflow.GetInfo(ctx).WorkflowExecution.ID, share) {
			return "", temporal.NewNonRetryableApplicationError(fmt.Sprintf("demo failure: DEMO_FAIL_SHARE=%g", share), "DemoFailure", nil)
		}
		return wf(ctx, name)
	}
}

// nondeterministic leaves a share of the Hello runs stuck on a workflow
// task that keeps failing: the second workflow task panics (once the
// activity's result is in), and every retry then replays a history the
// code no longer makes (replaying, it starts a timer where the history
// has the activity), a non-determinism error.
func nondeterministic(wf func(workflow.Context, string) (string, error), share float64) func(workflow.Context, string) (string, error) {
	if share <= 0 {
		return wf
	}
	return func(ctx workflow.Context, name string) (string, error) {
		if !shareHit(workflow.GetInfo(ctx).WorkflowExecution.ID, share) {
			return wf(ctx, name)
		}
		if workflow.IsReplaying(ctx) {
			if err := workflow.Sleep(ctx, time.Millisecond); err != nil {
				return "", err
			}
		}
		if _, err := whoAmI(ctx); err != nil {
			return "", err
		}
		panic(fmt.Sprintf("demo panic: DEMO_NONDETERMINISM_SHARE=%g", share))
	}
}

// shareHit picks share of the keys, by their hash.
func shareHit(key string, share float64) bool {
	h := fnv.New32a()
	h.Write([]byte(key))
	return float64(h.Sum32()%1000) < share*1000
}

// Long runs until the finish signal or its duration, calling WhoAmI at the
// start, on every tick and at the end. ContinueAsNewSignal makes it continue
// as new, the new run starting on the current version (see continueOnCurrent).
func Long(ctx workflow.Context, in LongInput) (LongResult, error) {
	res := LongResult{ContinuedFrom: in.ContinuedFrom, TargetChanged: in.TargetChanged}
	var err error
	if res.StartedOn, err = whoAmI(ctx); err != nil {
		return res, err
	}
	last := res.StartedOn
	if err := workflow.SetQueryHandler(ctx, BuildIDQuery, func() (string, error) { return last, nil }); err != nil {
		return res, err
	}
	finish := workflow.GetSignalChannel(ctx, FinishSignal)
	nudge := workflow.GetSignalChannel(ctx, ContinueAsNewSignal)
	deadline := workflow.Now(ctx).Add(in.Duration)
	for done := false; !done; {
		sel := workflow.NewSelector(ctx)
		sel.AddReceive(finish, func(c workflow.ReceiveChannel, _ bool) {
			c.Receive(ctx, nil)
			done = true
		})
		continueAsNew := false
		sel.AddReceive(nudge, func(c workflow.ReceiveChannel, _ bool) {
			c.ReceiveAsync(nil) // its input, if any, says nothing to this workflow
			continueAsNew = true
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
		if continueAsNew {
			return res, continueOnCurrent(ctx, in, deadline, last)
		}
		if !done && in.Tick > 0 {
			if last, err = whoAmI(ctx); err != nil {
				return res, err
			}
		}
	}
	res.FinishedOn, err = whoAmI(ctx)
	return res, err
}

// continueOnCurrent continues the workflow as new with the time it has
// left. A pinned run's next run would inherit its version; the
// AutoUpgrade initial behavior (upgrade on continue-as-new, Temporal 1.32
// and SDK 1.50, experimental) starts it on the task queue's current
// version instead, after whose first workflow task it is pinned there
// (the workflow type's own behavior). A run pinned by a versioning
// override keeps the override whatever this asks.
func continueOnCurrent(ctx workflow.Context, in LongInput, deadline time.Time, build string) error {
	next := in
	next.ContinuedFrom = build
	next.TargetChanged = workflow.GetInfo(ctx).GetTargetWorkerDeploymentVersionChanged()
	if in.Duration > 0 {
		next.Duration = max(deadline.Sub(workflow.Now(ctx)), time.Millisecond)
	}
	return workflow.NewContinueAsNewErrorWithOptions(ctx, workflow.ContinueAsNewErrorOptions{
		InitialVersioningBehavior: workflow.ContinueAsNewVersioningBehaviorAutoUpgrade,
	}, workflow.GetInfo(ctx).WorkflowType.Name, next)
}

// RolloutGate is a gate workflow: it succeeds unless told to fail. It
// honours cancellation: a cancelled run ends as cancelled.
func RolloutGate(ctx workflow.Context, in GateInput) (string, error) {
	id, err := whoAmI(ctx)
	if err != nil {
		return "", err
	}
	if in.Hang {
		sel := workflow.NewSelector(ctx)
		sel.AddReceive(workflow.GetSignalChannel(ctx, FinishSignal), func(c workflow.ReceiveChannel, _ bool) { c.Receive(ctx, nil) })
		sel.AddReceive(ctx.Done(), func(workflow.ReceiveChannel, bool) {})
		sel.Select(ctx)
		if err := ctx.Err(); err != nil {
			return "", err
		}
	}
	return gateVerdict(id, in)
}

// IgnoreCancelGate is a gate workflow that ignores cancellation, as a
// careless gate would: whatever happens it waits for FinishSignal, then
// decides as RolloutGate does. Only a termination (or its timeout) ends it
// before the signal; tests use it to see the controller end a gate it no
// longer needs.
func IgnoreCancelGate(ctx workflow.Context, in GateInput) (string, error) {
	ctx, _ = workflow.NewDisconnectedContext(ctx)
	id, err := whoAmI(ctx)
	if err != nil {
		return "", err
	}
	workflow.GetSignalChannel(ctx, FinishSignal).Receive(ctx, nil)
	return gateVerdict(id, in)
}

func gateVerdict(id string, in GateInput) (string, error) {
	if in.Fail {
		return "", fmt.Errorf("gate failed on %s: %s", id, in.Message)
	}
	return "gate passed on " + id, nil
}
