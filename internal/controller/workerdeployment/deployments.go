package workerdeployment

import (
	"context"
	"maps"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/internal/planner"
	"github.com/rainbow-deploy/rainbow/internal/workload"
)

// deploymentsByWorker indexes Deployments by their worker label. A label
// selector alone makes the cache match every Deployment of the namespace,
// each reconcile: quadratic with thousands of TWDs in one namespace.
const deploymentsByWorker = "metadata.labels.worker"

func indexDeploymentsByWorker(o client.Object) []string {
	if v, ok := o.GetLabels()[workload.LabelWorker]; ok {
		return []string{v}
	}
	return nil
}

// ownedDeployments lists the versioned Deployments a TWD controls, keyed by
// build ID. Deployments with the labels but another owner are ignored.
// opts add to the list's options (client.UnsafeDisableDeepCopy for readers
// that change nothing).
func ownedDeployments(ctx context.Context, c client.Reader, twd *v1alpha1.TemporalWorkerDeployment, opts ...client.ListOption) (map[string]*appsv1.Deployment, error) {
	var list appsv1.DeploymentList
	opts = append([]client.ListOption{client.InNamespace(twd.Namespace),
		client.MatchingFields{deploymentsByWorker: workload.WorkerLabel(twd.Name)}}, opts...)
	if err := c.List(ctx, &list, opts...); err != nil {
		return nil, err
	}
	out := make(map[string]*appsv1.Deployment, len(list.Items))
	for i := range list.Items {
		d := &list.Items[i]
		ref := metav1.GetControllerOf(d)
		if ref == nil || ref.UID != twd.UID {
			continue
		}
		if id := d.Labels[workload.LabelBuildID]; id != "" {
			out[id] = d
		}
	}
	return out, nil
}

// plannerDeployment is what the planner needs to know of a Deployment.
func plannerDeployment(d *appsv1.Deployment) planner.Deployment {
	pd := planner.Deployment{
		BuildID:   d.Labels[workload.LabelBuildID],
		Name:      d.Name,
		UID:       string(d.UID),
		Replicas:  replicasOf(d),
		Available: available(d),
		// Pods of an older template remain, or our template change is not
		// yet seen. A scale is no rollout: an autoscaler at work must not
		// make a current version look unfinished.
		Rolling:      workload.TemplateRolling(d),
		TemplateHash: d.Annotations[workload.AnnotationTemplateHash],
		// The Temporal worker controller writes its hash on the pod template.
		MigratedHash:  d.Spec.Template.Annotations[workload.AnnotationMigratedTemplateHash] != "",
		Server:        planner.Server{Address: workload.Address(d), NamespaceID: d.Annotations[workload.AnnotationNamespaceID]},
		CreatedAt:     d.CreationTimestamp.Time,
		Selector:      foreignSelector(d),
		ReadyReplicas: d.Status.ReadyReplicas,
	}
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentAvailable && c.Status == corev1.ConditionTrue && pd.Available {
			pd.AvailableSince = c.LastTransitionTime.Time
		}
	}
	if pd.Replicas == 0 {
		if t, err := time.Parse(time.RFC3339, d.Annotations[workload.AnnotationScaledDownAt]); err == nil {
			pd.ScaledDownAt = &t
		}
	}
	return pd
}

// foreignSelector is the Deployment's selector labels when they differ from
// the ones the controller gives its own: an adopted one's.
func foreignSelector(d *appsv1.Deployment) string {
	if d.Spec.Selector == nil {
		return ""
	}
	sel := d.Spec.Selector.MatchLabels
	if maps.Equal(sel, workload.SelectorLabels(d.Labels[workload.LabelWorker], d.Labels[workload.LabelBuildID])) {
		return ""
	}
	return labels.SelectorFromSet(sel).String()
}

func replicasOf(d *appsv1.Deployment) int32 {
	if d.Spec.Replicas == nil {
		return 1
	}
	return *d.Spec.Replicas
}

// available: the Deployment controller has seen the latest spec, every
// replica runs the latest template and enough of them are available.
func available(d *appsv1.Deployment) bool {
	if d.Status.ObservedGeneration < d.Generation {
		return false
	}
	want := replicasOf(d)
	if d.Status.UpdatedReplicas < want || d.Status.AvailableReplicas < want {
		return false
	}
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentAvailable {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
