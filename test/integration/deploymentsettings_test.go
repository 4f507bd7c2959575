package integration

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
)

// TestDeploymentSettingsReachRunningVersions: deploymentMetadata lands on
// the versioned Deployment object (not its pods) and follows the spec
// without restarting anything; the pod template's own labels and
// annotations are stored with the TWD and reach the pods; rollout.deploymentStrategy shapes the real
// Deployment controller's in-place update: with maxSurge 0 the version
// never runs more pods than its replicas while its template rolls.
func TestDeploymentSettingsReachRunningVersions(t *testing.T) {
	parallel(t)
	r := newRollout(env.NewTest(t), "settings")
	twd := r.Spec("v1")
	twd.Spec.Replicas = ptr.To[int32](2)
	twd.Spec.WorkerOptions.CustomBuildID = "wf-1"
	surge, unavailable := intstr.FromInt32(0), intstr.FromInt32(1)
	twd.Spec.Rollout.DeploymentStrategy = &v1alpha1.DeploymentStrategy{MaxSurge: &surge, MaxUnavailable: &unavailable}
	twd.Spec.DeploymentMetadata = v1alpha1.DeploymentMetadata{
		Labels: map[string]string{"team": "payments"}, Annotations: map[string]string{"example.com/owner": "alice"},
	}
	twd.Spec.Template.Labels = map[string]string{"app.kubernetes.io/part-of": "payments"}
	twd.Spec.Template.Annotations = map[string]string{"prometheus.io/scrape": "true"}
	r.Create(twd)
	if got := r.Get().Spec.Template; got.Labels["app.kubernetes.io/part-of"] != "payments" || got.Annotations["prometheus.io/scrape"] != "true" {
		t.Fatalf("the API server kept spec.template.metadata as %+v: the CRD must describe it (controller-gen crd:generateEmbeddedObjectMeta)", got.ObjectMeta)
	}
	r.WaitCurrent(5*time.Minute, "wf-1")
	d := r.deployment("wf-1")
	if d.Spec.Template.Labels["app.kubernetes.io/part-of"] != "payments" || d.Spec.Template.Annotations["prometheus.io/scrape"] != "true" {
		t.Fatalf("pod template labels %v, annotations %v: the TWD's template metadata is missing", d.Spec.Template.Labels, d.Spec.Template.Annotations)
	}
	if d.Labels["team"] != "payments" || d.Annotations["example.com/owner"] != "alice" || d.Spec.Template.Labels["team"] != "" {
		t.Fatalf("Deployment labels %v, annotations %v, pod labels %v", d.Labels, d.Annotations, d.Spec.Template.Labels)
	}
	if ru := d.Spec.Strategy.RollingUpdate; ru == nil || ru.MaxSurge.String() != "0" || ru.MaxUnavailable.String() != "1" {
		t.Fatalf("Deployment strategy %+v, want maxSurge 0, maxUnavailable 1", d.Spec.Strategy)
	}
	r.Eventually(time.Minute, "two pods of wf-1", func() (bool, string) {
		pods := r.podNames("wf-1")
		return len(pods) == 2, fmt.Sprint(pods)
	})
	pods := r.podNames("wf-1")

	r.Update(func(t *v1alpha1.TemporalWorkerDeployment) {
		t.Spec.DeploymentMetadata = v1alpha1.DeploymentMetadata{Labels: map[string]string{"team": "billing"}}
	})
	r.Eventually(time.Minute, "the new deploymentMetadata on the Deployment", func() (bool, string) {
		d := r.deployment("wf-1")
		_, owner := d.Annotations["example.com/owner"]
		return d.Labels["team"] == "billing" && !owner, fmt.Sprintf("labels %v, annotations %v", d.Labels, d.Annotations)
	})
	// (A Deployment's generation moves with its annotations; its pods do not.)
	if got := r.deployment("wf-1"); !equality.Semantic.DeepEqual(got.Spec, d.Spec) || !slices.Equal(r.podNames("wf-1"), pods) {
		t.Fatalf("a metadata change touched the Deployment's spec or pods: pods %v -> %v\n%s", pods, r.podNames("wf-1"), cmp.Diff(d.Spec, got.Spec))
	}

	r.SetImage("v2")
	most := 0
	r.Eventually(3*time.Minute, "wf-1 rolled to v2 in place", func() (bool, string) {
		images := r.podImages("wf-1")
		most = max(most, len(images))
		return len(images) == 2 && images[0] == "rainbow.local/demo-worker:v2" && images[1] == images[0], fmt.Sprint(images)
	})
	if most > 2 {
		t.Errorf("%d pods of wf-1 at once during the update, want at most 2 (maxSurge 0)", most)
	}
}
