package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/test/harness"
)

// The webhook's tests: the API server calls the manager's webhook over TLS
// (its certificate made by the manager's rotation) for every change to a
// TemporalWorkerOwnedResource.

const (
	admissionHPA = `{"apiVersion":"autoscaling/v2","kind":"HorizontalPodAutoscaler","spec":{"scaleTargetRef":null,"minReplicas":1,"maxReplicas":3}}`
	admissionPDB = `{"apiVersion":"policy/v1","kind":"PodDisruptionBudget","spec":{"minAvailable":1,"selector":{"matchLabels":null}}}`
	// An HPA on a Prometheus series, as the worker controller's manifests
	// select it: the user's labels in the metric selector.
	admissionMetricHPA = `{"apiVersion":"autoscaling/v2","kind":"HorizontalPodAutoscaler","spec":{"scaleTargetRef":{},"minReplicas":1,"maxReplicas":3,
		"metrics":[{"type":"External","external":{"metric":{"name":"temporal_slot_utilization","selector":{"matchLabels":{
		"worker_type":"ActivityWorker","temporal_worker_build_id":"{{ .BuildID }}"}}},"target":{"type":"Value","value":"750m"}}}]}}`
)

func ownedResource(ns, name, object string) *v1alpha1.TemporalWorkerOwnedResource {
	return &v1alpha1.TemporalWorkerOwnedResource{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1alpha1.TemporalWorkerOwnedResourceSpec{
			WorkerRef: v1alpha1.WorkerReference{Name: "worker"},
			Object:    apiextensionsv1.JSON{Raw: []byte(object)},
		},
	}
}

// TestAdmissionWebhookAdmitsGoodObjects: the good HPAs and PDB pass the
// webhook. The bad ones are rows of TestAdmissionTable.
func TestAdmissionWebhookAdmitsGoodObjects(t *testing.T) {
	parallel(t)
	tt := env.NewTest(t)
	ctx := context.Background()
	for name, object := range map[string]string{"hpa": admissionHPA, "pdb": admissionPDB, "metric-hpa": admissionMetricHPA} {
		if err := env.Kube.Create(ctx, ownedResource(tt.Namespace, name, object)); err != nil {
			t.Errorf("the good %s was refused: %v", name, err)
		}
	}
}

// TestAdmissionWebhookWorkerRefIsImmutable: a changed workerRef is refused.
func TestAdmissionWebhookWorkerRefIsImmutable(t *testing.T) {
	parallel(t)
	tt := env.NewTest(t)
	ctx := context.Background()
	twor := ownedResource(tt.Namespace, "hpa", admissionHPA)
	if err := env.Kube.Create(ctx, twor); err != nil {
		t.Fatal(err)
	}
	err := retryOnConflict(ctx, twor, func() { twor.Spec.WorkerRef.Name = "another" })
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.workerRef") || !strings.Contains(err.Error(), "immutable") {
		t.Errorf("changing workerRef: got %v, want Invalid naming spec.workerRef", err)
	}
	// Labels are not the spec: admitted without a check.
	if err := retryOnConflict(ctx, twor, func() { twor.Labels = map[string]string{"team": "a"} }); err != nil {
		t.Errorf("labelling: %v", err)
	}
}

// TestAdmissionWebhookChecksTheUser: a user who may create
// TemporalWorkerOwnedResources but not HPAs cannot create one holding an
// HPA, until granted HPAs; a user who may delete TemporalWorkerOwnedResources
// but not HPAs cannot delete one holding an HPA.
func TestAdmissionWebhookChecksTheUser(t *testing.T) {
	parallel(t)
	tt := env.NewTest(t)
	ctx := context.Background()
	user := "alice-" + tt.Suffix
	grant(t, tt, user, "owned-resources", rbacv1.PolicyRule{
		APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"temporalworkerownedresources"}, Verbs: []string{"*"}})
	alice := impersonate(t, user)

	err := alice.Create(ctx, ownedResource(tt.Namespace, "hpa", admissionHPA))
	want := fmt.Sprintf(`spec.object: user %q may not create horizontalpodautoscalers.autoscaling in namespace %q`, user, tt.Namespace)
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), want) {
		t.Fatalf("got %v, want Forbidden with %q", err, want)
	}

	grant(t, tt, user, "hpa-create", rbacv1.PolicyRule{
		APIGroups: []string{"autoscaling"}, Resources: []string{"horizontalpodautoscalers"}, Verbs: []string{"create"}})
	tt.Eventually(30*time.Second, "the TemporalWorkerOwnedResource admitted once the user may create HPAs", func() (bool, string) {
		err := alice.Create(ctx, ownedResource(tt.Namespace, "hpa", admissionHPA))
		return err == nil, errString(err)
	})

	twor := &v1alpha1.TemporalWorkerOwnedResource{}
	if err := alice.Get(ctx, crclient.ObjectKey{Namespace: tt.Namespace, Name: "hpa"}, twor); err != nil {
		t.Fatal(err)
	}
	err = alice.Delete(ctx, twor)
	want = fmt.Sprintf(`user %q may not delete horizontalpodautoscalers.autoscaling`, user)
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), want) {
		t.Fatalf("deleting: got %v, want Forbidden with %q", err, want)
	}
	grant(t, tt, user, "hpa-delete", rbacv1.PolicyRule{
		APIGroups: []string{"autoscaling"}, Resources: []string{"horizontalpodautoscalers"}, Verbs: []string{"delete"}})
	tt.Eventually(30*time.Second, "the deletion admitted once the user may delete HPAs", func() (bool, string) {
		err := alice.Delete(ctx, twor)
		return err == nil || apierrors.IsNotFound(err), errString(err)
	})
}

// TestTWDAuthorMustBeAllowedToRunWorkers: the controller makes, changes
// and deletes a Deployment per version from a TemporalWorkerDeployment's
// template, so a user who may write TemporalWorkerDeployments but not
// Deployments is refused (without the check the controller ran workers
// for them), and admitted once allowed; a gate reading a Secret its
// author may not get is refused too.
func TestTWDAuthorMustBeAllowedToRunWorkers(t *testing.T) {
	parallel(t)
	tt := env.NewTest(t)
	ctx := context.Background()
	user := "bob-" + tt.Suffix
	grant(t, tt, user, "twds", rbacv1.PolicyRule{
		APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"temporalworkerdeployments"}, Verbs: []string{"*"}})
	bob := impersonate(t, user)
	r := newRollout(tt, "bobs")

	err := bob.Create(ctx, r.Spec("v1"))
	want := fmt.Sprintf(`spec.template: user %q may not create deployments.apps in namespace %q`, user, tt.Namespace)
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), want) {
		t.Fatalf("got %v, want Forbidden with %q", err, want)
	}

	grant(t, tt, user, "deployments", rbacv1.PolicyRule{
		APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"create", "update", "delete"}})
	gated := r.Spec("v1")
	gated.Spec.Rollout.Gate = &v1alpha1.GateWorkflow{WorkflowType: "RolloutGate", InputFrom: &v1alpha1.GateInputSource{
		SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "not-bobs"}, Key: "input"}}}
	tt.Eventually(30*time.Second, "a gate reading a Secret bob may not get is refused", func() (bool, string) {
		err := bob.Create(ctx, gated.DeepCopy())
		return apierrors.IsForbidden(err) && strings.Contains(err.Error(), `spec.rollout.gate.inputFrom.secretKeyRef: user "`+user+`" may not get secrets "not-bobs"`), errString(err)
	})
	tt.Eventually(30*time.Second, "the TemporalWorkerDeployment admitted once bob may run workers", func() (bool, string) {
		err := bob.Create(ctx, r.Spec("v1"))
		return err == nil, errString(err)
	})
	r.WaitCurrent(5*time.Minute, r.BuildID())
}

// TestAdmissionWebhookChecksTheController: a kind the controller's service
// account may not create (config/rbac grants no ConfigMap writes) is
// refused even to an administrator, naming the service account.
func TestAdmissionWebhookChecksTheController(t *testing.T) {
	parallel(t)
	tt := env.NewTest(t)
	err := env.Kube.Create(context.Background(), ownedResource(tt.Namespace, "cm", `{"apiVersion":"v1","kind":"ConfigMap","data":{"a":"b"}}`))
	want := fmt.Sprintf(`the controller %q may not create configmaps in namespace %q`, managerUser, tt.Namespace)
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), want) {
		t.Errorf("got %v, want Forbidden with %q", err, want)
	}
}

// grant binds user to a Role of the test's namespace holding rule.
func grant(t *testing.T, tt *harness.T, user, name string, rule rbacv1.PolicyRule) {
	t.Helper()
	ctx := context.Background()
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: tt.Namespace, Name: name}, Rules: []rbacv1.PolicyRule{rule}}
	for _, obj := range []crclient.Object{role, harness.UserBinding(tt.Namespace, name, "Role", name, user)} {
		if err := env.Kube.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	// The API server's RBAC authorizer sees the binding through its own
	// watch, a moment later: a request made at once was seen refused.
	tt.Eventually(30*time.Second, fmt.Sprintf("RBAC lets %s %s %s", user, rule.Verbs[0], rule.Resources[0]), func() (bool, string) {
		review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: user,
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: tt.Namespace, Verb: rule.Verbs[0], Group: rule.APIGroups[0], Resource: rule.Resources[0],
			},
		}}
		if err := env.Kube.Create(ctx, review); err != nil {
			return false, err.Error()
		}
		return review.Status.Allowed, review.Status.Reason
	})
}

// impersonate is a client acting as user.
func impersonate(t *testing.T, user string) crclient.Client {
	t.Helper()
	cfg := rest.CopyConfig(env.REST)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	c, err := crclient.New(cfg, crclient.Options{Scheme: env.Scheme, Mapper: env.Kube.RESTMapper()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// retryOnConflict applies change to a fresh copy of twor and updates it,
// again on a conflict (the controller writes to it too).
func retryOnConflict(ctx context.Context, twor *v1alpha1.TemporalWorkerOwnedResource, change func()) error {
	for {
		if err := env.Kube.Get(ctx, crclient.ObjectKeyFromObject(twor), twor); err != nil {
			return err
		}
		change()
		err := env.Kube.Update(ctx, twor)
		if !apierrors.IsConflict(err) {
			return err
		}
	}
}

// TestAdmissionWebhookRefusesWhatItDoesNotCheck: a webhook configuration
// that routes more to the webhook than it checks (here the status
// subresource, for this test's namespace only) gets those requests
// refused, not admitted unchecked.
func TestAdmissionWebhookRefusesWhatItDoesNotCheck(t *testing.T) {
	parallel(t)
	tt := env.NewTest(t)
	ctx := context.Background()
	twor := ownedResource(tt.Namespace, "hpa", admissionHPA)
	if err := env.Kube.Create(ctx, twor); err != nil {
		t.Fatal(err)
	}
	var shipped admissionregistrationv1.ValidatingWebhookConfiguration
	if err := env.Kube.Get(ctx, crclient.ObjectKey{Name: webhookName}, &shipped); err != nil {
		t.Fatal(err)
	}
	extra := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "status-" + tt.Namespace}}
	hook := shipped.Webhooks[0]
	hook.Name = "status.validate.temporal.io"
	hook.Rules = []admissionregistrationv1.RuleWithOperations{{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
		Rule: admissionregistrationv1.Rule{APIGroups: []string{"temporal.io"}, APIVersions: []string{"v1alpha1"},
			Resources: []string{"temporalworkerownedresources/status"}},
	}}
	hook.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": tt.Namespace}}
	extra.Webhooks = []admissionregistrationv1.ValidatingWebhook{hook}
	if err := env.Kube.Create(ctx, extra); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Kube.Delete(context.Background(), extra) })

	tt.Eventually(time.Minute, "a status write refused by the webhook", func() (bool, string) {
		var got v1alpha1.TemporalWorkerOwnedResource
		if err := env.Kube.Get(ctx, crclient.ObjectKeyFromObject(twor), &got); err != nil {
			return false, err.Error()
		}
		patched := got.DeepCopy()
		patched.Status.ObservedGeneration++
		err := env.Kube.Status().Patch(ctx, patched, crclient.MergeFrom(&got))
		return apierrors.IsForbidden(err) && strings.Contains(err.Error(), `subresource "status"`) &&
			strings.Contains(err.Error(), "route only those requests"), errString(err)
	})
}
