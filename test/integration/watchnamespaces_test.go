package integration

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/rainbow-deploy/rainbow/test/harness"
)

// TestWatchNamespacesNeedsOnlyThoseNamespaces runs the manager binary with
// --watch-namespaces as a user whose permissions are a RoleBinding of the
// controller's ClusterRole in one namespace only, as the Helm chart's
// restricted RBAC grants them. It starts, reconciles the TWD there without
// a single error, and never touches the TWD of the other namespace, where
// any request would be forbidden. Without the flag the same user cannot
// even fill the controller's caches.
func TestWatchNamespacesNeedsOnlyThoseNamespaces(t *testing.T) {
	parallel(t)
	tt := env.NewTest(t)
	other := env.NewTest(t)
	ctx := context.Background()
	const user = "scoped-controller"
	if err := env.Kube.Create(ctx, harness.UserBinding(tt.Namespace, "scoped-controller", "ClusterRole", "rainbow-manager", user)); err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{tt.Namespace, other.Namespace} {
		if err := env.Kube.Create(ctx, validTWD(ns, "scoped")); err != nil {
			t.Fatal(err)
		}
	}
	kubeconfig := impersonatingKubeconfig(t, user)

	scoped, scopedMetrics, _ := startManagerBinary(t, kubeconfig, "--watch-namespaces="+tt.Namespace)
	tt.Eventually(2*time.Minute, "the scoped controller reconciles the TWD of "+tt.Namespace, func() (bool, string) {
		if resp, err := http.Get("http://" + scopedMetrics + "/metrics"); err != nil {
			return false, err.Error()
		} else {
			resp.Body.Close()
		}
		// A TWD without its connection asks to be looked at again.
		n, _ := metricAt(t, scopedMetrics, "controller_runtime_reconcile_total", map[string]string{"controller": "temporalworkerdeployment", "result": "requeue_after"})
		return n > 0, scoped.String()
	})
	time.Sleep(3 * time.Second) // a reconcile of the other namespace would fail by now
	if n, _ := metricAt(t, scopedMetrics, "controller_runtime_reconcile_errors_total", map[string]string{"controller": "temporalworkerdeployment"}); n != 0 {
		t.Errorf("%v reconcile errors; log:\n%s", n, scoped.String())
	}
	if log := scoped.String(); strings.Contains(log, "forbidden") || strings.Contains(log, other.Namespace) {
		t.Errorf("the scoped controller touched what it may not:\n%s", log)
	}

	// Without --watch-namespaces the same user cannot list cluster-wide.
	unscoped, _, kill := startManagerBinary(t, kubeconfig)
	tt.Eventually(2*time.Minute, "the unscoped controller is refused cluster-wide lists", func() (bool, string) {
		return strings.Contains(unscoped.String(), "forbidden"), unscoped.String()
	})
	kill() // it waits for its caches, up to controller-runtime's two minutes

}

// impersonatingKubeconfig is the environment's kubeconfig, acting as user.
func impersonatingKubeconfig(t *testing.T, user string) string {
	t.Helper()
	kc, err := clientcmd.LoadFromFile(env.Info.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range kc.AuthInfos {
		a.Impersonate = user
	}
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, kubeconfig); err != nil {
		t.Fatal(err)
	}
	return kubeconfig
}

// startManagerBinary runs .cache/bin/manager against kubeconfig with args,
// without webhook or leader election, and returns its log, its metrics
// address and a kill function. Unless killed, it must stop within 30s of
// SIGINT when the test ends.
func startManagerBinary(t *testing.T, kubeconfig string, args ...string) (*syncBuffer, string, func()) {
	t.Helper()
	metrics := harness.FreeAddr()
	cmd := exec.Command(filepath.Join(env.BinDir, "manager"), append([]string{
		"--kubeconfig=" + kubeconfig, "--identity=rainbow-scoped-test", "--webhook-port=0",
		"--metrics-bind-address=" + metrics, "--health-probe-bind-address=0", "--zap-devel=false",
	}, args...)...)
	log := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Env = append(os.Environ(), "KUBECONFIG=")
	// Dies with the test binary, even when a timeout kills it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Errorf("the manager did not stop within 30s of SIGINT; log:\n%s", log.String())
			_ = cmd.Process.Kill()
			<-done
		}
	})
	kill := func() {
		_ = cmd.Process.Kill()
		<-done
	}
	return log, metrics, kill
}

// syncBuffer collects a process's output while tests read it.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
