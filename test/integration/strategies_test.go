package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/worker"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/dev/demoworker"
)

func steps(pcts []int32, pause time.Duration) []v1alpha1.RolloutStep {
	out := make([]v1alpha1.RolloutStep, len(pcts))
	for i, p := range pcts {
		out[i] = v1alpha1.RolloutStep{RampPercentage: p, PauseDuration: metav1.Duration{Duration: pause}}
	}
	return out
}

// TestProgressiveRampsThroughEachStep: the first version becomes current
// directly; the next one ramps through every step, each held for its
// pause, then becomes current.
func TestProgressiveRampsThroughEachStep(t *testing.T) {
	parallel(t)
	r := newRollout(env.NewTest(t), "progressive")
	twd := r.Spec("v1")
	twd.Spec.Rollout = v1alpha1.RolloutSpec{Strategy: v1alpha1.StrategyProgressive, Steps: steps([]int32{20, 60}, 4*time.Second)}
	v1 := r.Create(twd)
	r.WaitCurrent(5*time.Minute, v1)

	v2 := r.SetImage("v2")
	seen := map[float32]time.Time{}
	mine := map[string]string{"namespace": r.Namespace, "name": r.Name}
	gauge := map[float64]bool{}
	r.Eventually(3*time.Minute, "version "+v2+" ramped 20% then 60%, then current", func() (bool, string) {
		cur, ramping, pct := r.routing()
		if ramping == v2 {
			if _, ok := seen[pct]; !ok {
				seen[pct] = time.Now()
			}
		}
		if v, ok := metric(t, "rainbow_ramp_percentage", mine); ok {
			gauge[v] = true
		}
		return cur == v2 && len(seen) == 2, describe(r.Get())
	})
	if seen[20].IsZero() || seen[60].IsZero() {
		t.Fatalf("ramps seen: %v, want 20%% and 60%%", seen)
	}
	// The pause is timed from Temporal's ramp timestamp, so the observed
	// gap may be a little shorter than 4s, but not much.
	if gap := seen[60].Sub(seen[20]); gap < 2*time.Second {
		t.Fatalf("the 20%% step lasted %s, want about its 4s pause", gap)
	}
	r.WaitCurrent(3*time.Minute, v2)

	// The rollout metrics followed it.
	if !gauge[20] || !gauge[60] {
		t.Errorf("rainbow_ramp_percentage showed %v during the rollout, want 20 and 60 among them", gauge)
	}
	r.Eventually(30*time.Second, "the metrics of the finished rollout", func() (bool, string) {
		ramp, _ := metric(t, "rainbow_ramp_percentage", mine)
		current, _ := metric(t, "rainbow_versions", map[string]string{"namespace": r.Namespace, "name": r.Name, "status": "Current"})
		draining, _ := metric(t, "rainbow_versions", map[string]string{"namespace": r.Namespace, "name": r.Name, "status": "Draining"})
		drained, _ := metric(t, "rainbow_versions", map[string]string{"namespace": r.Namespace, "name": r.Name, "status": "Drained"})
		complete, _ := metric(t, "rainbow_rollouts_total", map[string]string{"outcome": "complete"})
		durations, _ := metric(t, "rainbow_rollout_duration_seconds", nil)
		ramps, _ := metric(t, "rainbow_temporal_rpcs_total", map[string]string{"method": "SetWorkerDeploymentRampingVersion", "result": "ok"})
		ok := ramp == 0 && current == 1 && draining+drained == 1 && complete >= 1 && durations >= 1 && ramps >= 2
		return ok, fmt.Sprintf("ramp %g, versions current %g, draining %g, drained %g; rollouts complete %g, durations %g; ramp RPCs %g",
			ramp, current, draining, drained, complete, durations, ramps)
	})
}

// TestManualNeverChangesRouting: the controller registers versions but a
// person promotes them; Ready follows what they did.
func TestManualNeverChangesRouting(t *testing.T) {
	parallel(t)
	r := newRollout(env.NewTest(t), "manual")
	twd := r.Spec("v1")
	twd.Spec.Rollout = v1alpha1.RolloutSpec{Strategy: v1alpha1.StrategyManual}
	v1 := r.Create(twd)
	r.waitFor(2*time.Minute, "version "+v1+" registered and waiting for promotion", func(t *v1alpha1.TemporalWorkerDeployment) bool {
		return hasCondition(t, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonWaitingForPromotion) &&
			versionStatus(t, v1) == v1alpha1.VersionInactive
	})
	time.Sleep(3 * time.Second)
	if cur, ramping, _ := r.routing(); cur != "" || ramping != "" {
		t.Fatalf("Manual changed routing: current=%q ramping=%q", cur, ramping)
	}
	if _, err := r.Env.Temporal.WorkflowService().SetWorkerDeploymentCurrentVersion(context.Background(), &workflowservice.SetWorkerDeploymentCurrentVersionRequest{
		Namespace: r.Env.Info.TemporalNamespace, DeploymentName: r.DeploymentName(), BuildId: v1, Identity: "a-person",
	}); err != nil {
		t.Fatal(err)
	}
	r.WaitCurrent(3*time.Minute, v1)
}

// TestGateWorkflowDecidesTheRollout: a passing gate lets the version
// through; a failing one stops the rollout with the incumbent still
// current, and the conditions and an Event say why.
func TestGateWorkflowDecidesTheRollout(t *testing.T) {
	parallel(t)
	r := newRollout(env.NewTest(t), "gate")
	// The gate's input comes from a Secret for v1 and a ConfigMap for v2.
	pass, fail := gateInput(t, false, ""), gateInput(t, true, "smoke test failed")
	objs := []crclient.Object{
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "gate-pass", Namespace: r.Namespace}, Data: map[string][]byte{"input.json": pass.Raw}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "gate-fail", Namespace: r.Namespace}, Data: map[string]string{"input.json": string(fail.Raw)}},
	}
	for _, o := range objs {
		if err := r.Env.Kube.Create(context.Background(), o); err != nil {
			t.Fatal(err)
		}
	}
	twd := r.Spec("v1")
	twd.Spec.Rollout.Gate = &v1alpha1.GateWorkflow{WorkflowType: demoworker.GateWorkflow, InputFrom: &v1alpha1.GateInputSource{
		SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "gate-pass"}, Key: "input.json"}}}
	v1 := r.Create(twd)
	got := r.WaitCurrent(5*time.Minute, v1)
	if g := got.Status.Gate; g == nil || g.BuildID != v1 || g.Result != "Succeeded" || !strings.Contains(g.Message, v1) {
		t.Fatalf("gate status after a passing gate: %+v", got.Status.Gate)
	}

	r.Update(func(t *v1alpha1.TemporalWorkerDeployment) {
		t.Spec.Template.Spec.Containers[0].Image = "rainbow.local/demo-worker:v2"
		t.Spec.Rollout.Gate.InputFrom = &v1alpha1.GateInputSource{
			ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "gate-fail"}, Key: "input.json"}}
	})
	v2 := r.BuildID()
	got = r.waitCondition(2*time.Minute, v1alpha1.ConditionProgressing, metav1.ConditionFalse, v1alpha1.ReasonGateFailed)
	if c := findCondition(got, v1alpha1.ConditionReady); c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "smoke test failed") {
		t.Fatalf("Ready after a failed gate: %+v", c)
	}
	// kstatus (Flux, Helm 4) reads a blocked rollout as failed.
	if !hasCondition(got, v1alpha1.ConditionStalled, metav1.ConditionTrue, v1alpha1.ReasonGateFailed) ||
		!hasCondition(got, v1alpha1.ConditionReconciling, metav1.ConditionFalse, v1alpha1.ReasonGateFailed) {
		t.Fatalf("want Stalled=True and Reconciling=False after a failed gate: %s", describe(got))
	}
	if cur, ramping, _ := r.routing(); cur != v1 || ramping != "" {
		t.Fatalf("after a failed gate on %s routing is current=%q ramping=%q, want %s and no ramp", v2, cur, ramping, v1)
	}
	r.waitEvent(time.Minute, v1alpha1.ReasonGateFailed)
}

// TestRollbackSkipsStepsAndGate: returning the spec to a version that was
// current moments ago makes it current again at once, even though the
// strategy would otherwise ramp for an hour and run a gate.
func TestRollbackSkipsStepsAndGate(t *testing.T) {
	parallel(t)
	r := newRollout(env.NewTest(t), "rollback")
	twd := r.Spec("v1")
	twd.Spec.Sunset.ScaledownDelay = &metav1.Duration{Duration: 10 * time.Minute}
	v1 := r.Create(twd)
	r.WaitCurrent(5*time.Minute, v1)
	v2 := r.SetImage("v2")
	r.WaitCurrent(5*time.Minute, v2)

	start := time.Now()
	r.Update(func(t *v1alpha1.TemporalWorkerDeployment) {
		t.Spec.Template.Spec.Containers[0].Image = "rainbow.local/demo-worker:v1"
		t.Spec.Rollout = v1alpha1.RolloutSpec{
			Strategy: v1alpha1.StrategyProgressive,
			Steps:    steps([]int32{10}, time.Hour),
			Gate:     &v1alpha1.GateWorkflow{WorkflowType: demoworker.GateWorkflow, Input: gateInput(r.T.T, true, "must not run")},
		}
	})
	got := r.WaitCurrent(3*time.Minute, v1)
	if g := got.Status.Gate; g != nil && g.BuildID == v1 {
		t.Fatalf("the gate ran on a rollback: %+v", g)
	}
	t.Logf("rolled back in %s", time.Since(start).Round(100*time.Millisecond))
	r.waitEvent(time.Minute, "RolledBack")
}

// TestUnversionedPollersGetRampedNotReplaced: while unversioned workers
// still poll the task queue, the first version is ramped like any other
// instead of taking all traffic at once.
func TestUnversionedPollersGetRampedNotReplaced(t *testing.T) {
	parallel(t)
	r := newRollout(env.NewTest(t), "unversioned")
	w := worker.New(r.Env.Temporal, r.TaskQueue, worker.Options{})
	w.RegisterWorkflowWithOptions(demoworker.Hello, workflowName(demoworker.HelloWorkflow))
	w.RegisterActivity(&demoworker.Activities{BuildID: "unversioned"})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if got := r.hello(); !strings.Contains(got, "unversioned") {
		t.Fatalf("Hello ran on %q before any version existed", got)
	}

	twd := r.Spec("v1")
	twd.Spec.Rollout = v1alpha1.RolloutSpec{Strategy: v1alpha1.StrategyProgressive, Steps: steps([]int32{30}, time.Hour)}
	v1 := r.Create(twd)
	r.waitFor(2*time.Minute, "version "+v1+" ramping 30% next to the unversioned workers", func(t *v1alpha1.TemporalWorkerDeployment) bool {
		return hasCondition(t, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonRamping) &&
			t.Status.TargetVersion != nil && t.Status.TargetVersion.Status == v1alpha1.VersionRamping
	})
	if cur, ramping, pct := r.routing(); cur != "" || ramping != v1 || pct != 30 {
		t.Fatalf("routing: current=%q ramping=%q at %v%%, want unversioned current and %s at 30%%", cur, ramping, pct, v1)
	}
}

// TestManagerHeldByOtherIdentityIsNotFought: when a person takes the
// manager role, the controller stops writing routing and says so, and
// resumes once the role is handed back.
func TestManagerHeldByOtherIdentityIsNotFought(t *testing.T) {
	parallel(t)
	r := newRollout(env.NewTest(t), "manager")
	v1 := r.Create(r.Spec("v1"))
	r.WaitCurrent(5*time.Minute, v1)
	r.setManager("a-person")

	v2 := r.SetImage("v2")
	got := r.waitCondition(2*time.Minute, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonManagedByOtherIdentity)
	if c := findCondition(got, v1alpha1.ConditionReady); !strings.Contains(c.Message, "a-person") {
		t.Fatalf("the condition does not name the manager: %q", c.Message)
	}
	if cur, _, _ := r.routing(); cur != v1 {
		t.Fatalf("routing changed to %q while another identity manages the deployment", cur)
	}
	r.setManager("")
	r.WaitCurrent(5*time.Minute, v2)

	// The role handed to the controller's identity, rather than cleared,
	// once the TWD has settled waiting for it: no list shows the manager,
	// the controller still picks it up (how soon is for make bench).
	r.setManager("a-person")
	v3 := r.SetImage("v3")
	r.waitCondition(2*time.Minute, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonManagedByOtherIdentity)
	r.setManager(controllerIdentity)
	r.WaitCurrent(2*time.Minute, v3)

	// Deleting the TWD while someone else routes to it keeps its workers.
	r.setManager("a-person")
	if err := r.Env.Kube.Delete(context.Background(), r.Get()); err != nil {
		t.Fatal(err)
	}
	got = r.waitCondition(time.Minute, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonManagedByOtherIdentity)
	if c := findCondition(got, v1alpha1.ConditionReady); !strings.Contains(c.Message, "deletion waits") {
		t.Fatalf("the condition does not say the deletion waits: %q", c.Message)
	}
	r.holdsWorkers(10*time.Second, v3)
	r.setManager("")
	r.waitGone(drainBound)
}

// controllerIdentity is the Temporal identity TestMain gives the controller.
const controllerIdentity = "rainbow-test"

// setManager sets (or with "" clears) the manager identity as a person
// would with the temporal CLI.
func (r *rollout) setManager(identity string) {
	r.Helper()
	req := &workflowservice.SetWorkerDeploymentManagerRequest{
		Namespace: r.Env.Info.TemporalNamespace, DeploymentName: r.DeploymentName(), Identity: "a-person",
	}
	if identity == "" {
		req.NewManagerIdentity = &workflowservice.SetWorkerDeploymentManagerRequest_ManagerIdentity{ManagerIdentity: ""}
	} else {
		req.NewManagerIdentity = &workflowservice.SetWorkerDeploymentManagerRequest_ManagerIdentity{ManagerIdentity: identity}
	}
	r.Eventually(30*time.Second, "manager identity set to "+identity, func() (bool, string) {
		_, err := r.Env.Temporal.WorkflowService().SetWorkerDeploymentManager(context.Background(), req)
		if err != nil {
			return false, err.Error()
		}
		return true, ""
	})
}

func gateInput(t testing.TB, fail bool, msg string) *apiextensionsv1.JSON {
	raw, err := json.Marshal(demoworker.GateInput{Fail: fail, Message: msg})
	if err != nil {
		t.Fatal(err)
	}
	return &apiextensionsv1.JSON{Raw: raw}
}

// TestAutoscalerOwnsReplicas: without spec.replicas the controller starts
// a version at one replica and then leaves its replica count to whoever
// scales it (an HPA, here a person with kubectl scale).
func TestAutoscalerOwnsReplicas(t *testing.T) {
	parallel(t)
	r := newRollout(env.NewTest(t), "autoscaled")
	twd := r.Spec("v1")
	twd.Spec.Replicas = nil
	v1 := r.Create(twd)
	r.WaitCurrent(5*time.Minute, v1)
	d := r.deployment(v1)
	if got := ptr.Deref(d.Spec.Replicas, 0); got != 1 {
		t.Fatalf("the first version started with %d replicas, want 1", got)
	}
	if out, err := r.kubectl(time.Minute, "scale", "deployment", d.Name, "-n", r.Namespace, "--replicas=2"); err != nil {
		t.Fatalf("kubectl scale: %v\n%s", err, out)
	}
	r.Eventually(time.Minute, "two pods of "+v1, func() (bool, string) {
		d := r.deployment(v1)
		return d.Status.ReadyReplicas == 2, deploymentState(d)
	})
	// Nudge a reconcile: the spec change must not touch v1's replicas.
	r.Update(func(t *v1alpha1.TemporalWorkerDeployment) {
		t.Spec.Sunset.ScaledownDelay = &metav1.Duration{Duration: time.Hour}
	})
	r.WaitCurrent(3*time.Minute, v1)
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(500 * time.Millisecond) {
		if got := ptr.Deref(r.deployment(v1).Spec.Replicas, 0); got != 2 {
			t.Fatalf("the controller changed the autoscaled replicas from 2 to %d", got)
		}
	}
}
