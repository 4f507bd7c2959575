package helm

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rainbow-deploy/rainbow/test/harness"
)

// noCertLine is the one line a manager without a webhook certificate logs.
const noCertLine = "no webhook certificate: running without the webhook server"

// TestManagerRunByHand runs the built manager as a developer would, out of
// the cluster with only --kubeconfig (docs/install.md#running-it-outside-the-cluster):
// no webhook certificate anywhere, so it says once that it runs without its
// webhook server, and it still reconciles: the examples roll out to Ready.
func TestManagerRunByHand(t *testing.T) {
	bin := filepath.Join(env.BinDir, "manager")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%s is not built: run `make bins`: %v", bin, err)
	}
	tt := env.NewTest(t)
	logPath := startByHand(tt, bin, "--kubeconfig="+env.Info.Kubeconfig,
		// Only what this machine needs to share: the test's namespace,
		// an identity of its own and free ports.
		"--watch-namespaces="+tt.Namespace, "--identity=rainbow-by-hand-"+tt.Suffix,
		"--metrics-bind-address="+harness.FreeAddr(), "--health-probe-bind-address="+harness.FreeAddr())

	w := newWorkers(tt)
	w.waitCurrent(4*time.Minute, "v1")
	w.delete() // while the manager runs: the finalizers are its own

	data, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(data), noCertLine); n != 1 {
		t.Errorf("the manager logged %q %d times, want once; log:\n%s", noCertLine, n, data)
	}
}

// startByHand starts bin with args and an empty temporary directory (so no
// certificate is in the default place), logging into a file whose path it
// returns; SIGINT stops it when the test ends.
func startByHand(tt *harness.T, bin string, args ...string) string {
	tt.Helper()
	dir := tt.TempDir()
	logPath := filepath.Join(dir, "manager.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		tt.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Env = append(os.Environ(), "TMPDIR="+dir, "KUBECONFIG=")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // dies with the test binary
	if err := cmd.Start(); err != nil {
		tt.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait(); logFile.Close() }()
	tt.Cleanup(func() {
		if tt.Failed() {
			data, _ := os.ReadFile(logPath)
			tt.Logf("the manager's log:\n%s", data)
		}
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			tt.Errorf("the manager did not stop within 30s of SIGINT")
			_ = cmd.Process.Kill()
			<-done
		}
	})
	return logPath
}
