package helm

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	deploymentpb "go.temporal.io/api/deployment/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/converter"

	"github.com/rainbow-deploy/rainbow/internal/controller/workerdeployment"
	"github.com/rainbow-deploy/rainbow/test/harness"
)

// noCertLine is the one line a manager without a webhook certificate logs.
const noCertLine = "no webhook certificate: running without the webhook server"

// TestManagerRunByHand runs the built manager as a developer would, out of
// the cluster with only --kubeconfig (docs/install.md#running-it-outside-the-cluster):
// no webhook certificate anywhere, so it says once that it runs without its
// webhook server, and it still reconciles: the examples roll out to Ready.
// The version it rolled out carries its metadata in Temporal.
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

	// Temporal names who manages the version: the controller's identity
	// and the version --version prints, the TWD and its image.
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		t.Fatalf("manager --version: %v", err)
	}
	fields := strings.Fields(string(out)) // rainbow-manager <version> (revision <sha>)
	if len(fields) < 2 {
		t.Fatalf("manager --version printed %q", out)
	}
	want := map[string]string{
		workerdeployment.MetadataController:        "rainbow-by-hand-" + tt.Suffix,
		workerdeployment.MetadataControllerVersion: fields[1],
		workerdeployment.MetadataTWD:               tt.Namespace + "/" + w.twd.Name,
		workerdeployment.MetadataImage:             w.twd.Spec.Template.Spec.Containers[0].Image,
	}
	tt.Eventually(time.Minute, fmt.Sprintf("the version's metadata in Temporal %v", want), func() (bool, string) {
		got, err := versionMetadata(w.twd.WorkerDeploymentName(), w.buildID())
		return err == nil && maps.Equal(got, want), fmt.Sprintf("%v (%v)", got, err)
	})
	w.delete() // while the manager runs: the finalizers are its own

	data, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(data), noCertLine); n != 1 {
		t.Errorf("the manager logged %q %d times, want once; log:\n%s", noCertLine, n, data)
	}
}

// versionMetadata reads a version's metadata through Temporal's API, as
// its UI and CLI do.
func versionMetadata(deployment, build string) (map[string]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := env.Temporal.WorkflowService().DescribeWorkerDeploymentVersion(ctx, &workflowservice.DescribeWorkerDeploymentVersionRequest{
		Namespace:         env.Info.TemporalNamespace,
		DeploymentVersion: &deploymentpb.WorkerDeploymentVersion{DeploymentName: deployment, BuildId: build},
	})
	if err != nil {
		return nil, err
	}
	m := map[string]string{}
	for k, p := range resp.GetWorkerDeploymentVersionInfo().GetMetadata().GetEntries() {
		var v string
		if err := converter.GetDefaultDataConverter().FromPayload(p, &v); err != nil {
			return nil, fmt.Errorf("entry %s: %w", k, err)
		}
		m[k] = v
	}
	return m, nil
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
