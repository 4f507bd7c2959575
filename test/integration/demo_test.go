package integration

import (
	"context"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/dev/demo"
	"github.com/rainbow-deploy/rainbow/test/harness"
)

// TestDemo is `make demo`'s smoke test: the demo program's story, with
// examples/demo as they are but short steps and delays, runs to its end:
// the second version current after both ramp steps, the first Draining
// while the pinned workflow runs there, then scaled down and deleted; each
// version had its own HPA, from examples/twor-hpa.yaml.
func TestDemo(t *testing.T) {
	// Not parallel: the story paces itself by the clock (traffic windows,
	// a minute per Hello workflow), as a person watching it would; Go runs
	// it before the parallel tests, beside no other test of this package.
	tt := env.NewTest(t)
	r := &rollout{&harness.Rollout{T: tt, Name: "demo-worker", TaskQueue: tt.TaskQueue("demo")}}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	res, err := demo.Run(ctx, demo.Options{
		Kube:              env.Kube,
		Temporal:          env.Temporal,
		Dir:               filepath.Join(env.Root, "examples", "demo"),
		OwnedFiles:        []string{filepath.Join(env.Root, "examples", "twor-hpa.yaml")},
		Out:               testWriter{t},
		Namespace:         tt.Namespace,
		TemporalAddress:   env.Info.TemporalAddress,
		TemporalNamespace: env.Info.TemporalNamespace,
		TaskQueue:         r.TaskQueue,
		Customize: func(twd *v1alpha1.TemporalWorkerDeployment) {
			if twd.Name != r.Name || twd.Spec.Rollout.Strategy != v1alpha1.StrategyProgressive || len(twd.Spec.Rollout.Steps) != 2 {
				t.Errorf("examples/demo/%s changed: want TWD %s with 2 Progressive steps, got %s with %s and %d steps",
					demo.WorkerFile, r.Name, twd.Name, twd.Spec.Rollout.Strategy, len(twd.Spec.Rollout.Steps))
			}
			twd.Spec.Replicas = ptr.To[int32](1)
			twd.Spec.Rollout.Steps = steps([]int32{25, 75}, 3*time.Second)
			twd.Spec.Sunset.ScaledownDelay = &metav1.Duration{Duration: 2 * time.Second}
			twd.Spec.Sunset.DeleteDelay = &metav1.Duration{Duration: 3 * time.Second}
		},
		HelloEvery: 300 * time.Millisecond,
		Look:       time.Second,
		DrainHold:  2 * time.Second,
		PinnedTick: time.Second,
	})
	if err != nil {
		t.Fatalf("the demo failed: %v", err)
	}
	if res.First == "" || res.Second == "" || res.First == res.Second {
		t.Fatalf("versions %q then %q, want two different ones", res.First, res.Second)
	}
	if !strings.HasPrefix(res.First, "v1-") || !strings.HasPrefix(res.Second, "v2-") {
		t.Errorf("build IDs %s and %s, want the image tags v1 and v2 in them", res.First, res.Second)
	}
	if !slices.Equal(res.Ramps, []int32{25, 75}) {
		t.Errorf("the second version ramped %v, want [25 75]", res.Ramps)
	}
	if !res.DrainingWhilePinned {
		t.Error("the first version was never seen Draining while the pinned workflow ran on it")
	}
	if res.Pinned.StartedOn != res.First || res.Pinned.FinishedOn != res.First {
		t.Errorf("the pinned workflow ran on %s then %s, want %s", res.Pinned.StartedOn, res.Pinned.FinishedOn, res.First)
	}
	if res.HelloFailures != 0 || res.Hellos[res.First] == 0 || res.Hellos[res.Second] == 0 {
		t.Errorf("Hello workflows by build %v, %d failed; want some on each version and no failure", res.Hellos, res.HelloFailures)
	}
	if res.HPAs[res.First] == "" || res.HPAs[res.Second] == "" {
		t.Errorf("HPAs by version: %v, want one for each of %s and %s", res.HPAs, res.First, res.Second)
	}
	twd := r.WaitCurrent(10*time.Second, res.Second)
	if d := r.deployment(res.First); d != nil || versionStatus(twd, res.First) != "" {
		t.Errorf("the first version is still around: %s; %s", deploymentState(d), describe(twd))
	}
}

// TestDemoAbort runs `make demo-abort`'s story with examples/demo/abort.yaml
// as it is but for shorter steps: v2 becomes current through its analysis,
// v3 (failing half of its workflows) is aborted by the analysis at its first
// step, Temporal routes every new workflow back to v2, and the story prints
// the evidence (the check's verdicts, the abort, the Event) and how to retry
// or undo.
func TestDemoAbort(t *testing.T) {
	// Not parallel: the story paces itself by the clock (traffic windows,
	// a minute per Hello workflow), as a person watching it would; Go runs
	// it before the parallel tests, beside no other test of this package.
	tt := env.NewTest(t)
	r := &rollout{&harness.Rollout{T: tt, Name: "demo-abort", TaskQueue: tt.TaskQueue("abort")}}
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	var out strings.Builder
	res, err := demo.RunAbort(ctx, demo.Options{
		Kube:              env.Kube,
		Temporal:          env.Temporal,
		Dir:               filepath.Join(env.Root, "examples", "demo"),
		Out:               io.MultiWriter(testWriter{t}, &out),
		Namespace:         tt.Namespace,
		TemporalAddress:   env.Info.TemporalAddress,
		TemporalNamespace: env.Info.TemporalNamespace,
		TaskQueue:         r.TaskQueue,
		Customize: func(twd *v1alpha1.TemporalWorkerDeployment) {
			twd.Spec.Replicas = ptr.To[int32](1)
			twd.Spec.Rollout.Steps = steps([]int32{25, 75}, 5*time.Second)
		},
		HelloEvery: 100 * time.Millisecond,
		Look:       time.Second,
	}, 0.5)
	if err != nil {
		t.Fatalf("the abort story failed: %v", err)
	}
	if !slices.Equal(res.SecondRamps, []int32{25, 75}) {
		t.Errorf("v2 ramped %v, want [25 75] before becoming current", res.SecondRamps)
	}
	if !slices.Equal(res.BadRamps, []int32{25}) {
		t.Errorf("v3 ramped %v before the abort, want only the first step [25]", res.BadRamps)
	}
	if res.Current != res.Second || res.Ramping != "" {
		t.Errorf("Temporal routes to current %q, ramping %q; want %s alone", res.Current, res.Ramping, res.Second)
	}
	if res.After[res.Second] == 0 || len(res.After) != 1 {
		t.Errorf("Hello workflows started after the abort, by build: %v; want all on %s", res.After, res.Second)
	}
	if !strings.Contains(res.Evidence, "check failures") || !strings.Contains(res.Evidence, "above maxPercent 10%") || !strings.Contains(res.Event, res.Bad) {
		t.Errorf("evidence %q, Event %q: want the check, its bound and the version", res.Evidence, res.Event)
	}
	if d := r.deployment(res.Bad); d == nil || ptr.Deref(d.Spec.Replicas, 1) == 0 {
		t.Errorf("the aborted version lost its workers: %s", deploymentState(d))
	}
	printed := out.String()
	for _, want := range []string{
		"analysis v2 Passed",
		"analysis v3 Failed",
		"; above maxPercent 10%",
		"evidence  check failures failed 2 time(s) in a row",
		"window    workflows started on v3 since ",
		"event    Warning AnalysisFailed: the analysis aborted the rollout of version v3",
		"Temporal routes every new workflow to v2 again: its routing has v2 current and no ramp",
		"kubectl-rainbow -n " + tt.Namespace + " retry demo-abort",
		"kubectl-rainbow -n " + tt.Namespace + " undo demo-abort",
	} {
		if !strings.Contains(printed, want) {
			t.Errorf("the story did not print %q", want)
		}
	}
}

// testWriter logs each write to the test, shown with -v or on failure.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
