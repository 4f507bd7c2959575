package workerdeployment

import (
	"k8s.io/apimachinery/pkg/labels"
	"maps"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/rainbow-deploy/rainbow/internal/workload"
)

func deployment(mut func(*appsv1.Deployment)) *appsv1.Deployment {
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "w-v1", Generation: 2, Labels: map[string]string{workload.LabelBuildID: "v1"}},
		Spec:       appsv1.DeploymentSpec{Replicas: ptr.To[int32](2)},
		Status: appsv1.DeploymentStatus{
			ObservedGeneration: 2, UpdatedReplicas: 2, AvailableReplicas: 2,
			Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue}},
		},
	}
	if mut != nil {
		mut(d)
	}
	return d
}

func TestAvailable(t *testing.T) {
	cases := map[string]struct {
		d    *appsv1.Deployment
		want bool
	}{
		"rolled out":           {deployment(nil), true},
		"stale observation":    {deployment(func(d *appsv1.Deployment) { d.Status.ObservedGeneration = 1 }), false},
		"old pods remain":      {deployment(func(d *appsv1.Deployment) { d.Status.UpdatedReplicas = 1 }), false},
		"not enough ready":     {deployment(func(d *appsv1.Deployment) { d.Status.AvailableReplicas = 1 }), false},
		"condition false":      {deployment(func(d *appsv1.Deployment) { d.Status.Conditions[0].Status = corev1.ConditionFalse }), false},
		"no condition yet":     {deployment(func(d *appsv1.Deployment) { d.Status.Conditions = nil }), false},
		"nil replicas means 1": {deployment(func(d *appsv1.Deployment) { d.Spec.Replicas = nil }), true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := available(tc.d); got != tc.want {
				t.Errorf("available = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestPlannerDeploymentScaledDownAt(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	d := deployment(func(d *appsv1.Deployment) {
		d.Spec.Replicas = ptr.To[int32](0)
		d.Annotations = map[string]string{workload.AnnotationScaledDownAt: at.Format(time.RFC3339)}
	})
	pd := plannerDeployment(d)
	if pd.BuildID != "v1" || pd.Replicas != 0 || pd.ScaledDownAt == nil || !pd.ScaledDownAt.Equal(at) {
		t.Fatalf("planner deployment = %+v", pd)
	}
	// The annotation only counts while the Deployment is at zero.
	d.Spec.Replicas = ptr.To[int32](1)
	if pd := plannerDeployment(d); pd.ScaledDownAt != nil {
		t.Fatalf("ScaledDownAt kept while running: %+v", pd)
	}
}

// TestForeignSelector: only an adopted Deployment's own selector is passed
// on, and it comes back whole for the owned copies.
func TestForeignSelector(t *testing.T) {
	ours := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Labels: workload.SelectorLabels("orders", "v1")},
		Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: workload.SelectorLabels("orders", "v1")}}}
	if got := foreignSelector(ours); got != "" {
		t.Errorf("our own Deployment's selector passed on: %q", got)
	}
	theirs := map[string]string{"temporal.io/deployment-name": "orders", workload.LabelBuildID: "v1"}
	adopted := ours.DeepCopy()
	adopted.Spec.Selector.MatchLabels = theirs
	got := foreignSelector(adopted)
	if m, err := labels.ConvertSelectorToLabelsMap(got); err != nil || !maps.Equal(m, theirs) {
		t.Errorf("adopted selector %q (%v), want %v", got, err, theirs)
	}
}
