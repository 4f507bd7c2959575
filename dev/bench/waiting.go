package main

import (
	"context"
	"fmt"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
)

// Waiting is a phase where Manual TWDs wait for a person to promote them.
type Waiting struct {
	TWDs int `json:"twds"`
	// Window: the controller's work while they all wait.
	Window Window `json:"window"`
	// PromotionSeenSeconds: from a person's set-current-version of one of
	// them to its status showing the rollout complete.
	PromotionSeenSeconds float64 `json:"promotionSeenSeconds"`
}

// waiting creates k Manual TWDs in ns, measures the controller over d while
// they wait for a promotion, then promotes one as a person would (with the
// benchmark's own client) and times until its status shows it.
func waiting(ctx context.Context, e *benchEnv, o *observer, ns string, k int, d time.Duration) (Waiting, error) {
	w := Waiting{TWDs: k}
	if err := createNamespace(ctx, e, ns); err != nil {
		return w, err
	}
	keys := make([]types.NamespacedName, k)
	builds := make([]string, k)
	for i := range keys {
		keys[i] = types.NamespacedName{Namespace: ns, Name: fmt.Sprintf("m%03d", i)}
		c, err := create(ctx, e, newTWD(e, ns, keys[i].Name, "m1", v1alpha1.RolloutSpec{Strategy: v1alpha1.StrategyManual}))
		if err != nil {
			return w, err
		}
		builds[i] = c.build
	}
	if err := waitFor(ctx, 3*time.Minute, "every Manual TWD waiting for promotion", func() bool {
		for _, key := range keys {
			if !waitingForPromotion(o, key) {
				return false
			}
		}
		return true
	}, nil); err != nil {
		return w, err
	}
	var err error
	if w.Window, err = waitingWindow(ctx, e, d, fmt.Sprintf("%d Manual TWDs waiting for a promotion", k), k); err != nil {
		return w, err
	}

	key := keys[0]
	deployment := (&v1alpha1.TemporalWorkerDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: key.Name}}).WorkerDeploymentName()
	promoted := time.Now()
	if _, err := e.temporal.WorkflowService().SetWorkerDeploymentCurrentVersion(ctx, &workflowservice.SetWorkerDeploymentCurrentVersionRequest{
		Namespace: e.Info.TemporalNamespace, DeploymentName: deployment, BuildId: builds[0], Identity: "a-person",
	}); err != nil {
		return w, fmt.Errorf("promote %s: %w", deployment, err)
	}
	var seen time.Time
	if err := waitFor(ctx, 2*time.Minute, "the promotion to show in status", func() bool {
		t, ok := o.readyAt(key, 1)
		seen = t
		return ok
	}, func() string { return o.lastStatus(key) }); err != nil {
		return w, err
	}
	w.PromotionSeenSeconds = seen.Sub(promoted).Seconds()
	return w, nil
}

func waitingForPromotion(o *observer, key types.NamespacedName) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	s := o.twds[key]
	if s == nil || s.last == nil {
		return false
	}
	c := meta.FindStatusCondition(s.last.Status.Conditions, v1alpha1.ConditionReady)
	return c != nil && c.Reason == v1alpha1.ReasonWaitingForPromotion
}

// waitingWindow measures the controller over d while twds TWDs wait, once
// the last describes of what made them wait had 15 s to settle.
func waitingWindow(ctx context.Context, e *benchEnv, d time.Duration, name string, twds int) (Window, error) {
	time.Sleep(15 * time.Second)
	a, err := e.snapshot()
	if err != nil {
		return Window{}, err
	}
	select {
	case <-ctx.Done():
		return Window{}, ctx.Err()
	case <-time.After(d):
	}
	b, err := e.snapshot()
	if err != nil {
		return Window{}, err
	}
	return window(name, a, b, twds), nil
}
