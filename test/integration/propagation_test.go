package integration

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/dev/demoworker"
)

// propagationHold is how long devenv's Temporal holds each routing change
// back from the task queues' partitions, root and others, during these
// tests. The window between the answer to a routing write and every
// partition applying it is normally a few hundred milliseconds, in which a
// workflow started right after `kubectl wait` returned was seen once in
// about 14 tries to run on the old version; held, every workflow started
// in it is routed as before.
const propagationHold = time.Second

// holdPropagation makes devenv's Temporal hold routing changes of
// taskQueue back for the rest of the test
// (dev/cmd/devenv/temporaldev.PropagationHoldFile); the tests running
// beside it are not held. One test at a time may hold.
func holdPropagation(t *testing.T, d time.Duration, taskQueue string) {
	file := filepath.Join(env.Info.Dir, "temporal-propagation-hold")
	if err := os.WriteFile(file, []byte(d.String()+" "+taskQueue), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Remove(file) })
}

// startHellos starts n Hello workflows at once and returns the build ID
// each ran its first task on (Hello is pinned: its activity runs there
// too and names it).
func (r *rollout) startHellos(n int) []string {
	r.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	runs := make([]client.WorkflowRun, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runs[i], errs[i] = r.Env.Temporal.ExecuteWorkflow(ctx, client.StartWorkflowOptions{TaskQueue: r.TaskQueue}, demoworker.HelloWorkflow, "propagation")
		}()
	}
	wg.Wait()
	builds := make([]string, n)
	for i, run := range runs {
		if errs[i] != nil {
			r.Fatalf("start Hello: %v", errs[i])
		}
		var out string
		if err := run.Get(ctx, &out); err != nil {
			r.Fatalf("Hello %s: %v", run.GetID(), err)
		}
		_, builds[i], _ = strings.Cut(out, " from ")
	}
	return builds
}

// kubectlWaitReady waits for the controller to observe the spec, then
// runs `kubectl wait --for=condition=Ready`, as a CD pipeline does.
func (r *rollout) kubectlWaitReady() {
	r.Helper()
	// Generous: a pass whose routing write Temporal answers late (a loaded
	// machine: over a minute) observes the generation only after it.
	r.waitFor(3*time.Minute, "status for the new generation", func(*v1alpha1.TemporalWorkerDeployment) bool { return true })
	if out, err := r.kubectl(3*time.Minute, "wait", "--for=condition=Ready", "--timeout=170s", "-n", r.Namespace, "twd/"+r.Name); err != nil {
		r.Fatalf("kubectl wait: %v\n%s\nstatus: %s", err, out, describe(r.Get()))
	}
}

// TestReadyMeansTemporalRoutesThere: Ready=True and status.currentVersion
// promise that Temporal routes new workflows to the version. With each
// routing change held back from the task queue partitions for a second,
// a workflow started the moment `kubectl wait
// --for=condition=Ready` returns runs its first task on the new version,
// 20 times in a row, rollbacks included; and once status shows a ramp, new
// workflows split by it.
func TestReadyMeansTemporalRoutesThere(t *testing.T) {
	parallel(t)
	r := newRollout(env.NewTest(t), "propagation")
	twd := r.Spec("v1")
	// Old versions keep their workers: after the first two rollouts the
	// spec goes back and forth between v1 and v2, each a rollback.
	twd.Spec.Sunset.ScaledownDelay = &metav1.Duration{Duration: time.Hour}
	r.Create(twd)
	r.kubectlWaitReady()
	v1 := r.BuildID()
	holdPropagation(t, propagationHold, r.TaskQueue)

	const rollouts = 20
	tags := map[string]string{v1: "v1"}
	for i := range rollouts {
		tag := []string{"v2", "v1"}[i%2]
		build := r.SetImage(tag)
		tags[build] = tag
		r.kubectlWaitReady()
		if cur := r.Get().Status.CurrentVersion; cur == nil || cur.BuildID != build {
			t.Fatalf("rollout %d: Ready, but status.currentVersion is %+v, want %s", i+1, cur, build)
		}
		got := r.startHellos(1)[0]
		if got != build {
			t.Fatalf("rollout %d (to %s): a workflow started as soon as kubectl wait returned ran on %s (%s), want %s (%s): "+
				"Ready=True before Temporal routed new workflows there", i+1, tags[build], got, tags[got], build, tag)
		}
	}
	t.Logf("%d rollouts between %s and its successor: every workflow started on Ready ran on the new version", rollouts, v1)

	// A ramp step: once status shows 50%, about half of new workflows go
	// to the target. Shown before Temporal applied it, none would.
	r.Update(func(t *v1alpha1.TemporalWorkerDeployment) {
		t.Spec.Template.Spec.Containers[0].Image = "rainbow.local/demo-worker:v3"
		t.Spec.Rollout = v1alpha1.RolloutSpec{Strategy: v1alpha1.StrategyProgressive,
			Steps: []v1alpha1.RolloutStep{{RampPercentage: 50, PauseDuration: metav1.Duration{Duration: time.Hour}}}}
	})
	v3 := r.BuildID()
	r.waitFor(3*time.Minute, "version "+v3+" shown ramping 50%", func(t *v1alpha1.TemporalWorkerDeployment) bool {
		return t.Status.TargetVersion != nil && t.Status.TargetVersion.BuildID == v3 && t.Status.TargetVersion.Status == v1alpha1.VersionRamping &&
			t.Status.TargetVersion.RampPercentage != nil && *t.Status.TargetVersion.RampPercentage == 50
	})
	const n = 60
	onTarget := 0
	for _, b := range r.startHellos(n) {
		if b == v3 {
			onTarget++
		}
	}
	// Binomial(60, 0.5): outside 18 to 42 has a probability of about
	// 0.1% (each tail about 0.06%).
	if onTarget < 18 || onTarget > 42 {
		t.Fatalf("%d of %d workflows started once status showed a 50%% ramp ran on %s; want about half (18 to 42)", onTarget, n, v3)
	}
	t.Logf("ramp 50%%: %d of %d new workflows on the target", onTarget, n)
}
