package helm

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	externalmetricsv1beta1 "k8s.io/metrics/pkg/apis/external_metrics/v1beta1"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/dev/demoworker"
	"github.com/rainbow-deploy/rainbow/internal/buildid"
	"github.com/rainbow-deploy/rainbow/test/harness"
)

// TestHelmInstall installs both charts into the local environment with
// helm, against its real API server, as docs/install.md says (the CRDs
// first), and rolls out through the controller the chart runs as a pod
// under its own service account: a TemporalWorkerDeployment of the demo
// worker with an HPA per version (the webhook admits it through its
// Service), and reads the version's backlog through the external metrics
// API (externalMetrics.enabled) the pod serves. helm upgrade then restricts the controller to the workers'
// namespace (watchNamespaces: Roles instead of the ClusterRole) and a second
// version rolls out under those permissions. Uninstalling removes it all
// but the CRDs.
func TestHelmInstall(t *testing.T) {
	if _, err := os.Stat(filepath.Join(env.BinDir, "manager")); err != nil {
		t.Fatalf("the image rainbow.local/manager runs .cache/bin/manager, which is not built: run `make bins`: %v", err)
	}
	ctx := context.Background()
	tt := env.NewTest(t) // the workers' namespace
	system := namespace(t, "rainbow-"+tt.Suffix)
	crds := crdNames(t)

	// The harness installed config/crd for every package; the chart installs
	// them afresh.
	deleteHarnessCRDs(tt, crds)
	mustHelm(t, "install", "rainbow-crds", "charts/rainbow-crds", "--namespace", system, "--wait", "--timeout", "3m")
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
	replaceInFile(t, filepath.Join(changed, "files", "crds", "temporal.io_temporalconnections.yaml"), "name: Host\n", "name: Address\n")
	mustHelm(t, "upgrade", "rainbow-crds", changed, "--namespace", system, "--wait", "--timeout", "3m")
	if col := getCRD(t, "temporalconnections.temporal.io").Spec.Versions[0].AdditionalPrinterColumns[0].Name; col != "Address" {
		t.Errorf("after helm upgrade the first printer column of temporalconnections is %q, want the chart's new Address", col)
	}
	mustHelm(t, "upgrade", "rainbow-crds", "charts/rainbow-crds", "--namespace", system, "--wait", "--timeout", "3m")
	if col := getCRD(t, "temporalconnections.temporal.io").Spec.Versions[0].AdditionalPrinterColumns[0].Name; col != "Host" {
		t.Errorf("after upgrading back the first printer column is %q, want Host", col)
	}

	// The controller, with the default image name (the node agent runs
	// .cache/bin/manager for it) and the values docs/local-environment.md
	// gives: pods share the machine's network here, so the manager binds its
	// pod's own address; else the upgrade's new pod would find its ports
	// taken by the old one.
	manifest := installController(tt, "rainbow", system, "--set", "externalMetrics.enabled=true")

	w := newWorkers(tt)
	w.waitCurrent(4*time.Minute, "v1")
	// externalMetrics.enabled: the API server's aggregator sends the
	// external metrics API to the pod, which answers with the version's
	// backlog.
	if err := env.WaitForExternalMetrics(ctx, 3*time.Minute); err != nil {
		t.Fatal(err)
	}
	w.waitBacklogMetric()

	// Restricted to the workers' namespace: a Role there replaces the
	// ClusterRole's namespaced rules, and the manager watches only it.
	mustHelm(t, "upgrade", "rainbow", "charts/rainbow", "--namespace", system, "--reuse-values", "--wait", "--timeout", "4m",
		"--set", "watchNamespaces={"+tt.Namespace+"}")
	if out, err := env.Kubectl(nil, "-n", system, "rollout", "status", "deployment/rainbow-controller", "--timeout=4m"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	role := &rbacv1.Role{}
	if err := env.Kube.Get(ctx, crclient.ObjectKey{Namespace: tt.Namespace, Name: "rainbow-manager"}, role); err != nil {
		t.Fatalf("no Role rainbow-manager in the watched namespace after the upgrade: %v", err)
	}
	if err := env.WaitForWebhookIn(ctx, tt.Namespace, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	w.setImage("v2")
	w.waitCurrent(4*time.Minute, "v2")
	if got := w.hello(); !strings.Contains(got, w.buildID()) {
		t.Errorf("Hello answered %q, want the new version %s to run it", got, w.buildID())
	}

	// Uninstalling: first what has the controller's finalizers, while it
	// runs; then the controller's objects, cluster-scoped ones too. The CRDs
	// stay (helm.sh/resource-policy: keep): deleting them would delete every
	// TemporalWorkerDeployment.
	w.delete()
	mustHelm(t, "uninstall", "rainbow", "--namespace", system, "--wait", "--timeout", "3m")
	if out, err := env.Kubectl(manifest, "get", "-f", "-", "-o", "name", "--ignore-not-found"); err != nil || len(out) > 0 {
		t.Errorf("after helm uninstall these objects remain: %s (%v)", out, err)
	}
	mustHelm(t, "uninstall", "rainbow-crds", "--namespace", system, "--wait", "--timeout", "3m")
	for _, name := range crds {
		if crd := getCRD(t, name); crd.DeletionTimestamp != nil {
			t.Errorf("CRD %s is being deleted after helm uninstall rainbow-crds; want it kept", name)
		}
	}
	if out, err := env.Kubectl(nil, "get", "validatingadmissionpolicy", "rainbow-twd-background-deletion", "--ignore-not-found", "-o", "name"); err != nil || len(out) > 0 {
		t.Errorf("the deletion policy remains after helm uninstall rainbow-crds: %s (%v)", out, err)
	}
}

// installController installs charts/rainbow as release in namespace system
// with examples/local-environment/rainbow-values.yaml and args, waits for
// its Deployment as the chart's notes say and until its webhook answers in
// tt's namespace, and returns the release's manifest.
func installController(tt *harness.T, release, system string, args ...string) []byte {
	tt.Helper()
	mustHelm(tt, append([]string{"install", release, "charts/rainbow", "--namespace", system, "--wait", "--timeout", "4m",
		"-f", "examples/local-environment/rainbow-values.yaml", "--set", "identity=" + release + "-" + tt.Suffix}, args...)...)
	manifest := mustHelm(tt, "get", "manifest", release, "--namespace", system)
	if out, err := env.Kubectl(nil, "-n", system, "rollout", "status", "deployment/"+release+"-controller", "--timeout=4m"); err != nil {
		tt.Fatalf("%v\n%s", err, out)
	}
	if err := env.WaitForWebhookIn(context.Background(), tt.Namespace, 2*time.Minute); err != nil {
		tt.Fatal(err)
	}
	return manifest
}

// workers are the examples a user applies once the controller runs:
// examples/connection/plaintext.yaml, examples/rollouts/allatonce.yaml
// and examples/twor-hpa.yaml for it, in the test's namespace, with this
// environment's Temporal and a task queue of the test's own.
type workers struct {
	*harness.T
	twd  *v1alpha1.TemporalWorkerDeployment
	twor *v1alpha1.TemporalWorkerOwnedResource
	conn *v1alpha1.TemporalConnection
}

func newWorkers(tt *harness.T) *workers {
	tt.Helper()
	w := &workers{T: tt, twd: &v1alpha1.TemporalWorkerDeployment{}, twor: &v1alpha1.TemporalWorkerOwnedResource{}, conn: &v1alpha1.TemporalConnection{}}
	env.ReadExample(tt, "connection/plaintext.yaml", w.conn)
	env.ReadExample(tt, "rollouts/allatonce.yaml", w.twd)
	env.ReadExample(tt, "twor-hpa.yaml", w.twor)
	w.conn.Namespace, w.twd.Namespace, w.twor.Namespace = tt.Namespace, tt.Namespace, tt.Namespace
	w.conn.Spec.HostPort = env.Info.TemporalAddress
	w.twd.Spec.WorkerOptions.TemporalNamespace = env.Info.TemporalNamespace
	w.twd.Spec.Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "DEMO_TASK_QUEUE", Value: tt.TaskQueue("demo")}}
	w.twor.Spec.WorkerRef.Name = w.twd.Name
	for _, obj := range []crclient.Object{w.conn, w.twd, w.twor} {
		if err := env.Kube.Create(context.Background(), obj); err != nil {
			tt.Fatalf("create %T: %v", obj, err)
		}
	}
	return w
}

func (w *workers) buildID() string {
	w.Helper()
	if err := env.Kube.Get(context.Background(), crclient.ObjectKeyFromObject(w.twd), w.twd); err != nil {
		w.Fatal(err)
	}
	return buildid.Of(&w.twd.Spec)
}

// setImage rolls out the demo worker's image with tag.
func (w *workers) setImage(tag string) {
	w.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		w.buildID() // reads the TWD
		c := &w.twd.Spec.Template.Spec.Containers[0]
		c.Image = c.Image[:strings.LastIndexByte(c.Image, ':')+1] + tag
		return env.Kube.Update(context.Background(), w.twd)
	})
	if err != nil {
		w.Fatal(err)
	}
}

// waitCurrent waits until the image tag's version is current and the
// rollout Ready, and its HPA is applied (the TWOR Ready).
func (w *workers) waitCurrent(timeout time.Duration, tag string) {
	w.Helper()
	w.Eventually(timeout, "version "+tag+" current and Ready, and its HPA applied", func() (bool, string) {
		build := w.buildID()
		if err := env.Kube.Get(context.Background(), crclient.ObjectKeyFromObject(w.twor), w.twor); err != nil {
			return false, err.Error()
		}
		twdReady := meta.FindStatusCondition(w.twd.Status.Conditions, v1alpha1.ConditionReady)
		tworReady := meta.FindStatusCondition(w.twor.Status.Conditions, v1alpha1.ConditionReady)
		applied := slices.ContainsFunc(w.twor.Status.Versions, func(v v1alpha1.OwnedResourceVersion) bool { return v.BuildID == build && v.Applied })
		current := w.twd.Status.CurrentVersion != nil && w.twd.Status.CurrentVersion.BuildID == build
		return strings.HasPrefix(build, tag+"-") && current && applied && w.twd.Status.ObservedGeneration == w.twd.Generation &&
				twdReady != nil && twdReady.Status == metav1.ConditionTrue && tworReady != nil && tworReady.Status == metav1.ConditionTrue,
			fmt.Sprintf("build %s; TWD %+v %+v; TWOR %+v %+v", build, w.twd.Status.CurrentVersion, twdReady, w.twor.Status.Versions, tworReady)
	})
}

// waitBacklogMetric waits until kubectl get --raw reads the current
// version's temporal_backlog_count through the API server: one value, of
// that build, 0 since no task waits.
func (w *workers) waitBacklogMetric() {
	w.Helper()
	build := w.buildID()
	path := fmt.Sprintf("/apis/external.metrics.k8s.io/v1beta1/namespaces/%s/temporal_backlog_count?labelSelector=%s",
		w.Namespace, url.QueryEscape("temporal.io/build-id="+build))
	w.Eventually(2*time.Minute, "kubectl get --raw "+path, func() (bool, string) {
		out, err := env.Kubectl(nil, "get", "--raw", path)
		if err != nil {
			return false, err.Error()
		}
		var list externalmetricsv1beta1.ExternalMetricValueList
		if err := json.Unmarshal(out, &list); err != nil {
			return false, fmt.Sprintf("%v: %s", err, out)
		}
		ok := len(list.Items) == 1 && list.Items[0].MetricName == "temporal_backlog_count" &&
			list.Items[0].MetricLabels["temporal.io/build-id"] == build && list.Items[0].Value.IsZero()
		return ok, string(out)
	})
}

// hello runs the demo's short workflow; its answer names the build that ran it.
func (w *workers) hello() string {
	w.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	queue := w.twd.Spec.Template.Spec.Containers[0].Env[0].Value
	run, err := env.Temporal.ExecuteWorkflow(ctx, client.StartWorkflowOptions{TaskQueue: queue}, demoworker.HelloWorkflow, "helm")
	if err != nil {
		w.Fatal(err)
	}
	var out string
	if err := run.Get(ctx, &out); err != nil {
		w.Fatal(err)
	}
	return out
}

// delete deletes the examples, TWOR and TWD first, and waits until the
// controller has let them go (finalizers).
func (w *workers) delete() {
	w.Helper()
	for _, obj := range []crclient.Object{w.twor, w.twd, w.conn} {
		if err := env.Kube.Delete(context.Background(), obj); err != nil {
			w.Fatal(err)
		}
		w.Eventually(3*time.Minute, fmt.Sprintf("%T %s gone", obj, obj.GetName()), func() (bool, string) {
			err := env.Kube.Get(context.Background(), crclient.ObjectKeyFromObject(obj), obj)
			return apierrors.IsNotFound(err), fmt.Sprintf("finalizers %v (%v)", obj.GetFinalizers(), err)
		})
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
