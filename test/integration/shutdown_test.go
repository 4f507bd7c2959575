package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rainbow-deploy/rainbow/internal/workerenv"
	"github.com/rainbow-deploy/rainbow/test/harness"
)

// TestShutdownLeavesNoProcesses starts a second environment, runs workers
// on it, stops it the way Ctrl-C does and checks that every process it
// started (etcd, kube-apiserver, kube-controller-manager, workers) is gone.
func TestShutdownLeavesNoProcesses(t *testing.T) {
	parallel(t)
	own, err := harness.Start()
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			own.Stop()
		}
	}()
	ctx := context.Background()
	dep := &appsv1.Deployment{}
	own.ReadExample(t, "local-environment/demo-worker.yaml", dep)
	c := &dep.Spec.Template.Spec.Containers[0]
	for i := range c.Env {
		if c.Env[i].Name == workerenv.Address {
			c.Env[i].Value = own.Info.TemporalAddress
		}
	}
	if err := own.Kube.Create(ctx, dep); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, time.Minute, "2 ready demo-worker pods", func() (bool, string) {
		var pods corev1.PodList
		if err := own.Kube.List(ctx, &pods, crclient.InNamespace(dep.Namespace), crclient.MatchingLabels(dep.Spec.Selector.MatchLabels)); err != nil {
			return false, err.Error()
		}
		ready := 0
		for i := range pods.Items {
			if harness.PodReady(&pods.Items[i]) {
				ready++
			}
		}
		return ready == 2, fmt.Sprintf("%d of %d pods ready", ready, len(pods.Items))
	})
	pids := own.Descendants()
	// etcd, kube-apiserver, kube-controller-manager and two workers at least.
	if len(pids) < 5 {
		t.Fatalf("expected at least 5 processes under devenv, found %v", pids)
	}
	own.Stop() // SIGTERM, as Ctrl-C via make demo
	stopped = true
	var alive []int
	for _, pid := range pids {
		if harness.ProcessAlive(pid) {
			alive = append(alive, pid)
		}
	}
	if len(alive) > 0 {
		t.Fatalf("processes still running after devenv stopped: %v (of %v)", alive, pids)
	}
}
