package integration

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/internal/buildid"
)

// TestProgressDeadlineFailsStuckRollouts starts from
// examples/rollouts/deadline.yaml: its healthy first version never looks
// failed to kstatus or Argo CD. Then, with a 25s progressDeadline, a version
// whose pods crash-loop, and one whose workers poll a wrong task queue
// (with progressDeadlineAbort), each turn kstatus Failed and Argo CD
// Degraded with reason ProgressDeadlineExceeded, not before the deadline,
// with a message that says what is missing; the current version keeps its
// traffic and workers, and the aborted version is scaled to zero. A good
// spec then rolls out and the conditions return to Ready.
func TestProgressDeadlineFailsStuckRollouts(t *testing.T) {
	parallel(t)
	r, example := createExample(t, "rollouts/deadline.yaml", nil)
	if d := example.Spec.Rollout.ProgressDeadline; d == nil || !example.Spec.Rollout.ProgressDeadlineAbort {
		t.Fatalf("the example sets no progressDeadline with progressDeadlineAbort: %+v", example.Spec.Rollout)
	}
	w := watchCD(t, r.Namespace, r.Name)
	v1 := r.BuildID()
	requireComplete(t, r.WaitCurrent(5*time.Minute, v1))
	if looks, failed := w.result(); len(failed) > 0 {
		t.Fatalf("%d of %d looks at a healthy rollout said Failed or Degraded:\n%s", len(failed), looks, strings.Join(failed, "\n"))
	}
	replicas := ptr.Deref(example.Spec.Replicas, 1)

	const deadline = 25 * time.Second
	setEnv := func(twd *v1alpha1.TemporalWorkerDeployment, name, value string) {
		c := &twd.Spec.Template.Spec.Containers[0]
		c.Env = slices.DeleteFunc(slices.Clone(c.Env), func(e corev1.EnvVar) bool { return e.Name == name })
		if value != "" {
			c.Env = append(c.Env, corev1.EnvVar{Name: name, Value: value})
		}
	}
	// failsAtDeadline waits for kstatus Failed and Argo CD Degraded with
	// ProgressDeadlineExceeded, and checks that it came no sooner than the
	// deadline after the target started, and that v1 kept its traffic and
	// its workers.
	failsAtDeadline := func(build string) *v1alpha1.TemporalWorkerDeployment {
		t.Helper()
		r.waitView(deadline+2*time.Minute, "kstatus Failed and Argo CD Degraded with "+v1alpha1.ReasonProgressDeadlineExceeded, func(v cdView) bool {
			return v.kstatus == status.FailedStatus && v.health.Status == "Degraded" && strings.Contains(v.health.Message, v1alpha1.ReasonProgressDeadlineExceeded)
		})
		got := r.Get()
		tv := got.Status.TargetVersion
		if tv == nil || tv.BuildID != build || tv.TargetSince == nil {
			t.Fatalf("status records no targetSince for %s: %s", build, describe(got))
		}
		stalled := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionStalled)
		if stalled == nil || stalled.Status != metav1.ConditionTrue || stalled.LastTransitionTime.Time.Before(tv.TargetSince.Add(deadline)) {
			t.Fatalf("Stalled %+v before the deadline %s after targetSince %s", stalled, deadline, tv.TargetSince)
		}
		if !hasCondition(got, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonProgressDeadlineExceeded) {
			t.Fatalf("want Ready=False ProgressDeadlineExceeded: %s", describe(got))
		}
		// The alert RainbowRolloutStuck reads this series (docs/observability.md).
		blocked := map[string]string{"namespace": r.Namespace, "name": r.Name, "reason": v1alpha1.ReasonProgressDeadlineExceeded}
		r.Eventually(30*time.Second, "rainbow_rollout_blocked 1 with reason "+v1alpha1.ReasonProgressDeadlineExceeded, func() (bool, string) {
			n, ok := metric(t, "rainbow_rollout_blocked", blocked)
			return ok && n == 1, fmt.Sprintf("value %v, series %v", n, ok)
		})
		if cur, ramping, _ := r.routing(); cur != v1 || ramping != "" {
			t.Fatalf("routing moved: current %q, ramping %q; want %s current and no ramp", cur, ramping, v1)
		}
		if d := r.deployment(v1); d == nil || ptr.Deref(d.Spec.Replicas, 1) != replicas {
			t.Fatalf("the current version's workers changed: %s", deploymentState(d))
		}
		return got
	}

	// A version whose worker exits at start: the demo worker refuses a
	// DEMO_POLL_DELAY that is no duration.
	r.Update(func(twd *v1alpha1.TemporalWorkerDeployment) {
		twd.Spec.Template.Spec.Containers[0].Image = "rainbow.local/demo-worker:v2"
		setEnv(twd, "DEMO_POLL_DELAY", "crash")
		twd.Spec.Rollout.ProgressDeadline = &metav1.Duration{Duration: deadline}
		twd.Spec.Rollout.ProgressDeadlineAbort = false
	})
	v2 := r.BuildID()
	got := failsAtDeadline(v2)
	msg := findCondition(got, v1alpha1.ConditionReady).Message
	for _, want := range []string{"pods of Deployment", "are not ready", "kubectl -n " + r.Namespace + " describe deployment", "logs deployment/"} {
		if !strings.Contains(msg, want) {
			t.Fatalf("the message of a crash-looping version does not say %q: %s", want, msg)
		}
	}
	if d := r.deployment(v2); d == nil || ptr.Deref(d.Spec.Replicas, 1) != replicas {
		t.Fatalf("without progressDeadlineAbort the failed version keeps its replicas: %s", deploymentState(d))
	}

	// A version whose workers poll another task queue, aborted at the
	// deadline.
	r.Update(func(twd *v1alpha1.TemporalWorkerDeployment) {
		twd.Spec.Template.Spec.Containers[0].Image = "rainbow.local/demo-worker:v3"
		setEnv(twd, "DEMO_POLL_DELAY", "")
		setEnv(twd, "DEMO_TASK_QUEUE", r.TaskQueue+"-typo")
		twd.Spec.Rollout.ProgressDeadlineAbort = true
	})
	v3 := r.BuildID()
	got = failsAtDeadline(v3)
	msg = findCondition(got, v1alpha1.ConditionReady).Message
	for _, want := range []string{"do not poll task queue " + r.TaskQueue + " (", "which the current version " + v1 + " polls", "progressDeadlineAbort"} {
		if !strings.Contains(msg, want) {
			t.Fatalf("the message of a version polling a wrong task queue does not say %q: %s", want, msg)
		}
	}
	r.Eventually(time.Minute, "the aborted version "+v3+" scaled to zero", func() (bool, string) {
		d := r.deployment(v3)
		return d != nil && ptr.Deref(d.Spec.Replicas, 1) == 0, deploymentState(d)
	})
	if got := r.hello(); !strings.Contains(got, v1) {
		t.Fatalf("a new workflow ran on %q, want the current version %s", got, v1)
	}
	if v := r.view(r.Name); v.kstatus != status.FailedStatus || v.health.Status != "Degraded" {
		t.Fatalf("after the abort: %s", v)
	}

	// A good spec recovers.
	r.Update(func(twd *v1alpha1.TemporalWorkerDeployment) {
		twd.Spec.Template.Spec.Containers[0].Image = "rainbow.local/demo-worker:v4"
		setEnv(twd, "DEMO_TASK_QUEUE", r.TaskQueue)
	})
	v4 := r.BuildID()
	if v4 == buildid.Of(&example.Spec) {
		t.Fatal("the good spec has the first version's build ID")
	}
	requireComplete(t, r.WaitCurrent(5*time.Minute, v4))
	r.waitView(time.Minute, "kstatus Current and Argo CD Healthy", func(v cdView) bool {
		return v.kstatus == status.CurrentStatus && v.health.Status == "Healthy"
	})
	r.Eventually(30*time.Second, "no rainbow_rollout_blocked series once complete", func() (bool, string) {
		n, ok := metric(t, "rainbow_rollout_blocked", map[string]string{"namespace": r.Namespace, "name": r.Name})
		return !ok, fmt.Sprintf("value %v", n)
	})
}
