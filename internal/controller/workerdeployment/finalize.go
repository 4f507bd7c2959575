package workerdeployment

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/internal/planner"
)

// Finalizer holds a TWD until its workers and its versions in Temporal are
// gone; the planner decides each step (planner.Input.Deletion).
const Finalizer = v1alpha1.FinalizerCleanup

// deletion is the planner's view of a deletion request, nil while the TWD
// is not being deleted.
func deletion(twd *v1alpha1.TemporalWorkerDeployment) *planner.Deletion {
	if twd.DeletionTimestamp.IsZero() {
		return nil
	}
	d := &planner.Deletion{
		Object:               twd.Namespace + "/" + twd.Name,
		RequestedAt:          twd.DeletionTimestamp.Time,
		Policy:               twd.Spec.Deletion.Policy,
		StatusShowedVersions: statusShowsVersions(twd.Status),
	}
	if d.Policy == "" {
		d.Policy = v1alpha1.DeletionWaitForDrain
	}
	if w := twd.Spec.Deletion.MaxDrainWait; w != nil {
		d.MaxDrainWait = w.Duration
	}
	return d
}

// statusShowsVersions: the status reported a version that Temporal may
// know, so Temporal may hold something of this TWD.
func statusShowsVersions(st v1alpha1.TemporalWorkerDeploymentStatus) bool {
	return st.CurrentVersion != nil || st.RampingVersion != nil || len(st.DeprecatedVersions) > 0 ||
		(st.TargetVersion != nil && st.TargetVersion.Status != v1alpha1.VersionNotRegistered)
}

// removeFinalizer lets the API server delete the TWD once the plan's last
// deletion steps succeeded.
func (r *Reconciler) removeFinalizer(ctx context.Context, twd *v1alpha1.TemporalWorkerDeployment) error {
	patched := twd.DeepCopy()
	controllerutil.RemoveFinalizer(patched, Finalizer)
	if err := r.Client.Patch(ctx, patched, client.MergeFrom(twd)); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	r.Pool.Forget(ownerKey(twd))
	return nil
}

// retryDeleting paces a deletion whose step failed.
const retryDeleting = 2 * time.Second
