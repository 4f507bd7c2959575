package admission

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	cradmission "sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/internal/claim"
)

// TestWorkerDeploymentAuthorRights: whoever creates a
// TemporalWorkerDeployment, or changes its spec, must be allowed to
// create, update and delete Deployments in its namespace, and to get the
// gate's input, since the controller does those for them; other updates
// (status, metadata) ask nothing.
func TestWorkerDeploymentAuthorRights(t *testing.T) {
	scheme := runtime.NewScheme()
	_ = v1alpha1.AddToScheme(scheme)
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(claimConn("team-b", "temporal", "temporal:7233")).
		WithIndex(&v1alpha1.TemporalWorkerDeployment{}, claim.Index, claim.IndexKey).Build()
	worker := func() map[string]bool {
		return map[string]bool{"alice create deployments": true, "alice update deployments": true, "alice delete deployments": true}
	}
	plain := claimTWD("team-b", "mine", "", "temporal", 0)
	gated := func(secret bool) *v1alpha1.TemporalWorkerDeployment {
		twd := claimTWD("team-b", "mine", "", "temporal", 0)
		from := &v1alpha1.GateInputSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "gate-in"}, Key: "k"}}
		if secret {
			from = &v1alpha1.GateInputSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "gate-in"}, Key: "k"}}
		}
		twd.Spec.Rollout.Gate = &v1alpha1.GateWorkflow{WorkflowType: "Gate", InputFrom: from}
		return twd
	}
	stepGated := func() *v1alpha1.TemporalWorkerDeployment {
		twd := gated(true)
		g := twd.Spec.Rollout.Gate
		twd.Spec.Rollout.Gate = nil
		twd.Spec.Rollout.Steps = []v1alpha1.RolloutStep{{RampPercentage: 10}, {RampPercentage: 50, Gate: g}}
		return twd
	}
	labelled := claimTWD("team-b", "mine", "", "temporal", 0)
	labelled.Labels = map[string]string{"team": "b"}
	cases := map[string]struct {
		op       admissionv1.Operation
		obj, old *v1alpha1.TemporalWorkerDeployment
		allow    map[string]bool
		refusal  []string // empty: admitted
	}{
		"create by someone who may run workers": {op: admissionv1.Create, obj: plain, allow: worker()},
		"create by someone who may not delete Deployments": {op: admissionv1.Create, obj: plain,
			allow:   map[string]bool{"alice create deployments": true, "alice update deployments": true},
			refusal: []string{"spec.template", `user "alice" may not delete deployments.apps in namespace "team-b"`, "edit role"}},
		"create by someone who may not create Deployments": {op: admissionv1.Create, obj: plain, allow: map[string]bool{},
			refusal: []string{"spec.template", "may not create deployments.apps"}},
		"spec changed by someone who may not": {op: admissionv1.Update, obj: withReplicas(claimTWD("team-b", "mine", "", "temporal", 0)), old: plain, allow: map[string]bool{},
			refusal: []string{"spec.template", "may not create deployments.apps"}},
		"only metadata changed: nothing asked": {op: admissionv1.Update, obj: labelled, old: plain, allow: map[string]bool{}},
		"a gate reading a Secret its author may not get": {op: admissionv1.Create, obj: gated(true), allow: worker(),
			refusal: []string{"spec.rollout.gate.inputFrom.secretKeyRef", `may not get secrets "gate-in"`}},
		"a gate reading a ConfigMap its author may not get": {op: admissionv1.Create, obj: gated(false), allow: worker(),
			refusal: []string{"spec.rollout.gate.inputFrom.configMapKeyRef", `may not get configmaps "gate-in"`}},
		"a step gate reading a Secret its author may not get": {op: admissionv1.Create, obj: stepGated(), allow: worker(),
			refusal: []string{"spec.rollout.steps[1].gate.inputFrom.secretKeyRef", `may not get secrets "gate-in"`}},
		"a gate reading a Secret its author may get": {op: admissionv1.Create, obj: gated(true),
			allow: func() map[string]bool { a := worker(); a["alice get secrets"] = true; return a }()},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r := &fakeReviewer{allow: tc.allow}
			v := NewWorkerDeploymentValidator(scheme, r, c)
			req := cradmission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: tc.op, Name: "mine", Namespace: "team-b",
				Kind:     metav1.GroupVersionKind{Group: "temporal.io", Version: "v1alpha1", Kind: "TemporalWorkerDeployment"},
				Resource: metav1.GroupVersionResource{Group: "temporal.io", Version: "v1alpha1", Resource: "temporalworkerdeployments"},
				UserInfo: authenticationv1.UserInfo{Username: "alice"}}}
			req.Object.Raw, _ = json.Marshal(tc.obj)
			if tc.old != nil {
				req.OldObject.Raw, _ = json.Marshal(tc.old)
			}
			resp := v.Handle(context.Background(), req)
			if resp.Allowed != (len(tc.refusal) == 0) {
				t.Fatalf("allowed %v, want %v: %+v", resp.Allowed, len(tc.refusal) == 0, resp.Result)
			}
			for _, w := range tc.refusal {
				if !strings.Contains(resp.Result.Message, w) {
					t.Errorf("message %q does not say %q", resp.Result.Message, w)
				}
			}
			if len(tc.refusal) > 0 && resp.Result.Code != 403 {
				t.Errorf("code %d, want 403", resp.Result.Code)
			}
			if tc.op == admissionv1.Update && tc.obj == labelled && len(r.reviews) != 0 {
				t.Errorf("a metadata change was reviewed: %+v", r.reviews)
			}
		})
	}
}

// TestTWDAndConnectionWebhooksRefuseOtherShapes: like the TWOR webhook, the
// TemporalWorkerDeployment and TemporalConnection webhooks refuse a
// request of a shape their configuration does not send (a status write,
// another kind, a delete) instead of decoding it as their own kind.
func TestTWDAndConnectionWebhooksRefuseOtherShapes(t *testing.T) {
	scheme := runtime.NewScheme()
	_ = v1alpha1.AddToScheme(scheme)
	c := fake.NewClientBuilder().WithScheme(scheme).WithIndex(&v1alpha1.TemporalWorkerDeployment{}, claim.Index, claim.IndexKey).Build()
	allowAll := &fakeReviewer{allow: map[string]bool{"alice create deployments": true, "alice update deployments": true, "alice delete deployments": true, "alice get secrets": true}}
	twd, _ := json.Marshal(claimTWD("team-b", "mine", "", "temporal", 0))
	conn, _ := json.Marshal(claimConn("team-b", "temporal", "temporal:7233"))
	for name, h := range map[string]struct {
		handler  cradmission.Handler
		kind     string
		resource string
		raw      []byte
	}{
		"TemporalWorkerDeployment": {NewWorkerDeploymentValidator(scheme, allowAll, c), "TemporalWorkerDeployment", "temporalworkerdeployments", twd},
		"TemporalConnection":       {NewConnectionValidator(scheme, allowAll, nil), "TemporalConnection", "temporalconnections", conn},
	} {
		base := func() cradmission.Request {
			return cradmission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: admissionv1.Create, Name: "x", Namespace: "team-b",
				Kind:     metav1.GroupVersionKind{Group: "temporal.io", Version: "v1alpha1", Kind: h.kind},
				Resource: metav1.GroupVersionResource{Group: "temporal.io", Version: "v1alpha1", Resource: h.resource},
				UserInfo: authenticationv1.UserInfo{Username: "alice"}, Object: runtime.RawExtension{Raw: h.raw}}}
		}
		if resp := h.handler.Handle(context.Background(), base()); !resp.Allowed {
			t.Fatalf("%s: the expected shape is refused: %+v", name, resp.Result)
		}
		for shape, change := range map[string]func(*cradmission.Request){
			"status subresource": func(r *cradmission.Request) {
				r.Operation, r.SubResource, r.OldObject = admissionv1.Update, "status", runtime.RawExtension{Raw: h.raw}
			},
			"another kind": func(r *cradmission.Request) {
				r.Kind.Kind, r.Resource.Resource = "TemporalWorkerOwnedResource", "temporalworkerownedresources"
			},
			"a delete": func(r *cradmission.Request) {
				r.Operation, r.Object, r.OldObject = admissionv1.Delete, runtime.RawExtension{}, runtime.RawExtension{Raw: h.raw}
			},
			"a CONNECT":    func(r *cradmission.Request) { r.Operation = admissionv1.Connect },
			"no object":    func(r *cradmission.Request) { r.Object = runtime.RawExtension{} },
			"no oldObject": func(r *cradmission.Request) { r.Operation = admissionv1.Update },
		} {
			req := base()
			change(&req)
			resp := h.handler.Handle(context.Background(), req)
			if resp.Allowed || !strings.Contains(resp.Result.Message, "refuses anything else") {
				t.Errorf("%s, %s: %+v, want a refusal", name, shape, resp.Result)
			}
		}
	}
}
