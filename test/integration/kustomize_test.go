package integration

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
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
		case "Namespace", "CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding":
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
		"ClusterRoleBinding": 1, "Role": 1, "RoleBinding": 1, "Deployment": 1}
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

// TestKustomizeRBACRoleIsGenerated: config/rbac/role.yaml is what `make
// generate` makes of the markers in internal/ now.
func TestKustomizeRBACRoleIsGenerated(t *testing.T) {
	tools, _ := filepath.Glob(filepath.Join(env.Root, ".cache", "tools", "controller-gen-*"))
	if len(tools) == 0 {
		t.Skip("controller-gen is not built (make generate builds it)")
	}
	dir := t.TempDir()
	cmd := exec.Command(tools[len(tools)-1], "rbac:roleName=rainbow-manager", "paths=./internal/...", "output:rbac:artifacts:config="+dir)
	cmd.Dir = env.Root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("controller-gen: %v\n%s", err, out)
	}
	fresh, err := os.ReadFile(filepath.Join(dir, "role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	committed, err := os.ReadFile(filepath.Join(env.Root, "config", "rbac", "role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(fresh, committed) {
		t.Fatalf("config/rbac/role.yaml is stale: run `make generate`. Generated now:\n%s", fresh)
	}
}
