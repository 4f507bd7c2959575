package helm

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/dev/demoworker"
	"github.com/rainbow-deploy/rainbow/test/harness"
)

// previousCommit stands in for the previous release until one is tagged:
// the last commit before this wave's production changes (one replica,
// the CRDs without spec.rollout.progressDeadline, no version metadata).
const previousCommit = "a2323e6ba12c0ea0bfa59aafaca8de63878de402"

// TestUpgradeFromThePreviousRelease installs the charts and the manager of
// previousCommit (a git worktree, its manager built from it), starts a
// Progressive rollout and a pinned workflow on the version it leaves, and
// upgrades both charts to this commit's while the ramp pauses. The
// rollout must complete under the new controller, no worker pod may be
// replaced or restarted, and the pinned workflow must finish on its
// version. docs/install.md says how to upgrade.
func TestUpgradeFromThePreviousRelease(t *testing.T) {
	ctx := context.Background()
	tt := env.NewTest(t)
	system := namespace(t, "rainbow-"+tt.Suffix)
	identity := "rainbow-upgrade-" + tt.Suffix

	previousBuild.wait(t)
	prev, program := previousWorktree(previousBuild), previousProgram

	deleteHarnessCRDs(tt, crdNames(t))
	mustHelm(t, "install", "rainbow-crds", filepath.Join(prev, "charts/rainbow-crds"), "--namespace", system, "--wait", "--timeout", "3m")
	mustHelm(t, "install", "rainbow", filepath.Join(prev, "charts/rainbow"), "--namespace", system, "--wait", "--timeout", "4m",
		"-f", filepath.Join(prev, "examples/local-environment/rainbow-values.yaml"),
		"--set", "image.repository=rainbow.local/"+program, "--set", "identity="+identity)
	waitController(tt, system)

	w := newWorkers(tt)
	w.waitCurrent(4*time.Minute, "v1")
	v1 := w.buildID()
	pinned := startPinned(w)

	// A Progressive rollout to v2 that holds at 50% for longer than the
	// upgrade takes.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		w.buildID()
		w.twd.Spec.Rollout.Strategy = v1alpha1.StrategyProgressive
		w.twd.Spec.Rollout.Steps = []v1alpha1.RolloutStep{{RampPercentage: 50, PauseDuration: metav1.Duration{Duration: 90 * time.Second}}}
		c := &w.twd.Spec.Template.Spec.Containers[0]
		c.Image = c.Image[:strings.LastIndexByte(c.Image, ':')+1] + "v2"
		return env.Kube.Update(ctx, w.twd)
	})
	if err != nil {
		t.Fatal(err)
	}
	v2 := w.buildID()
	w.Eventually(3*time.Minute, "v2 ramping at 50% under the previous controller", func() (bool, string) {
		w.buildID()
		r := w.twd.Status.TargetVersion
		return r != nil && r.BuildID == v2 && r.Status == v1alpha1.VersionRamping && r.RampPercentage != nil && *r.RampPercentage == 50,
			fmt.Sprintf("target %+v", r)
	})
	before := workerPods(tt)

	mustHelm(t, "upgrade", "rainbow-crds", "charts/rainbow-crds", "--namespace", system, "--wait", "--timeout", "3m")
	mustHelm(t, "upgrade", "rainbow", "charts/rainbow", "--namespace", system, "--wait", "--timeout", "4m",
		"-f", "examples/local-environment/rainbow-values.yaml", "--set", "identity="+identity)
	waitController(tt, system)

	w.waitCurrent(5*time.Minute, "v2")
	after := workerPods(tt)
	for uid, p := range before {
		q, ok := after[uid]
		switch {
		case !ok:
			t.Errorf("worker pod %s (%s) was replaced during the upgrade", p.name, uid)
		case q.restarts != p.restarts:
			t.Errorf("worker pod %s restarted during the upgrade: %d restarts, %d before", p.name, q.restarts, p.restarts)
		}
	}
	if err := env.Temporal.SignalWorkflow(ctx, pinned.GetID(), pinned.GetRunID(), demoworker.FinishSignal, nil); err != nil {
		t.Fatal(err)
	}
	var res demoworker.LongResult
	if err := pinned.Get(ctx, &res); err != nil {
		t.Fatal(err)
	}
	if res.StartedOn != v1 || res.FinishedOn != v1 {
		t.Errorf("the pinned workflow ran on %s and finished on %s, want %s throughout", res.StartedOn, res.FinishedOn, v1)
	}
	w.delete()
	mustHelm(t, "uninstall", "rainbow", "--namespace", system, "--wait", "--timeout", "3m")
	mustHelm(t, "uninstall", "rainbow-crds", "--namespace", system, "--wait", "--timeout", "3m")
}

// waitController waits for the chart's controller Deployment and for its
// webhook in the test's namespace.
func waitController(tt *harness.T, system string) {
	tt.Helper()
	if out, err := env.Kubectl(nil, "-n", system, "rollout", "status", "deployment/rainbow-controller", "--timeout=4m"); err != nil {
		tt.Fatalf("%v\n%s", err, out)
	}
	if err := env.WaitForWebhookIn(context.Background(), tt.Namespace, 2*time.Minute); err != nil {
		tt.Fatal(err)
	}
}

// startPinned starts a pinned workflow on the current version, which
// ticks an activity every second until told to finish.
func startPinned(w *workers) client.WorkflowRun {
	w.Helper()
	queue := w.twd.Spec.Template.Spec.Containers[0].Env[0].Value
	run, err := env.Temporal.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{TaskQueue: queue},
		demoworker.LongPinnedWorkflow, demoworker.LongInput{Tick: time.Second})
	if err != nil {
		w.Fatal(err)
	}
	return run
}

type workerPod struct {
	name     string
	restarts int32
}

// workerPods are the pods of the test's namespace by UID, with their
// containers' restarts.
func workerPods(tt *harness.T) map[string]workerPod {
	tt.Helper()
	var pods corev1.PodList
	if err := env.Kube.List(context.Background(), &pods, crclient.InNamespace(tt.Namespace)); err != nil {
		tt.Fatal(err)
	}
	out := map[string]workerPod{}
	for _, p := range pods.Items {
		var restarts int32
		for _, c := range p.Status.ContainerStatuses {
			restarts += c.RestartCount
		}
		out[string(p.UID)] = workerPod{name: p.Name, restarts: restarts}
	}
	return out
}
