package helm

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/internal/buildid"
	"github.com/rainbow-deploy/rainbow/test/harness"
)

// TestCDToolsHelm runs the Helm snippets of docs/cd-tools.md, read from the
// page, with helm 3 and helm 4 against the controller installed with
// charts/rainbow: each upgrades the release of a worker's own chart
// (testdata/orders, in the snippets' ./chart) whose values a commit would
// change. Helm 3's snippet (helm, then the kubectl waits) returns once the
// new version is current; its --wait alone reports success on a blocked
// rollout. Helm 4's --wait returns once the new version is current, fails,
// before its timeout, on a failed gate and on a missing connection, and
// with --rollback-on-failure puts back the last successful release.
func TestCDToolsHelm(t *testing.T) {
	helm4 := helm4Path(t)
	tt := env.NewTest(t)
	system := namespace(t, "rainbow-cd-"+tt.Suffix)
	installController(tt, "rainbow-cd", system)
	t.Cleanup(func() {
		if _, err := helm(t, "uninstall", "rainbow-cd", "--namespace", system, "--wait", "--timeout", "3m"); err != nil {
			t.Error(err)
		}
	})
	helm3, helm4Snippet := docSnippet(t, "### Helm 3"), docSnippet(t, "### Helm 4")

	t.Run("Helm 3", func(t *testing.T) {
		t.Parallel()
		c := newChartRelease(env.NewTest(t), helmPath(t))
		c.values("v1", nil, "")
		c.mustRun(helm3)
		c.checkCurrent("v1")
		c.values("v2", nil, "")
		c.mustRun(helm3)
		c.checkCurrent("v2")

		// helm upgrade --wait returns on a rollout blocked by its gate.
		c.values("v3", failingGate, "")
		c.mustRun(firstLine(t, helm3) + " --wait --timeout 10m")
		c.waitStalled(v1alpha1.ReasonGateFailed)
	})

	t.Run("Helm 4", func(t *testing.T) {
		t.Parallel()
		c := newChartRelease(env.NewTest(t), helm4)
		// A first install may return before the controller wrote any
		// status (the page says so): wait for v1 here.
		c.values("v1", nil, "")
		c.mustRun(helm4Snippet)
		c.Eventually(4*time.Minute, "v1 current", func() (bool, string) { return c.current("v1") })
		c.values("v2", nil, "")
		c.mustRun(helm4Snippet)
		c.checkCurrent("v2")

		// Blocked: helm fails, with kstatus' Failed and the reason, before
		// its timeout of 30 minutes (the test stops it after 6).
		c.values("v3", failingGate, "")
		c.mustFail(helm4Snippet, gateMessage)
		c.waitStalled(v1alpha1.ReasonGateFailed)
		c.values("v2", nil, "missing")
		c.mustFail(helm4Snippet, "TemporalConnection missing not found")
		c.waitStalled(v1alpha1.ReasonTemporalConnectionNotFound)

		// --rollback-on-failure puts back the last successful release's
		// template, v2's, which is still current: Ready again.
		c.values("v3", failingGate, "")
		c.mustFail(strings.TrimSpace(helm4Snippet)+" --rollback-on-failure", gateMessage, "has been rolled back")
		c.Eventually(3*time.Minute, "v2 current after the rollback", func() (bool, string) { return c.current("v2") })
		if twd := c.get(); twd.Spec.WorkerOptions.ConnectionRef.Name != "orders-temporal" || twd.Spec.Rollout.Gate != nil {
			c.Fatalf("after the rollback: connection %s, gate %+v: want the last successful release's", twd.Spec.WorkerOptions.ConnectionRef.Name, twd.Spec.Rollout.Gate)
		}
	})
}

const gateMessage = "smoke test failed"

var failingGate = map[string]any{"Fail": true, "Message": gateMessage}

// docSnippet is the first sh block after heading in docs/cd-tools.md.
func docSnippet(t testing.TB, heading string) string {
	t.Helper()
	return pageSnippet(t, "cd-tools.md", heading)
}

// pageSnippet is the first sh block after heading in docs/page.
func pageSnippet(t testing.TB, page, heading string) string {
	t.Helper()
	text, err := os.ReadFile(filepath.Join(env.Root, "docs", page))
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(text), "\n"+heading+"\n")
	if !ok {
		t.Fatalf("docs/%s has no heading %q", page, heading)
	}
	_, block, ok := strings.Cut(after, "```sh\n")
	if !ok {
		t.Fatalf("docs/%s: no sh block after %q", page, heading)
	}
	block, _, _ = strings.Cut(block, "```")
	return block
}

func firstLine(t testing.TB, snippet string) string {
	t.Helper()
	line, _, _ := strings.Cut(snippet, "\n")
	if !strings.HasPrefix(line, "helm upgrade --install orders ./chart") {
		t.Fatalf("the snippet starts with %q, want helm upgrade --install orders ./chart", line)
	}
	return line
}

// chartRelease is the release orders of testdata/orders in the test's
// namespace, which the snippets call shop, run from a directory that holds
// the chart as ./chart.
type chartRelease struct {
	*harness.T
	dir  string
	bin  string // holds helm and kubectl
	home string
}

func newChartRelease(tt *harness.T, helmBin string) *chartRelease {
	c := &chartRelease{T: tt, dir: tt.TempDir(), bin: tt.TempDir(), home: tt.TempDir()}
	if err := os.CopyFS(filepath.Join(c.dir, "chart"), os.DirFS(filepath.Join(env.Root, "test", "helm", "testdata", "orders"))); err != nil {
		tt.Fatal(err)
	}
	for name, target := range map[string]string{"helm": helmBin, "kubectl": filepath.Join(env.Root, ".cache", "kube", "kubectl")} {
		if err := os.Symlink(target, filepath.Join(c.bin, name)); err != nil {
			tt.Fatal(err)
		}
	}
	tt.Cleanup(func() {
		// The TemporalWorkerDeployment's finalizer needs the controller,
		// which the parent test uninstalls after this.
		if out, err := c.run("helm uninstall orders -n shop --wait --timeout 3m"); err != nil {
			tt.Errorf("helm uninstall orders: %v\n%s", err, out)
		}
	})
	return c
}

// values writes the chart's values as a commit would: the demo worker's
// image tag, a gate input or none, and the connection ("" for the chart's).
func (c *chartRelease) values(tag string, gate map[string]any, connection string) {
	c.Helper()
	if connection == "" {
		connection = "orders-temporal"
	}
	v := map[string]any{
		"image":      "rainbow.local/demo-worker:" + tag,
		"taskQueue":  c.TaskQueue("orders"),
		"temporal":   map[string]any{"hostPort": env.Info.TemporalAddress, "namespace": env.Info.TemporalNamespace},
		"connection": connection,
		"gate":       gate,
	}
	data, err := yaml.Marshal(v)
	if err != nil {
		c.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(c.dir, "chart", "values.yaml"), data, 0o644); err != nil {
		c.Fatal(err)
	}
}

var shop = regexp.MustCompile(`-n shop\b`)

// run runs script with bash as a pipeline would, in the test's namespace
// for shop, and returns its output.
func (c *chartRelease) run(script string) (string, error) {
	if !shop.MatchString(script) {
		c.Fatalf("the script names no namespace shop: %s", script)
	}
	script = shop.ReplaceAllString(script, "-n "+c.Namespace)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", script)
	cmd.Dir = c.dir
	cmd.Env = append(os.Environ(), "KUBECONFIG="+env.Info.Kubeconfig, "PATH="+c.bin+":"+os.Getenv("PATH"),
		"HELM_CONFIG_HOME="+filepath.Join(c.home, "config"), "HELM_CACHE_HOME="+filepath.Join(c.home, "cache"),
		"HELM_DATA_HOME="+filepath.Join(c.home, "data"))
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		return string(out), fmt.Errorf("still running after 6 minutes: %w", ctx.Err())
	}
	return string(out), err
}

func (c *chartRelease) mustRun(script string) {
	c.Helper()
	if out, err := c.run(script); err != nil {
		c.Fatalf("%s: %v\n%s", script, err, out)
	}
}

// mustFail runs script, which must fail with kstatus' Failed for the
// TemporalWorkerDeployment and each want in its output, not on its timeout.
func (c *chartRelease) mustFail(script string, want ...string) {
	c.Helper()
	out, err := c.run(script)
	want = append(want, "TemporalWorkerDeployment/"+c.Namespace+"/orders not ready. status: Failed")
	ok := err != nil && !strings.Contains(out, "context deadline exceeded") && !strings.Contains(err.Error(), "after 6 minutes")
	for _, w := range want {
		ok = ok && strings.Contains(out, w)
	}
	if !ok {
		c.Fatalf("%s: %v, want it to fail, not time out, with %q:\n%s", script, err, want, out)
	}
	c.Logf("%s: as expected, %v:\n%s", script, err, out)
}

func (c *chartRelease) get() *v1alpha1.TemporalWorkerDeployment {
	c.Helper()
	var twd v1alpha1.TemporalWorkerDeployment
	if err := env.Kube.Get(context.Background(), crclient.ObjectKey{Namespace: c.Namespace, Name: "orders"}, &twd); err != nil && !apierrors.IsNotFound(err) {
		c.Fatal(err)
	}
	return &twd
}

// current tells whether the image tag's version, built from the live spec,
// is current and the rollout Ready for this generation.
func (c *chartRelease) current(tag string) (bool, string) {
	twd := c.get()
	build := buildid.Of(&twd.Spec)
	ready := meta.FindStatusCondition(twd.Status.Conditions, v1alpha1.ConditionReady)
	ok := strings.HasPrefix(build, tag+"-") && twd.Status.CurrentVersion != nil && twd.Status.CurrentVersion.BuildID == build &&
		twd.Status.ObservedGeneration == twd.Generation && ready != nil && ready.Status == metav1.ConditionTrue
	return ok, fmt.Sprintf("build %s, generation %d, status %+v", build, twd.Generation, twd.Status)
}

// checkCurrent: a snippet that returned has waited until tag was current.
func (c *chartRelease) checkCurrent(tag string) {
	c.Helper()
	if ok, state := c.current(tag); !ok {
		c.Fatalf("the snippet returned before %s was current and Ready: %s", tag, state)
	}
}

func (c *chartRelease) waitStalled(reason string) {
	c.Helper()
	c.Eventually(3*time.Minute, "Stalled "+reason, func() (bool, string) {
		twd := c.get()
		s := meta.FindStatusCondition(twd.Status.Conditions, v1alpha1.ConditionStalled)
		return twd.Status.ObservedGeneration == twd.Generation && s != nil && s.Status == metav1.ConditionTrue && s.Reason == reason,
			fmt.Sprintf("%+v", twd.Status.Conditions)
	})
}
