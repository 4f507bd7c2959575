package workerdeployment

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/internal/connection"
	"github.com/rainbow-deploy/rainbow/internal/planner"
	"github.com/rainbow-deploy/rainbow/internal/temporal"
)

// retryDeleting paces the wait for pollers to go away during deletion.
const retryDeleting = 2 * time.Second

// finalize removes the TWD's footprint: routing moves to unversioned
// workers, the Deployments go, then each version and the worker deployment
// are deleted from Temporal once no worker polls them. While Temporal is
// unreachable nothing is deleted, and the conditions say why.
func (r *Reconciler) finalize(ctx context.Context, twd *v1alpha1.TemporalWorkerDeployment) (reconcile.Result, error) {
	if !controllerutil.ContainsFinalizer(twd, Finalizer) {
		return reconcile.Result{}, nil
	}
	done, cond, err := r.cleanup(ctx, twd)
	if err != nil {
		return reconcile.Result{}, err
	}
	if done {
		patched := twd.DeepCopy()
		controllerutil.RemoveFinalizer(patched, Finalizer)
		if err := r.Client.Patch(ctx, patched, client.MergeFrom(twd)); err != nil && !apierrors.IsNotFound(err) {
			return reconcile.Result{}, err
		}
		r.Pool.Forget(ownerKey(twd))
		return reconcile.Result{}, nil
	}
	st := *twd.Status.DeepCopy()
	// Deletion bumps the generation; the conditions below describe it.
	st.ObservedGeneration = twd.Generation
	setCondition(&st.Conditions, v1alpha1.ConditionReady, planner.Condition{Status: metav1.ConditionFalse, Reason: cond.Reason, Message: cond.Message}, twd.Generation)
	setCondition(&st.Conditions, v1alpha1.ConditionProgressing, cond, twd.Generation)
	if err := r.writeStatus(ctx, twd, st); err != nil {
		return reconcile.Result{}, err
	}
	return reconcile.Result{RequeueAfter: retryDeleting}, nil
}

// cleanup does the next deletion steps; done means the finalizer may go.
func (r *Reconciler) cleanup(ctx context.Context, twd *v1alpha1.TemporalWorkerDeployment) (bool, planner.Condition, error) {
	name := DeploymentName(twd)
	blocked := func(reason, format string, args ...any) (bool, planner.Condition, error) {
		return false, planner.Condition{Status: metav1.ConditionFalse, Reason: reason,
			Message: "deletion waits: " + fmt.Sprintf(format, args...)}, nil
	}
	waiting := func(format string, args ...any) (bool, planner.Condition, error) {
		return false, planner.Condition{Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonDeleting, Message: fmt.Sprintf(format, args...)}, nil
	}

	conn, prob, err := connection.Resolve(ctx, r.Client, twd.Namespace, twd.Spec.WorkerOptions.ConnectionRef.Name,
		twd.Spec.WorkerOptions.TemporalNamespace, r.Clock.Now())
	if err != nil {
		return false, planner.Condition{}, err
	}
	if prob != nil {
		if prob.Reason == v1alpha1.ReasonTemporalConnectionNotFound && !everDeployed(ctx, r.Client, twd) {
			// It never ran a worker, so Temporal holds nothing of it.
			r.event(twd, corev1.EventTypeWarning, prob.Reason,
				"not cleaning up worker deployment %s in Temporal: %s", name, prob.Message)
			return true, planner.Condition{}, nil
		}
		return blocked(prob.Reason, "%s; its workers and versions stay until it can reach Temporal "+
			"(to give up on cleaning up Temporal, remove the finalizer %s by hand)", prob.Message, Finalizer)
	}
	c, err := r.Pool.Get(ctx, ownerKey(twd), conn.Params)
	if err != nil {
		return blocked(v1alpha1.ReasonTemporalClientCreationFailed, "cannot connect to Temporal at %s to remove worker deployment %s: %v", conn.Params.HostPort, name, err)
	}
	api := temporal.NewAPI(c, conn.Params.Namespace, r.Pool.Identity())
	state, token, err := api.Describe(ctx, name)
	if err != nil {
		return blocked(v1alpha1.ReasonTemporalStateFetchFailed, "cannot read worker deployment %s from Temporal: %v", name, err)
	}
	if m := state.ManagerIdentity; m != "" && m != r.Pool.Identity() {
		// Its routing is not ours to move, and its workers must not go
		// while it sends workflows to them.
		if routed := routedVersions(state); len(routed) > 0 {
			return blocked(v1alpha1.ReasonManagedByOtherIdentity, "identity %q manages worker deployment %s and routes new workflows to versions %v "+
				"of this TemporalWorkerDeployment; route them elsewhere or clear the manager identity, and deletion goes on", m, name, routed)
		}
		r.event(twd, corev1.EventTypeWarning, v1alpha1.ReasonManagedByOtherIdentity,
			"leaving worker deployment %s in Temporal as it is: identity %q manages it", name, m)
		return true, planner.Condition{}, r.deleteAllDeployments(ctx, twd)
	}

	// Routing first, so no new workflow goes to a version losing its workers.
	if state.RampingBuildID != "" {
		if _, err := api.RemoveRamp(ctx, name, token); err != nil {
			return blocked(v1alpha1.ReasonPlanExecutionFailed, "removing the ramp of worker deployment %s: %v", name, err)
		}
		r.event(twd, corev1.EventTypeNormal, v1alpha1.ReasonDeleting, "removed the ramp of version %s of worker deployment %s", state.RampingBuildID, name)
		return waiting("removed the ramp of worker deployment %s", name)
	}
	if state.CurrentBuildID != "" {
		if _, err := api.SetCurrent(ctx, name, "", token); err != nil {
			return blocked(v1alpha1.ReasonPlanExecutionFailed, "sending new workflows of worker deployment %s to unversioned workers: %v", name, err)
		}
		r.event(twd, corev1.EventTypeNormal, v1alpha1.ReasonDeleting, "new workflows of worker deployment %s now go to unversioned workers", name)
		return waiting("moved new workflows of worker deployment %s to unversioned workers", name)
	}
	if err := r.deleteAllDeployments(ctx, twd); err != nil {
		return false, planner.Condition{}, err
	}
	var polled []string
	for _, v := range state.Versions {
		err := api.DeleteVersionSkipDrainage(ctx, name, v.BuildID)
		switch {
		case err == nil, errors.Is(err, temporal.ErrNotFound):
		case errors.Is(err, temporal.ErrVersionInUse):
			polled = append(polled, v.BuildID)
		default:
			return blocked(v1alpha1.ReasonPlanExecutionFailed, "deleting version %s of worker deployment %s: %v", v.BuildID, name, err)
		}
	}
	if len(polled) > 0 {
		return waiting("waiting for Temporal to forget the pollers of versions %v before deleting them; "+
			"the workers are stopped, and Temporal drops a poller after its poller history TTL (5 minutes by default)", polled)
	}
	if !state.Exists {
		return true, planner.Condition{}, nil
	}
	if err := api.DeleteDeployment(ctx, name); err != nil && !errors.Is(err, temporal.ErrNotFound) {
		return blocked(v1alpha1.ReasonPlanExecutionFailed, "deleting worker deployment %s: %v", name, err)
	}
	r.event(twd, corev1.EventTypeNormal, v1alpha1.ReasonDeleting, "deleted worker deployment %s and its versions from Temporal", name)
	return true, planner.Condition{}, nil
}

// routedVersions are the versions new workflows go to.
func routedVersions(s *planner.TemporalState) []string {
	var out []string
	for _, b := range []string{s.CurrentBuildID, s.RampingBuildID} {
		if b != "" {
			out = append(out, b)
		}
	}
	return out
}

// everDeployed: the TWD has, or reported, a version that may be known to
// Temporal. Without a connection the controller cannot tell for sure, so
// anything it may have registered counts.
func everDeployed(ctx context.Context, c client.Client, twd *v1alpha1.TemporalWorkerDeployment) bool {
	st := twd.Status
	if st.CurrentVersion != nil || st.RampingVersion != nil || len(st.DeprecatedVersions) > 0 ||
		(st.TargetVersion != nil && st.TargetVersion.Status != v1alpha1.VersionNotRegistered) {
		return true
	}
	deps, err := ownedDeployments(ctx, c, twd)
	return err != nil || len(deps) > 0
}

// deleteAllDeployments deletes every versioned Deployment of the TWD: the
// user deleted the TWD, so its workers go.
func (r *Reconciler) deleteAllDeployments(ctx context.Context, twd *v1alpha1.TemporalWorkerDeployment) error {
	deps, err := ownedDeployments(ctx, r.Client, twd)
	if err != nil {
		return err
	}
	for _, d := range deps {
		if !d.DeletionTimestamp.IsZero() {
			continue
		}
		if err := r.Client.Delete(ctx, d, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete Deployment %s: %w", d.Name, err)
		}
		r.event(twd, corev1.EventTypeNormal, v1alpha1.ReasonDeleting, "deleted Deployment %s: its TemporalWorkerDeployment is being deleted", d.Name)
	}
	return nil
}
