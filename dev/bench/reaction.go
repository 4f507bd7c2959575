package main

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
)

// Rollout is one AllAtOnce rollout of one TWD, every time on the local
// clock (Kubernetes events as the benchmark's watches saw them, Temporal's
// own timestamps as the server recorded them).
type Rollout struct {
	Build             string    `json:"build"`
	SpecChanged       time.Time `json:"specChanged"`       // the update returned
	DeploymentCreated time.Time `json:"deploymentCreated"` // watch
	PodCreated        time.Time `json:"podCreated"`        // watch
	PodRunning        time.Time `json:"podRunning"`        // watch: container running
	// Registered is the version's create time in Temporal: its first
	// worker's first poll registered it.
	Registered time.Time `json:"registered"`
	Available  time.Time `json:"available"` // watch: the Deployment available as the controller defines it
	// AvailableCondition is the Available condition's lastTransitionTime
	// (whole seconds), a cross-check of Available.
	AvailableCondition time.Time `json:"availableCondition"`
	Current            time.Time `json:"current"` // Temporal: routing current_version_changed_time
	Ready              time.Time `json:"ready"`   // watch: Ready=True for this generation

	// ReactionSeconds is Current - max(Available, Registered).
	ReactionSeconds float64 `json:"reactionSeconds"`
	// StartedBy says which of Available and Registered came last.
	StartedBy string `json:"startedBy"`
	// EndToEndSeconds is Ready - SpecChanged.
	EndToEndSeconds float64 `json:"endToEndSeconds"`
	// FloorSeconds is Registered - PodCreated: the worker starting and
	// polling, which no controller can avoid.
	FloorSeconds float64 `json:"floorSeconds"`
	// ControllerRPCs are the controller's Temporal calls from SpecChanged
	// to Ready, by method.
	ControllerRPCs map[string]float64 `json:"controllerRPCs"`
	// ControllerRPCErrors are those of them that failed, by method and code.
	ControllerRPCErrors map[string]float64 `json:"controllerRPCErrors,omitempty"`
	// Progress is the Ready condition's reasons and messages on the way.
	Progress []progressSeen `json:"progress"`
}

// allAtOnce creates one AllAtOnce TWD and rolls it out n times in a row,
// each time once the previous rollout is Ready. The creation is a warm-up
// (the controller dials Temporal then) and is not counted.
func allAtOnce(ctx context.Context, e *benchEnv, o *observer, ns string, n int) ([]Rollout, Window, error) {
	key := types.NamespacedName{Namespace: ns, Name: "aao"}
	twd := newTWD(e, ns, key.Name, "r0", v1alpha1.RolloutSpec{Strategy: v1alpha1.StrategyAllAtOnce})
	if _, err := measureRollout(ctx, e, o, key, func() (change, error) { return create(ctx, e, twd) }); err != nil {
		return nil, Window{}, fmt.Errorf("first version: %w", err)
	}
	var out []Rollout
	first, err := e.snapshot()
	if err != nil {
		return nil, Window{}, err
	}
	busy := 0.0 // seconds spent rolling out, for the per-minute rate
	rpcs := map[string]float64{}
	for i := 1; i <= n; i++ {
		tag := fmt.Sprintf("r%d", i)
		r, err := measureRollout(ctx, e, o, key, func() (change, error) { return setTag(ctx, e, key, tag) })
		if err != nil {
			return nil, Window{}, fmt.Errorf("rollout %d: %w", i, err)
		}
		out = append(out, r)
		busy += r.Ready.Sub(r.SpecChanged).Seconds()
		for m, c := range r.ControllerRPCs {
			rpcs[m] += c
		}
		fmt.Printf("  AllAtOnce rollout %2d: reaction %6.3fs (after %s), end to end %5.2fs, floor %5.2fs\n",
			i, r.ReactionSeconds, r.StartedBy, r.EndToEndSeconds, r.FloorSeconds)
		time.Sleep(time.Second)
	}
	last, err := e.snapshot()
	if err != nil {
		return nil, Window{}, err
	}
	// The whole phase for the server cross-check; the per-minute rates
	// cover only the time spent rolling out (spec change to Ready).
	w := window("single TWD, rollouts back to back", first, last, 1)
	w.Rollouts = n
	w.InRollouts = rpcs
	if reads, wdReads, writes := byKind(rpcs); busy > 0 {
		w.ReadsPerTWDMin, w.WorkerDeploymentReadsPerTM, w.WritesPerTWDMin = reads/busy*60, wdReads/busy*60, writes/busy*60
	}
	return out, w, nil
}

// measureRollout applies a spec change and times the rollout it starts.
func measureRollout(ctx context.Context, e *benchEnv, o *observer, key types.NamespacedName, apply func() (change, error)) (Rollout, error) {
	before, err := fetchMetrics(e.metricsURL)
	if err != nil {
		return Rollout{}, err
	}
	ch, err := apply()
	if err != nil {
		return Rollout{}, err
	}
	// The benchmark does not ask Temporal about the version's pollers while
	// the rollout runs: the root partition caches DescribeTaskQueue's
	// answer per version for 5 s (matching.TaskQueueInfoByBuildIdTTL), so
	// asking before the workers poll would hide them from the controller.
	r := Rollout{Build: ch.build, SpecChanged: ch.at}
	var ready time.Time
	err = waitFor(ctx, 3*time.Minute, fmt.Sprintf("%s Ready with version %s current", key, ch.build), func() bool {
		var ok bool
		ready, ok = o.readyAt(key, ch.generation)
		return ok
	}, func() string { return o.lastStatus(key) })
	if err != nil {
		return r, err
	}
	r.Ready = ready
	r.Progress = o.progressSince(key, ch.at)
	after, err := fetchMetrics(e.metricsURL)
	if err != nil {
		return r, err
	}
	r.ControllerRPCErrors = rpcErrors(before, after)
	r.ControllerRPCs = rpcDelta(before, after)
	resp, err := describe(ctx, e, temporalName(key))
	if err != nil {
		return r, err
	}
	rc := resp.GetWorkerDeploymentInfo().GetRoutingConfig()
	if got := rc.GetCurrentDeploymentVersion().GetBuildId(); got != ch.build {
		return r, fmt.Errorf("Ready=True but Temporal's current version is %q, not %s", got, ch.build)
	}
	r.Current = rc.GetCurrentVersionChangedTime().AsTime()
	var ok bool
	if r.Registered, ok = versionCreated(resp, ch.build); !ok {
		return r, fmt.Errorf("Temporal does not report when version %s was created", ch.build)
	}
	seen := o.seen(key.Namespace, key.Name, ch.build)
	r.DeploymentCreated, r.PodCreated, r.PodRunning = seen.deploymentCreated, seen.podCreated, seen.podRunning
	r.Available, r.AvailableCondition = seen.available, seen.availableTransition
	if r.Available.IsZero() || r.PodCreated.IsZero() {
		return r, fmt.Errorf("the watches missed the pod or the availability of version %s", ch.build)
	}
	start, by := r.Available, "available"
	if r.Registered.After(start) {
		start, by = r.Registered, "registered"
	}
	r.ReactionSeconds = r.Current.Sub(start).Seconds()
	r.StartedBy = by
	r.EndToEndSeconds = r.Ready.Sub(r.SpecChanged).Seconds()
	r.FloorSeconds = r.Registered.Sub(r.PodCreated).Seconds()
	return r, nil
}

// rpcDelta is the controller's Temporal calls between two scrapes, by method.
func rpcDelta(before, after scrape) map[string]float64 {
	out := map[string]float64{}
	b := before.by(rpcMetric, "method", nil)
	for m, n := range after.by(rpcMetric, "method", nil) {
		if d := n - b[m]; d != 0 {
			out[m] = d
		}
	}
	return out
}

// StepReaction is one Progressive step ending: the pause of the ramp at
// From percent ended at PauseEnded (Temporal's ramp change time plus the
// pause), and the next routing change (To percent, or 100 for current) was
// recorded by Temporal at Next.
type StepReaction struct {
	Build           string    `json:"build"`
	From            int32     `json:"fromPercent"`
	To              int32     `json:"toPercent"`
	PauseEnded      time.Time `json:"pauseEnded"`
	Next            time.Time `json:"next"`
	ReactionSeconds float64   `json:"reactionSeconds"`
}

// progressive rolls a Progressive TWD out n times through steps, each held
// for pause. It reads Temporal's timestamps once per step, right after the
// controller's status shows the step: polling DescribeWorkerDeployment
// would compete with the controller's own reads of the same worker
// deployment workflow.
func progressive(ctx context.Context, e *benchEnv, o *observer, ns string, n int, steps []int32, pause time.Duration) ([]StepReaction, []progressSeen, Window, error) {
	key := types.NamespacedName{Namespace: ns, Name: "prog"}
	var spec []v1alpha1.RolloutStep
	for _, p := range steps {
		spec = append(spec, v1alpha1.RolloutStep{RampPercentage: p, PauseDuration: metav1.Duration{Duration: pause}})
	}
	twd := newTWD(e, ns, key.Name, "p0", v1alpha1.RolloutSpec{Strategy: v1alpha1.StrategyProgressive, Steps: spec})
	ch, err := create(ctx, e, twd)
	if err != nil {
		return nil, nil, Window{}, err
	}
	if err := waitReady(ctx, o, key, ch, 3*time.Minute); err != nil {
		return nil, nil, Window{}, err
	}
	since := time.Now()
	first, err := e.snapshot()
	if err != nil {
		return nil, nil, Window{}, err
	}
	var out []StepReaction
	for i := 1; i <= n; i++ {
		ch, err := setTag(ctx, e, key, fmt.Sprintf("p%d", i))
		if err != nil {
			return nil, nil, Window{}, err
		}
		rs, err := stepTimes(ctx, e, o, key, ch, steps, pause)
		if err != nil {
			return nil, nil, Window{}, fmt.Errorf("progressive rollout %d: %w", i, err)
		}
		for _, sr := range rs {
			fmt.Printf("  Progressive rollout %d: pause at %2d%% ended, %3d%% set %6.3fs later\n", i, sr.From, sr.To, sr.ReactionSeconds)
		}
		out = append(out, rs...)
		time.Sleep(time.Second)
	}
	last, err := e.snapshot()
	if err != nil {
		return nil, nil, Window{}, err
	}
	w := window("Progressive rollouts of one TWD", first, last, 2)
	w.Rollouts = n
	return out, o.progressSince(key, since), w, nil
}

// rampChangedAt reads when Temporal set build's ramp to pct. The routing
// config is read from the worker deployment's workflow and may lag the
// write a moment: it is read again until it shows pct or has moved past it
// (then the step cannot be timed and the zero time is returned).
func rampChangedAt(ctx context.Context, e *benchEnv, key types.NamespacedName, build string, pct int32) (time.Time, error) {
	for i := 0; i < 40; i++ {
		resp, err := describe(ctx, e, temporalName(key))
		if err != nil {
			return time.Time{}, err
		}
		rc := resp.GetWorkerDeploymentInfo().GetRoutingConfig()
		ramping := rc.GetRampingDeploymentVersion().GetBuildId() == build
		got := int32(rc.GetRampingVersionPercentage() + 0.5)
		switch {
		case ramping && got == pct:
			return rc.GetRampingVersionPercentageChangedTime().AsTime(), nil
		case rc.GetCurrentDeploymentVersion().GetBuildId() == build || (ramping && got > pct):
			return time.Time{}, nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return time.Time{}, nil
}

func waitReady(ctx context.Context, o *observer, key types.NamespacedName, ch change, timeout time.Duration) error {
	return waitFor(ctx, timeout, fmt.Sprintf("%s Ready with version %s current", key, ch.build),
		func() bool { _, ok := o.readyAt(key, ch.generation); return ok },
		func() string { return o.lastStatus(key) })
}

// stepTimes follows one Progressive rollout to Ready and returns the
// reaction at the end of each step.
func stepTimes(ctx context.Context, e *benchEnv, o *observer, key types.NamespacedName, ch change, steps []int32, pause time.Duration) ([]StepReaction, error) {
	changed := map[int32]time.Time{}
	deadline := time.Now().Add(3 * time.Minute)
	for {
		if _, ok := o.readyAt(key, ch.generation); ok {
			break
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("version %s not Ready after 3m; ramps seen %v; %s", ch.build, changed, o.lastStatus(key))
		}
		build, pct := o.target(key)
		if _, seen := changed[pct]; build != ch.build || pct == 0 || seen {
			time.Sleep(10 * time.Millisecond)
			continue
		}
		// The status shows a new ramp: read when Temporal recorded it.
		at, err := rampChangedAt(ctx, e, key, ch.build, pct)
		if err != nil {
			return nil, err
		}
		changed[pct] = at
	}
	resp, err := describe(ctx, e, temporalName(key))
	if err != nil {
		return nil, err
	}
	rc := resp.GetWorkerDeploymentInfo().GetRoutingConfig()
	if rc.GetCurrentDeploymentVersion().GetBuildId() != ch.build {
		return nil, fmt.Errorf("Ready=True but Temporal's current version is %q, not %s", rc.GetCurrentDeploymentVersion().GetBuildId(), ch.build)
	}
	current := rc.GetCurrentVersionChangedTime().AsTime()
	var out []StepReaction
	for s, p := range steps {
		start := changed[p]
		next, to := current, int32(100)
		if s+1 < len(steps) {
			next, to = changed[steps[s+1]], steps[s+1]
		}
		if start.IsZero() || next.IsZero() {
			fmt.Printf("  (the %d%% step of version %s or the one after it moved on before it was read: not counted)\n", p, ch.build)
			continue
		}
		sr := StepReaction{Build: ch.build, From: p, To: to, PauseEnded: start.Add(pause), Next: next}
		sr.ReactionSeconds = sr.Next.Sub(sr.PauseEnded).Seconds()
		out = append(out, sr)
	}
	return out, nil
}
