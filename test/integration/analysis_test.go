package integration

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/dev/demoworker"
)

// TestRolloutAnalysis runs one TWD through four rollouts judged by
// spec.rollout.analysis, with real workers taking Hello workflows the test
// starts all along: two healthy versions become current without an abort
// (no false positive); a version whose workers fail 60% of the workflows
// is aborted at the first step, routing goes back to the current version,
// and status, an Event and a metric carry the evidence; a retry judges it
// afresh (and aborts it again); a version whose checks cannot reach
// minSamples holds its first step; under dryRun a bad version is only
// reported, and becomes current.
func TestRolloutAnalysis(t *testing.T) {
	parallel(t)
	r := newRollout(env.NewTest(t), "analysis")
	twd := r.Spec("v1")
	twd.Spec.Rollout = v1alpha1.RolloutSpec{
		Strategy: v1alpha1.StrategyProgressive,
		Steps:    steps([]int32{30, 70}, 5*time.Second),
		Analysis: &v1alpha1.AnalysisSpec{
			Interval: &metav1.Duration{Duration: 5 * time.Second},
			Checks: []v1alpha1.AnalysisCheck{
				{Name: "failures", Kind: v1alpha1.CheckWorkflowFailureRate, MaxPercent: ptr.To[int32](20), MinSamples: 8},
				{Name: "backlog", Kind: v1alpha1.CheckBacklogAge, MaxAge: &metav1.Duration{Duration: time.Minute}},
			},
		},
	}
	v1 := r.Create(twd)
	r.WaitCurrent(5*time.Minute, v1)
	started := r.helloLoad(t)

	// Healthy versions: every check passes at each step, no abort.
	for _, tag := range []string{"v2", "v3"} {
		build := r.SetImage(tag)
		got := r.WaitCurrent(4*time.Minute, build)
		a := got.Status.Analysis
		if a == nil || a.BuildID != build || a.Aborted != "" || len(a.Checks) != 2 {
			t.Fatalf("analysis of healthy %s: %+v", build, a)
		}
		for _, c := range a.Checks {
			if c.Result != v1alpha1.AnalysisPassed {
				t.Fatalf("check %s of healthy %s ended %s: %s", c.Name, build, c.Result, c.Message)
			}
		}
		if _, ok := got.Annotations[v1alpha1.AnnotationAbortRollout]; ok {
			t.Fatalf("healthy %s was aborted: %s", build, describe(got))
		}
		r.Logf("%s current after its analysis passed: %s", build, a.Checks[0].Message)
	}
	v3 := r.BuildID()

	// A bad version: aborted at its first step, routing back on v3.
	r.Update(func(t *v1alpha1.TemporalWorkerDeployment) {
		c := &t.Spec.Template.Spec.Containers[0]
		c.Image = "rainbow.local/demo-worker:v4"
		c.Env = append(c.Env, corev1.EnvVar{Name: "DEMO_FAIL_SHARE", Value: "0.6"})
	})
	v4 := r.BuildID()
	got := r.waitAnalysisAbort(v4, v3, 30)
	if a := got.Annotations[v1alpha1.AnnotationAbortRollout]; a != v4 {
		t.Fatalf("annotation %s = %q, want %s (what kubectl rainbow retry removes)", v1alpha1.AnnotationAbortRollout, a, v4)
	}
	a := got.Status.Analysis
	if a == nil || a.BuildID != v4 || !strings.Contains(a.Aborted, "check failures") || !strings.Contains(a.Aborted, "since ") ||
		!strings.Contains(a.Aborted, "above maxPercent 20%") {
		t.Fatalf("status.analysis does not name the check, its values and the window: %+v", a)
	}
	if msg := findCondition(got, v1alpha1.ConditionReady).Message; !strings.Contains(msg, a.Aborted) || !strings.Contains(msg, "kubectl rainbow retry") {
		t.Fatalf("Ready message lacks the evidence or how to retry: %s", msg)
	}
	r.waitEvent(time.Minute, v1alpha1.ReasonAnalysisFailed)
	if n, _ := metric(t, "rainbow_analysis_aborts_total", map[string]string{"namespace": r.Namespace, "name": r.Name}); n < 1 {
		t.Fatalf("rainbow_analysis_aborts_total = %g, want 1", n)
	}

	// Retry (what kubectl rainbow retry does: remove the annotation): the
	// version ramps again from its first step, counted in a new window, and
	// is aborted again on evidence of its own.
	first := *a
	r.Update(func(t *v1alpha1.TemporalWorkerDeployment) { delete(t.Annotations, v1alpha1.AnnotationAbortRollout) })
	again := r.waitFor(3*time.Minute, "the retried rollout of "+v4+" aborted again", func(twd *v1alpha1.TemporalWorkerDeployment) bool {
		a := twd.Status.Analysis
		return a != nil && a.AbortedAt != nil && a.AbortedAt.After(first.AbortedAt.Time) && twd.Annotations[v1alpha1.AnnotationAbortRollout] == v4
	})
	// Status keeps whole seconds: the new window may start in the second of the first abort.
	if w := again.Status.Analysis.WindowStart; w == nil || w.Before(first.AbortedAt) || !w.After(first.WindowStart.Time) {
		t.Fatalf("the retry was judged in window %v, not a new one starting at or after the first abort (%s)", w, first.AbortedAt)
	}

	// Too few samples: the first step holds past its pause, and says why.
	r.Update(func(t *v1alpha1.TemporalWorkerDeployment) {
		c := &t.Spec.Template.Spec.Containers[0]
		c.Image = "rainbow.local/demo-worker:v5"
		c.Env = c.Env[:len(c.Env)-1]
		t.Spec.Rollout.Analysis.Checks[0].MinSamples = 1_000_000
	})
	v5 := r.BuildID()
	held := r.waitFor(3*time.Minute, v5+" held at its first step, inconclusive", func(twd *v1alpha1.TemporalWorkerDeployment) bool {
		a := twd.Status.Analysis
		return a != nil && a.BuildID == v5 && len(a.Checks) > 0 && a.Checks[0].Result == v1alpha1.AnalysisInconclusive &&
			strings.Contains(findCondition(twd, v1alpha1.ConditionReady).Message, "holding the 30% ramp")
	})
	if msg := held.Status.Analysis.Checks[0].Message; !strings.Contains(msg, "minSamples (1000000)") {
		t.Fatalf("the inconclusive check does not say why: %s", msg)
	}
	// Several evaluations later it still holds the 30% step.
	evaluated := held.Status.Analysis.EvaluatedAt.Time
	r.waitFor(time.Minute, "two more evaluations of "+v5, func(twd *v1alpha1.TemporalWorkerDeployment) bool {
		a := twd.Status.Analysis
		return a != nil && a.EvaluatedAt != nil && a.EvaluatedAt.Time.After(evaluated.Add(8*time.Second))
	})
	if cur, ramping, pct := r.routing(); cur != v3 || ramping != v5 || pct != 30 {
		t.Fatalf("routing while inconclusive: current %s, %s ramping %g%%; want %s current and %s held at 30%%", cur, ramping, pct, v3, v5)
	}

	// Dry run: a bad version is reported, not aborted, and becomes current.
	r.Update(func(t *v1alpha1.TemporalWorkerDeployment) {
		c := &t.Spec.Template.Spec.Containers[0]
		c.Image = "rainbow.local/demo-worker:v6"
		c.Env = append(c.Env, corev1.EnvVar{Name: "DEMO_FAIL_SHARE", Value: "0.6"})
		t.Spec.Rollout.Analysis.Checks[0].MinSamples = 8
		t.Spec.Rollout.Analysis.DryRun = true
	})
	v6 := r.BuildID()
	done := r.WaitCurrent(4*time.Minute, v6)
	if done.Annotations[v1alpha1.AnnotationAbortRollout] == v6 { // it still names v4, aborted above
		t.Fatalf("a dry run aborted %s: %s", v6, describe(done))
	}
	if a := done.Status.Analysis; a == nil || a.BuildID != v6 || a.Aborted != "" {
		t.Fatalf("the dry run's report of %s: %+v, want its checks and no abort", v6, a)
	}
	r.Eventually(time.Minute, "an Event saying the dry run would have aborted "+v6, func() (bool, string) {
		list, err := r.Env.Clients.EventsV1().Events(r.Namespace).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, e := range list.Items {
			if e.Regarding.Name == r.Name && e.Reason == v1alpha1.ReasonAnalysisFailed && strings.Contains(e.Note, "dry run") && strings.Contains(e.Note, v6) {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d Events", len(list.Items))
	})
	r.Logf("%d Hello workflows started", started.Load())
}

// waitAnalysisAbort waits until the analysis aborted the rollout of
// build, which must not have ramped past its first step, then checks that
// routing went back to current alone and that build kept its workers for
// the workflows pinned to it.
func (r *rollout) waitAnalysisAbort(build, current string, firstStep int32) *v1alpha1.TemporalWorkerDeployment {
	r.Helper()
	var sawRamp atomic.Int32
	got := r.waitFor(4*time.Minute, "the rollout of "+build+" aborted by the analysis", func(twd *v1alpha1.TemporalWorkerDeployment) bool {
		if tv := twd.Status.TargetVersion; tv != nil && tv.BuildID == build && tv.RampPercentage != nil {
			sawRamp.Store(*tv.RampPercentage)
		}
		return hasCondition(twd, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonRolloutAborted)
	})
	if p := sawRamp.Load(); p != 0 && p != firstStep {
		r.Fatalf("%s ramped %d%% before the abort; its faults show at the first step (%d%%)", build, p, firstStep)
	}
	r.Eventually(time.Minute, "routing back on "+current+" alone", func() (bool, string) {
		cur, ramping, _ := r.routing()
		return cur == current && ramping == "", fmt.Sprintf("current %s, ramping %q", cur, ramping)
	})
	if d := r.deployment(build); d == nil || d.Spec.Replicas == nil || *d.Spec.Replicas == 0 {
		r.Fatalf("the aborted version's Deployment was scaled down or deleted: %v", d)
	}
	return got
}

// helloLoad starts about ten Hello workflows a second until the test ends,
// so that the analysis has workflows to count on each version.
func (r *rollout) helloLoad(t *testing.T) *atomic.Int64 {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	var n atomic.Int64
	go func() {
		defer close(done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			id := fmt.Sprintf("%s-load-%d", r.Name, time.Now().UnixNano())
			if _, err := r.Env.Temporal.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: r.TaskQueue}, demoworker.HelloWorkflow, "load"); err == nil {
				n.Add(1)
			}
		}
	}()
	return &n
}
