package helm

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"
)

// incumbentCRDChart is a chart with the CRD names of Temporal's worker
// controller's CRD chart, temporal-worker-controller-crds (its templates
// at v1.8.1: the two deprecated kinds that collide with Rainbow's, and
// WorkerDeployment), as templates without helm.sh/resource-policy: keep,
// as that chart ships them (docs/migration-from-twc.md#crds-and-helm-charts).
func incumbentCRDChart(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	crd := func(plural, kind string) string {
		return fmt.Sprintf(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: %s.temporal.io
spec:
  group: temporal.io
  names: {kind: %s, listKind: %sList, plural: %s, singular: %s}
  scope: Namespaced
  versions:
  - name: v1alpha1
    served: true
    storage: true
    deprecated: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
`, plural, kind, kind, plural, strings.ToLower(kind))
	}
	files := map[string]string{
		"Chart.yaml":                   "apiVersion: v2\nname: temporal-worker-controller-crds\nversion: 0.27.0\n",
		"templates/twd.yaml":           crd("temporalworkerdeployments", "TemporalWorkerDeployment"),
		"templates/tconn.yaml":         crd("temporalconnections", "TemporalConnection"),
		"templates/workerdeploys.yaml": strings.Replace(crd("workerdeployments", "WorkerDeployment"), "    deprecated: true\n", "", 1),
	}
	for name, content := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestCRDHandoverFromTheIncumbentRelease runs the commands of
// docs/migration-from-twc.md that end the worker controller's CRD release
// and give the two colliding CRDs to rainbow-crds: Helm installs Rainbow's
// CRDs over them, the old release is gone without deleting anything, and
// uninstalling Rainbow's release keeps them.
func TestCRDHandoverFromTheIncumbentRelease(t *testing.T) {
	tt := env.NewTest(t)
	crds := crdNames(t)
	deleteHarnessCRDs(tt, crds)
	incumbentNS := namespace(t, "twc-"+tt.Suffix)
	rainbowNS := "rbcrds-" + tt.Suffix
	t.Cleanup(func() {
		_, _ = helm(t, "uninstall", "rainbow-crds", "--namespace", rainbowNS, "--wait", "--timeout", "2m")
		_ = env.Kube.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: rainbowNS}})
		_, _ = env.Kubectl(nil, "delete", "--ignore-not-found", "crd", "workerdeployments.temporal.io")
	})

	mustHelm(t, "install", "temporal-worker-controller-crds", incumbentCRDChart(t), "--namespace", incumbentNS, "--wait", "--timeout", "2m")
	// An object the incumbent stores under a colliding CRD must survive.
	wd := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"replicas": int64(1)}}}
	wd.SetAPIVersion("temporal.io/v1alpha1")
	wd.SetKind("WorkerDeployment")
	wd.SetNamespace(tt.Namespace)
	wd.SetName("orders")
	tt.Eventually(time.Minute, "a WorkerDeployment stored", func() (bool, string) {
		err := env.Kube.Create(context.Background(), wd)
		return err == nil, fmt.Sprint(err)
	})

	script := pageSnippet(t, "migration-from-twc.md", "#### Handing the two CRDs to Rainbow's chart")
	for _, ns := range []string{"temporal-system", "rainbow-system"} {
		if !strings.Contains(script, ns) {
			t.Fatalf("the snippet names no namespace %s", ns)
		}
	}
	script = strings.NewReplacer("temporal-system", incumbentNS, "rainbow-system", rainbowNS).Replace(script)
	bin := t.TempDir()
	for name, target := range map[string]string{"helm": helmPath(t), "kubectl": filepath.Join(env.Root, ".cache", "kube", "kubectl")} {
		if err := os.Symlink(target, filepath.Join(bin, name)); err != nil {
			t.Fatal(err)
		}
	}
	home := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", script)
	cmd.Dir = env.Root
	cmd.Env = append(os.Environ(), "KUBECONFIG="+env.Info.Kubeconfig, "PATH="+bin+":"+os.Getenv("PATH"),
		"HELM_CONFIG_HOME="+filepath.Join(home, "config"), "HELM_CACHE_HOME="+filepath.Join(home, "cache"), "HELM_DATA_HOME="+filepath.Join(home, "data"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the documented commands: %v\n%s", err, out)
	}

	for _, name := range []string{"temporalworkerdeployments.temporal.io", "temporalconnections.temporal.io"} {
		crd := getCRD(t, name)
		if crd.Annotations["meta.helm.sh/release-name"] != "rainbow-crds" || crd.DeletionTimestamp != nil {
			t.Errorf("CRD %s: annotations %v, deleting %v: want rainbow-crds's", name, crd.Annotations, crd.DeletionTimestamp)
		}
		if v := crd.Spec.Versions[0]; v.Deprecated || v.Schema.OpenAPIV3Schema.XPreserveUnknownFields != nil {
			t.Errorf("CRD %s still has the incumbent's schema", name)
		}
	}
	getCRD(t, "temporalworkerownedresources.temporal.io")
	if out := mustHelm(t, "list", "--namespace", incumbentNS, "-q"); strings.TrimSpace(string(out)) != "" {
		t.Errorf("the worker controller's CRD release is still listed: %s", out)
	}
	if _, err := helm(t, "uninstall", "temporal-worker-controller-crds", "--namespace", incumbentNS); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("uninstalling the ended release: %v, want not found", err)
	}
	if err := env.Kube.Get(context.Background(), crclient.ObjectKeyFromObject(wd), wd); err != nil {
		t.Errorf("the WorkerDeployment is gone: %v", err)
	}
	for _, name := range crds {
		if crd := getCRD(t, name); crd.DeletionTimestamp != nil {
			t.Errorf("CRD %s is being deleted", name)
		}
	}
}
