package migrate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/internal/buildid"
	"github.com/rainbow-deploy/rainbow/internal/ownedresource"
	"github.com/rainbow-deploy/rainbow/internal/workload"
)

// Options are the switch's flags.
type Options struct {
	// Namespace limits the switch; "" is every namespace.
	Namespace         string
	IncumbentIdentity string
	GitOpsPaused      bool
}

// Observe reads everything the switch plans from, as the user: c carries
// the user's credentials, so the switch can do nothing they could not.
func Observe(ctx context.Context, c client.Client, o Options) (Snapshot, error) {
	s := Snapshot{IncumbentIdentity: o.IncumbentIdentity, GitOpsPaused: o.GitOpsPaused}
	in := []client.ListOption{}
	if o.Namespace != "" {
		in = append(in, client.InNamespace(o.Namespace))
	}
	var err error
	if s.WorkerDeployments, err = listIncumbent(ctx, c, KindWorkerDeployment, in); err != nil {
		return s, err
	}
	if s.Connections, err = listIncumbent(ctx, c, KindConnection, in); err != nil {
		return s, err
	}
	if s.Templates, err = listIncumbent(ctx, c, KindWorkerResourceTemplate, in); err != nil {
		return s, err
	}
	var deps appsv1.DeploymentList
	if err := c.List(ctx, &deps, append(in, client.HasLabels{workload.LabelBuildID})...); err != nil {
		return s, fmt.Errorf("list Deployments: %w", err)
	}
	s.Deployments = deps.Items
	var twds v1alpha1.TemporalWorkerDeploymentList
	if err := c.List(ctx, &twds, in...); err != nil {
		return s, fmt.Errorf("list TemporalWorkerDeployments (are Rainbow's CRDs installed?): %w", err)
	}
	s.TWDs = twds.Items
	var conns v1alpha1.TemporalConnectionList
	if err := c.List(ctx, &conns, in...); err != nil {
		return s, fmt.Errorf("list TemporalConnections: %w", err)
	}
	s.TemporalConnections = conns.Items
	var twors v1alpha1.TemporalWorkerOwnedResourceList
	if err := c.List(ctx, &twors, in...); err != nil {
		return s, fmt.Errorf("list TemporalWorkerOwnedResources (are Rainbow's CRDs installed?): %w", err)
	}
	s.TWORs = twors.Items

	var ctrls appsv1.DeploymentList
	switch err := c.List(ctx, &ctrls, client.MatchingLabels{LabelIncumbentApp: IncumbentApp}); {
	case apierrors.IsForbidden(err):
		s.Unchecked = append(s.Unchecked, "that the worker controller is stopped (Deployments labelled "+LabelIncumbentApp+"="+IncumbentApp+" in any namespace)")
	case err != nil:
		return s, fmt.Errorf("look for the worker controller: %w", err)
	}
	s.Controllers = ctrls.Items
	var hooks admissionregistrationv1.ValidatingWebhookConfigurationList
	switch err := c.List(ctx, &hooks); {
	case apierrors.IsForbidden(err):
		s.Unchecked = append(s.Unchecked, "that the worker controller's admission webhooks are gone (ValidatingWebhookConfigurations)")
	case err != nil:
		return s, fmt.Errorf("look for the worker controller's webhooks: %w", err)
	}
	for _, h := range hooks.Items {
		if slices.ContainsFunc(h.Webhooks, func(w admissionregistrationv1.ValidatingWebhook) bool {
			return slices.Contains(IncumbentWebhooks, w.Name)
		}) {
			s.Webhooks = append(s.Webhooks, h.Name)
		}
	}
	return s, nil
}

// listIncumbent lists one of the incumbent's kinds; none when its CRD is
// not installed.
func listIncumbent(ctx context.Context, c client.Client, kind string, opts []client.ListOption) ([]unstructured.Unstructured, error) {
	var l unstructured.UnstructuredList
	l.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind(kind + "List"))
	if err := c.List(ctx, &l, opts...); err != nil {
		if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("list the worker controller's %ss: %w", kind, err)
	}
	return l.Items, nil
}

// Run makes the plan's steps, in order, each idempotent: a run interrupted
// half-way is finished by running again. It stops at the first failure.
func Run(ctx context.Context, c client.Client, p Plan, out io.Writer) error {
	if len(p.Refusals) > 0 {
		return errors.New("refused; nothing was changed")
	}
	for i, s := range p.Steps {
		if err := act(ctx, c, s); err != nil {
			return fmt.Errorf("step %d (%s): %w; steps before it are done, run migrate again to go on", i+1, s.Says, err)
		}
		fmt.Fprintf(out, "done: %s\n", s.Says)
	}
	return nil
}

func act(ctx context.Context, c client.Client, s Step) error {
	switch s.Kind {
	case CreateConnection:
		return ignoreExists(c.Create(ctx, s.Connection.DeepCopy()))
	case CreateWorker:
		return createWorker(ctx, c, s.TWD.DeepCopy())
	case AdoptDeployment:
		return adoptDeployment(ctx, c, s)
	case ReplaceTemplate:
		if err := deleteIncumbent(ctx, c, KindWorkerResourceTemplate, s, metav1.DeletePropagationBackground); err != nil {
			return err
		}
		return ignoreExists(c.Create(ctx, s.TWOR.DeepCopy()))
	case RetireWorker:
		if err := ownsNoDeployment(ctx, c, s.Namespace, "WorkerDeployment "+s.Name, types.UID(s.IncumbentUID)); err != nil {
			return err
		}
		return deleteIncumbent(ctx, c, KindWorkerDeployment, s, metav1.DeletePropagationOrphan)
	case RetireConnection:
		return deleteIncumbent(ctx, c, KindConnection, s, metav1.DeletePropagationOrphan)
	case HoldWorker:
		patch := []byte(fmt.Sprintf(`{"metadata":{"annotations":{%q:"true"}}}`, v1alpha1.AnnotationAdoptionPending))
		twd := &v1alpha1.TemporalWorkerDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: s.Name}}
		return c.Patch(ctx, twd, client.RawPatch(types.MergePatchType, patch))
	case CreateIncumbentConn, CreateIncumbent:
		return ignoreExists(c.Create(ctx, s.Incumbent.DeepCopy()))
	case ReturnDeployment:
		return returnDeployment(ctx, c, s)
	case ReturnOwned:
		return returnOwned(ctx, c, s)
	case RetireTWD:
		var twd v1alpha1.TemporalWorkerDeployment
		if err := c.Get(ctx, types.NamespacedName{Namespace: s.Namespace, Name: s.Name}, &twd); apierrors.IsNotFound(err) {
			return nil
		} else if err != nil {
			return err
		}
		if err := ownsNoDeployment(ctx, c, s.Namespace, "TemporalWorkerDeployment "+s.Name, twd.UID); err != nil {
			return err
		}
		return removeWithoutCleanup(ctx, c, &twd, s, metav1.DeletePropagationBackground)
	case RetireTConn:
		return removeWithoutCleanup(ctx, c, &v1alpha1.TemporalConnection{}, s, metav1.DeletePropagationBackground)
	case FinishAdoption:
		patch := []byte(fmt.Sprintf(`{"metadata":{"annotations":{%q:null}}}`, v1alpha1.AnnotationAdoptionPending))
		twd := &v1alpha1.TemporalWorkerDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: s.Name}}
		return c.Patch(ctx, twd, client.RawPatch(types.MergePatchType, patch))
	}
	return fmt.Errorf("unknown step %q", s.Kind)
}

// createWorker creates the held TWD, then records the hash of its template
// as the API server stored it: that is what the controller compares.
func createWorker(ctx context.Context, c client.Client, twd *v1alpha1.TemporalWorkerDeployment) error {
	if err := c.Create(ctx, twd); apierrors.IsAlreadyExists(err) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(twd), twd); err != nil {
			return err
		}
	} else if err != nil {
		return err
	}
	if twd.Annotations[v1alpha1.AnnotationAdoptedBuildID] == "" {
		return nil
	}
	hash := buildid.TemplateHash(&twd.Spec.Template)
	if twd.Annotations[v1alpha1.AnnotationAdoptedTemplateHash] == hash {
		return nil
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{v1alpha1.AnnotationAdoptedTemplateHash: hash}}})
	return c.Patch(ctx, twd, client.RawPatch(types.MergePatchType, patch))
}

// adoptDeployment gives the TWD the incumbent's Deployment in one update
// (the resourceVersion makes it fail rather than overwrite a change): the
// controller reference, the worker label and the adopted mark. Nothing
// under spec changes, so no pod restarts.
func adoptDeployment(ctx context.Context, c client.Client, s Step) error {
	var twd v1alpha1.TemporalWorkerDeployment
	if err := c.Get(ctx, types.NamespacedName{Namespace: s.Namespace, Name: s.Worker}, &twd); err != nil {
		return err
	}
	var d appsv1.Deployment
	if err := c.Get(ctx, types.NamespacedName{Namespace: s.Namespace, Name: s.Name}, &d); err != nil {
		return err
	}
	ref := metav1.GetControllerOf(&d)
	switch {
	case ref != nil && ref.UID == twd.UID:
		return nil
	case ref == nil || string(ref.UID) != s.IncumbentUID:
		return fmt.Errorf("Deployment %s is no longer controlled by WorkerDeployment %s; not taking it", d.Name, s.Worker)
	}
	refs := slices.DeleteFunc(d.OwnerReferences, func(r metav1.OwnerReference) bool { return r.Controller != nil && *r.Controller })
	d.OwnerReferences = append(refs, metav1.OwnerReference{
		APIVersion: v1alpha1.GroupVersion.String(), Kind: "TemporalWorkerDeployment", Name: twd.Name, UID: twd.UID,
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
	})
	if d.Labels == nil {
		d.Labels = map[string]string{}
	}
	d.Labels[workload.LabelWorker] = workload.WorkerLabel(twd.Name)
	if d.Annotations == nil {
		d.Annotations = map[string]string{}
	}
	d.Annotations[v1alpha1.AnnotationAdoptedFrom] = v1alpha1.IncumbentName
	return c.Update(ctx, &d)
}

// deleteIncumbent removes one of the incumbent's objects without its
// controller's clean-up.
func deleteIncumbent(ctx context.Context, c client.Client, kind string, s Step, propagation metav1.DeletionPropagation) error {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind(kind))
	return removeWithoutCleanup(ctx, c, u, s, propagation)
}

// removeWithoutCleanup deletes obj (s's namespace and name) after taking
// its finalizers away, so that no controller's clean-up runs, and only if
// it is still the object planned (its UID). The delete names the
// resourceVersion the finalizers went with: a controller that put its
// finalizer back in between (Rainbow's does, for a TWD it sees without
// one) would otherwise turn the delete into its clean-up, so a conflict
// takes them away again.
func removeWithoutCleanup(ctx context.Context, c client.Client, obj client.Object, s Step, propagation metav1.DeletionPropagation) error {
	var err error
	for range removeAttempts {
		if err = c.Get(ctx, types.NamespacedName{Namespace: s.Namespace, Name: s.Name}, obj); apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
			return nil
		} else if err != nil {
			return err
		}
		if string(obj.GetUID()) != s.IncumbentUID {
			return fmt.Errorf("%s was replaced since the plan (another UID); not removing it", s.Name)
		}
		if len(obj.GetFinalizers()) > 0 {
			patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"finalizers": nil, "resourceVersion": obj.GetResourceVersion()}})
			if err = c.Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch)); apierrors.IsConflict(err) {
				continue
			} else if err != nil {
				return err
			}
		}
		uid, rv := obj.GetUID(), obj.GetResourceVersion()
		err = c.Delete(ctx, obj, client.PropagationPolicy(propagation), client.Preconditions{UID: &uid, ResourceVersion: &rv})
		switch {
		case err == nil, apierrors.IsNotFound(err):
			return nil
		case !apierrors.IsConflict(err):
			return err
		}
	}
	return fmt.Errorf("%s: its finalizers came back %d times in a row (%v); stop the controller that adds them, then run migrate again", s.Name, removeAttempts, err)
}

// removeAttempts bounds the retries of removeWithoutCleanup against a
// controller that keeps putting its finalizer back.
const removeAttempts = 10

func ignoreExists(err error) error {
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// returnDeployment hands a Deployment to the WorkerDeployment of the TWD's
// name: the controller reference, and Rainbow's worker label and adopted
// mark go. Nothing under spec changes.
func returnDeployment(ctx context.Context, c client.Client, s Step) error {
	wd := &unstructured.Unstructured{}
	wd.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind(KindWorkerDeployment))
	if err := c.Get(ctx, types.NamespacedName{Namespace: s.Namespace, Name: s.Worker}, wd); err != nil {
		return err
	}
	var d appsv1.Deployment
	if err := c.Get(ctx, types.NamespacedName{Namespace: s.Namespace, Name: s.Name}, &d); err != nil {
		return err
	}
	ref := metav1.GetControllerOf(&d)
	switch {
	case ref != nil && ref.UID == wd.GetUID():
		return nil
	case ref == nil || ref.Kind != "TemporalWorkerDeployment" || ref.Name != s.Worker:
		return fmt.Errorf("Deployment %s is no longer controlled by TemporalWorkerDeployment %s; not handing it back", d.Name, s.Worker)
	}
	refs := slices.DeleteFunc(d.OwnerReferences, func(r metav1.OwnerReference) bool { return r.Controller != nil && *r.Controller })
	d.OwnerReferences = append(refs, metav1.OwnerReference{
		APIVersion: v1alpha1.GroupVersion.String(), Kind: KindWorkerDeployment, Name: wd.GetName(), UID: wd.GetUID(),
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
	})
	delete(d.Labels, workload.LabelWorker)
	delete(d.Annotations, v1alpha1.AnnotationAdoptedFrom)
	return c.Update(ctx, &d)
}

// returnOwned deletes Rainbow's copies of a TWOR (owned by the versioned
// Deployments, which stay, so nothing else would collect them), then the
// TWOR without its clean-up, and creates the WorkerResourceTemplate.
func returnOwned(ctx context.Context, c client.Client, s Step) error {
	var twor v1alpha1.TemporalWorkerOwnedResource
	err := c.Get(ctx, types.NamespacedName{Namespace: s.Namespace, Name: s.Name}, &twor)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return err
	default:
		for _, v := range twor.Status.Versions {
			if v.ResourceName == "" || v.Kind == "" {
				continue
			}
			if err := deleteCopy(ctx, c, &twor, v.APIVersion, v.Kind, v.ResourceName); err != nil {
				return err
			}
		}
		if err := removeWithoutCleanup(ctx, c, &twor, s, metav1.DeletePropagationBackground); err != nil {
			return err
		}
	}
	if s.Incumbent == nil {
		return nil
	}
	return ignoreExists(c.Create(ctx, s.Incumbent.DeepCopy()))
}

// deleteCopy deletes the object a TWOR's status names as its copy only if
// it is one: status is anyone's to write, so the object must carry the
// labels of this TWOR's copies and have a Deployment as its controller,
// in the TWOR's namespace. Anything else is left as it is.
func deleteCopy(ctx context.Context, c client.Client, twor *v1alpha1.TemporalWorkerOwnedResource, apiVersion, kind, name string) error {
	obj := &unstructured.Unstructured{}
	obj.SetAPIVersion(apiVersion)
	obj.SetKind(kind)
	err := c.Get(ctx, types.NamespacedName{Namespace: twor.Namespace, Name: name}, obj)
	if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
		return nil
	} else if err != nil {
		return fmt.Errorf("read Rainbow's copy %s %s: %w", kind, name, err)
	}
	ref := metav1.GetControllerOf(obj)
	if obj.GetNamespace() != twor.Namespace || obj.GetLabels()[ownedresource.LabelOwnedResource] != workload.WorkerLabel(twor.Name) ||
		obj.GetLabels()[workload.LabelWorker] != workload.WorkerLabel(twor.Spec.WorkerRef.Name) ||
		ref == nil || ref.APIVersion != "apps/v1" || ref.Kind != "Deployment" {
		return nil
	}
	uid := obj.GetUID()
	if err := c.Delete(ctx, obj, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete Rainbow's copy %s %s: %w", kind, name, err)
	}
	return nil
}

// ownsNoDeployment fails if the object with uid (what names it) still
// controls a Deployment of namespace: removing it would let the garbage
// collector take that Deployment's workers.
func ownsNoDeployment(ctx context.Context, c client.Client, namespace, what string, uid types.UID) error {
	var deps appsv1.DeploymentList
	if err := c.List(ctx, &deps, client.InNamespace(namespace)); err != nil {
		return err
	}
	for _, d := range deps.Items {
		if ref := metav1.GetControllerOf(&d); ref != nil && ref.UID == uid {
			return fmt.Errorf("%s still controls Deployment %s; it is not removed", what, d.Name)
		}
	}
	return nil
}
