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

// Scale is one step of the scale phase: the fleet grown to N TWDs, all of
// them rolled out at once, their old versions retired, then left idle.
type Scale struct {
	N int `json:"n"`
	// Added is how many TWDs this step created (the fleet grows step by
	// step, so the earlier steps' TWDs are still there).
	Added int `json:"added"`
	// BaselineRSSMiB is the controller's RSS before this step's TWDs existed.
	BaselineRSSMiB float64 `json:"baselineRSSMiB"`
	// CreateSeconds: first create to the last new TWD Ready.
	CreateSeconds float64 `json:"createSeconds"`
	Create        Window  `json:"create"`
	Idle          Window  `json:"idle"`
	// RolloutSeconds: first spec change of the shared image change to the
	// last TWD Ready with its new version current.
	RolloutSeconds float64 `json:"rolloutSeconds"`
	// Per-TWD spec change to Ready during the shared rollout.
	RolloutEndToEnd Stats `json:"rolloutEndToEnd"`
	// RolloutStages splits each TWD's shared rollout at what the watches
	// saw: spec change -> Deployment created (the controller's queue and
	// reconcile), Deployment created -> available (Kubernetes, the worker
	// starting), available -> Ready seen (the controller and Temporal).
	RolloutStages map[string]Stats `json:"rolloutStages,omitempty"`
	Rollout       Window           `json:"rollout"`
	// RetireSeconds: from the last Ready until every old version's
	// Deployment is deleted and status lists no deprecated version, in the
	// scale namespace and the earlier phases' one.
	RetireSeconds float64 `json:"retireSeconds"`
	Retire        Window  `json:"retire"`
	// The shared rollout's end, where the retirement is timed from.
	rolledOut  time.Time
	rolledSnap snapshot
}

// The stages of RolloutStages, in order.
const (
	stageCreated   = "spec change -> Deployment created"
	stageAvailable = "Deployment created -> available"
	stageReady     = "available -> Ready seen"
)

// scale grows the fleet in ns from `from` to `to` TWDs, each with one
// running version; changes the images of all `to` at once (step numbers
// the tags); waits for the old versions to retire; then measures the
// controller while nothing moves. others is the number of TWDs in
// otherNamespace, which exist from earlier phases.
func scale(ctx context.Context, e *benchEnv, o *observer, ns string, from, to, step int, otherNamespace string, others int, idle time.Duration, rollout bool) (Scale, error) {
	s := Scale{N: to, Added: to - from}
	total := to + others
	if from == 0 {
		if err := createNamespace(ctx, e, ns); err != nil {
			return s, err
		}
	}
	keys := make([]types.NamespacedName, to)
	for i := range keys {
		keys[i] = types.NamespacedName{Namespace: ns, Name: fmt.Sprintf("w%04d", i)}
	}
	start, err := e.snapshot()
	if err != nil {
		return s, err
	}
	s.BaselineRSSMiB = start.proc.RSSMiB
	changes := make([]change, to)
	for i := from; i < to; i++ {
		twd := newTWD(e, ns, keys[i].Name, fmt.Sprintf("a%d", step), v1alpha1.RolloutSpec{Strategy: v1alpha1.StrategyAllAtOnce})
		if changes[i], err = create(ctx, e, twd); err != nil {
			return s, err
		}
	}
	fmt.Printf("  created %d TWDs in %.1fs; waiting for all to be Ready\n", to-from, time.Since(start.at).Seconds())
	last, err := waitAllReady(ctx, o, keys[from:], changes[from:], generous(to-from))
	if err != nil {
		return s, err
	}
	s.CreateSeconds = last.Sub(changes[from].at).Seconds()
	created, err := e.snapshot()
	if err != nil {
		return s, err
	}
	s.Create = window(fmt.Sprintf("create %d TWDs", to-from), start, created, total)
	fmt.Printf("  all %d Ready %.1fs after the first create\n", to-from, s.CreateSeconds)

	if rollout {
		if err := sharedRollout(ctx, e, o, &s, keys, fmt.Sprintf("b%d", step), total); err != nil {
			return s, err
		}
	}
	// Both namespaces: the earlier phases' old versions too.
	before := time.Now()
	for ns, count := range map[string]int{ns: to, otherNamespace: others} {
		if err := waitRetired(ctx, e, ns, count, generous(count)); err != nil {
			return s, err
		}
	}
	if rollout {
		retired, err := e.snapshot()
		if err != nil {
			return s, err
		}
		s.RetireSeconds = retired.at.Sub(s.rolledOut).Seconds()
		s.Retire = window(fmt.Sprintf("retire %d old versions", to), s.rolledSnap, retired, total)
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

// sharedRollout changes every TWD's image to tag at once, applied as fast
// as the API server takes it (as a Helm upgrade or a GitOps sync would),
// and times the rollout.
func sharedRollout(ctx context.Context, e *benchEnv, o *observer, s *Scale, keys []types.NamespacedName, tag string, total int) error {
	n := len(keys)
	rollStart, err := e.snapshot()
	if err != nil {
		return err
	}
	changes := make([]change, n)
	for i, k := range keys {
		if changes[i], err = setTag(ctx, e, k, tag); err != nil {
			return err
		}
	}
	fmt.Printf("  changed %d images in %.1fs; waiting for all to be Ready\n", n, time.Since(rollStart.at).Seconds())
	last, err := waitAllReady(ctx, o, keys, changes, generous(n))
	if err != nil {
		return err
	}
	s.RolloutSeconds = last.Sub(changes[0].at).Seconds()
	var e2e []float64
	stages := map[string][]float64{}
	for i, k := range keys {
		t, _ := o.readyAt(k, changes[i].generation)
		e2e = append(e2e, t.Sub(changes[i].at).Seconds())
		v := o.seen(k.Namespace, k.Name, changes[i].build)
		if v.deploymentCreated.IsZero() || v.available.IsZero() {
			continue // the watch missed it; the stage figures say how many they hold
		}
		stages[stageCreated] = append(stages[stageCreated], v.deploymentCreated.Sub(changes[i].at).Seconds())
		stages[stageAvailable] = append(stages[stageAvailable], v.available.Sub(v.deploymentCreated).Seconds())
		stages[stageReady] = append(stages[stageReady], t.Sub(v.available).Seconds())
	}
	s.RolloutEndToEnd = stats(e2e)
	s.RolloutStages = map[string]Stats{}
	for k, xs := range stages {
		s.RolloutStages[k] = stats(xs)
	}
	if s.rolledSnap, err = e.snapshot(); err != nil {
		return err
	}
	s.rolledOut = last
	s.Rollout = window(fmt.Sprintf("shared image change of %d TWDs", n), rollStart, s.rolledSnap, total)
	fmt.Printf("  all %d rolled out %.1fs after the first change (each: median %.1fs; %s); Temporal calls in flight: %.0f cuts, limit %.1f at the end; waiting for the old versions to retire\n",
		n, s.RolloutSeconds, s.RolloutEndToEnd.Median, stageMedians(s.RolloutStages), s.Rollout.InFlightCuts, s.Rollout.InFlightLimit)
	return nil
}

// stageMedians is the rollout stages' medians, in order.
func stageMedians(st map[string]Stats) string {
	out := ""
	for i, k := range []string{stageCreated, stageAvailable, stageReady} {
		if i > 0 {
			out += "; "
		}
		out += fmt.Sprintf("%s %s", k, secs(st[k].Median))
	}
	return out
}

// generous bounds a wait for n TWDs: on a shared 2-core machine creating
// 40 at once was seen to take 4.5 minutes.
func generous(n int) time.Duration { return 10*time.Minute + time.Duration(n)*3*time.Second }

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
