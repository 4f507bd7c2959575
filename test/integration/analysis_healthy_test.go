package integration

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
)

// TestAnalysisHasNoFalsePositives rolls healthy versions out, several
// TWDs at once, through every built-in check, and checks that no
// evaluation of any check ever failed: not an abort, not even one failed
// evaluation within a failureLimit. "Healthy" is not "perfect": every
// version fails the same 5% of its Hello workflows (by a hash of the
// workflow ID, so which ones is chance), as production versions do, so a
// bound that reacted to noise would show here.
func TestAnalysisHasNoFalsePositives(t *testing.T) {
	t.Parallel()
	const twds, rollouts = 2, 3
	for i := range twds {
		t.Run(fmt.Sprintf("twd-%d", i), func(t *testing.T) {
			parallel(t)
			healthyRollouts(t, rollouts)
		})
	}
}

func healthyRollouts(t *testing.T, count int) {
	r := newRollout(env.NewTest(t), "healthy")
	baseline := corev1.EnvVar{Name: "DEMO_FAIL_SHARE", Value: "0.05"}
	twd := r.Spec("v1")
	twd.Spec.Template.Spec.Containers[0].Env = append(twd.Spec.Template.Spec.Containers[0].Env, baseline)
	twd.Spec.Rollout = v1alpha1.RolloutSpec{
		Strategy: v1alpha1.StrategyProgressive,
		Steps:    steps([]int32{30, 70}, 5*time.Second),
		Analysis: &v1alpha1.AnalysisSpec{
			Interval: &metav1.Duration{Duration: 5 * time.Second},
			Checks: []v1alpha1.AnalysisCheck{
				{Name: "failures", Kind: v1alpha1.CheckWorkflowFailureRate, MaxPercent: ptr.To[int32](25), MinSamples: 20, FailureLimit: 1},
				{Name: "vs-current", Kind: v1alpha1.CheckWorkflowFailureRate, Compare: v1alpha1.CompareCurrent, MarginPercent: ptr.To[int32](20), MinSamples: 20, FailureLimit: 1},
				{Name: "stuck", Kind: v1alpha1.CheckWorkflowTaskFailures, MaxPercent: ptr.To[int32](0), MinSamples: 10},
				{Name: "backlog", Kind: v1alpha1.CheckBacklogAge, MaxAge: &metav1.Duration{Duration: time.Minute}},
			},
		},
	}
	r.WaitCurrent(5*time.Minute, r.Create(twd))
	started := r.helloLoad(t)
	for i := 2; i <= count+1; i++ {
		build := r.SetImage(fmt.Sprintf("v%d", i))
		// Generous: at load 35-40 a rollout took 5 minutes (2 for the
		// pod to poll, 3 for Temporal to apply the routing).
		got := r.WaitCurrent(10*time.Minute, build)
		a := got.Status.Analysis
		if a == nil || a.BuildID != build || a.Aborted != "" || len(a.Checks) != 4 {
			t.Fatalf("analysis of healthy %s: %+v", build, a)
		}
		r.Logf("%s current: %s", build, a.Checks[0].Message)
	}
	for _, c := range []string{"failures", "vs-current", "stuck", "backlog"} {
		labels := map[string]string{"namespace": r.Namespace, "name": r.Name, "check": c}
		labels["result"] = string(v1alpha1.AnalysisFailed)
		if n, _ := metric(t, "rainbow_analysis_evaluations_total", labels); n != 0 {
			t.Errorf("check %s failed %g evaluations of healthy versions", c, n)
		}
		labels["result"] = string(v1alpha1.AnalysisPassed)
		if n, _ := metric(t, "rainbow_analysis_evaluations_total", labels); n < float64(count) {
			t.Errorf("check %s passed %g evaluations across %d rollouts, want at least one each", c, n, count)
		}
	}
	if n, _ := metric(t, "rainbow_analysis_aborts_total", map[string]string{"namespace": r.Namespace, "name": r.Name}); n != 0 {
		t.Errorf("%g aborts of healthy versions", n)
	}
	r.Logf("%d Hello workflows started, %d%% of each version's failing", started.Load(), 5)
}
