// Package workerdeployment reconciles TemporalWorkerDeployments: it
// observes the versioned Deployments and the Temporal worker deployment,
// asks the planner what to do, and applies the plan.
package workerdeployment

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/internal/temporal"

	"sigs.k8s.io/controller-runtime/pkg/builder"
)

// Reconciler reconciles TemporalWorkerDeployments.
type Reconciler struct {
	Client   ctrl.Client
	Pool     *temporal.Pool
	Recorder events.EventRecorder
	Clock    clock.PassiveClock
	// MaxVersions is Temporal's limit of versions per worker deployment
	// (the server's matching.maxVersionsInDeployment); 0 = no limit.
	MaxVersions int
}

// SetupWithManager registers the reconciler and its watches.
func (r *Reconciler) SetupWithManager(mgr manager.Manager) error {
	return builder.ControllerManagedBy(mgr).
		For(&v1alpha1.TemporalWorkerDeployment{}).
		Owns(&appsv1.Deployment{}).
		Named("temporalworkerdeployment").
		Complete(r)
}

// Reconcile runs one observe, plan, act pass.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	return reconcile.Result{}, nil
}
