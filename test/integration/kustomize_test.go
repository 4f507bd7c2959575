package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/rainbow-deploy/rainbow/internal/admission"
)

// TestKustomizeConfigDefault builds the install manifests with kubectl's
// kustomize and sends them to the real API server (server-side dry run),
// so schemas, RBAC references and the Deployment are known valid.
// TestMain applied config/rbac for real and runs the controller with it.
func TestKustomizeConfigDefault(t *testing.T) {
	parallel(t)
	out, m := buildKustomization(t, "config/default")
	kinds := map[string]int{}
	for _, obj := range m.objects {
		kinds[obj.GetKind()]++
	}
	deployment := m.deployment
	// ClusterRoles: the manager's, rainbow-metrics-reader, rainbow-view, rainbow-edit.
	want := map[string]int{"Namespace": 1, "CustomResourceDefinition": 3, "ServiceAccount": 1, "ClusterRole": 4,
		"ClusterRoleBinding": 1, "Role": 2, "RoleBinding": 2, "Deployment": 1,
		"ValidatingAdmissionPolicy": 1, "ValidatingAdmissionPolicyBinding": 1,
		"ValidatingWebhookConfiguration": 1, "Service": 1, "Secret": 1}
	for k, n := range want {
		if kinds[k] != n {
			t.Errorf("%d %s objects, want %d (all: %v)", kinds[k], k, n, kinds)
		}
	}
	m.checkWebhook(t, "--webhook-cert-rotation")
	pod := deployment.Spec.Template.Spec
	if pod.ServiceAccountName != "rainbow-manager" {
		t.Errorf("serviceAccountName = %q, want rainbow-manager", pod.ServiceAccountName)
	}
	if len(pod.Containers) == 1 {
		c := pod.Containers[0]
		if sc := c.SecurityContext; sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
			t.Errorf("container securityContext = %+v, want a non-root user and a read-only root filesystem", sc)
		}
		if c.LivenessProbe == nil || c.ReadinessProbe == nil || c.Resources.Requests.Cpu().IsZero() {
			t.Error("the container lacks probes or resource requests")
		}
		for _, arg := range []string{"--leader-elect", "--metrics-secure"} {
			if !slices.Contains(c.Args, arg) {
				t.Errorf("args %v lack %s", c.Args, arg)
			}
		}
	}

	if _, err := env.Kubectl(out, "apply", "--server-side", "--dry-run=server", "--field-manager=rainbow-test", "-f", "-"); err != nil {
		t.Fatalf("the API server refuses config/default: %v", err)
	}
}

// TestKustomizeCertManager builds config/cert-manager: config/default with
// cert-manager's Issuer and Certificate, the CA injection annotation and
// the manager's own rotation turned off. The server-side dry run leaves
// out the cert-manager objects, whose CRDs this cluster does not have.
func TestKustomizeCertManager(t *testing.T) {
	parallel(t)
	_, m := buildKustomization(t, "config/cert-manager")
	var rest []any
	kinds := map[string]int{}
	for _, obj := range m.objects {
		kinds[obj.GetKind()]++
		if obj.GetAPIVersion() != "cert-manager.io/v1" {
			rest = append(rest, obj.Object)
		}
	}
	if kinds["Issuer"] != 1 || kinds["Certificate"] != 1 || kinds["Secret"] != 0 {
		t.Errorf("kinds %v, want one Issuer and one Certificate, and no Secret (cert-manager makes it)", kinds)
	}
	if got := m.webhookConfig.GetAnnotations()["cert-manager.io/inject-ca-from"]; got != "rainbow-system/rainbow-webhook-cert" {
		t.Errorf("cert-manager.io/inject-ca-from = %q", got)
	}
	m.checkWebhook(t, "--webhook-cert-rotation=false")
	list, err := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "List", "items": rest})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := env.Kubectl(list, "apply", "--server-side", "--dry-run=server", "--field-manager=rainbow-test", "-f", "-"); err != nil {
		t.Fatalf("the API server refuses config/cert-manager: %v", err)
	}
}

// manifests are the objects of a kustomization, with its Deployment and
// ValidatingWebhookConfiguration decoded.
type manifests struct {
	objects       []unstructured.Unstructured
	deployment    appsv1.Deployment
	webhookConfig unstructured.Unstructured
	webhook       admissionregistrationv1.ValidatingWebhookConfiguration
	service       corev1.Service
}

// buildKustomization builds dir with kubectl's kustomize; every namespaced
// object must be in rainbow-system.
func buildKustomization(t *testing.T, dir string) ([]byte, *manifests) {
	t.Helper()
	out, err := env.Kubectl(nil, "kustomize", dir)
	if err != nil {
		t.Fatal(err)
	}
	m := &manifests{}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(out), 4096)
	for {
		var obj unstructured.Unstructured
		if err := dec.Decode(&obj.Object); err != nil {
			break
		}
		if obj.Object == nil {
			continue
		}
		m.objects = append(m.objects, obj)
		switch obj.GetKind() {
		case "Namespace", "CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding",
			"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding", "ValidatingWebhookConfiguration":
		default:
			if obj.GetNamespace() != "rainbow-system" {
				t.Errorf("%s: %s %s is in namespace %q, want rainbow-system", dir, obj.GetKind(), obj.GetName(), obj.GetNamespace())
			}
		}
		var into any
		switch obj.GetKind() {
		case "Deployment":
			into = &m.deployment
		case "ValidatingWebhookConfiguration":
			m.webhookConfig, into = obj, &m.webhook
		case "Service":
			into = &m.service
		default:
			continue
		}
		raw, _ := yaml.Marshal(obj.Object)
		if err := yaml.UnmarshalStrict(raw, into); err != nil {
			t.Fatalf("%s: %s: %v", dir, obj.GetKind(), err)
		}
	}
	return out, m
}

// checkWebhook checks that the webhook configuration calls the Service,
// which reaches the manager's webhook port, and that the manager serves
// the webhook there with the certificate from the mounted Secret;
// rotationArg is the manager's last --webhook-cert-rotation argument.
func (m *manifests) checkWebhook(t *testing.T, rotationArg string) {
	t.Helper()
	// TemporalWorkerOwnedResources (CREATE, UPDATE, DELETE), then
	// TemporalWorkerDeployments and TemporalConnections (CREATE, UPDATE);
	// only the TemporalWorkerDeployment one admits while no manager
	// answers, as the controller checks the same again.
	if len(m.webhook.Webhooks) != 3 {
		t.Fatalf("%d webhooks, want 3", len(m.webhook.Webhooks))
	}
	for i, want := range []struct {
		path    string
		ops     int
		failure admissionregistrationv1.FailurePolicyType
	}{{admission.Path, 3, admissionregistrationv1.Fail}, {admission.WorkerDeploymentPath, 2, admissionregistrationv1.Ignore}, {admission.ConnectionPath, 2, admissionregistrationv1.Fail}} {
		wh := m.webhook.Webhooks[i]
		svc := wh.ClientConfig.Service
		if svc == nil || svc.Name != m.service.Name || svc.Namespace != "rainbow-system" || svc.Path == nil || *svc.Path != want.path ||
			svc.Port == nil || len(m.service.Spec.Ports) != 1 || m.service.Spec.Ports[0].Port != *svc.Port {
			t.Errorf("webhook clientConfig %+v does not call Service %s (ports %+v) at %s", wh.ClientConfig, m.service.Name, m.service.Spec.Ports, want.path)
		}
		if wh.FailurePolicy == nil || *wh.FailurePolicy != want.failure || wh.SideEffects == nil ||
			*wh.SideEffects != admissionregistrationv1.SideEffectClassNone || len(wh.Rules) != 1 || len(wh.Rules[0].Operations) != want.ops {
			t.Errorf("webhook %+v: want failurePolicy %s, sideEffects None and %d operations", wh, want.failure, want.ops)
		}
	}
	pod := m.deployment.Spec.Template.Spec
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers", len(pod.Containers))
	}
	c := pod.Containers[0]
	if m.service.Spec.Ports[0].TargetPort.String() != "webhook" || !slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool {
		return p.Name == "webhook" && slices.Contains(c.Args, fmt.Sprintf("--webhook-port=%d", p.ContainerPort))
	}) {
		t.Errorf("the Service's targetPort %s is not the container's --webhook-port (ports %+v, args %v)", m.service.Spec.Ports[0].TargetPort.String(), c.Ports, c.Args)
	}
	rotation := ""
	for _, a := range c.Args {
		if strings.HasPrefix(a, "--webhook-cert-rotation") {
			rotation = a
		}
	}
	if rotation != rotationArg {
		t.Errorf("the last --webhook-cert-rotation argument is %q, want %q", rotation, rotationArg)
	}
	mounted := false
	for _, vm := range c.VolumeMounts {
		for _, v := range pod.Volumes {
			if v.Name == vm.Name && v.Secret != nil && v.Secret.SecretName == "rainbow-webhook-cert" &&
				slices.Contains(c.Args, "--webhook-cert-dir="+vm.MountPath) {
				mounted = true
			}
		}
	}
	if !mounted {
		t.Errorf("the Secret rainbow-webhook-cert is not mounted at --webhook-cert-dir (mounts %+v, args %v)", c.VolumeMounts, c.Args)
	}
	vars := map[string]string{}
	for _, e := range c.Env {
		if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
			vars[e.Name] = e.ValueFrom.FieldRef.FieldPath
		}
	}
	if vars["POD_NAMESPACE"] != "metadata.namespace" || vars["SERVICE_ACCOUNT_NAME"] != "spec.serviceAccountName" {
		t.Errorf("env %v lacks POD_NAMESPACE and SERVICE_ACCOUNT_NAME from the downward API", vars)
	}
}

// TestKustomizeOwnedResourcesAnyKind builds an overlay of config/default
// with the component that lets the controller manage owned resources of
// any kind, as docs/owned-resources.md shows, and checks that only it
// grants the wildcard, to the controller's service account.
func TestKustomizeOwnedResourcesAnyKind(t *testing.T) {
	parallel(t)
	dir := t.TempDir()
	rel, err := filepath.Rel(dir, env.Root)
	if err != nil {
		t.Fatal(err)
	}
	overlay := fmt.Sprintf("resources:\n  - %s/config/default\ncomponents:\n  - %s/config/components/owned-resources-any-kind\n", rel, rel)
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(overlay), 0o644); err != nil {
		t.Fatal(err)
	}
	out, m := buildKustomization(t, dir)
	wildcards := 0
	for _, obj := range m.objects {
		if obj.GetKind() != "ClusterRole" && obj.GetKind() != "Role" {
			continue
		}
		var role rbacv1.ClusterRole
		raw, _ := yaml.Marshal(obj.Object)
		if err := yaml.Unmarshal(raw, &role); err != nil {
			t.Fatal(err)
		}
		for _, r := range role.Rules {
			if slices.Contains(r.Resources, "*") {
				wildcards++
				if role.Name != "rainbow-owned-resources-any-kind" || slices.Contains(r.Verbs, "*") || slices.Contains(r.Verbs, "escalate") {
					t.Errorf("%s %s grants %+v", obj.GetKind(), role.Name, r)
				}
			}
		}
	}
	if wildcards != 1 {
		t.Errorf("%d rules on every resource, want exactly the component's", wildcards)
	}
	if _, err := env.Kubectl(out, "apply", "--server-side", "--dry-run=server", "--field-manager=rainbow-test", "-f", "-"); err != nil {
		t.Fatalf("the API server refuses the overlay: %v", err)
	}
	if base, _ := buildKustomization(t, "config/default"); bytes.Contains(base, []byte("rainbow-owned-resources-any-kind")) {
		t.Error("config/default grants any kind; only the component may")
	}
}
