package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
)

var managerWaiting = flag.Duration("manager-waiting", envDuration("BENCH_MANAGER_WAITING", 2*time.Minute),
	"how long 1, then 10, TWDs are watched waiting for a person to hand the manager role back (env BENCH_MANAGER_WAITING); 0 skips it")

// HandBack is a phase where AllAtOnce TWDs wait for the manager role,
// which a person holds in Temporal, to be handed back.
type HandBack struct {
	TWDs int `json:"twds"`
	// Window: the controller's work while they all wait.
	Window Window `json:"window"`
	// SeenSeconds: for each of them, from a person clearing its manager
	// identity to the controller making the new version current
	// (Temporal's current_version_changed_time); StatusSeconds, to its
	// status showing the rollout complete, which also waits for Temporal
	// to apply the change to the task queues (Ready means routed).
	SeenSeconds   []float64 `json:"seenSeconds"`
	StatusSeconds []float64 `json:"statusSeconds"`
}

// handBackSpacing staggers the hand-backs of several TWDs, so that they
// fall at different points of the controller's 10 s watch interval.
const handBackSpacing = 3700 * time.Millisecond

// handBack rolls out k AllAtOnce TWDs in ns, has a person take the manager
// role of each, changes their images, measures the controller over d while
// they wait (ManagedByOtherIdentity), then hands one role back and times
// until its status shows the new version current. The others are handed
// back last, so that later phases do not count their waiting.
func handBack(ctx context.Context, e *benchEnv, o *observer, ns string, k int, d time.Duration) (HandBack, error) {
	h := HandBack{TWDs: k}
	if err := createNamespace(ctx, e, ns); err != nil {
		return h, err
	}
	keys := make([]types.NamespacedName, k)
	changes := make([]change, k)
	for i := range keys {
		keys[i] = types.NamespacedName{Namespace: ns, Name: fmt.Sprintf("h%03d", i)}
		c, err := create(ctx, e, newTWD(e, ns, keys[i].Name, "h1", v1alpha1.RolloutSpec{Strategy: v1alpha1.StrategyAllAtOnce}))
		if err != nil {
			return h, err
		}
		changes[i] = c
	}
	if _, err := waitAllReady(ctx, o, keys, changes, generous(k)); err != nil {
		return h, err
	}
	for i, key := range keys {
		if err := setManager(ctx, e, temporalName(key), "a-person"); err != nil {
			return h, err
		}
		c, err := setTag(ctx, e, key, "h2")
		if err != nil {
			return h, err
		}
		changes[i] = c
	}
	if err := waitFor(ctx, 3*time.Minute, "every TWD waiting for the manager role", func() bool {
		for _, key := range keys {
			if o.readyReason(key) != v1alpha1.ReasonManagedByOtherIdentity {
				return false
			}
		}
		return true
	}, func() string { return o.lastStatus(keys[len(keys)-1]) }); err != nil {
		return h, err
	}
	var err error
	if h.Window, err = waitingWindow(ctx, e, d, fmt.Sprintf("%d TWDs waiting for the manager role", k), k); err != nil {
		return h, err
	}

	handed := make([]time.Time, k)
	for i, key := range keys {
		if i > 0 {
			time.Sleep(handBackSpacing)
		}
		handed[i] = time.Now()
		if err := setManager(ctx, e, temporalName(key), ""); err != nil {
			return h, err
		}
	}
	if _, err := waitAllReady(ctx, o, keys, changes, generous(k)); err != nil {
		return h, err
	}
	for i, key := range keys {
		resp, err := describe(ctx, e, temporalName(key))
		if err != nil {
			return h, err
		}
		current := resp.GetWorkerDeploymentInfo().GetRoutingConfig().GetCurrentVersionChangedTime().AsTime()
		ready, _ := o.readyAt(key, changes[i].generation)
		h.SeenSeconds = append(h.SeenSeconds, current.Sub(handed[i]).Seconds())
		h.StatusSeconds = append(h.StatusSeconds, ready.Sub(handed[i]).Seconds())
	}
	return h, nil
}

// setManager sets (or with "" clears) a worker deployment's manager
// identity as a person would with the temporal CLI, retrying while
// Temporal is busy with an earlier update.
func setManager(ctx context.Context, e *benchEnv, deployment, identity string) error {
	var last error
	for range 50 {
		_, err := e.temporal.WorkflowService().SetWorkerDeploymentManager(ctx, &workflowservice.SetWorkerDeploymentManagerRequest{
			Namespace: e.Info.TemporalNamespace, DeploymentName: deployment, Identity: "a-person",
			NewManagerIdentity: &workflowservice.SetWorkerDeploymentManagerRequest_ManagerIdentity{ManagerIdentity: identity},
		})
		if err == nil {
			return nil
		}
		last = err
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return fmt.Errorf("set the manager of %s to %q: %w", deployment, identity, last)
}

// handBackRows: the reads while TWDs wait for the manager role, and how
// soon a handed-back role shows (issue 30, goal 3).
func handBackRows(hs []HandBack) []row {
	var rows []row
	for _, h := range hs {
		seen, status := stats(h.SeenSeconds), stats(h.StatusSeconds)
		target, ok := waitingTarget(h.Window)
		rows = append(rows,
			row{Figure: fmt.Sprintf("Temporal reads per TWD waiting for the manager role per minute (%d waiting)", h.TWDs),
				Value:  fmt.Sprintf("%.2f (%s)", h.Window.ReadsPerTWDMin, perMethod(h.Window)),
				Target: target, Verdict: verdict(ok),
				How: fmt.Sprintf("the controller's rainbow_temporal_rpcs_total over %s while %d AllAtOnce TWDs of one namespace wait for a person "+
					"to hand the manager role back (ManagedByOtherIdentity), 15 s after the last of them first reported it, divided by TWDs and minutes.",
					secs(h.Window.Seconds), h.TWDs)},
			row{Figure: fmt.Sprintf("A handed-back manager role acted on, median / max (%d waiting)", h.TWDs),
				Value:  fmt.Sprintf("%s / %s (n=%d); status shows it %s / %s", secs(seen.Median), secs(seen.Max), seen.N, secs(status.Median), secs(status.Max)),
				Target: "< 10 s plus the visibility lag", Verdict: verdict(seen.N > 0 && seen.Max < 12),
				How: fmt.Sprintf("for each TWD, from the benchmark's SetWorkerDeploymentManager clearing its manager identity (as a person with the "+
					"temporal CLI) to Temporal's current_version_changed_time of the new version (the controller's write); the hand-backs %s apart. "+
					"Status: to the watch seeing Ready=True, which also waits for Temporal to apply the change to every task queue partition.", handBackSpacing)},
		)
	}
	return rows
}
