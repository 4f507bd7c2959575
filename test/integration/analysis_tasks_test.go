package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/internal/temporal"
)

// TestRolloutAnalysisWorkflowTasks: a WorkflowTaskFailures check aborts
// at its first step a version whose workers leave a share of their Hello
// workflows stuck on a workflow task that fails with a non-determinism
// error (the demo worker's DEMO_NONDETERMINISM_SHARE): the evidence gives
// the counts, routing goes back to the current version, and the stuck
// workflows are what Temporal's own TemporalReportedProblems marks. The
// first step pauses long enough for Temporal's mark (five problems in a
// row: one failure and the timeouts of its retries); healthy versions
// through the same check are in TestAnalysisHasNoFalsePositives.
func TestRolloutAnalysisWorkflowTasks(t *testing.T) {
	parallel(t) // a minute of waiting for Temporal's mark, on objects of its own
	r := newRollout(env.NewTest(t), "analysis-wft")
	twd := r.Spec("v1")
	twd.Spec.Rollout = v1alpha1.RolloutSpec{
		Strategy: v1alpha1.StrategyProgressive,
		Steps:    append(steps([]int32{30}, 5*time.Minute), steps([]int32{70}, 5*time.Second)...),
		Analysis: &v1alpha1.AnalysisSpec{
			Interval: &metav1.Duration{Duration: 5 * time.Second},
			Checks:   []v1alpha1.AnalysisCheck{{Name: "stuck", Kind: v1alpha1.CheckWorkflowTaskFailures, MaxPercent: ptr.To[int32](0), MinSamples: 8}},
		},
	}
	v1 := r.Create(twd)
	r.WaitCurrent(5*time.Minute, v1)
	started := r.helloLoad(t)

	r.Update(func(t *v1alpha1.TemporalWorkerDeployment) {
		c := &t.Spec.Template.Spec.Containers[0]
		c.Image = "rainbow.local/demo-worker:v3"
		c.Env = append(c.Env, corev1.EnvVar{Name: "DEMO_NONDETERMINISM_SHARE", Value: "0.5"})
	})
	v3 := r.BuildID()
	a := r.waitAnalysisAbort(v3, v1, 30).Status.Analysis
	if a == nil || a.BuildID != v3 || !strings.Contains(a.Aborted, "check stuck") ||
		!strings.Contains(a.Aborted, "workflows on the target are stuck") || !strings.Contains(a.Aborted, "above maxPercent 0%") {
		t.Fatalf("status.analysis does not name the check and its counts: %+v", a)
	}

	// What the check counted is Temporal's own mark: running workflows on
	// v3 whose workflow task keeps failing.
	resp, err := r.Env.Temporal.WorkflowService().CountWorkflowExecutions(context.Background(), &workflowservice.CountWorkflowExecutionsRequest{
		Namespace: r.Env.Info.TemporalNamespace,
		Query:     temporal.StuckQuery(r.DeploymentName(), v3),
	})
	if err != nil || resp.GetCount() == 0 {
		t.Fatalf("Temporal marks no stuck workflow on %s (%v); the abort's evidence: %s", v3, err, a.Aborted)
	}
	r.Logf("aborted on: %s; %d workflows on %s stuck; %d Hello workflows started", a.Aborted, resp.GetCount(), v3, started.Load())
}
