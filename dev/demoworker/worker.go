package demoworker

import (
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/rainbow-deploy/rainbow/internal/workerenv"
)

// New creates a versioned worker for the build the environment names.
func New(c client.Client, env workerenv.Config, taskQueue string) worker.Worker {
	return NewWithOptions(c, env, taskQueue, Options{})
}

// Options tune the demo worker.
type Options struct {
	// MaxConcurrentActivities bounds the activities a worker runs at once
	// (DEMO_MAX_CONCURRENT_ACTIVITIES); 0 is the SDK's default.
	MaxConcurrentActivities int
	// FailShare is the share of Hello workflows that fail
	// (DEMO_FAIL_SHARE, 0 to 1): a bad version for rollout analysis.
	FailShare float64
	// NondeterminismShare is the share of Hello workflows left stuck on a
	// failing workflow task, a non-determinism error
	// (DEMO_NONDETERMINISM_SHARE, 0 to 1).
	NondeterminismShare float64
	// ActivityFailShare is the share of the Hello workflow's activity
	// attempts that fail with a retryable error (DEMO_ACTIVITY_FAIL_SHARE,
	// 0 to 1): the workflows still succeed after retries, so only the
	// SDK's activity metrics show the version is bad.
	ActivityFailShare float64
}

// NewWithOptions is New with opts.
func NewWithOptions(c client.Client, env workerenv.Config, taskQueue string, opts Options) worker.Worker {
	w := worker.New(c, taskQueue, worker.Options{
		DeploymentOptions: worker.DeploymentOptions{
			UseVersioning: true,
			Version: worker.WorkerDeploymentVersion{
				DeploymentName: env.DeploymentName,
				BuildID:        env.BuildID,
			},
		},
		MaxConcurrentActivityExecutionSize: opts.MaxConcurrentActivities,
	})
	pinned := workflow.RegisterOptions{VersioningBehavior: workflow.VersioningBehaviorPinned}
	w.RegisterWorkflowWithOptions(failing(nondeterministic(Hello, opts.NondeterminismShare), opts.FailShare), withName(pinned, HelloWorkflow))
	w.RegisterWorkflowWithOptions(Long, withName(pinned, LongPinnedWorkflow))
	w.RegisterWorkflowWithOptions(RolloutGate, withName(pinned, GateWorkflow))
	w.RegisterWorkflowWithOptions(IgnoreCancelGate, withName(pinned, IgnoreCancelGateWorkflow))
	w.RegisterWorkflowWithOptions(Work, withName(pinned, WorkWorkflow))
	w.RegisterWorkflowWithOptions(Long, workflow.RegisterOptions{
		Name:               LongAutoUpgradeWorkflow,
		VersioningBehavior: workflow.VersioningBehaviorAutoUpgrade,
	})
	w.RegisterActivity(&Activities{BuildID: env.BuildID, FailShare: opts.ActivityFailShare})
	return w
}

func withName(o workflow.RegisterOptions, name string) workflow.RegisterOptions {
	o.Name = name
	return o
}
