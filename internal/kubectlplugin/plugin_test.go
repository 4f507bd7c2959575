package kubectlplugin

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/internal/buildid"
	"github.com/rainbow-deploy/rainbow/internal/workload"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

var now = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func at(d time.Duration) *metav1.Time { return &metav1.Time{Time: now.Add(d)} }

// rampingTWD: v2 ramps 25% under Progressive, v1 is current, v0 drains.
func rampingTWD() *v1alpha1.TemporalWorkerDeployment {
	return &v1alpha1.TemporalWorkerDeployment{
		ObjectMeta: metav1.ObjectMeta{Name: "orders", Namespace: "shop", Generation: 4, UID: "uid-orders", ResourceVersion: "42"},
		Spec: v1alpha1.TemporalWorkerDeploymentSpec{
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "worker", Image: "orders:v2"}}}},
			Rollout: v1alpha1.RolloutSpec{Strategy: v1alpha1.StrategyProgressive, Steps: []v1alpha1.RolloutStep{
				{RampPercentage: 25, PauseDuration: metav1.Duration{Duration: time.Hour}},
				{RampPercentage: 75, PauseDuration: metav1.Duration{Duration: 30 * time.Minute}},
			}},
		},
		Status: v1alpha1.TemporalWorkerDeploymentStatus{
			ObservedGeneration: 4,
			TargetVersion:      &v1alpha1.WorkerVersion{BuildID: "v2-bbb", Status: v1alpha1.VersionRamping, RampPercentage: ptr.To[int32](25), Deployment: "orders-v2-bbb"},
			CurrentVersion:     &v1alpha1.WorkerVersion{BuildID: "v1-aaa", Status: v1alpha1.VersionCurrent, Deployment: "orders-v1-aaa"},
			DeprecatedVersions: []v1alpha1.WorkerVersion{
				{BuildID: "v0-zzz", Status: v1alpha1.VersionDraining, Deployment: "orders-v0-zzz",
					Drain: &v1alpha1.VersionDrain{PinnedWorkflows: 3, Deadline: at(2 * time.Hour)}},
				{BuildID: "v-old", Status: v1alpha1.VersionDrained, DrainedSince: at(-90 * time.Minute)},
			},
			Gate: &v1alpha1.GateStatus{BuildID: "v2-bbb", WorkflowID: "orders-gate-v2-bbb", Result: "Succeeded"},
			Conditions: []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonRamping,
				Message: "ramping 25% to v2-bbb, next step (75%) at 2026-03-01T12:40:00Z"}},
		},
	}
}

func deployment(name string, desired, ready int32) appsv1.Deployment {
	return appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: appsv1.DeploymentSpec{Replicas: &desired},
		Status: appsv1.DeploymentStatus{ReadyReplicas: ready}}
}

func snapshot() Snapshot {
	return Snapshot{
		TWD:         rampingTWD(),
		Deployments: []appsv1.Deployment{deployment("orders-v2-bbb", 2, 1), deployment("orders-v1-aaa", 3, 3), deployment("orders-v0-zzz", 1, 1)},
		Owned: []v1alpha1.TemporalWorkerOwnedResource{{
			ObjectMeta: metav1.ObjectMeta{Name: "orders-pdb"},
			Status: v1alpha1.TemporalWorkerOwnedResourceStatus{
				Versions: []v1alpha1.OwnedResourceVersion{
					{BuildID: "v2-bbb", Applied: true, Kind: "PodDisruptionBudget"},
					{BuildID: "v1-aaa", Applied: true, Kind: "PodDisruptionBudget"},
				},
				Conditions: []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue}},
			},
		}},
		Events: []corev1.Event{
			{Type: "Normal", Reason: "Ramp", Message: "ramping 25% of new workflows to version v2-bbb", LastTimestamp: *at(-20 * time.Minute)},
			{Type: "Normal", Reason: "CreateDeployment", Message: "created Deployment orders-v2-bbb", LastTimestamp: *at(-25 * time.Minute)},
		},
	}
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s differs (go test ./internal/kubectlplugin -update rewrites it):\n%s", name, got)
	}
}

func TestRenderStatusGolden(t *testing.T) {
	var b bytes.Buffer
	RenderStatus(&b, NewView(snapshot()), now, Style{})
	golden(t, "status.golden", b.Bytes())
	if strings.Contains(b.String(), "\x1b[") {
		t.Fatal("plain style wrote colour codes")
	}
	b.Reset()
	RenderStatus(&b, NewView(snapshot()), now, Style{Colour: true})
	for _, want := range []string{"\x1b[32mCurrent\x1b[0m", "\x1b[34mRamping\x1b[0m", "\x1b[33m1/2 ready\x1b[0m"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("coloured status lacks %q:\n%s", want, b.String())
		}
	}
}

func TestRenderListGolden(t *testing.T) {
	paused := rampingTWD()
	paused.Name, paused.Namespace, paused.Spec.Rollout.Paused = "billing", "pay", true
	done := rampingTWD()
	done.Name = "shipping"
	done.Status.TargetVersion = done.Status.CurrentVersion
	done.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonRolloutComplete}}
	rows := []ListRow{NewListRow(paused), NewListRow(rampingTWD()), NewListRow(done)}
	var b bytes.Buffer
	RenderList(&b, rows, true, Style{})
	golden(t, "list.golden", b.Bytes())

	b.Reset()
	if err := printAs(&b, "json", rows[:1]); err != nil {
		t.Fatal(err)
	}
	var back []ListRow
	if err := json.Unmarshal(b.Bytes(), &back); err != nil || back[0].Strategy != "Progressive (paused)" || *back[0].Ramp != 25 {
		t.Fatalf("-o json: %s (%v)", b.String(), err)
	}
}

// TestActions: the patch each command sends, and its refusals.
func TestActions(t *testing.T) {
	with := func(mod func(*v1alpha1.TemporalWorkerDeployment)) *v1alpha1.TemporalWorkerDeployment {
		twd := rampingTWD()
		mod(twd)
		return twd
	}
	paused := with(func(t *v1alpha1.TemporalWorkerDeployment) { t.Spec.Rollout.Paused = true })
	manual := with(func(t *v1alpha1.TemporalWorkerDeployment) {
		t.Spec.Rollout.Strategy = v1alpha1.StrategyManual
		t.Status.TargetVersion.Status, t.Status.TargetVersion.RampPercentage = v1alpha1.VersionInactive, nil
	})
	aborted := with(func(t *v1alpha1.TemporalWorkerDeployment) {
		t.Annotations = map[string]string{v1alpha1.AnnotationAbortRollout: "v2-bbb"}
	})
	complete := with(func(t *v1alpha1.TemporalWorkerDeployment) { t.Status.TargetVersion = t.Status.CurrentVersion })
	stale := with(func(t *v1alpha1.TemporalWorkerDeployment) { t.Generation = 5 })
	allAtOnce := with(func(t *v1alpha1.TemporalWorkerDeployment) { t.Spec.Rollout.Strategy = v1alpha1.StrategyAllAtOnce })

	for _, c := range []struct {
		name   string
		change func() (Change, error)
		patch  string // or, with refused, a part of the error
		refuse bool
	}{
		{"pause", func() (Change, error) { return Pause(rampingTWD()) }, `{"spec":{"rollout":{"paused":true}}}`, false},
		{"pause twice", func() (Change, error) { return Pause(paused) }, "paused already", true},
		{"pause Manual", func() (Change, error) { return Pause(manual) }, "nothing to pause", true},
		{"resume", func() (Change, error) { return Resume(paused) }, `{"spec":{"rollout":{"paused":false}}}`, false},
		{"resume what runs", func() (Change, error) { return Resume(rampingTWD()) }, "not paused", true},
		{"promote a step", func() (Change, error) { return Promote(rampingTWD(), false) },
			`{"spec":{"rollout":{"steps":[{"pauseDuration":"0s","rampPercentage":25},{"pauseDuration":"30m0s","rampPercentage":75}]}}}`, false},
		{"promote --full", func() (Change, error) { return Promote(rampingTWD(), true) }, `{"spec":{"rollout":{"strategy":"AllAtOnce"}}}`, false},
		{"promote --full while paused", func() (Change, error) { return Promote(paused, true) },
			`{"spec":{"rollout":{"paused":false,"strategy":"AllAtOnce"}}}`, false},
		{"promote a step while paused", func() (Change, error) { return Promote(paused, false) }, "resume it", true},
		{"promote Manual", func() (Change, error) { return Promote(manual, false) }, `{"spec":{"rollout":{"strategy":"AllAtOnce"}}}`, false},
		{"promote AllAtOnce", func() (Change, error) { return Promote(allAtOnce, false) }, "as soon as its workers poll", true},
		{"promote a complete rollout", func() (Change, error) { return Promote(complete, true) }, "current already", true},
		{"promote before the spec is observed", func() (Change, error) { return Promote(stale, false) }, "not observed", true},
		{"promote an aborted rollout", func() (Change, error) { return Promote(aborted, false) }, "retry first", true},
		{"abort", func() (Change, error) { return Abort(rampingTWD()) }, `{"metadata":{"annotations":{"temporal.io/abort-rollout":"v2-bbb"}}}`, false},
		{"abort while paused", func() (Change, error) { return Abort(paused) }, `{"metadata":{"annotations":{"temporal.io/abort-rollout":"v2-bbb"}}}`, false},
		{"abort twice", func() (Change, error) { return Abort(aborted) }, "aborted already", true},
		{"abort Manual", func() (Change, error) { return Abort(manual) }, "Manual", true},
		{"abort a complete rollout", func() (Change, error) { return Abort(complete) }, "current already", true},
		{"retry", func() (Change, error) { return Retry(aborted) }, `{"metadata":{"annotations":{"temporal.io/abort-rollout":null}}}`, false},
		{"retry what runs", func() (Change, error) { return Retry(rampingTWD()) }, "no rollout", true},
	} {
		ch, err := c.change()
		switch {
		case c.refuse && (err == nil || !strings.Contains(err.Error(), c.patch)):
			t.Errorf("%s: want a refusal with %q, got %s (%v)", c.name, c.patch, ch.Patch, err)
		case !c.refuse && (err != nil || string(ch.Patch) != c.patch || ch.Type != types.MergePatchType || ch.Says == ""):
			t.Errorf("%s: patch %s (%v), want %s", c.name, ch.Patch, err, c.patch)
		}
	}
}

// TestUndo: undo goes back to the current version while a rollout runs,
// else to the newest earlier one with a Deployment, or the one named; the
// patch replaces the whole template, only if nothing changed meanwhile.
func TestUndo(t *testing.T) {
	twd := rampingTWD()
	if v, err := UndoTarget(twd, ""); err != nil || v.BuildID != "v1-aaa" {
		t.Fatalf("while ramping: %v (%v)", v.BuildID, err)
	}
	complete := rampingTWD()
	complete.Status.TargetVersion = complete.Status.CurrentVersion
	if v, err := UndoTarget(complete, ""); err != nil || v.BuildID != "v0-zzz" {
		t.Fatalf("complete: %v (%v)", v.BuildID, err)
	}
	if _, err := UndoTarget(twd, "v-old"); err == nil || !strings.Contains(err.Error(), "not an earlier version with a Deployment") {
		t.Fatalf("a version without a Deployment: %v", err)
	}

	old := rampingTWD()
	old.Spec.Template.Spec.Containers[0].Image = "orders:v1"
	old.Spec.Template.Labels = map[string]string{"app": "orders"}
	build := buildid.Generate(&old.Spec.Template)
	d := workload.NewDeployment(old, workload.Identity{BuildID: build}, workload.Connection{Address: "t:7233"}, nil)
	ch, err := Undo(twd, v1alpha1.WorkerVersion{BuildID: build}, d)
	if err != nil || ch.Type != types.JSONPatchType {
		t.Fatal(err)
	}
	var ops []struct {
		Op, Path string
		Value    json.RawMessage
	}
	if err := json.Unmarshal(ch.Patch, &ops); err != nil || len(ops) != 2 || ops[0].Op != "test" || string(ops[0].Value) != `"42"` || ops[1].Path != "/spec/template" {
		t.Fatalf("undo patch %s (%v)", ch.Patch, err)
	}
	var tpl corev1.PodTemplateSpec
	if err := json.Unmarshal(ops[1].Value, &tpl); err != nil || buildid.Generate(&tpl) != build {
		t.Fatalf("the template sent gives build %s, want %s (%v)", buildid.Generate(&tpl), build, err)
	}
}

func TestStatusOnlyChanged(t *testing.T) {
	read := &v1alpha1.TemporalWorkerDeployment{ObjectMeta: metav1.ObjectMeta{UID: "a", ResourceVersion: "10", Generation: 3}}
	for _, c := range []struct {
		name  string
		fresh metav1.ObjectMeta
		want  bool
	}{
		{"the controller wrote status", metav1.ObjectMeta{UID: "a", ResourceVersion: "11", Generation: 3}, true},
		{"someone changed the spec", metav1.ObjectMeta{UID: "a", ResourceVersion: "11", Generation: 4}, false},
		{"nothing changed: the refusal was no race", metav1.ObjectMeta{UID: "a", ResourceVersion: "10", Generation: 3}, false},
		{"deleted and created again", metav1.ObjectMeta{UID: "b", ResourceVersion: "12", Generation: 3}, false},
	} {
		if got := StatusOnlyChanged(read, &v1alpha1.TemporalWorkerDeployment{ObjectMeta: c.fresh}); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}
