package helm

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rainbow-deploy/rainbow/test/harness"
)

// TestHelmInstall installs, upgrades and uninstalls both charts in the local
// environment with helm, against its real API server, as docs/install.md
// says: the CRDs chart first, then the controller.
func TestHelmInstall(t *testing.T) {
	tt := env.NewTest(t)
	ns := tt.Namespace
	crds := crdNames(t)

	// The harness installed config/crd for every package; the chart installs
	// them afresh.
	deleteHarnessCRDs(tt, crds)
	mustHelm(t, "install", "rainbow-crds", "charts/rainbow-crds", "--namespace", ns, "--wait", "--timeout", "3m")
	for _, name := range crds {
		crd := getCRD(t, name)
		if crd.Labels["app.kubernetes.io/managed-by"] != "Helm" || crd.Annotations["meta.helm.sh/release-name"] != "rainbow-crds" || !established(crd) {
			t.Errorf("CRD %s: labels %v, annotations %v: want installed by the release rainbow-crds and established", name, crd.Labels, crd.Annotations)
		}
	}
	if _, err := env.Kubectl(nil, "get", "validatingadmissionpolicy,validatingadmissionpolicybinding", "rainbow-twd-background-deletion"); err != nil {
		t.Errorf("the deletion policy is not installed: %v", err)
	}

	// helm upgrade updates the CRDs (they are templates, not files under
	// crds/, which helm installs once and never updates).
	changed := copyDir(t, filepath.Join(env.Root, "charts", "rainbow-crds"))
	crdFile := filepath.Join(changed, "files", "crds", "temporal.io_temporalconnections.yaml")
	replaceInFile(t, crdFile, "name: Host\n", "name: Address\n")
	mustHelm(t, "upgrade", "rainbow-crds", changed, "--namespace", ns, "--wait", "--timeout", "3m")
	if col := getCRD(t, "temporalconnections.temporal.io").Spec.Versions[0].AdditionalPrinterColumns[0].Name; col != "Address" {
		t.Errorf("after helm upgrade the first printer column of temporalconnections is %q, want the chart's new Address", col)
	}
	mustHelm(t, "upgrade", "rainbow-crds", "charts/rainbow-crds", "--namespace", ns, "--wait", "--timeout", "3m")
	if col := getCRD(t, "temporalconnections.temporal.io").Spec.Versions[0].AdditionalPrinterColumns[0].Name; col != "Host" {
		t.Errorf("after upgrading back the first printer column is %q, want Host", col)
	}

	// The controller. Its pod cannot run in the local environment yet (the
	// node agent gives processes no in-cluster configuration): no replicas.
	args := []string{"install", "rainbow", "charts/rainbow", "--namespace", ns, "--wait", "--timeout", "3m",
		"--set", "replicas=0", "--set", "identity=rainbow-" + tt.Suffix}
	mustHelm(t, args...)
	manifest := mustHelm(t, "get", "manifest", "rainbow", "--namespace", ns)
	if out, err := env.Kubectl(manifest, "get", "-f", "-", "-o", "name"); err != nil {
		t.Errorf("the release's objects are not all in the cluster: %v", err)
	} else if n := len(strings.Fields(string(out))); n != len(decode(t, manifest)) {
		t.Errorf("%d of the release's %d objects are in the cluster", n, len(decode(t, manifest)))
	}
	mustHelm(t, "upgrade", "rainbow", "charts/rainbow", "--namespace", ns, "--reuse-values", "--set", "maxVersions=50", "--wait", "--timeout", "3m")
	if out, err := env.Kubectl(nil, "-n", ns, "get", "deployment", "rainbow-controller", "-o", "jsonpath={.spec.template.spec.containers[0].args}"); err != nil ||
		!strings.Contains(string(out), "--max-versions=50") || !strings.Contains(string(out), "--identity=rainbow-"+tt.Suffix) {
		t.Errorf("after helm upgrade --set maxVersions=50 the manager's args are %s (%v)", out, err)
	}

	// Uninstalling removes the controller's objects, cluster-scoped ones
	// too, and keeps the CRDs (helm.sh/resource-policy: keep), whose
	// deletion would delete every TemporalWorkerDeployment.
	mustHelm(t, "uninstall", "rainbow", "--namespace", ns, "--wait", "--timeout", "3m")
	if out, err := env.Kubectl(manifest, "get", "-f", "-", "-o", "name", "--ignore-not-found"); err != nil || len(out) > 0 {
		t.Errorf("after helm uninstall these objects remain: %s (%v)", out, err)
	}
	mustHelm(t, "uninstall", "rainbow-crds", "--namespace", ns, "--wait", "--timeout", "3m")
	for _, name := range crds {
		if crd := getCRD(t, name); crd.DeletionTimestamp != nil {
			t.Errorf("CRD %s is being deleted after helm uninstall rainbow-crds; want it kept", name)
		}
	}
	if out, err := env.Kubectl(nil, "get", "validatingadmissionpolicy", "rainbow-twd-background-deletion", "--ignore-not-found", "-o", "name"); err != nil || len(out) > 0 {
		t.Errorf("the deletion policy remains after helm uninstall rainbow-crds: %s (%v)", out, err)
	}
}

// crdNames are the names of the CRDs of config/crd/bases.
func crdNames(t testing.TB) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(env.Root, "config", "crd", "bases", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no CRDs in config/crd/bases: %v", err)
	}
	var names []string
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, decode(t, data)[0].GetName())
	}
	return names
}

// deleteHarnessCRDs deletes the CRDs and the admission policy the harness
// applied, and waits until they are gone.
func deleteHarnessCRDs(tt *harness.T, crds []string) {
	tt.Helper()
	args := append([]string{"delete", "--wait", "--timeout=2m", "--ignore-not-found", "crd"}, crds...)
	if _, err := env.Kubectl(nil, args...); err != nil {
		tt.Fatal(err)
	}
	if _, err := env.Kubectl(nil, "delete", "--ignore-not-found", "validatingadmissionpolicy,validatingadmissionpolicybinding", "rainbow-twd-background-deletion"); err != nil {
		tt.Fatal(err)
	}
	tt.Eventually(time.Minute, "the harness's CRDs gone", func() (bool, string) {
		for _, name := range crds {
			err := env.Kube.Get(context.Background(), crclient.ObjectKey{Name: name}, &apiextensionsv1.CustomResourceDefinition{})
			if !apierrors.IsNotFound(err) {
				return false, name + " still there"
			}
		}
		return true, ""
	})
}

func getCRD(t testing.TB, name string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	var crd apiextensionsv1.CustomResourceDefinition
	if err := env.Kube.Get(context.Background(), crclient.ObjectKey{Name: name}, &crd); err != nil {
		t.Fatalf("CRD %s: %v", name, err)
	}
	return &crd
}

func established(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
			return true
		}
	}
	return false
}

// copyDir copies a directory tree into a temporary directory.
func copyDir(t testing.TB, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), filepath.Base(src))
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	return dst
}

func replaceInFile(t testing.TB, path, old, new string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(string(data), old) != 1 {
		t.Fatalf("%s holds %q %d times, want once", path, old, strings.Count(string(data), old))
	}
	if err := os.WriteFile(path, []byte(strings.Replace(string(data), old, new, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
}
