package temporalconnection

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/internal/connection"
)

// SetupWithManager registers the reconciler and its watches. The
// manager must have the indexes of connection.RegisterIndexes.
func (r *Reconciler) SetupWithManager(mgr manager.Manager) error {
	return builder.ControllerManagedBy(mgr).
		For(&v1alpha1.TemporalConnection{}, builder.WithPredicates(specOrLifecycleChanged)).
		// Metadata is enough to wake the users of a Secret; its data is
		// read on demand (internal/manager/trim.go).
		WatchesMetadata(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.connectionsNaming)).
		Watches(&v1alpha1.TemporalWorkerDeployment{}, handler.EnqueueRequestsFromMapFunc(r.deletingConnectionOf)).
		// A probe of an unreachable server waits for its timeout; one
		// such connection should not delay the others.
		WithOptions(controller.Options{MaxConcurrentReconciles: 4}).
		Named("temporalconnection").
		Complete(r)
}

// specOrLifecycleChanged skips the updates our own writes (status, adding
// the finalizer) cause, each of which would otherwise probe again. A
// finalizer removed by someone else is put back.
var specOrLifecycleChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		o, n := e.ObjectOld, e.ObjectNew
		return o.GetGeneration() != n.GetGeneration() ||
			o.GetDeletionTimestamp().IsZero() != n.GetDeletionTimestamp().IsZero() ||
			!controllerutil.ContainsFinalizer(n, Finalizer)
	},
}

// connectionsNaming maps a Secret to the connections that name it, so a
// created, fixed or rotated Secret is checked at once.
func (r *Reconciler) connectionsNaming(ctx context.Context, s client.Object) []reconcile.Request {
	var conns v1alpha1.TemporalConnectionList
	if err := r.Client.List(ctx, &conns, client.InNamespace(s.GetNamespace()), client.MatchingFields{connection.ConnectionsBySecret: s.GetName()}); err != nil {
		log.FromContext(ctx).Error(err, "list TemporalConnections naming Secret", "secret", client.ObjectKeyFromObject(s))
		return nil
	}
	reqs := make([]reconcile.Request, len(conns.Items))
	for i := range conns.Items {
		reqs[i] = reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&conns.Items[i])}
	}
	return reqs
}

// deletingConnectionOf maps a TemporalWorkerDeployment to its connection
// when that one waits to be deleted, so the deletion goes on as soon as
// the last user goes. Other connections do not care: this skips a probe
// on every status write of every TemporalWorkerDeployment.
func (r *Reconciler) deletingConnectionOf(ctx context.Context, o client.Object) []reconcile.Request {
	key := client.ObjectKey{Namespace: o.GetNamespace(), Name: connection.ConnectionRefOf(o)[0]}
	var conn v1alpha1.TemporalConnection
	if err := r.Client.Get(ctx, key, &conn); err != nil || conn.DeletionTimestamp.IsZero() {
		return nil
	}
	return []reconcile.Request{{NamespacedName: key}}
}
