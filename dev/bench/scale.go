package main

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
)

// Scale is the N-TWD phase.
type Scale struct {
	N int `json:"n"`
	// BaselineRSSMiB is the controller's RSS before the N TWDs existed.
	BaselineRSSMiB float64 `json:"baselineRSSMiB"`
	// CreateSeconds: first create to the last TWD Ready.
	CreateSeconds float64 `json:"createSeconds"`
	Create        Window  `json:"create"`
	Idle          Window  `json:"idle"`
	// RolloutSeconds: first spec change of the shared image change to the
	// last TWD Ready with its new version current.
	RolloutSeconds float64 `json:"rolloutSeconds"`
	// Per-TWD spec change to Ready during the shared rollout.
	RolloutEndToEnd Stats  `json:"rolloutEndToEnd"`
	Rollout         Window `json:"rollout"`
	// RetireSeconds: from the last Ready until every old version's
	// Deployment is deleted and status lists no deprecated version, in the
	// scale namespace and the earlier phases' one.
	RetireSeconds float64 `json:"retireSeconds"`
	Retire        Window  `json:"retire"`
	// The shared rollout's end, where the retirement is timed from.
	rolledOut  time.Time
	rolledSnap snapshot
}

// scale creates n TWDs, each with one running version, changes all their
// images at once, waits for the old versions to retire, then measures the
// controller while nothing moves. others is the number of TWDs in
// otherNamespace, which exist from earlier phases.
func scale(ctx context.Context, e *benchEnv, o *observer, ns string, n int, otherNamespace string, others int, idle time.Duration, rollout bool) (Scale, error) {
	s := Scale{N: n}
	total := n + others
	if err := createNamespace(ctx, e, ns); err != nil {
		return s, err
	}
	keys := make([]types.NamespacedName, n)
	for i := range keys {
		keys[i] = types.NamespacedName{Namespace: ns, Name: fmt.Sprintf("w%04d", i)}
	}
	start, err := e.snapshot()
	if err != nil {
		return s, err
	}
	s.BaselineRSSMiB = start.proc.RSSMiB
	changes := make([]change, n)
	for i, k := range keys {
		if changes[i], err = create(ctx, e, newTWD(e, ns, k.Name, "s1", v1alpha1.RolloutSpec{Strategy: v1alpha1.StrategyAllAtOnce})); err != nil {
			return s, err
		}
	}
	fmt.Printf("  created %d TWDs in %.1fs; waiting for all to be Ready\n", n, time.Since(start.at).Seconds())
	last, err := waitAllReady(ctx, o, keys, changes, 5*time.Minute+time.Duration(n)*2*time.Second)
	if err != nil {
		return s, err
	}
	s.CreateSeconds = last.Sub(changes[0].at).Seconds()
	created, err := e.snapshot()
	if err != nil {
		return s, err
	}
	s.Create = window(fmt.Sprintf("create %d TWDs", n), start, created, total)
	fmt.Printf("  all %d Ready %.1fs after the first create\n", n, s.CreateSeconds)

	if rollout {
		if err := sharedRollout(ctx, e, o, &s, keys, changes, total); err != nil {
			return s, err
		}
	}
	// Both namespaces: the earlier phases' old versions too.
	before := time.Now()
	for ns, count := range map[string]int{ns: n, otherNamespace: others} {
		if err := waitRetired(ctx, e, ns, count, 10*time.Minute); err != nil {
			return s, err
		}
	}
	if rollout {
		retired, err := e.snapshot()
		if err != nil {
			return s, err
		}
		s.RetireSeconds = retired.at.Sub(s.rolledOut).Seconds()
		s.Retire = window(fmt.Sprintf("retire %d old versions", n), s.rolledSnap, retired, total)
		fmt.Printf("  old versions retired %.1fs after the last Ready\n", s.RetireSeconds)
	} else {
		fmt.Printf("  no old version left (waited %.1fs)\n", time.Since(before).Seconds())
	}
	fmt.Printf("  settling, then idle for %s\n", idle)

	// Let the last requeues of the retirement pass, then measure nothing
	// moving: every TWD has one version, current, and nothing retiring.
	time.Sleep(20 * time.Second)
	idleStart, err := e.snapshot()
	if err != nil {
		return s, err
	}
	select {
	case <-ctx.Done():
		return s, ctx.Err()
	case <-time.After(idle):
	}
	idleEnd, err := e.snapshot()
	if err != nil {
		return s, err
	}
	s.Idle = window(fmt.Sprintf("%d idle TWDs", total), idleStart, idleEnd, total)
	fmt.Printf("  idle: %.2f Temporal reads per TWD per minute, RSS %.0f MiB, %.2f CPU s/min\n",
		s.Idle.ReadsPerTWDMin, s.Idle.RSSMiB, s.Idle.CPUSecondsPerMin)
	return s, nil
}

// sharedRollout changes every TWD's image at once, applied as fast as the
// API server takes it (as a Helm upgrade or a GitOps sync would), and
// times the rollout.
func sharedRollout(ctx context.Context, e *benchEnv, o *observer, s *Scale, keys []types.NamespacedName, changes []change, total int) error {
	n := len(keys)
	rollStart, err := e.snapshot()
	if err != nil {
		return err
	}
	for i, k := range keys {
		if changes[i], err = setTag(ctx, e, k, "s2"); err != nil {
			return err
		}
	}
	fmt.Printf("  changed %d images in %.1fs; waiting for all to be Ready\n", n, time.Since(rollStart.at).Seconds())
	last, err := waitAllReady(ctx, o, keys, changes, 5*time.Minute+time.Duration(n)*2*time.Second)
	if err != nil {
		return err
	}
	s.RolloutSeconds = last.Sub(changes[0].at).Seconds()
	var e2e []float64
	for i, k := range keys {
		t, _ := o.readyAt(k, changes[i].generation)
		e2e = append(e2e, t.Sub(changes[i].at).Seconds())
	}
	s.RolloutEndToEnd = stats(e2e)
	if s.rolledSnap, err = e.snapshot(); err != nil {
		return err
	}
	s.rolledOut = last
	s.Rollout = window(fmt.Sprintf("shared image change of %d TWDs", n), rollStart, s.rolledSnap, total)
	fmt.Printf("  all %d rolled out %.1fs after the first change; waiting for the old versions to retire\n", n, s.RolloutSeconds)
	return nil
}

// waitAllReady waits until every key is Ready at its change's generation
// and returns when the last one was seen.
func waitAllReady(ctx context.Context, o *observer, keys []types.NamespacedName, changes []change, timeout time.Duration) (time.Time, error) {
	var last time.Time
	pending := 0
	err := waitFor(ctx, timeout, "every TWD Ready", func() bool {
		pending = 0
		for i, k := range keys {
			t, ok := o.readyAt(k, changes[i].generation)
			if !ok {
				pending++
			} else if t.After(last) {
				last = t
			}
		}
		return pending == 0
	}, func() string {
		for i, k := range keys {
			if _, ok := o.readyAt(k, changes[i].generation); !ok {
				return fmt.Sprintf("%d not Ready, e.g. %s: %s", pending, k, o.lastStatus(k))
			}
		}
		return ""
	})
	return last, err
}

// waitRetired waits until the namespace holds one Deployment per TWD and
// no TWD lists a deprecated version.
func waitRetired(ctx context.Context, e *benchEnv, ns string, n int, timeout time.Duration) error {
	seen := ""
	return waitFor(ctx, timeout, "the old versions to be retired", func() bool {
		var deps appsv1.DeploymentList
		var twds v1alpha1.TemporalWorkerDeploymentList
		if err := e.Kube.List(ctx, &deps, client.InNamespace(ns)); err != nil {
			seen = err.Error()
			return false
		}
		if err := e.Kube.List(ctx, &twds, client.InNamespace(ns)); err != nil {
			seen = err.Error()
			return false
		}
		deprecated := 0
		for _, t := range twds.Items {
			deprecated += len(t.Status.DeprecatedVersions)
		}
		seen = fmt.Sprintf("%d Deployments for %d TWDs, %d deprecated versions in status", len(deps.Items), n, deprecated)
		if len(deps.Items) == n && deprecated == 0 {
			return true
		}
		time.Sleep(time.Second) // listing is not free; a second is precise enough here
		return false
	}, func() string { return seen })
}
