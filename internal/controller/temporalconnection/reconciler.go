// Package connection reconciles TemporalConnections: it checks that the
// server answers with the configured credentials and runs a version the
// controller supports, reports that in the Ready condition, and keeps a
// connection from being deleted while TemporalWorkerDeployments still use
// it.
package temporalconnection

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/internal/connection"
	"github.com/rainbow-deploy/rainbow/internal/temporal"
)

// Finalizer keeps a TemporalConnection until no TemporalWorkerDeployment
// names it: their cleanup in Temporal needs its address and credentials.
const Finalizer = "temporal.io/connection-in-use"

// Reconciler reconciles TemporalConnections.
type Reconciler struct {
	Client client.Client
	// Pool probes the servers; the connection controller holds no client.
	Pool     Prober
	Recorder events.EventRecorder
	Clock    clock.PassiveClock
	// AllowedHosts are the addresses probed at all; another is reported
	// AddressNotAllowed without a dial (the pool refuses it too).
	AllowedHosts temporal.AllowedHosts
}

// Prober checks a server and returns the version it reports;
// *temporal.Pool is the real one.
type Prober interface {
	Probe(ctx context.Context, params temporal.ConnectionParams) (serverVersion string, err error)
}

// +kubebuilder:rbac:groups=temporal.io,resources=temporalconnections,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=temporal.io,resources=temporalconnections/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=temporal.io,resources=temporalconnections/finalizers,verbs=update
// +kubebuilder:rbac:groups=temporal.io,resources=temporalworkerdeployments,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile checks one connection, or finishes its deletion.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var conn v1alpha1.TemporalConnection
	if err := r.Client.Get(ctx, req.NamespacedName, &conn); err != nil {
		if apierrors.IsNotFound(err) {
			reachable.DeleteLabelValues(req.Namespace, req.Name)
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !conn.DeletionTimestamp.IsZero() {
		reachable.DeleteLabelValues(conn.Namespace, conn.Name)
		return reconcile.Result{}, r.finalize(ctx, &conn)
	}
	if !controllerutil.ContainsFinalizer(&conn, Finalizer) {
		if err := r.patchFinalizer(ctx, &conn, controllerutil.AddFinalizer); err != nil {
			return reconcile.Result{}, err
		}
	}
	ready, version, err := r.check(ctx, &conn)
	if err != nil {
		return reconcile.Result{}, err
	}
	observeReachable(conn.Namespace, conn.Name, ready)
	if err := r.setReady(ctx, &conn, ready, version); err != nil {
		return reconcile.Result{}, err
	}
	return reconcile.Result{RequeueAfter: recheckAfter(*meta.FindStatusCondition(conn.Status.Conditions, v1alpha1.ConditionReady), r.Clock.Now())}, nil
}

// check resolves the connection's Secrets, probes the server and checks
// its version, which it returns ("" when the server was not reached). err
// is only for failures to read from the API server.
func (r *Reconciler) check(ctx context.Context, conn *v1alpha1.TemporalConnection) (metav1.Condition, string, error) {
	// No Temporal namespace: a connection serves any of them.
	resolved, prob, err := connection.ResolveObject(ctx, r.Client, conn, "", r.AllowedHosts, r.Clock.Now())
	if err != nil {
		return metav1.Condition{}, "", err
	}
	if prob != nil {
		return notReady(prob.Reason, prob.Message), "", nil
	}
	version, err := r.Pool.Probe(ctx, resolved.Params)
	if err != nil {
		if ctx.Err() != nil {
			// Shutting down: the server did nothing wrong.
			return metav1.Condition{}, "", ctx.Err()
		}
		log.FromContext(ctx).V(1).Info("Temporal probe failed", "hostPort", conn.Spec.HostPort, "error", err.Error())
		return notReady(v1alpha1.ReasonTemporalClientCreationFailed, unreachableMessage(conn.Spec, resolved.Params.TLS, err)), "", nil
	}
	if temporal.ServerTooOld(version) {
		prob := connection.UnsupportedServer(conn.Spec.HostPort, version)
		return notReady(prob.Reason, prob.Message), version, nil
	}
	return metav1.Condition{
		Type:    v1alpha1.ConditionReady,
		Status:  metav1.ConditionTrue,
		Reason:  v1alpha1.ReasonReachable,
		Message: reachableMessage(conn.Spec, resolved.Params.TLS, version),
	}, version, nil
}

// finalize removes the finalizer once no TemporalWorkerDeployment names
// the connection, and says which ones block it until then.
func (r *Reconciler) finalize(ctx context.Context, conn *v1alpha1.TemporalConnection) error {
	if !controllerutil.ContainsFinalizer(conn, Finalizer) {
		return nil
	}
	var users v1alpha1.TemporalWorkerDeploymentList
	if err := r.Client.List(ctx, &users, client.InNamespace(conn.Namespace), client.MatchingFields{connection.WorkerDeploymentsByConnection: conn.Name}); err != nil {
		return fmt.Errorf("list TemporalWorkerDeployments using TemporalConnection %s: %w", conn.Name, err)
	}
	if len(users.Items) > 0 {
		names := make([]string, len(users.Items))
		for i, d := range users.Items {
			names[i] = d.Name
		}
		// The TemporalWorkerDeployment watch brings us back when one goes.
		return r.setReady(ctx, conn, notReady(v1alpha1.ReasonDeletionBlocked, blockedMessage(conn.Name, names)), "")
	}
	// No Event: the object goes now, often with its namespace, which
	// refuses new Events.
	return r.patchFinalizer(ctx, conn, controllerutil.RemoveFinalizer)
}

// patchFinalizer adds or removes the finalizer. The optimistic lock keeps
// a merge patch of the list from dropping another controller's finalizer.
func (r *Reconciler) patchFinalizer(ctx context.Context, conn *v1alpha1.TemporalConnection, change func(client.Object, string) bool) error {
	orig := conn.DeepCopy()
	change(conn, Finalizer)
	if err := r.Client.Patch(ctx, conn, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("update finalizers of TemporalConnection %s: %w", conn.Name, err)
	}
	return nil
}

// setReady writes the status if ready or serverVersion changes it, with an
// Event saying why ready changed. An empty serverVersion keeps the last
// one: a server that cannot be reached for a while stays known as it was.
// conn's status is updated in place, so callers see the stored condition.
func (r *Reconciler) setReady(ctx context.Context, conn *v1alpha1.TemporalConnection, ready metav1.Condition, serverVersion string) error {
	orig := conn.DeepCopy()
	ready.ObservedGeneration = conn.Generation
	ready.LastTransitionTime = metav1.NewTime(r.Clock.Now())
	v1alpha1.SetCondition(&conn.Status.Conditions, ready)
	// kstatus' "failed": a connection that cannot be used needs someone to
	// act, so tools waiting on it stop at once instead of timing out.
	stalled := ready
	stalled.Type, stalled.Status = v1alpha1.ConditionStalled, metav1.ConditionFalse
	if ready.Status != metav1.ConditionTrue {
		stalled.Status = metav1.ConditionTrue
	}
	v1alpha1.SetCondition(&conn.Status.Conditions, stalled)
	conn.Status.ObservedGeneration = conn.Generation
	if serverVersion != "" {
		conn.Status.ServerVersion = serverVersion
	}
	if equality.Semantic.DeepEqual(orig.Status, conn.Status) {
		return nil
	}
	if err := r.Client.Status().Patch(ctx, conn, client.MergeFrom(orig)); err != nil {
		return fmt.Errorf("update status of TemporalConnection %s: %w", conn.Name, err)
	}
	if old := meta.FindStatusCondition(orig.Status.Conditions, ready.Type); old == nil ||
		old.Status != ready.Status || old.Reason != ready.Reason || old.Message != ready.Message {
		kind := corev1.EventTypeWarning
		if ready.Status == metav1.ConditionTrue {
			kind = corev1.EventTypeNormal
		}
		r.Recorder.Eventf(conn, nil, kind, ready.Reason, "CheckConnection", "%s", ready.Message)
	}
	return nil
}

func notReady(reason, message string) metav1.Condition {
	return metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: reason, Message: message}
}
