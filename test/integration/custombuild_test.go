package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/internal/demoworker"
	"github.com/rainbow-deploy/rainbow/internal/workload"
)

// TestCustomBuildIDRollsInPlace: with a custom build ID, a new image is a
// rolling update of the same version (one Deployment, its pods replaced,
// the version still current, a pinned workflow unharmed); a new custom
// build ID is a new version with a normal rollout.
func TestCustomBuildIDRollsInPlace(t *testing.T) {
	r := newRollout(env.NewTest(t), "custom")
	twd := r.spec("v1")
	twd.Spec.WorkerOptions.CustomBuildID = "wf-1"
	r.create(twd)
	r.waitCurrent(2*time.Minute, "wf-1")
	first := r.deployment("wf-1")
	pinned := r.startLong(demoworker.LongPinnedWorkflow)

	r.setImage("v2")
	got := r.waitFor(2*time.Minute, "wf-1 updated in place and current again", func(t *v1alpha1.TemporalWorkerDeployment) bool {
		return hasCondition(t, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonRolloutComplete) &&
			t.Status.CurrentVersion != nil && t.Status.CurrentVersion.UpdatedInPlaceAt != nil
	})
	if got.Status.CurrentVersion.BuildID != "wf-1" {
		t.Fatalf("current version is %s, want wf-1: %s", got.Status.CurrentVersion.BuildID, describe(got))
	}
	r.Eventually(2*time.Minute, "every pod of wf-1 runs image v2", func() (bool, string) {
		images := r.podImages("wf-1")
		for _, img := range images {
			if img != "rainbow.local/demo-worker:v2" {
				return false, fmt.Sprint(images)
			}
		}
		return len(images) == 1, fmt.Sprint(images)
	})
	d := r.deployment("wf-1")
	if d.UID != first.UID {
		t.Fatal("the Deployment was replaced instead of updated in place")
	}
	if d.Annotations[workload.AnnotationTemplateHash] == first.Annotations[workload.AnnotationTemplateHash] {
		t.Fatal("the template hash annotation did not change")
	}
	if deps := r.deploymentsOfTWD(); len(deps) != 1 {
		t.Fatalf("Deployments after an in-place update: %v, want one", deps)
	}
	if cur, _, _ := r.routing(); cur != "wf-1" {
		t.Fatalf("Temporal's current version is %q, want wf-1", cur)
	}
	r.waitEvent(time.Minute, "UpdateInPlace")

	// The pinned workflow moved to the new pods of the same version.
	if err := r.Env.Temporal.SignalWorkflow(context.Background(), pinned.GetID(), "", demoworker.FinishSignal, nil); err != nil {
		t.Fatal(err)
	}
	var res demoworker.LongResult
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := pinned.Get(ctx, &res); err != nil {
		t.Fatalf("the pinned workflow failed across the in-place update: %v", err)
	}
	if res.StartedOn != "wf-1" || res.FinishedOn != "wf-1" {
		t.Fatalf("pinned workflow ran on %s then %s", res.StartedOn, res.FinishedOn)
	}

	r.update(func(t *v1alpha1.TemporalWorkerDeployment) { t.Spec.WorkerOptions.CustomBuildID = "wf-2" })
	r.waitCurrent(2*time.Minute, "wf-2")
	if r.deployment("wf-1") == nil {
		t.Fatal("the old version's Deployment vanished right after the new version became current")
	}
}

// podImages lists the first container image of each running pod of build.
func (r *rollout) podImages(build string) []string {
	r.Helper()
	var pods corev1.PodList
	if err := r.Env.Kube.List(context.Background(), &pods, crclient.InNamespace(r.Namespace),
		crclient.MatchingLabels{workload.LabelBuildID: build}); err != nil {
		r.Fatal(err)
	}
	var out []string
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, p.Spec.Containers[0].Image)
		}
	}
	return out
}

// deploymentsOfTWD names every Deployment in the test's namespace.
func (r *rollout) deploymentsOfTWD() []string {
	r.Helper()
	var list appsv1.DeploymentList
	if err := r.Env.Kube.List(context.Background(), &list, crclient.InNamespace(r.Namespace)); err != nil {
		r.Fatal(err)
	}
	var out []string
	for _, d := range list.Items {
		out = append(out, d.Name)
	}
	return out
}

// TestCustomBuildIDExample applies examples/custom-build-id/worker.yaml and
// changes an env var, which the example says is an in-place update.
func TestCustomBuildIDExample(t *testing.T) {
	tt := env.NewTest(t)
	twd := &v1alpha1.TemporalWorkerDeployment{}
	env.ReadExample(t, "custom-build-id/worker.yaml", twd)
	r := &rollout{T: tt, Name: twd.Name, TaskQueue: tt.TaskQueue(twd.Name)}
	conn := &v1alpha1.TemporalConnection{
		ObjectMeta: metav1.ObjectMeta{Name: twd.Spec.WorkerOptions.ConnectionRef.Name, Namespace: tt.Namespace},
		Spec:       v1alpha1.TemporalConnectionSpec{HostPort: tt.Env.Info.TemporalAddress},
	}
	if err := tt.Env.Kube.Create(context.Background(), conn); err != nil {
		t.Fatal(err)
	}
	twd.Namespace = tt.Namespace
	twd.Spec.WorkerOptions.TemporalNamespace = tt.Env.Info.TemporalNamespace
	setEnv(&twd.Spec.Template.Spec.Containers[0], "DEMO_TASK_QUEUE", r.TaskQueue)
	r.create(twd)
	build := twd.Spec.WorkerOptions.CustomBuildID
	r.waitCurrent(2*time.Minute, build)

	r.update(func(t *v1alpha1.TemporalWorkerDeployment) {
		setEnv(&t.Spec.Template.Spec.Containers[0], "LOG_LEVEL", "debug")
	})
	got := r.waitFor(2*time.Minute, build+" updated in place and Ready", func(t *v1alpha1.TemporalWorkerDeployment) bool {
		return hasCondition(t, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonRolloutComplete) &&
			t.Status.CurrentVersion != nil && t.Status.CurrentVersion.UpdatedInPlaceAt != nil
	})
	if got.Status.CurrentVersion.BuildID != build {
		t.Fatalf("current version changed to %s", got.Status.CurrentVersion.BuildID)
	}
}

func setEnv(c *corev1.Container, name, value string) {
	for i := range c.Env {
		if c.Env[i].Name == name {
			c.Env[i].Value = value
			return
		}
	}
	c.Env = append(c.Env, corev1.EnvVar{Name: name, Value: value})
}
