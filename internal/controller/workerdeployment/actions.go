package workerdeployment

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rainbow-deploy/rainbow/internal/planner"
	"github.com/rainbow-deploy/rainbow/internal/workload"
)

// scaleDeployment sets spec.replicas with an optimistic lock, so a change
// made since the observation fails the step instead of being overwritten.
// A sunset scale records when it happened; any other scale clears that.
func scaleDeployment(ctx context.Context, c client.Client, d *appsv1.Deployment, s planner.Scale, now time.Time) error {
	patched := d.DeepCopy()
	patched.Spec.Replicas = ptr.To(s.Replicas)
	if s.Reason == planner.ScaleSunset {
		if patched.Annotations == nil {
			patched.Annotations = map[string]string{}
		}
		patched.Annotations[workload.AnnotationScaledDownAt] = now.UTC().Format(time.RFC3339)
	} else {
		delete(patched.Annotations, workload.AnnotationScaledDownAt)
	}
	if err := c.Patch(ctx, patched, client.MergeFromWithOptions(d, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("scale Deployment %s to %d: %w", d.Name, s.Replicas, err)
	}
	return nil
}

// deleteDeployment deletes a version's Deployment only if it is still the
// object the planner saw (same UID and resource version) and, unless the
// plan says it may still run (its TWD is being deleted), at zero.
func deleteDeployment(ctx context.Context, c client.Client, d *appsv1.Deployment, del planner.DeleteDeployment) error {
	if !d.DeletionTimestamp.IsZero() {
		return nil
	}
	if replicasOf(d) != 0 && !del.Running {
		return fmt.Errorf("refusing to delete Deployment %s: it has %d replicas", d.Name, replicasOf(d))
	}
	err := c.Delete(ctx, d, client.Preconditions{UID: &d.UID, ResourceVersion: &d.ResourceVersion},
		client.PropagationPolicy("Background"))
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("delete Deployment %s: %w", d.Name, err)
	}
	return nil
}
