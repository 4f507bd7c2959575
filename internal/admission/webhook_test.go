package admission

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	cradmission "sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
)

// fakeReviewer allows exactly the "user verb resource" triples it holds
// and records every review.
type fakeReviewer struct {
	allow   map[string]bool
	reviews []authorizationv1.SubjectAccessReviewSpec
	err     error
}

func (f *fakeReviewer) Review(_ context.Context, spec authorizationv1.SubjectAccessReviewSpec) (authorizationv1.SubjectAccessReviewStatus, error) {
	f.reviews = append(f.reviews, spec)
	a := spec.ResourceAttributes
	return authorizationv1.SubjectAccessReviewStatus{Allowed: f.allow[spec.User+" "+a.Verb+" "+a.Resource]}, f.err
}

func testMapper() meta.RESTMapper {
	m := meta.NewDefaultRESTMapper(nil)
	m.Add(schema.GroupVersionKind{Group: "autoscaling", Version: "v2", Kind: "HorizontalPodAutoscaler"}, meta.RESTScopeNamespace)
	m.Add(schema.GroupVersionKind{Group: "policy", Version: "v1", Kind: "PodDisruptionBudget"}, meta.RESTScopeNamespace)
	m.Add(schema.GroupVersionKind{Group: "scheduling.k8s.io", Version: "v1", Kind: "PriorityClass"}, meta.RESTScopeRoot)
	return m
}

const controllerSA = "system:serviceaccount:rainbow-system:rainbow-manager"

// everyone may do everything to HPAs.
func allowAll() *fakeReviewer {
	allow := map[string]bool{}
	for _, who := range []string{"alice", controllerSA} {
		for _, verb := range []string{"create", "update", "patch", "delete"} {
			allow[who+" "+verb+" horizontalpodautoscalers"] = true
		}
		allow[who+" delete poddisruptionbudgets"] = true
	}
	return &fakeReviewer{allow: allow}
}

func newTestValidator(t *testing.T, r AccessReviewer) *Validator {
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	return NewValidator(scheme, testMapper(), r, StaticIdentity(ServiceAccountIdentity("rainbow-system", "rainbow-manager")), DefaultBannedKinds)
}

func request(t *testing.T, op admissionv1.Operation, obj, old *v1alpha1.TemporalWorkerOwnedResource) cradmission.Request {
	raw := func(o *v1alpha1.TemporalWorkerOwnedResource) runtime.RawExtension {
		if o == nil {
			return runtime.RawExtension{}
		}
		o.APIVersion, o.Kind = v1alpha1.GroupVersion.String(), "TemporalWorkerOwnedResource"
		b, err := json.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		return runtime.RawExtension{Raw: b}
	}
	return cradmission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		Operation: op, Name: "r", Namespace: "ns", Object: raw(obj), OldObject: raw(old),
		Kind:     metav1.GroupVersionKind{Group: "temporal.io", Version: "v1alpha1", Kind: "TemporalWorkerOwnedResource"},
		Resource: metav1.GroupVersionResource{Group: "temporal.io", Version: "v1alpha1", Resource: "temporalworkerownedresources"},
		UserInfo: authenticationv1.UserInfo{Username: "alice", Groups: []string{"devs"}, Extra: map[string]authenticationv1.ExtraValue{"k": {"v"}}},
	}}
}

func TestHandle(t *testing.T) {
	cases := []struct {
		name     string
		op       admissionv1.Operation
		obj, old *v1alpha1.TemporalWorkerOwnedResource
		reviewer *fakeReviewer
		// code is the HTTP code of a denial; 0 means admitted.
		code int32
		// message holds this, if set.
		message string
		// reviews are the "user verb" pairs asked, in order.
		reviews []string
	}{
		{name: "create admitted", op: admissionv1.Create, obj: twor("w", goodHPA), reviewer: allowAll(),
			reviews: []string{"alice create", controllerSA + " create", controllerSA + " patch", controllerSA + " delete"}},
		{name: "invalid create refused before any review", op: admissionv1.Create, obj: twor("w", `{"apiVersion":"autoscaling/v2"}`), reviewer: allowAll(),
			code: http.StatusUnprocessableEntity, message: "spec.object.kind: Required value"},
		{name: "unknown kind", op: admissionv1.Create, obj: twor("w", `{"apiVersion":"example.com/v1","kind":"Gadget"}`), reviewer: allowAll(),
			code: http.StatusUnprocessableEntity, message: "spec.object.kind: Invalid value: \"Gadget\": unknown kind"},
		{name: "unknown version", op: admissionv1.Create, obj: twor("w", `{"apiVersion":"autoscaling/v9","kind":"HorizontalPodAutoscaler"}`), reviewer: allowAll(),
			code: http.StatusUnprocessableEntity, message: "unknown kind"},
		{name: "cluster-scoped kind", op: admissionv1.Create, obj: twor("w", `{"apiVersion":"scheduling.k8s.io/v1","kind":"PriorityClass"}`), reviewer: allowAll(),
			code: http.StatusUnprocessableEntity, message: "spec.object.kind: Invalid value: \"PriorityClass\": cluster-scoped kind"},
		{name: "user may not create", op: admissionv1.Create, obj: twor("w", goodHPA), reviewer: &fakeReviewer{},
			code: http.StatusForbidden, message: `spec.object: user "alice" may not create horizontalpodautoscalers.autoscaling in namespace "ns"`,
			reviews: []string{"alice create"}},
		{name: "controller may not delete", op: admissionv1.Create, obj: twor("w", goodHPA),
			reviewer: &fakeReviewer{allow: map[string]bool{"alice create horizontalpodautoscalers": true,
				controllerSA + " create horizontalpodautoscalers": true, controllerSA + " patch horizontalpodautoscalers": true}},
			code: http.StatusForbidden, message: `the controller "` + controllerSA + `" may not delete horizontalpodautoscalers.autoscaling`,
			reviews: []string{"alice create", controllerSA + " create", controllerSA + " patch", controllerSA + " delete"}},
		{name: "update asks update of the user", op: admissionv1.Update, obj: twor("w", goodHPA), old: twor("w", goodHPA2), reviewer: allowAll(),
			reviews: []string{"alice update", controllerSA + " create", controllerSA + " patch", controllerSA + " delete"}},
		{name: "a new kind asks delete of the old kind too", op: admissionv1.Update, obj: twor("w", goodHPA), old: twor("w", goodPDB), reviewer: allowAll(),
			reviews: []string{"alice update", controllerSA + " create", controllerSA + " patch", controllerSA + " delete",
				"alice delete poddisruptionbudgets", controllerSA + " delete poddisruptionbudgets"}},
		{name: "a new kind refused to a user who may not delete the old", op: admissionv1.Update, obj: twor("w", goodHPA), old: twor("w", goodPDB),
			reviewer: &fakeReviewer{allow: map[string]bool{"alice update horizontalpodautoscalers": true, controllerSA + " create horizontalpodautoscalers": true,
				controllerSA + " patch horizontalpodautoscalers": true, controllerSA + " delete horizontalpodautoscalers": true}},
			code: http.StatusForbidden, message: `user "alice" may not delete poddisruptionbudgets.policy`,
			reviews: []string{"alice update", controllerSA + " create", controllerSA + " patch", controllerSA + " delete", "alice delete poddisruptionbudgets"}},
		{name: "update refused without update", op: admissionv1.Update, obj: twor("w", goodHPA), old: twor("w", goodPDB),
			reviewer: &fakeReviewer{allow: map[string]bool{"alice create horizontalpodautoscalers": true}},
			code:     http.StatusForbidden, message: `user "alice" may not update`, reviews: []string{"alice update"}},
		{name: "workerRef change refused", op: admissionv1.Update, obj: twor("other", goodHPA), old: twor("w", goodHPA), reviewer: allowAll(),
			code: http.StatusUnprocessableEntity, message: "spec.workerRef.name: Invalid value"},
		{name: "unchanged spec admitted unchecked", op: admissionv1.Update, obj: twor("w", `{"apiVersion":"apps/v1","kind":"Deployment"}`),
			old: twor("w", `{"apiVersion":"apps/v1","kind":"Deployment"}`), reviewer: &fakeReviewer{}},
		{name: "delete asks delete of both", op: admissionv1.Delete, old: twor("w", goodHPA), reviewer: allowAll(),
			reviews: []string{"alice delete", controllerSA + " delete"}},
		{name: "delete refused to a user who may not delete", op: admissionv1.Delete, old: twor("w", goodHPA),
			reviewer: &fakeReviewer{allow: map[string]bool{"alice create horizontalpodautoscalers": true}},
			code:     http.StatusForbidden, message: `user "alice" may not delete`, reviews: []string{"alice delete"}},
		{name: "delete of an unknown kind admitted", op: admissionv1.Delete, old: twor("w", `{"apiVersion":"example.com/v1","kind":"Gadget"}`), reviewer: &fakeReviewer{}},
		{name: "delete without a kind admitted", op: admissionv1.Delete, old: twor("w", `{}`), reviewer: &fakeReviewer{}},
		{name: "review error", op: admissionv1.Create, obj: twor("w", goodHPA), reviewer: &fakeReviewer{err: errors.New("boom")},
			code: http.StatusInternalServerError, message: "boom", reviews: []string{"alice create"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp := newTestValidator(t, c.reviewer).Handle(context.Background(), request(t, c.op, c.obj, c.old))
			var code int32
			msg := ""
			if resp.Result != nil {
				msg = resp.Result.Message
			}
			if !resp.Allowed {
				code = resp.Result.Code
			}
			if code != c.code || !strings.Contains(msg, c.message) {
				t.Errorf("response %d %q, want %d with %q", code, msg, c.code, c.message)
			}
			var got []string
			for _, r := range c.reviewer.reviews {
				a := r.ResourceAttributes
				switch {
				case a.Namespace == "ns" && a.Group == "autoscaling" && a.Resource == "horizontalpodautoscalers":
					got = append(got, r.User+" "+a.Verb)
				case a.Namespace == "ns" && a.Group == "policy" && a.Resource == "poddisruptionbudgets":
					got = append(got, r.User+" "+a.Verb+" "+a.Resource)
				default:
					t.Errorf("review of %+v, want horizontalpodautoscalers.autoscaling or poddisruptionbudgets.policy in ns", a)
				}
				if r.User == "alice" && (len(r.Groups) != 1 || r.Extra["k"][0] != "v") {
					t.Errorf("the user's review lacks their groups or extra: %+v", r)
				}
				if r.User == controllerSA && len(r.Groups) != 3 {
					t.Errorf("the controller's review has groups %v", r.Groups)
				}
			}
			if strings.Join(got, ", ") != strings.Join(c.reviews, ", ") {
				t.Errorf("reviews %v, want %v", got, c.reviews)
			}
		})
	}
}

func TestInvalidCarriesCauses(t *testing.T) {
	resp := newTestValidator(t, allowAll()).Handle(context.Background(),
		request(t, admissionv1.Create, twor("w", `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"x"}}`), nil))
	if resp.Allowed || resp.Result.Reason != metav1.StatusReasonInvalid || resp.Result.Details == nil || len(resp.Result.Details.Causes) != 2 {
		t.Fatalf("result %+v, want Invalid with two causes", resp.Result)
	}
	if f := resp.Result.Details.Causes[0].Field; f != "spec.object.kind" {
		t.Errorf("first cause on %q", f)
	}
}

// TestHandleRefusesUnexpectedShapes: whatever the webhook configuration
// does not send is refused without a review, not admitted.
func TestHandleRefusesUnexpectedShapes(t *testing.T) {
	good := func() *v1alpha1.TemporalWorkerOwnedResource { return twor("w", goodHPA) }
	cases := map[string]struct {
		req     func(t *testing.T) cradmission.Request
		message string
	}{
		"another kind": {func(t *testing.T) cradmission.Request {
			r := request(t, admissionv1.Create, good(), nil)
			r.Kind = metav1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
			r.Resource = metav1.GroupVersionResource{Version: "v1", Resource: "configmaps"}
			return r
		}, `kind "/v1, Kind=ConfigMap"`},
		"another version": {func(t *testing.T) cradmission.Request {
			r := request(t, admissionv1.Create, good(), nil)
			r.Kind.Version = "v1beta1"
			return r
		}, `kind "temporal.io/v1beta1`},
		"a TemporalWorkerDeployment": {func(t *testing.T) cradmission.Request {
			r := request(t, admissionv1.Update, good(), good())
			r.Kind.Kind, r.Resource.Resource = "TemporalWorkerDeployment", "temporalworkerdeployments"
			return r
		}, "TemporalWorkerDeployment"},
		"the status subresource": {func(t *testing.T) cradmission.Request {
			r := request(t, admissionv1.Update, good(), good())
			r.SubResource = "status"
			return r
		}, `subresource "status"`},
		"another resource of the kind": {func(t *testing.T) cradmission.Request {
			r := request(t, admissionv1.Create, good(), nil)
			r.Resource.Resource = "gadgets"
			return r
		}, `resource "gadgets"`},
		"connect": {func(t *testing.T) cradmission.Request {
			return request(t, admissionv1.Connect, good(), nil)
		}, `operation "CONNECT"`},
		"an empty operation": {func(t *testing.T) cradmission.Request {
			return request(t, "", good(), nil)
		}, `operation ""`},
		"create without object": {func(t *testing.T) cradmission.Request {
			return request(t, admissionv1.Create, nil, nil)
		}, "CREATE request without object"},
		"update without oldObject": {func(t *testing.T) cradmission.Request {
			return request(t, admissionv1.Update, good(), nil)
		}, "UPDATE request without oldObject"},
		"update without object": {func(t *testing.T) cradmission.Request {
			return request(t, admissionv1.Update, nil, good())
		}, "UPDATE request without object"},
		"delete without oldObject": {func(t *testing.T) cradmission.Request {
			return request(t, admissionv1.Delete, nil, nil)
		}, "DELETE request without oldObject"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			reviewer := allowAll()
			resp := newTestValidator(t, reviewer).Handle(context.Background(), c.req(t))
			if resp.Allowed || resp.Result == nil || resp.Result.Code != http.StatusForbidden ||
				!strings.Contains(resp.Result.Message, c.message) || !strings.Contains(resp.Result.Message, "route only those requests") {
				t.Errorf("response %+v, want refused (403) saying %q and what to do", resp.Result, c.message)
			}
			if len(reviewer.reviews) > 0 {
				t.Errorf("%d access review(s) for a request the webhook does not check", len(reviewer.reviews))
			}
		})
	}
}
