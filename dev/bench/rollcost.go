package main

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
)

var (
	lateRollouts = flag.Int("late-rollouts", envInt("BENCH_LATE_ROLLOUTS", 6),
		"AllAtOnce rollouts whose workers poll 3 s after their Deployment is available (env BENCH_LATE_ROLLOUTS); 0 skips them")
	minReadyRollouts = flag.Int("min-ready-rollouts", envInt("BENCH_MIN_READY_ROLLOUTS", 6),
		"AllAtOnce rollouts of a TWD with minReadySeconds 1, so that its Deployment becomes available after Temporal's busy second "+
			"that follows a registration (env BENCH_MIN_READY_ROLLOUTS); 0 skips them")
	retireRollouts = flag.Int("retire-rollouts", envInt("BENCH_RETIRE_ROLLOUTS", 3),
		"AllAtOnce rollouts each followed to the old version's deletion, to count Temporal calls per rollout (env BENCH_RETIRE_ROLLOUTS); 0 skips them")
)

// latePollDelay: the late workers poll this long after they start, well
// after the node agent marks their container ready (1 s).
const latePollDelay = 3 * time.Second

// latePollers rolls out an AllAtOnce TWD whose workers poll latePollDelay
// after they start, so that their first poll, not the Deployment's
// availability, is the last event before the version can be current.
func latePollers(ctx context.Context, e *benchEnv, o *observer, ns string, n int) ([]Rollout, error) {
	twd := newTWD(e, ns, "late", "l0", v1alpha1.RolloutSpec{Strategy: v1alpha1.StrategyAllAtOnce})
	c := &twd.Spec.Template.Spec.Containers[0]
	c.Env = append(c.Env, corev1.EnvVar{Name: "DEMO_POLL_DELAY", Value: latePollDelay.String()})
	return rolloutsOf(ctx, e, o, twd, "l", n, func(i int, r Rollout) {
		fmt.Printf("  late pollers, rollout %d: reaction %6.3fs (after %s; first poll %.2fs after available), end to end %5.2fs\n",
			i, r.ReactionSeconds, r.StartedBy, r.Registered.Sub(r.Available).Seconds(), r.EndToEndSeconds)
	})
}

// minReady rolls out an AllAtOnce TWD whose Deployments count a pod as
// available one second after it is ready (minReadySeconds 1): about two
// seconds after the version registers rather than one, past the time in
// which Temporal answers a new version's describe late (the floor phase).
func minReady(ctx context.Context, e *benchEnv, o *observer, ns string, n int) ([]Rollout, error) {
	twd := newTWD(e, ns, "minready", "m0", v1alpha1.RolloutSpec{Strategy: v1alpha1.StrategyAllAtOnce})
	twd.Spec.MinReadySeconds = 1
	return rolloutsOf(ctx, e, o, twd, "m", n, func(i int, r Rollout) {
		fmt.Printf("  minReadySeconds 1, rollout %d: reaction %6.3fs (after %s; available %.2fs after registered), end to end %5.2fs\n",
			i, r.ReactionSeconds, r.StartedBy, r.Available.Sub(r.Registered).Seconds(), r.EndToEndSeconds)
	})
}

// rolloutsOf creates twd (a warm-up, not counted), then rolls it out n
// times to the image tags prefix1..prefixN, one after the other, printing
// each with show.
func rolloutsOf(ctx context.Context, e *benchEnv, o *observer, twd *v1alpha1.TemporalWorkerDeployment, prefix string, n int,
	show func(int, Rollout)) ([]Rollout, error) {
	key := types.NamespacedName{Namespace: twd.Namespace, Name: twd.Name}
	if _, err := measureRollout(ctx, e, o, key, func() (change, error) { return create(ctx, e, twd) }); err != nil {
		return nil, fmt.Errorf("%s, first version: %w", key, err)
	}
	var out []Rollout
	for i := 1; i <= n; i++ {
		r, err := measureRollout(ctx, e, o, key, func() (change, error) { return setTag(ctx, e, key, fmt.Sprintf("%s%d", prefix, i)) })
		if err != nil {
			return nil, fmt.Errorf("%s, rollout %d: %w", key, i, err)
		}
		out = append(out, r)
		show(i, r)
		time.Sleep(time.Second)
	}
	return out, nil
}

// Retirement is one AllAtOnce rollout followed until the version it
// replaced is deleted from Temporal: every call a rollout costs.
type Retirement struct {
	Build string `json:"build"`
	// Seconds from the spec change to the old version gone.
	Seconds float64 `json:"seconds"`
	// ControllerRPCs are the controller's Temporal calls over it, by method.
	ControllerRPCs map[string]float64 `json:"controllerRPCs"`
}

// retirements rolls the AllAtOnce TWD out n more times, each time waiting
// until the old version has left Temporal (and the TWD's status) before
// the next, and counts the controller's calls for each.
func retirements(ctx context.Context, e *benchEnv, o *observer, ns string, n int) ([]Retirement, error) {
	key := types.NamespacedName{Namespace: ns, Name: "aao"}
	var out []Retirement
	for i := 1; i <= n; i++ {
		// Start from a TWD with nothing left to retire.
		if err := waitOldGone(ctx, e, key, 3*time.Minute); err != nil {
			return nil, err
		}
		before, err := fetchMetrics(e.metricsURL)
		if err != nil {
			return nil, err
		}
		ch, err := setTag(ctx, e, key, fmt.Sprintf("t%d", i))
		if err != nil {
			return nil, err
		}
		if err := waitReady(ctx, o, key, ch, 3*time.Minute); err != nil {
			return nil, err
		}
		if err := waitOldGone(ctx, e, key, 3*time.Minute); err != nil {
			return nil, err
		}
		done := time.Now()
		after, err := fetchMetrics(e.metricsURL)
		if err != nil {
			return nil, err
		}
		r := Retirement{Build: ch.build, Seconds: done.Sub(ch.at).Seconds(), ControllerRPCs: rpcDelta(before, after)}
		out = append(out, r)
		fmt.Printf("  rollout and retirement %d: %.1fs, %.0f Temporal calls (%s)\n", i, r.Seconds, sum(r.ControllerRPCs),
			joinSorted(r.ControllerRPCs, func(m string, n float64) string { return fmt.Sprintf("%s %.0f", m, n) }))
	}
	return out, nil
}

// waitOldGone waits until the TWD's status holds no version but the
// target, and Temporal only the target.
func waitOldGone(ctx context.Context, e *benchEnv, key types.NamespacedName, timeout time.Duration) error {
	var last string
	return waitFor(ctx, timeout, fmt.Sprintf("%s with its old versions retired", key), func() bool {
		var twd v1alpha1.TemporalWorkerDeployment
		if err := e.Kube.Get(ctx, key, &twd); err != nil || twd.Status.TargetVersion == nil {
			return false
		}
		last = "deprecated versions in status:"
		for _, v := range twd.Status.DeprecatedVersions {
			last += fmt.Sprintf(" %s (%s, Deployment %q)", v.BuildID, v.Status, v.Deployment)
		}
		if len(twd.Status.DeprecatedVersions) > 0 {
			return false
		}
		resp, err := describe(ctx, e, temporalName(key))
		if err != nil {
			return false
		}
		var builds []string
		for _, v := range resp.GetWorkerDeploymentInfo().GetVersionSummaries() {
			builds = append(builds, v.GetDeploymentVersion().GetBuildId())
		}
		last = fmt.Sprintf("Temporal has versions %v", builds)
		return slices.Equal(builds, []string{twd.Status.TargetVersion.BuildID})
	}, func() string { return last })
}

func sum(m map[string]float64) float64 {
	var s float64
	for _, v := range m {
		s += v
	}
	return s
}

// reactionRows are the table's rows for the late pollers and the calls of
// a whole rollout.
func reactionRows(res Result) []row {
	var rows []row
	if len(res.LatePollers) > 0 {
		var reaction, shown []float64
		for _, r := range res.LatePollers {
			reaction = append(reaction, r.ReactionSeconds)
			shown = append(shown, r.Ready.Sub(r.Current).Seconds())
		}
		st := stats(reaction)
		rows = append(rows, row{Figure: "Reaction to workers polling after the Deployment is available, median / p95",
			Value: fmt.Sprintf("%s / %s (n=%d); status shows it %s / %s after it was current", ms(st.Median), ms(st.P95), st.N,
				ms(stats(shown).Median), ms(stats(shown).P95)),
			Target: "median <= 300 ms", Verdict: verdict(st.N > 0 && st.Median <= 0.3),
			How: fmt.Sprintf("current_version_changed_time minus the version's create time in Temporal (its first poll), for an AllAtOnce TWD whose "+
				"demo workers wait %s before they poll (DEMO_POLL_DELAY), so their Deployment is available about 2 s earlier.", latePollDelay)})
	}
	if len(res.MinReady) > 0 {
		var reaction, shown []float64
		for _, r := range res.MinReady {
			reaction = append(reaction, r.ReactionSeconds)
			shown = append(shown, r.Ready.Sub(r.Current).Seconds())
		}
		st := stats(reaction)
		rows = append(rows, row{Figure: "AllAtOnce reaction, Deployment available 2 s after registration (minReadySeconds 1), median / p95",
			Value: fmt.Sprintf("%s / %s (n=%d); status shows it %s / %s after it was current", ms(st.Median), ms(st.P95), st.N,
				ms(stats(shown).Median), ms(stats(shown).P95)),
			Target: "median <= 150 ms, p95 <= 500 ms", Verdict: verdict(st.N > 0 && st.Median <= 0.15 && st.P95 <= 0.5),
			How: "as the AllAtOnce reaction, for a TWD with minReadySeconds 1: its Deployment becomes available after the second in which " +
				"Temporal answers a new version's describe late (see the Temporal rows), as it does where readiness probes take longer than a second."})
	}
	if len(res.Retirements) > 0 {
		total := map[string]float64{}
		var secs []float64
		for _, r := range res.Retirements {
			for m, n := range r.ControllerRPCs {
				total[m] += n
			}
			secs = append(secs, r.Seconds)
		}
		k := float64(len(res.Retirements))
		per := sum(total) / k
		rows = append(rows, row{Figure: "Temporal calls per AllAtOnce rollout, old version's retirement included",
			Value: fmt.Sprintf("%.1f: %s (n=%d; rollout to deletion median %.0f s)", per,
				joinSorted(total, func(m string, n float64) string { return fmt.Sprintf("%s %.1f", m, n/k) }), len(res.Retirements), stats(secs).Median),
			Target: "<= 13 (the incumbent's)", Verdict: verdict(per <= 13),
			How: "the controller's rainbow_temporal_rpcs_total from the spec change until the old version is deleted from Temporal and gone from status " +
				"(sunset delays 2 s and 3 s, the dev server's 10 s poller history), one rollout at a time."})
	}
	return rows
}

// statusRow: how soon after Temporal made the version current its status
// said so.
func statusRow(seen []float64) row {
	st := stats(seen)
	return row{Figure: "Status showing the AllAtOnce change, median / p95", Value: fmt.Sprintf("%s / %s after it was current (n=%d)", ms(st.Median), ms(st.P95), st.N),
		Target: "median <= 100 ms", Verdict: verdict(st.N > 0 && st.Median <= 0.1),
		How: "the benchmark's watch first seeing Ready=True with the version current, minus Temporal's current_version_changed_time."}
}
