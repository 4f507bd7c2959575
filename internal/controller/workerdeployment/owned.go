package workerdeployment

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/internal/ownedresource"
	"github.com/rainbow-deploy/rainbow/internal/planner"
)

// The kinds the controller may attach to versions by default. A cluster
// that attaches others grants them to the controller's role too (the
// admission webhook refuses kinds the controller may not manage).
// +kubebuilder:rbac:groups=temporal.io,resources=temporalworkerownedresources,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=temporal.io,resources=temporalworkerownedresources/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=autoscaling,resources=horizontalpodautoscalers,verbs=get;create;update;patch;delete
// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=get;create;update;patch;delete

const (
	// ownedByWorker indexes TemporalWorkerOwnedResources by spec.workerRef.name.
	ownedByWorker = "spec.workerRef.name"
	// retryOwned paces copies that failed to apply or delete: often a
	// permission or a webhook of that kind, which a person fixes.
	retryOwned = 30 * time.Second
	// reasonCopyNotDeleted: status named an object to delete that is not
	// a copy the controller made.
	reasonCopyNotDeleted = "CopyNotDeleted"
)

func indexOwnedByWorker(o client.Object) []string {
	return []string{o.(*v1alpha1.TemporalWorkerOwnedResource).Spec.WorkerRef.Name}
}

// workerOfOwned maps an owned resource to the TWD it names.
func workerOfOwned(_ context.Context, o client.Object) []reconcile.Request {
	or := o.(*v1alpha1.TemporalWorkerOwnedResource)
	return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: or.Namespace, Name: or.Spec.WorkerRef.Name}}}
}

// ownedChanged ignores the status writes the controller itself makes: only
// a new spec, a deletion or a lost finalizer needs a pass.
var ownedChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		return e.ObjectOld.GetGeneration() != e.ObjectNew.GetGeneration() ||
			!e.ObjectOld.GetDeletionTimestamp().Equal(e.ObjectNew.GetDeletionTimestamp()) ||
			!slices.Equal(e.ObjectOld.GetFinalizers(), e.ObjectNew.GetFinalizers())
	},
}

// observeOwned lists the TWD's owned resources, sorted by name, and what
// the planner needs of each.
func (r *Reconciler) observeOwned(ctx context.Context, o *observation) error {
	var list v1alpha1.TemporalWorkerOwnedResourceList
	if err := r.Client.List(ctx, &list, client.InNamespace(o.twd.Namespace), client.MatchingFields{ownedByWorker: o.twd.Name}); err != nil {
		return fmt.Errorf("list TemporalWorkerOwnedResources: %w", err)
	}
	slices.SortFunc(list.Items, func(a, b v1alpha1.TemporalWorkerOwnedResource) int { return strings.Compare(a.Name, b.Name) })
	o.owned = map[string]*v1alpha1.TemporalWorkerOwnedResource{}
	for i := range list.Items {
		or := &list.Items[i]
		o.owned[or.Name] = or
		p := plannerOwned(or, o.twd)
		p.ClusterScoped = r.clusterScoped(p.Object)
		o.input.OwnedResources = append(o.input.OwnedResources, p)
	}
	o.input.BannedKinds = r.bannedKinds()
	return nil
}

func (r *Reconciler) bannedKinds() []string {
	if r.BannedKinds == nil {
		return ownedresource.DefaultBannedKinds
	}
	return r.BannedKinds
}

// clusterScoped: the API server serves the kind of spec.object as a
// cluster-scoped one. An unknown kind is not (applying it fails anyway).
func (r *Reconciler) clusterScoped(obj map[string]any) bool {
	apiVersion, _ := obj["apiVersion"].(string)
	kind, _ := obj["kind"].(string)
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil || kind == "" {
		return false
	}
	m, err := r.Client.RESTMapper().RESTMapping(schema.GroupKind{Group: gv.Group, Kind: kind}, gv.Version)
	return err == nil && m.Scope.Name() != meta.RESTScopeNameNamespace
}

func plannerOwned(or *v1alpha1.TemporalWorkerOwnedResource, twd *v1alpha1.TemporalWorkerDeployment) planner.OwnedResource {
	var obj map[string]any
	if err := json.Unmarshal(or.Spec.Object.Raw, &obj); err != nil {
		obj = nil
	}
	finalized := controllerutil.ContainsFinalizer(or, v1alpha1.FinalizerOwnedResourceCleanup)
	p := planner.OwnedResource{
		Name:       or.Name,
		Generation: or.Generation,
		Object:     obj,
		Deleting:   !or.DeletionTimestamp.IsZero(),
		Finalized:  finalized,
		Adopted:    finalized && metav1.IsControlledBy(or, twd),
	}
	for _, v := range or.Status.Versions {
		c := planner.OwnedCopy{
			BuildID: v.BuildID, APIVersion: v.APIVersion, Kind: v.Kind, Name: v.ResourceName,
			Applied: v.Applied, Generation: v.Generation, Hash: v.Hash,
		}
		if v.AppliedAt != nil {
			c.AppliedAt = v.AppliedAt.Time
		}
		p.Copies = append(p.Copies, c)
	}
	return p
}

// ownedOutcome is how the copies of one owned resource went, by build ID.
type ownedOutcome struct {
	applied   map[string]bool
	applyErr  map[string]error
	deleteErr map[string]error
	adoptErr  error
}

// actOwned applies the plan's owned-resource work. Every copy is tried
// whatever happened to the others, and each owned resource's status says
// how its copies went: one that fails never holds up the rollout or
// another owned resource. It reports whether something failed.
func (r *Reconciler) actOwned(ctx context.Context, o *observation, res planner.Result, now time.Time) bool {
	outcomes := map[string]*ownedOutcome{}
	failed := false
	for _, w := range res.OwnedResources {
		or := o.owned[w.Name]
		if or == nil {
			continue
		}
		out := &ownedOutcome{applied: map[string]bool{}, applyErr: map[string]error{}, deleteErr: map[string]error{}}
		outcomes[w.Name] = out
		if w.Adopt {
			out.adoptErr = r.adoptOwned(ctx, o.twd, or)
		}
		for _, c := range w.Delete {
			refused, err := r.deleteCopy(ctx, o.input, or.Name, c)
			if err != nil {
				out.deleteErr[c.BuildID] = err
			}
			if refused != nil {
				// Not a copy of ours: left alone, and no longer on record.
				r.event(or, corev1.EventTypeWarning, reasonCopyNotDeleted, "%s %s named in status.versions (build ID %q) was not deleted: %v",
					c.Kind, c.Name, c.BuildID, refused)
			}
		}
		for _, a := range w.Apply {
			if err := r.applyCopy(ctx, or, a); err != nil {
				out.applyErr[a.Copy.BuildID] = err
			} else {
				out.applied[a.Copy.BuildID] = true
			}
		}
		if w.RemoveFinalizer && len(out.deleteErr) == 0 {
			patched := or.DeepCopy()
			controllerutil.RemoveFinalizer(patched, v1alpha1.FinalizerOwnedResourceCleanup)
			if err := r.Client.Patch(ctx, patched, client.MergeFrom(or)); err != nil && !apierrors.IsNotFound(err) {
				out.adoptErr = fmt.Errorf("remove finalizer: %w", err)
			}
		}
		failed = failed || out.adoptErr != nil || len(out.applyErr) > 0 || len(out.deleteErr) > 0
	}
	for _, st := range res.OwnedResourceStatus {
		or := o.owned[st.Name]
		if or == nil {
			continue
		}
		status := ownedStatus(or.Status, st, outcomes[st.Name], now)
		if equality.Semantic.DeepEqual(or.Status, status) {
			continue
		}
		patched := or.DeepCopy()
		patched.Status = status
		if err := r.Client.Status().Patch(ctx, patched, client.MergeFrom(or)); err != nil && !apierrors.IsNotFound(err) {
			failed = true
		}
	}
	return failed
}

// adoptOwned makes the TWD the owned resource's controller, so that it
// goes with the TWD, and adds the finalizer that deletes its copies.
func (r *Reconciler) adoptOwned(ctx context.Context, twd *v1alpha1.TemporalWorkerDeployment, or *v1alpha1.TemporalWorkerOwnedResource) error {
	patched := or.DeepCopy()
	controllerutil.AddFinalizer(patched, v1alpha1.FinalizerOwnedResourceCleanup)
	if !metav1.IsControlledBy(or, twd) {
		if ref := metav1.GetControllerOf(or); ref != nil {
			return fmt.Errorf("it is controlled by %s %s, not by TemporalWorkerDeployment %s", ref.Kind, ref.Name, twd.Name)
		}
		patched.OwnerReferences = append(patched.OwnerReferences, metav1.OwnerReference{
			APIVersion: v1alpha1.GroupVersion.String(), Kind: "TemporalWorkerDeployment",
			Name: twd.Name, UID: twd.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
		})
	}
	if err := r.Client.Patch(ctx, patched, client.MergeFromWithOptions(or, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("add finalizer and owner reference: %w", err)
	}
	*or = *patched
	return nil
}

// applyCopy server-side applies a copy under the owned resource's own
// field manager, so it shares the object with other managers (an HPA's
// controller writes only its status) without taking their fields.
func (r *Reconciler) applyCopy(ctx context.Context, or *v1alpha1.TemporalWorkerOwnedResource, a planner.OwnedApply) error {
	u := &unstructured.Unstructured{Object: a.Object}
	err := r.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(FieldManager(or.Name)), client.ForceOwnership)
	if err != nil {
		return fmt.Errorf("apply %s %s: %w", a.Copy.Kind, a.Copy.Name, err)
	}
	return nil
}

// deleteCopy deletes the object a recorded copy names if it is a copy the
// controller made (planner.DeleteRefusal, on what it reads now), with its
// UID as a precondition; refused says why it is not. An object already
// gone, or of a kind no longer served, counts as deleted.
func (r *Reconciler) deleteCopy(ctx context.Context, in planner.Input, owned string, c planner.OwnedCopy) (refused, err error) {
	gv, err := schema.ParseGroupVersion(c.APIVersion)
	if err != nil {
		return err, nil
	}
	gk := schema.GroupKind{Group: gv.Group, Kind: c.Kind}
	m, err := r.Client.RESTMapper().RESTMapping(gk, gv.Version)
	if meta.IsNoMatchError(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("delete %s %s: %w", c.Kind, c.Name, err)
	}
	obs := planner.ObservedObject{Namespaced: m.Scope.Name() == meta.RESTScopeNameNamespace}
	if obs.Namespaced && c.Name != "" {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gv.WithKind(c.Kind))
		var reader client.Reader = r.Client
		if r.APIReader != nil {
			reader = r.APIReader
		}
		switch err := reader.Get(ctx, client.ObjectKey{Namespace: in.Namespace, Name: c.Name}, u); {
		case apierrors.IsNotFound(err):
			return nil, nil
		case apierrors.IsForbidden(err):
			return fmt.Errorf("it cannot be read to check that it is a copy: %w", err), nil
		case err != nil:
			return nil, fmt.Errorf("delete %s %s: %w", c.Kind, c.Name, err)
		}
		obs.Namespace, obs.UID, obs.Labels, obs.Owners = u.GetNamespace(), string(u.GetUID()), u.GetLabels(), u.GetOwnerReferences()
	}
	if refused := planner.DeleteRefusal(in, owned, c, obs); refused != nil {
		return refused, nil
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gv.WithKind(c.Kind))
	u.SetNamespace(obs.Namespace)
	u.SetName(c.Name)
	err = r.Client.Delete(ctx, u, client.PropagationPolicy(metav1.DeletePropagationBackground),
		client.Preconditions{UID: ptr.To(types.UID(obs.UID))})
	switch {
	case apierrors.IsConflict(err):
		return fmt.Errorf("it was replaced after it was read (UID %s no longer matches)", obs.UID), nil
	case err != nil && !apierrors.IsNotFound(err):
		return nil, fmt.Errorf("delete %s %s: %w", c.Kind, c.Name, err)
	}
	return nil, nil
}

// FieldManager is the server-side apply field manager of an owned
// resource's copies: one per owned resource, so two never take each
// other's fields.
func FieldManager(owned string) string {
	const prefix, limit = "rainbow/", 128
	if len(prefix)+len(owned) <= limit {
		return prefix + owned
	}
	sum := sha256.Sum256([]byte(owned))
	return prefix + owned[:limit-len(prefix)-17] + "-" + hex.EncodeToString(sum[:])[:16]
}

// ownedStatus is the owned resource's status after this pass: the plan's,
// with what failed recorded per version.
func ownedStatus(old v1alpha1.TemporalWorkerOwnedResourceStatus, st planner.OwnedResourceStatus, out *ownedOutcome, now time.Time) v1alpha1.TemporalWorkerOwnedResourceStatus {
	if out == nil {
		out = &ownedOutcome{}
	}
	prev := map[string]v1alpha1.OwnedResourceVersion{}
	for _, v := range old.Versions {
		prev[v.BuildID] = v
	}
	status := v1alpha1.TemporalWorkerOwnedResourceStatus{ObservedGeneration: st.Generation, Conditions: slices.Clone(old.Conditions)}
	var problems, running []string
	for _, pv := range st.Versions {
		b := pv.Copy.BuildID
		v := v1alpha1.OwnedResourceVersion{
			BuildID: b, Applied: pv.Copy.Applied, APIVersion: pv.Copy.APIVersion, Kind: pv.Copy.Kind,
			ResourceName: pv.Copy.Name, Generation: pv.Copy.Generation, Hash: pv.Copy.Hash,
			AppliedAt: prev[b].AppliedAt, Message: pv.Error,
		}
		if err := out.deleteErr[b]; err != nil {
			// The earlier copy is still there: keep it on record.
			p := prev[b]
			p.Applied, p.Message = false, v1alpha1.BoundMessage(err.Error(), v1alpha1.MaxVersionMessage)
			status.Versions = append(status.Versions, p)
			problems = append(problems, b+": "+p.Message)
			continue
		}
		if pv.Deleting {
			continue
		}
		running = append(running, b)
		switch {
		case out.applied[b]:
			v.Applied, v.AppliedAt, v.Message = true, &metav1.Time{Time: now}, ""
		case out.applyErr[b] != nil:
			v.Applied, v.Message = false, out.applyErr[b].Error()
		}
		if !v.Applied && v.Message == "" && prev[b].Message != "" {
			v.Message = prev[b].Message
		}
		// An error may quote a value of any length: bounded, so that the
		// status (the record of the copies) can always be written.
		v.Message = v1alpha1.BoundMessage(v.Message, v1alpha1.MaxVersionMessage)
		if v.Message != "" {
			problems = append(problems, b+": "+v.Message)
		}
		status.Versions = append(status.Versions, v)
	}
	cond := metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonApplied, ObservedGeneration: st.Generation}
	switch {
	case out.adoptErr != nil:
		problems = append([]string{out.adoptErr.Error()}, problems...)
		fallthrough
	case len(problems) > 0:
		cond.Status, cond.Reason = metav1.ConditionFalse, v1alpha1.ReasonApplyFailed
		cond.Message = fmt.Sprintf("%d problem(s): %s; fix spec.object (or the permissions it needs) and the controller retries every %s",
			len(problems), strings.Join(problems, "; "), retryOwned)
	case len(running) == 0:
		cond.Message = "no version of the TemporalWorkerDeployment has running workers yet"
	default:
		cond.Message = fmt.Sprintf("applied to %d version(s): %s", len(running), strings.Join(running, ", "))
	}
	v1alpha1.SetCondition(&status.Conditions, cond)
	return status
}

// orphanedOwned handles the owned resources of a TWD that does not exist:
// a deleted one loses its finalizer (its copies went with the versions'
// Deployments), the others say what they wait for.
func (r *Reconciler) orphanedOwned(ctx context.Context, key client.ObjectKey) error {
	var list v1alpha1.TemporalWorkerOwnedResourceList
	if err := r.Client.List(ctx, &list, client.InNamespace(key.Namespace), client.MatchingFields{ownedByWorker: key.Name}); err != nil {
		return err
	}
	for i := range list.Items {
		or := &list.Items[i]
		if !or.DeletionTimestamp.IsZero() {
			if controllerutil.ContainsFinalizer(or, v1alpha1.FinalizerOwnedResourceCleanup) {
				patched := or.DeepCopy()
				controllerutil.RemoveFinalizer(patched, v1alpha1.FinalizerOwnedResourceCleanup)
				if err := r.Client.Patch(ctx, patched, client.MergeFrom(or)); err != nil && !apierrors.IsNotFound(err) {
					return err
				}
			}
			continue
		}
		patched := or.DeepCopy()
		patched.Status.ObservedGeneration = or.Generation
		v1alpha1.SetCondition(&patched.Status.Conditions, metav1.Condition{
			Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonWorkerDeploymentNotFound,
			ObservedGeneration: or.Generation,
			Message: fmt.Sprintf("TemporalWorkerDeployment %s does not exist in namespace %s; create it, or fix spec.workerRef.name by recreating this object",
				key.Name, key.Namespace),
		})
		if equality.Semantic.DeepEqual(or.Status, patched.Status) {
			continue
		}
		if err := r.Client.Status().Patch(ctx, patched, client.MergeFrom(or)); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return nil
}
