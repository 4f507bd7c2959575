package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/dev/demoworker"
	"github.com/rainbow-deploy/rainbow/integrations/argocd"
)

// cdView is what the CD tools make of a live object: kstatus (Flux, Helm
// 4, kpt) and Argo CD's health and actions from integrations/argocd.
type cdView struct {
	obj     *unstructured.Unstructured
	kstatus status.Status
	kmsg    string
	health  argocd.Health
	actions map[string]bool // action name: enabled
}

func (v cdView) String() string {
	var enabled []string
	for name, on := range v.actions {
		if on {
			enabled = append(enabled, name)
		}
	}
	return fmt.Sprintf("kstatus %s (%s), Argo CD %s (%s), actions %v", v.kstatus, v.kmsg, v.health.Status, v.health.Message, enabled)
}

// liveObject reads an object as unstructured, as kstatus and Argo CD get it.
func liveObject(t testing.TB, kind, namespace, name string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind(kind))
	if err := env.Kube.Get(context.Background(), crclient.ObjectKey{Namespace: namespace, Name: name}, u); err != nil {
		t.Fatalf("get %s %s: %v", kind, name, err)
	}
	return u
}

func kstatusOf(t testing.TB, u *unstructured.Unstructured) *status.Result {
	t.Helper()
	res, err := status.Compute(u)
	if err != nil {
		t.Fatalf("kstatus of %s %s: %v", u.GetKind(), u.GetName(), err)
	}
	return res
}

// view reads the TWD named name and judges it like the CD tools do.
func (r *rollout) view(name string) cdView {
	r.Helper()
	u := liveObject(r.T.T, "TemporalWorkerDeployment", r.Namespace, name)
	res := kstatusOf(r.T.T, u)
	h, err := argocd.RunHealth(argocd.HealthScript(), u.Object)
	if err != nil {
		r.Fatalf("health.lua: %v", err)
	}
	found, err := argocd.RunDiscovery(argocd.DiscoveryScript(), u.Object)
	if err != nil {
		r.Fatalf("discovery.lua: %v", err)
	}
	actions := map[string]bool{}
	for _, a := range found {
		actions[a.Name] = !a.Disabled
	}
	v := cdView{obj: u, kstatus: res.Status, kmsg: res.Message, health: h, actions: actions}
	r.checkConsistent(v)
	return v
}

// checkConsistent holds every view to the table in docs/cd-tools.md: what
// kstatus and Argo CD say follows from the conditions of the generation
// they describe, and a blocked rollout is Failed and Degraded, never
// Current or Healthy.
func (r *rollout) checkConsistent(v cdView) {
	r.Helper()
	var twd v1alpha1.TemporalWorkerDeployment
	if err := runtimeFromUnstructured(v.obj, &twd); err != nil {
		r.Fatal(err)
	}
	var wantK status.Status
	var wantH []string
	progressing := meta.FindStatusCondition(twd.Status.Conditions, v1alpha1.ConditionProgressing)
	switch {
	case twd.Status.ObservedGeneration != 0 && twd.Status.ObservedGeneration != twd.Generation:
		wantK, wantH = status.InProgressStatus, []string{"Progressing"}
	case len(twd.Status.Conditions) == 0:
		// No status yet: kstatus has no opinion and says Current (the limit
		// docs/cd-tools.md describes); Argo CD waits.
		wantK, wantH = status.CurrentStatus, []string{"Progressing"}
	case meta.IsStatusConditionTrue(twd.Status.Conditions, v1alpha1.ConditionStalled):
		wantK, wantH = status.FailedStatus, []string{"Degraded"}
	case meta.IsStatusConditionTrue(twd.Status.Conditions, v1alpha1.ConditionReady):
		wantK, wantH = status.CurrentStatus, []string{"Healthy"}
	case progressing != nil && progressing.Status == metav1.ConditionTrue:
		wantK, wantH = status.InProgressStatus, []string{"Progressing", "Suspended"}
		if progressing.Reason == v1alpha1.ReasonPaused {
			wantH = []string{"Suspended"}
		} else if twd.Spec.Rollout.Strategy != v1alpha1.StrategyManual || progressing.Reason != v1alpha1.ReasonWaitingForPromotion {
			wantH = []string{"Progressing"}
		}
	default:
		r.Fatalf("a state outside the table of docs/conditions.md: %s", describe(&twd))
	}
	if v.kstatus != wantK || !contains(wantH, v.health.Status) {
		r.Fatalf("%s: want kstatus %s and Argo CD health %v; status: %s", v, wantK, wantH, describe(&twd))
	}
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

func runtimeFromUnstructured(u *unstructured.Unstructured, into any) error {
	raw, err := json.Marshal(u.Object)
	if err != nil {
		return err
	}
	return json.Unmarshal(raw, into)
}

// waitView samples the TWD until done accepts a view; every sample on the
// way is checked by checkConsistent, and the first of each Argo CD health
// and Ready reason is recorded (see record).
func (r *rollout) waitView(timeout time.Duration, expected string, done func(cdView) bool) cdView {
	r.Helper()
	var last cdView
	r.Eventually(timeout, expected, func() (bool, string) {
		last = r.view(r.Name)
		r.recordFirst(last)
		return done(last), last.String()
	})
	return last
}

// runAction runs an Argo CD action on the live TWD and sends the API
// server the merge patch Argo CD would send.
func (r *rollout) runAction(name string) {
	r.Helper()
	script, err := argocd.ActionScript(name)
	if err != nil {
		r.Fatal(err)
	}
	live := liveObject(r.T.T, "TemporalWorkerDeployment", r.Namespace, r.Name)
	patch, err := argocd.RunAction(script, live.Object)
	if err != nil {
		r.Fatalf("action %s: %v", name, err)
	}
	r.Logf("action %s patches %s", name, patch)
	if err := r.Env.Kube.Patch(context.Background(), live, crclient.RawPatch(types.MergePatchType, patch)); err != nil {
		r.Fatalf("apply the patch of action %s: %v", name, err)
	}
}

// rampsAt: status, for the latest spec, has build ramping at pct.
func rampsAt(twd *v1alpha1.TemporalWorkerDeployment, build string, pct int32) bool {
	tv := twd.Status.TargetVersion
	return twd.Status.ObservedGeneration == twd.Generation && tv != nil && tv.BuildID == build &&
		tv.Status == v1alpha1.VersionRamping && tv.RampPercentage != nil && *tv.RampPercentage == pct
}

func enabledActions(v cdView) []string {
	var on []string
	for _, name := range argocd.ActionNames() {
		if v.actions[name] {
			on = append(on, name)
		}
	}
	return on
}

func (r *rollout) requireActions(v cdView, want ...string) {
	r.Helper()
	if got := enabledActions(v); strings.Join(got, ",") != strings.Join(want, ",") {
		r.Fatalf("enabled Argo CD actions %v, want %v (%s)", got, want, v)
	}
}

// recordFirst records the first view of each (health, Ready reason) pair
// as "seen-<health>-<reason>", see record.
var recorded = map[string]bool{}

func (r *rollout) recordFirst(v cdView) {
	reason := "NoStatus"
	var twd v1alpha1.TemporalWorkerDeployment
	if runtimeFromUnstructured(v.obj, &twd) == nil {
		if c := meta.FindStatusCondition(twd.Status.Conditions, v1alpha1.ConditionReady); c != nil {
			reason = c.Reason
		}
		if twd.Status.ObservedGeneration != twd.Generation && len(twd.Status.Conditions) > 0 {
			reason = "StaleGeneration"
		}
	}
	name := "seen-" + strings.ToLower(v.health.Status) + "-" + reason
	if !recorded[name] {
		recorded[name] = true
		r.record(name, v)
	}
}

// record writes the live object of a view, with what kstatus and the
// health check said, to the environment's directory and, with
// RAINBOW_RECORD_ARGOCD=1, to integrations/argocd/testdata, where the
// package's unit tests run the Lua scripts on them.
func (r *rollout) record(name string, v cdView) {
	r.Helper()
	obj := v.obj.DeepCopy()
	obj.SetManagedFields(nil)
	rec := map[string]any{"kstatus": string(v.kstatus), "health": v.health, "object": obj.Object}
	raw, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		r.Fatal(err)
	}
	dirs := []string{filepath.Join(r.Env.Info.Dir, "argocd-objects")}
	if os.Getenv("RAINBOW_RECORD_ARGOCD") == "1" {
		dirs = append(dirs, filepath.Join(r.Env.Root, "integrations", "argocd", "testdata"))
	}
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			r.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, name+".json"), append(raw, '\n'), 0o644); err != nil {
			r.Fatal(err)
		}
	}
}

// TestCDToolsFollowARollout drives a real Progressive rollout through its
// states with the Argo CD actions of integrations/argocd, and checks at
// every sample what kstatus (sigs.k8s.io/cli-utils, as Flux and Helm 4 use
// it) and the Argo CD health check make of the live object: InProgress and
// Progressing while it moves, Suspended while paused, Current and Healthy
// when complete, Failed and Degraded when blocked by a failed gate or a
// missing TemporalConnection. The TemporalConnection and a
// TemporalWorkerOwnedResource are Current once Ready. Finally the
// argocd-cm patch is applied with kubectl as docs/cd-tools.md says, and the
// health check read back from it judges the object the same way.
func TestCDToolsFollowARollout(t *testing.T) {
	parallel(t)
	r := newRollout(env.NewTest(t), "cd")

	// A TWD whose connection does not exist is blocked from the start.
	orphan := r.Spec("v1")
	orphan.Name = "cd-orphan"
	orphan.Spec.WorkerOptions.ConnectionRef.Name = "missing"
	r.Create(orphan)
	// A connection nobody answers on is not Ready; kstatus says Failed.
	unreachable := &v1alpha1.TemporalConnection{
		ObjectMeta: metav1.ObjectMeta{Name: "unreachable", Namespace: r.Namespace},
		Spec:       v1alpha1.TemporalConnectionSpec{HostPort: "127.0.0.1:1"},
	}
	if err := r.Env.Kube.Create(context.Background(), unreachable); err != nil {
		t.Fatal(err)
	}

	twd := r.Spec("v1")
	twd.Spec.Rollout = v1alpha1.RolloutSpec{Strategy: v1alpha1.StrategyProgressive, Steps: steps([]int32{25, 75}, time.Hour)}
	v1 := r.Create(twd)
	done := r.waitView(2*time.Minute, "version "+v1+" current: Current and Healthy", func(v cdView) bool {
		return v.kstatus == status.CurrentStatus && v.health.Status == "Healthy"
	})
	r.requireActions(done, "pause")
	r.record("complete", done)
	r.Eventually(time.Minute, "the TemporalConnection is Current", func() (bool, string) {
		res := kstatusOf(t, liveObject(t, "TemporalConnection", r.Namespace, "temporal"))
		return res.Status == status.CurrentStatus, string(res.Status) + ": " + res.Message
	})

	// An owned resource is Current once applied to the running version.
	pdb := r.ownedExample("twor-pdb.yaml")
	if err := r.Env.Kube.Create(context.Background(), pdb); err != nil {
		t.Fatal(err)
	}
	r.waitOwnedReady(pdb.Name, metav1.ConditionTrue, v1alpha1.ReasonApplied)
	if res := kstatusOf(t, liveObject(t, "TemporalWorkerOwnedResource", r.Namespace, pdb.Name)); res.Status != status.CurrentStatus {
		t.Fatalf("kstatus of an applied TemporalWorkerOwnedResource: %s (%s)", res.Status, res.Message)
	}

	// v2 ramps to its first step and holds there for an hour.
	v2 := r.SetImage("v2")
	// Ramping, as the object the view judged shows it: status shows the
	// ramp once Temporal has applied it (until then promote-step is not
	// offered).
	ramping := r.waitView(2*time.Minute, "version "+v2+" ramping 25%", func(v cdView) bool {
		var seen v1alpha1.TemporalWorkerDeployment
		return runtime.DefaultUnstructuredConverter.FromUnstructured(v.obj.Object, &seen) == nil && rampsAt(&seen, v2, 25)
	})
	if ramping.kstatus != status.InProgressStatus || ramping.health.Status != "Progressing" {
		t.Fatalf("while ramping: %s", ramping)
	}
	r.requireActions(ramping, "abort", "pause", "promote-full", "promote-step")
	r.record("ramping", ramping)

	// pause: spec.rollout.paused holds the ramp; Argo CD shows Suspended.
	r.runAction("pause")
	paused := r.waitView(time.Minute, "paused: Suspended", func(v cdView) bool { return v.health.Status == "Suspended" })
	if paused.kstatus != status.InProgressStatus || !strings.Contains(paused.health.Message, v1alpha1.ReasonPaused) {
		t.Fatalf("paused: %s", paused)
	}
	r.requireActions(paused, "abort", "promote-full", "resume")
	r.record("paused", paused)
	time.Sleep(3 * time.Second)
	if cur, ramp, pct := r.routing(); cur != v1 || ramp != v2 || pct != 25 {
		t.Fatalf("paused, routing is current=%s ramping=%s %g%%, want %s and %s at 25%%", cur, ramp, pct, v1, v2)
	}

	// resume: ramping again, still at the first step.
	r.runAction("resume")
	resumed := r.waitView(time.Minute, "resumed: ramping again", func(v cdView) bool {
		got := r.Get()
		return v.health.Status == "Progressing" && rampsAt(got, v2, 25) && hasCondition(got, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonRamping)
	})
	if got := r.Get(); got.Spec.Rollout.Strategy != v1alpha1.StrategyProgressive || got.Spec.Rollout.Paused {
		t.Fatalf("after resume: strategy %s, paused %v", got.Spec.Rollout.Strategy, got.Spec.Rollout.Paused)
	}
	r.requireActions(resumed, "abort", "pause", "promote-full", "promote-step")

	// abort: the controller removes its ramp; Failed and Degraded, and
	// new workflows go to v1 only. retry takes the rollout up again.
	r.runAction("abort")
	aborted := r.waitView(time.Minute, "aborted: Failed and Degraded", func(v cdView) bool {
		return v.kstatus == status.FailedStatus && v.health.Status == "Degraded" && strings.Contains(v.health.Message, v1alpha1.ReasonRolloutAborted)
	})
	r.Eventually(time.Minute, "the ramp of "+v2+" removed", func() (bool, string) {
		cur, ramp, pct := r.routing()
		return cur == v1 && ramp == "", fmt.Sprintf("current=%s ramping=%s %g%%", cur, ramp, pct)
	})
	r.requireActions(aborted, "pause", "retry")
	r.runAction("retry")
	r.waitView(time.Minute, "retried: ramping again", func(v cdView) bool {
		return v.health.Status == "Progressing" && rampsAt(r.Get(), v2, 25)
	})

	// promote-step: the 25% step ends now; the ramp goes to 75%.
	r.runAction("promote-step")
	r.waitView(3*time.Minute, "version "+v2+" ramping 75%", func(v cdView) bool {
		return rampsAt(r.Get(), v2, 75) && v.health.Status == "Progressing"
	})

	// promote-full: AllAtOnce makes v2 current at once.
	r.runAction("promote-full")
	r.waitView(2*time.Minute, "version "+v2+" current: Current and Healthy", func(v cdView) bool {
		return v.kstatus == status.CurrentStatus && v.health.Status == "Healthy"
	})
	r.WaitCurrent(3*time.Minute, v2)

	// A failing gate on v3 blocks the rollout: Failed and Degraded.
	failing := gateInput(t, true, "smoke test failed")
	r.Update(func(t *v1alpha1.TemporalWorkerDeployment) {
		t.Spec.Template.Spec.Containers[0].Image = "rainbow.local/demo-worker:v3"
		t.Spec.Rollout.Gate = &v1alpha1.GateWorkflow{WorkflowType: demoworker.GateWorkflow, Input: failing}
	})
	blocked := r.waitView(2*time.Minute, "a failed gate: Failed and Degraded", func(v cdView) bool {
		return v.kstatus == status.FailedStatus && v.health.Status == "Degraded" &&
			hasCondition(r.Get(), v1alpha1.ConditionStalled, metav1.ConditionTrue, v1alpha1.ReasonGateFailed)
	})
	if !strings.Contains(blocked.health.Message, "GateFailed") {
		t.Fatalf("the Degraded message does not name the reason: %s", blocked)
	}
	r.record("gate-failed", blocked)

	// The TWD without a connection.
	var orphanView cdView
	r.Eventually(time.Minute, "the TWD without a connection: Failed and Degraded", func() (bool, string) {
		orphanView = r.view(orphan.Name)
		return orphanView.kstatus == status.FailedStatus && orphanView.health.Status == "Degraded", orphanView.String()
	})
	if !strings.Contains(orphanView.health.Message, v1alpha1.ReasonTemporalConnectionNotFound) {
		t.Fatalf("the Degraded message does not name the reason: %s", orphanView)
	}
	r.record("connection-not-found", orphanView)

	// The unreachable connection: not Ready and Stalled, which kstatus reads
	// as Failed, so a tool waiting on it stops at once.
	r.Eventually(time.Minute, "the unreachable TemporalConnection is Failed", func() (bool, string) {
		u := liveObject(t, "TemporalConnection", r.Namespace, unreachable.Name)
		res := kstatusOf(t, u)
		obs, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
		reason := ""
		if len(res.Conditions) > 0 {
			reason = res.Conditions[0].Reason
		}
		return res.Status == status.FailedStatus && obs == u.GetGeneration() && reason == v1alpha1.ReasonTemporalClientCreationFailed,
			fmt.Sprintf("%s (%s): %s", res.Status, reason, res.Message)
	})

	// Installing the customizations as docs/cd-tools.md says, then using the
	// health check Argo CD would read from argocd-cm.
	r.argoCDConfigMapJudges(blocked.obj, "Degraded")
}

// argoCDConfigMapJudges creates an argocd-cm ConfigMap in the test's
// namespace, patches it with integrations/argocd/argocd-cm.yaml using
// kubectl as the docs do, and runs the health check stored there on obj.
func (r *rollout) argoCDConfigMapJudges(obj *unstructured.Unstructured, want string) {
	r.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "argocd-cm", Namespace: r.Namespace}, Data: map[string]string{"url": "https://argocd.example.com"}}
	if err := r.Env.Kube.Create(context.Background(), cm); err != nil {
		r.Fatal(err)
	}
	// The command of docs/cd-tools.md, in this test's namespace.
	var install string
	for _, b := range docBlocks(r.T.T, "\n## Argo CD\n", "sh") {
		if strings.Contains(b, "argocd-cm.yaml") {
			install = strings.TrimSpace(b)
		}
	}
	if !strings.HasPrefix(install, "kubectl -n argocd ") {
		r.Fatalf("docs/cd-tools.md gives no kubectl command that installs argocd-cm.yaml: %q", install)
	}
	args := strings.Fields(strings.TrimPrefix(install, "kubectl -n argocd "))
	if out, err := r.Env.Kubectl(nil, append([]string{"-n", r.Namespace}, args...)...); err != nil {
		r.Fatalf("%s: %v: %s", install, err, out)
	}
	if err := r.Env.Kube.Get(context.Background(), crclient.ObjectKeyFromObject(cm), cm); err != nil {
		r.Fatal(err)
	}
	if cm.Data["url"] == "" {
		r.Fatalf("the patch dropped the ConfigMap's other keys: %v", cm.Data)
	}
	script := cm.Data["resource.customizations.health.temporal.io_TemporalWorkerDeployment"]
	h, err := argocd.RunHealth(script, obj.Object)
	if err != nil || h.Status != want {
		r.Fatalf("the health check from argocd-cm says %+v (%v), want %s", h, err, want)
	}
	var actions struct {
		Discovery   string `json:"discovery.lua"`
		Definitions []struct {
			Name   string `json:"name"`
			Action string `json:"action.lua"`
		} `json:"definitions"`
	}
	if err := yaml.UnmarshalStrict([]byte(cm.Data["resource.customizations.actions.temporal.io_TemporalWorkerDeployment"]), &actions); err != nil {
		r.Fatalf("the actions in argocd-cm: %v", err)
	}
	if actions.Discovery != argocd.DiscoveryScript() || len(actions.Definitions) != len(argocd.ActionNames()) {
		r.Fatalf("argocd-cm holds other actions than integrations/argocd: %d definitions", len(actions.Definitions))
	}
}
