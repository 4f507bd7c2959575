package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/dev/demoworker"
	"github.com/rainbow-deploy/rainbow/internal/workload"
	"github.com/rainbow-deploy/rainbow/test/harness"
)

// TestCustomBuildIDRollsInPlace: with a custom build ID, a new image is a
// rolling update of the same version (one Deployment, its pods replaced,
// the version still current, a pinned workflow unharmed); a new custom
// build ID is a new version with a normal rollout.
func TestCustomBuildIDRollsInPlace(t *testing.T) {
	parallel(t)
	r := newRollout(env.NewTest(t), "custom")
	twd := r.Spec("v1")
	twd.Spec.WorkerOptions.CustomBuildID = "wf-1"
	r.Create(twd)
	r.WaitCurrent(5*time.Minute, "wf-1")
	first := r.deployment("wf-1")
	oldPods := r.podNames("wf-1")
	pinned := r.startLong(demoworker.LongPinnedWorkflow)

	r.SetImage("v2")
	got := r.waitFor(2*time.Minute, "wf-1 updated in place and current again", func(t *v1alpha1.TemporalWorkerDeployment) bool {
		return hasCondition(t, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonRolloutComplete) &&
			t.Status.CurrentVersion != nil && t.Status.CurrentVersion.UpdatedInPlaceAt != nil
	})
	if got.Status.CurrentVersion.BuildID != "wf-1" {
		t.Fatalf("current version is %s, want wf-1: %s", got.Status.CurrentVersion.BuildID, describe(got))
	}
	if why := got.Status.CurrentVersion.UpdatedInPlaceReason; !strings.Contains(why, "spec.template changed") {
		t.Fatalf("status.currentVersion.updatedInPlaceReason = %q, want why the version was updated in place", why)
	}
	r.Eventually(2*time.Minute, "every pod of wf-1 runs image v2 and none of its old pods is left", func() (bool, string) {
		images := r.podImages("wf-1")
		for _, img := range images {
			if img != "rainbow.local/demo-worker:v2" {
				return false, fmt.Sprint(images)
			}
		}
		now := r.podNames("wf-1")
		for _, p := range oldPods {
			if slices.Contains(now, p) {
				return false, fmt.Sprintf("old pod %s still exists (pods %v)", p, now)
			}
		}
		return len(images) == 1, fmt.Sprint(images)
	})
	// The Deployment controller rolled it: a new ReplicaSet, the old one at zero.
	if sets := r.replicaSets("wf-1"); len(sets) != 2 {
		t.Fatalf("ReplicaSets of wf-1 after the in-place update: %v, want the old one at 0 and a new one", sets)
	}
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

	// Only the new pods poll now, so the pinned workflow finishes there.
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

	r.Update(func(t *v1alpha1.TemporalWorkerDeployment) { t.Spec.WorkerOptions.CustomBuildID = "wf-2" })
	got = r.WaitCurrent(5*time.Minute, "wf-2")
	if r.deployment("wf-1") == nil {
		t.Fatal("the old version's Deployment vanished right after the new version became current")
	}
	if st := versionStatus(got, "wf-1"); st != v1alpha1.VersionDraining && st != v1alpha1.VersionDrained {
		t.Fatalf("the old version wf-1 is %q after wf-2 became current, want Draining or Drained: %s", st, describe(got))
	}
}

// podImages lists the first container image of each running pod of build.
func (r *rollout) podImages(build string) []string {
	return r.livePods(build, func(p corev1.Pod) string { return p.Spec.Containers[0].Image })
}

// podNames lists the pods of build that are not being deleted.
func (r *rollout) podNames(build string) []string {
	return r.livePods(build, func(p corev1.Pod) string { return p.Name })
}

// livePods maps each pod of build that is not being deleted.
func (r *rollout) livePods(build string, f func(corev1.Pod) string) []string {
	r.Helper()
	var pods corev1.PodList
	if err := r.Env.Kube.List(context.Background(), &pods, crclient.InNamespace(r.Namespace),
		crclient.MatchingLabels{workload.LabelBuildID: build}); err != nil {
		r.Fatal(err)
	}
	var out []string
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, f(p))
		}
	}
	return out
}

// replicaSets lists build's ReplicaSets as "name=replicas".
func (r *rollout) replicaSets(build string) []string {
	r.Helper()
	var sets appsv1.ReplicaSetList
	if err := r.Env.Kube.List(context.Background(), &sets, crclient.InNamespace(r.Namespace),
		crclient.MatchingLabels{workload.LabelBuildID: build}); err != nil {
		r.Fatal(err)
	}
	var out []string
	for _, rs := range sets.Items {
		out = append(out, fmt.Sprintf("%s=%d", rs.Name, ptr.Deref(rs.Spec.Replicas, 0)))
	}
	return out
}

// TestDeploymentWithoutTemplateHashIsNotRestarted: a Deployment that
// records no template hash (made before hashes were recorded) gets the
// hash back without a new ReplicaSet or a restarted pod.
func TestDeploymentWithoutTemplateHashIsNotRestarted(t *testing.T) {
	parallel(t)
	r := newRollout(env.NewTest(t), "legacy")
	r.Create(r.Spec("v1"))
	r.hashRecordedWithoutRestart(r.BuildID(), nil, map[string]any{workload.AnnotationTemplateHash: nil})
}

// TestMigratedDeploymentIsNotRestarted: a Deployment whose pod template
// carries the template hash of the tool users migrate from (its own
// algorithm, which cannot be compared; the Temporal worker controller
// writes it there) and which records none of ours gets ours without a new
// ReplicaSet or a restarted pod, even under a custom build ID, which
// proves nothing of its template.
func TestMigratedDeploymentIsNotRestarted(t *testing.T) {
	parallel(t)
	r := newRollout(env.NewTest(t), "migrated")
	twd := r.Spec("v1")
	twd.Spec.WorkerOptions.CustomBuildID = "migrated-1"
	r.Create(twd)
	d := r.hashRecordedWithoutRestart("migrated-1", map[string]any{workload.AnnotationMigratedTemplateHash: "5f0c2a9e"},
		map[string]any{workload.AnnotationTemplateHash: nil})
	if got := d.Spec.Template.Annotations[workload.AnnotationMigratedTemplateHash]; got != "5f0c2a9e" {
		t.Errorf("the migrated annotation became %q", got)
	}
}

// hashRecordedWithoutRestart waits for build to run, gives its Deployment
// a pod template the controller would not build (as another tool's or an
// older controller's may be, with templateAnnotations), then sets
// annotations on the Deployment (nil removes one) and checks that the
// controller records the template hash again without touching the pod
// template, its ReplicaSets or pods.
func (r *rollout) hashRecordedWithoutRestart(build string, templateAnnotations, annotations map[string]any) *appsv1.Deployment {
	r.Helper()
	r.WaitCurrent(5*time.Minute, build)
	first := r.podNames(build)
	made := map[string]any{"example.com/made-by": "another-tool"}
	maps.Copy(made, templateAnnotations)
	mergePatch(r, r.deployment(build), map[string]any{"spec": map[string]any{"template": map[string]any{
		"metadata": map[string]any{"annotations": made}}}})
	r.Eventually(2*time.Minute, "the changed pod template rolled out to one new pod", func() (bool, string) {
		d, pods := r.deployment(build), r.podNames(build)
		done := d.Status.ObservedGeneration == d.Generation && d.Status.Replicas == 1 && d.Status.UpdatedReplicas == 1 && d.Status.AvailableReplicas == 1
		return done && len(pods) == 1 && !slices.Contains(first, pods[0]), fmt.Sprintf("%s, pods %v (before %v)", deploymentState(d), pods, first)
	})
	pods, sets, d := r.podNames(build), r.replicaSets(build), r.deployment(build)
	hash := d.Annotations[workload.AnnotationTemplateHash]
	if hash == "" {
		r.Fatalf("Deployment %s records no template hash", d.Name)
	}

	mergePatch(r, d, map[string]any{"metadata": map[string]any{"annotations": annotations}})
	r.Eventually(time.Minute, "the template hash recorded again", func() (bool, string) {
		got := r.deployment(build).Annotations[workload.AnnotationTemplateHash]
		return got == hash, fmt.Sprintf("annotation %q, want %q", got, hash)
	})
	// Give a wrong in-place update the time to show.
	time.Sleep(3 * time.Second)
	after := r.deployment(build)
	// (Its generation moves anyway: a Deployment's annotations count.)
	if !equality.Semantic.DeepEqual(after.Spec.Template, d.Spec.Template) {
		r.Errorf("the pod template changed:\nbefore: %+v\nafter:  %+v", d.Spec.Template, after.Spec.Template)
	}
	if got := r.replicaSets(build); !slices.Equal(got, sets) {
		r.Errorf("ReplicaSets %v became %v: the pods were rolled", sets, got)
	}
	if got := r.podNames(build); !slices.Equal(got, pods) {
		r.Errorf("pods %v became %v: the pods were restarted", pods, got)
	}
	return after
}

func mergePatch(r *rollout, obj crclient.Object, patch map[string]any) {
	r.Helper()
	data, err := json.Marshal(patch)
	if err != nil {
		r.Fatal(err)
	}
	if err := r.Env.Kube.Patch(context.Background(), obj, crclient.RawPatch(types.MergePatchType, data)); err != nil {
		r.Fatal(err)
	}
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

// TestCustomBuildIDExample applies examples/custom-build-id/worker.yaml
// (kubectl apply, client-side) and changes an env var, which the example
// says is an in-place update.
func TestCustomBuildIDExample(t *testing.T) {
	parallel(t)
	tt := env.NewTest(t)
	twd := &v1alpha1.TemporalWorkerDeployment{}
	env.ReadExample(t, "custom-build-id/worker.yaml", twd)
	r := &rollout{&harness.Rollout{T: tt, Name: twd.Name, TaskQueue: tt.TaskQueue(twd.Name)}}
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
	if err := env.KubectlApply(twd, harness.ClientSideApply); err != nil {
		t.Fatal(err)
	}
	build := twd.Spec.WorkerOptions.CustomBuildID
	r.WaitCurrent(5*time.Minute, build)

	r.Update(func(t *v1alpha1.TemporalWorkerDeployment) {
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
