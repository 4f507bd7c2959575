package integration

import (
	"bytes"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// TestKustomizeConfigDefault builds the install manifests with kubectl's
// kustomize and sends them to the real API server (server-side dry run),
// so schemas, RBAC references and the Deployment are known valid.
// TestMain applied config/rbac for real and runs the controller with it.
func TestKustomizeConfigDefault(t *testing.T) {
	out, err := env.Kubectl(nil, "kustomize", "config/default")
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	var deployment appsv1.Deployment
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(out), 4096)
	for {
		var obj unstructured.Unstructured
		if err := dec.Decode(&obj.Object); err != nil {
			break
		}
		if obj.Object == nil {
			continue
		}
		kinds[obj.GetKind()]++
		switch obj.GetKind() {
		case "Namespace", "CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding",
			"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding":
		default:
			if obj.GetNamespace() != "rainbow-system" {
				t.Errorf("%s %s is in namespace %q, want rainbow-system", obj.GetKind(), obj.GetName(), obj.GetNamespace())
			}
		}
		if obj.GetKind() == "Deployment" {
			raw, _ := yaml.Marshal(obj.Object)
			if err := yaml.UnmarshalStrict(raw, &deployment); err != nil {
				t.Fatalf("Deployment: %v", err)
			}
		}
	}
	want := map[string]int{"Namespace": 1, "CustomResourceDefinition": 2, "ServiceAccount": 1, "ClusterRole": 1,
		"ClusterRoleBinding": 1, "Role": 1, "RoleBinding": 1, "Deployment": 1,
		"ValidatingAdmissionPolicy": 1, "ValidatingAdmissionPolicyBinding": 1}
	for k, n := range want {
		if kinds[k] != n {
			t.Errorf("%d %s objects, want %d (all: %v)", kinds[k], k, n, kinds)
		}
	}
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
		if !strings.Contains(strings.Join(c.Args, " "), "--leader-elect") {
			t.Errorf("args %v lack --leader-elect", c.Args)
		}
	}

	if _, err := env.Kubectl(out, "apply", "--server-side", "--dry-run=server", "--field-manager=rainbow-test", "-f", "-"); err != nil {
		t.Fatalf("the API server refuses config/default: %v", err)
	}
}
