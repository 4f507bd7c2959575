// Package admission is the validating webhook of TemporalWorkerOwnedResources
// and how the manager serves it: the rules a TemporalWorkerOwnedResource must
// follow, the checks that neither its author nor the controller gains a
// permission through it, and the serving certificate (mounted, or made and
// rotated by the manager itself). The same server checks that no two
// TemporalWorkerDeployments name one Temporal worker deployment (claim.go).
package admission

import (
	"context"
	"fmt"
	"net/http"
	"slices"

	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/log"
	cradmission "sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
)

// Path is where the manager serves the webhook.
const Path = "/validate-temporal-io-v1alpha1-temporalworkerownedresource"

var tworGroupKind = v1alpha1.GroupVersion.WithKind("TemporalWorkerOwnedResource").GroupKind()

// Validator admits TemporalWorkerOwnedResources. On create and update it
// applies Validate, then refuses kinds the API server does not serve or
// that are cluster-scoped, then asks whether the requesting user may create
// (or update) that kind in the namespace and the controller may create,
// patch and delete it. On delete both must be allowed to delete it, and so
// on an update that changes the kind, for the old kind. An update that
// leaves the spec as it was is admitted unchecked.
type Validator struct {
	Kinds  KindResolver
	Access AccessReviewer
	// Controller is who the controller acts as.
	Controller IdentityFunc
	// BannedKinds are refused in spec.object.
	BannedKinds []string
	Decoder     cradmission.Decoder
}

// NewValidator builds a Validator decoding with scheme.
func NewValidator(scheme *runtime.Scheme, kinds KindResolver, access AccessReviewer, controller IdentityFunc, banned []string) *Validator {
	return &Validator{Kinds: kinds, Access: access, Controller: controller, BannedKinds: banned, Decoder: cradmission.NewDecoder(scheme)}
}

// Handle implements admission.Handler. A request of another shape than
// the webhook configuration sends is refused: a configuration routing more
// to this webhook must not have those requests admitted unchecked.
func (v *Validator) Handle(ctx context.Context, req cradmission.Request) cradmission.Response {
	if why := unexpectedShape(req, "TemporalWorkerOwnedResource", "temporalworkerownedresources", admissionv1.Create, admissionv1.Update, admissionv1.Delete); why != "" {
		return cradmission.Denied(fmt.Sprintf("this webhook checks only the creation, update and deletion of "+
			"temporalworkerownedresources.temporal.io (not their subresources), and refuses anything else: %s; "+
			"route only those requests to it (rules of the ValidatingWebhookConfiguration, see config/webhook/validating_webhook.yaml)", why))
	}
	var twor, old *v1alpha1.TemporalWorkerOwnedResource
	for _, d := range []struct {
		raw  runtime.RawExtension
		into **v1alpha1.TemporalWorkerOwnedResource
	}{{req.Object, &twor}, {req.OldObject, &old}} {
		if len(d.raw.Raw) == 0 {
			continue
		}
		*d.into = &v1alpha1.TemporalWorkerOwnedResource{}
		if err := v.Decoder.DecodeRaw(d.raw, *d.into); err != nil {
			return cradmission.Errored(http.StatusBadRequest, err)
		}
	}
	switch {
	case req.Operation == admissionv1.Create && twor != nil:
		return v.admitWrite(ctx, req, twor, nil, "create")
	case req.Operation == admissionv1.Update && twor != nil && old != nil:
		if specUnchanged(twor, old) {
			return cradmission.Allowed("spec unchanged")
		}
		resp := v.admitWrite(ctx, req, twor, old, "update")
		if gk, _ := ObjectGVK(twor); resp.Allowed && kindOf(old) != gk.GroupKind() {
			// The controller deletes the copies of the old kind on the
			// author's behalf.
			return v.admitDelete(ctx, req, old)
		}
		return resp
	case req.Operation == admissionv1.Delete && old != nil:
		return v.admitDelete(ctx, req, old)
	}
	return cradmission.Denied(fmt.Sprintf("a %s request without the object(s) it needs (object, oldObject) is not checked, so it is refused", req.Operation))
}

// unexpectedShape says how req differs from the requests a webhook
// configuration sends for kind (its resource itself, with one of ops, and
// the objects each carries); empty if it does not.
func unexpectedShape(req cradmission.Request, kind, resource string, ops ...admissionv1.Operation) string {
	want := v1alpha1.GroupVersion.WithKind(kind)
	if gvk := schema.GroupVersionKind(req.Kind); gvk != want {
		return fmt.Sprintf("the request is for kind %q, not %s", gvk, want)
	}
	if req.Resource.Resource != resource || req.SubResource != "" {
		return fmt.Sprintf("the request is for resource %q, subresource %q", req.Resource.Resource, req.SubResource)
	}
	if !slices.Contains(ops, req.Operation) {
		return fmt.Sprintf("operation %q", req.Operation)
	}
	missing := func(r runtime.RawExtension) bool { return len(r.Raw) == 0 }
	switch {
	case req.Operation != admissionv1.Delete && missing(req.Object):
		return fmt.Sprintf("a %s request without object", req.Operation)
	case req.Operation != admissionv1.Create && missing(req.OldObject):
		return fmt.Sprintf("a %s request without oldObject", req.Operation)
	}
	return ""
}

func (v *Validator) admitWrite(ctx context.Context, req cradmission.Request, twor, old *v1alpha1.TemporalWorkerOwnedResource, userVerb string) cradmission.Response {
	if errs := Validate(twor, old, v.BannedKinds); len(errs) > 0 {
		return invalid(req.Name, errs)
	}
	gvk, _ := ObjectGVK(twor) // Validate checked it
	mapping, err := v.Kinds.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		return invalid(req.Name, field.ErrorList{field.Invalid(objectPath.Child("kind"), gvk.Kind,
			fmt.Sprintf("unknown kind: the API server serves no %s in %s", gvk.Kind, gvk.GroupVersion()))})
	}
	if err != nil {
		return cradmission.Errored(http.StatusInternalServerError, fmt.Errorf("look up %s: %w", gvk, err))
	}
	if mapping.Scope.Name() != meta.RESTScopeNameNamespace {
		return invalid(req.Name, field.ErrorList{field.Invalid(objectPath.Child("kind"), gvk.Kind,
			"cluster-scoped kind: only namespaced objects can be attached to worker versions")})
	}
	return v.authorize(ctx, req, mapping.Resource, userVerb, "create", "patch", "delete")
}

func (v *Validator) admitDelete(ctx context.Context, req cradmission.Request, old *v1alpha1.TemporalWorkerOwnedResource) cradmission.Response {
	gvk, ok := ObjectGVK(old)
	if !ok {
		return cradmission.Allowed("spec.object names no kind: nothing of it can exist")
	}
	mapping, err := v.Kinds.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		return cradmission.Allowed(fmt.Sprintf("the API server serves no %s: nothing of it can exist", gvk.Kind))
	}
	if err != nil {
		return cradmission.Errored(http.StatusInternalServerError, fmt.Errorf("look up %s: %w", gvk, err))
	}
	return v.authorize(ctx, req, mapping.Resource, "delete", "delete")
}

// authorize admits the request if its user may do userVerb on resource in
// the request's namespace and the controller may do every controllerVerb.
func (v *Validator) authorize(ctx context.Context, req cradmission.Request, resource schema.GroupVersionResource, userVerb string, controllerVerbs ...string) cradmission.Response {
	user := requester(req.UserInfo)
	d, err := allowed(ctx, v.Access, user, fmt.Sprintf("user %q", user.Username), resource, req.Namespace, userVerb)
	if err == nil && d == nil {
		var ctrl Identity
		if ctrl, err = v.Controller(ctx); err == nil {
			d, err = allowed(ctx, v.Access, ctrl, fmt.Sprintf("the controller %q", ctrl.Username),
				resource, req.Namespace, controllerVerbs...)
		}
	}
	if err != nil {
		log.FromContext(ctx).Error(err, "access review failed")
		return cradmission.Errored(http.StatusInternalServerError, err)
	}
	if d != nil {
		status := apierrors.NewForbidden(v1alpha1.GroupVersion.WithResource("temporalworkerownedresources").GroupResource(),
			req.Name, fmt.Errorf("spec.object: %w", d)).ErrStatus
		return cradmission.Response{AdmissionResponse: admissionv1.AdmissionResponse{Allowed: false, Result: &status}}
	}
	return cradmission.Allowed("")
}

// kindOf is the group and kind of a TWOR's spec.object; empty if none.
func kindOf(twor *v1alpha1.TemporalWorkerOwnedResource) schema.GroupKind {
	gvk, _ := ObjectGVK(twor)
	return gvk.GroupKind()
}

// invalid is a denial carrying errs as the API server's own validation
// would: 422 Invalid, with a cause per field.
func invalid(name string, errs field.ErrorList) cradmission.Response {
	status := apierrors.NewInvalid(tworGroupKind, name, errs).ErrStatus
	return cradmission.Response{AdmissionResponse: admissionv1.AdmissionResponse{Allowed: false, Result: &status}}
}

var _ cradmission.Handler = (*Validator)(nil)
