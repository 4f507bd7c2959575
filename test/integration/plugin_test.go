package integration

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/test/harness"
)

// TestKubectlPlugin runs the built kubectl-rainbow (make bins) against the
// local environment's kubeconfig: list, the status tree of a rolling TWD,
// pause (status shows Paused and the ramp holds even with its step's pause
// cut to zero), resume (it advances), abort, undo, the promotion of a
// Manual rollout, and the refusal a user who may only view gets.
func TestKubectlPlugin(t *testing.T) {
	parallel(t)
	tt := env.NewTest(t)
	bin := filepath.Join(env.BinDir, "kubectl-rainbow")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%v: build it with make bins", err)
	}
	run := func(kubeconfig string, args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, append([]string{"--kubeconfig", kubeconfig, "-n", tt.Namespace}, args...)...)
		out, err := cmd.CombinedOutput()
		t.Logf("$ kubectl rainbow %s\n%s", strings.Join(args, " "), out)
		return string(out), err
	}
	plugin := func(args ...string) string {
		t.Helper()
		// Once: the plugin itself tries again when only the controller's
		// status changed between its read and its write.
		out, err := run(env.Info.Kubeconfig, args...)
		if err != nil {
			t.Fatalf("kubectl rainbow %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}

	r := newRollout(tt, "plug")
	twd := r.Spec("v1")
	twd.Spec.Rollout = v1alpha1.RolloutSpec{Strategy: v1alpha1.StrategyProgressive, Steps: steps([]int32{25, 75}, time.Hour)}
	v1 := r.Create(twd)
	r.WaitCurrent(5*time.Minute, v1)

	manual := newRollout(tt, "plug-manual")
	mt := manual.Spec("v1")
	mt.Spec.Rollout.Strategy = v1alpha1.StrategyManual
	m1 := manual.Create(mt)

	if out := plugin("list", "-A"); !strings.Contains(out, tt.Namespace) || !strings.Contains(out, "plug-manual") ||
		!strings.Contains(out, "RolloutComplete") {
		t.Fatalf("list -A:\n%s", out)
	}

	v2 := r.SetImage("v2")
	r.waitFor(2*time.Minute, v2+" ramping 25%", func(tw *v1alpha1.TemporalWorkerDeployment) bool { return rampsAt(tw, v2, 25) })
	out := plugin("status", "plug")
	for _, want := range []string{v2 + "  target  Ramping 25%", v1 + "  current  Current", "Deployment " + r.deployment(v2).Name, "Events"} {
		if !strings.Contains(out, want) {
			t.Fatalf("status lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "\x1b[") {
		t.Fatalf("status in a pipe has colour codes:\n%s", out)
	}

	// status --watch shows the object again when it changes.
	watchCtx, stopWatch := context.WithCancel(context.Background())
	defer stopWatch()
	var watched syncBuffer
	watch := exec.CommandContext(watchCtx, bin, "--kubeconfig", env.Info.Kubeconfig, "-n", tt.Namespace, "status", "plug", "--watch")
	watch.Stdout, watch.Stderr = &watched, &watched
	if err := watch.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = watch.Wait() }()

	// pause: Paused, and the ramp holds even once its step's pause is cut
	// to zero and the controller has seen that.
	plugin("pause", "plug")
	r.waitCondition(time.Minute, v1alpha1.ConditionProgressing, metav1.ConditionTrue, v1alpha1.ReasonPaused)
	r.Eventually(time.Minute, "status --watch shows the pause", func() (bool, string) {
		return strings.Contains(watched.String(), "Ready=False Paused"), watched.String()
	})
	stopWatch()
	if out := plugin("status", "plug"); !strings.Contains(out, "paused") || !strings.Contains(out, "Ready=False Paused") {
		t.Fatalf("status while paused:\n%s", out)
	}
	r.Update(func(tw *v1alpha1.TemporalWorkerDeployment) {
		tw.Spec.Rollout.Steps[0].PauseDuration = metav1.Duration{}
	})
	r.waitCondition(time.Minute, v1alpha1.ConditionProgressing, metav1.ConditionTrue, v1alpha1.ReasonPaused)
	if cur, ramp, pct := r.routing(); cur != v1 || ramp != v2 || pct != 25 {
		t.Fatalf("paused, routing is current=%s ramping=%s %g%%, want %s and %s at 25%%", cur, ramp, pct, v1, v2)
	}
	plugin("resume", "plug")
	r.waitFor(2*time.Minute, v2+" ramping 75% after resume", func(tw *v1alpha1.TemporalWorkerDeployment) bool { return rampsAt(tw, v2, 75) })

	// abort: the ramp goes, new workflows stay on v1.
	plugin("abort", "plug")
	r.waitCondition(time.Minute, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonRolloutAborted)
	r.Eventually(time.Minute, "the ramp of "+v2+" removed", func() (bool, string) {
		cur, ramp, _ := r.routing()
		return cur == v1 && ramp == "", "current=" + cur + " ramping=" + ramp
	})
	if out := plugin("status", "plug"); !strings.Contains(out, "aborted "+v2) {
		t.Fatalf("status after abort:\n%s", out)
	}

	// undo: spec.template back to v1's, which is current: complete again.
	plugin("undo", "plug")
	r.waitCondition(2*time.Minute, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonRolloutComplete)
	if got := r.Get(); got.Status.TargetVersion.BuildID != v1 {
		t.Fatalf("after undo the target is %s, want %s", got.Status.TargetVersion.BuildID, v1)
	}

	// promote a Manual rollout: it waits for a person, then is current.
	manual.waitCondition(2*time.Minute, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonWaitingForPromotion)
	plugin("promote", "plug-manual")
	manual.WaitCurrent(5*time.Minute, m1)

	// A user who may only view sees status and is refused a pause.
	if err := env.Kube.Create(context.Background(), harness.UserBinding(tt.Namespace, "plugin-viewer", "ClusterRole", "view", "viewer")); err != nil {
		t.Fatal(err)
	}
	tt.CheckAccess("viewer", []harness.Access{
		harness.Allow("get", "temporal.io/temporalworkerdeployments", tt.Namespace, "plug"),
		harness.Deny("patch", "temporal.io/temporalworkerdeployments", tt.Namespace, "plug"),
	})
	viewer := impersonatingKubeconfig(t, "viewer")
	if out, err := run(viewer, "list"); err != nil || !strings.Contains(out, "plug") {
		t.Fatalf("list as a viewer: %v\n%s", err, out)
	}
	out, err := run(viewer, "pause", "plug")
	if err == nil || !strings.Contains(out, "you may not pause TemporalWorkerDeployment "+tt.Namespace+"/plug") || !strings.Contains(out, "edit role") {
		t.Fatalf("pause as a viewer: %v\n%s", err, out)
	}
	if r.Get().Spec.Rollout.Paused {
		t.Fatal("a viewer's pause went through")
	}
}
