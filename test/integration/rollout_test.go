package integration

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"k8s.io/utils/ptr"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/dev/demoworker"
)

// TestAllAtOnceKeepsPinnedWorkflowsOnTheirVersion is the core promise: the
// first version becomes current, kubectl wait sees the rollout finish, a
// new version takes new workflows at once, and a pinned workflow started
// on the old version finishes there; the old version is only scaled down
// after it drained, then deleted in Kubernetes and in Temporal.
func TestAllAtOnceKeepsPinnedWorkflowsOnTheirVersion(t *testing.T) {
	parallel(t)
	r := newRollout(env.NewTest(t), "allatonce")
	v1 := r.Create(r.Spec("v1"))

	out, err := r.kubectl(3*time.Minute, "wait", "--for=condition=Ready", "--timeout=170s", "-n", r.Namespace, "twd/"+r.Name)
	if err != nil {
		t.Fatalf("kubectl wait for the first version: %v\n%s\nstatus: %s", err, out, describe(r.Get()))
	}
	r.WaitCurrent(3*time.Minute, v1)
	if cur, _, _ := r.routing(); cur != v1 {
		t.Fatalf("Temporal's current version is %q, want %s", cur, v1)
	}
	if got := r.hello(); !strings.Contains(got, v1) {
		t.Fatalf("Hello ran on %q, want build %s", got, v1)
	}
	pinned := r.startLong(demoworker.LongPinnedWorkflow)
	upgrading := r.startLong(demoworker.LongAutoUpgradeWorkflow)

	v2 := r.SetImage("v2")
	if v2 == v1 {
		t.Fatal("a new image did not change the build ID")
	}
	// Wait for the controller to see the new spec, then let kubectl wait
	// for the end of the rollout, as a CD pipeline would.
	r.waitFor(time.Minute, "status for the new generation", func(*v1alpha1.TemporalWorkerDeployment) bool { return true })
	out, err = r.kubectl(3*time.Minute, "wait", "--for=condition=Ready", "--timeout=170s", "-n", r.Namespace, "twd/"+r.Name)
	if err != nil {
		t.Fatalf("kubectl wait for v2: %v\n%s\nstatus: %s", err, out, describe(r.Get()))
	}
	r.WaitCurrent(3*time.Minute, v2)
	// The printer columns show what people look for first.
	out, err = r.kubectl(time.Minute, "get", "twd", r.Name, "-n", r.Namespace, "--no-headers")
	if fields := strings.Fields(out); err != nil || len(fields) < 4 || fields[1] != v2 || fields[2] != v2 || !slices.Contains(fields, v1alpha1.ReasonRolloutComplete) {
		t.Fatalf("kubectl get twd = %q (%v), want NAME, CURRENT %s, TARGET %s, no ramp, READY RolloutComplete, AGE", out, err, v2, v2)
	}
	if got := r.hello(); !strings.Contains(got, v2) {
		t.Fatalf("after the rollout Hello ran on %q, want build %s", got, v2)
	}

	// The pinned workflow keeps v1 draining, so v1 keeps its workers well
	// past the scaledown delay.
	r.holdsWorkers(8*time.Second, v1)
	twd := r.Get()
	if st := versionStatus(twd, v1); st != v1alpha1.VersionDraining {
		t.Fatalf("version %s is %q, want Draining while a pinned workflow runs: %s", v1, st, describe(twd))
	}

	// The auto-upgrade workflow started on v1 moved to v2 on its own.
	r.Eventually(30*time.Second, "the auto-upgrade workflow running on "+v2, func() (bool, string) {
		on := r.queryBuild(upgrading)
		return on == v2, "it runs on " + on
	})
	for _, w := range []struct {
		run          client.WorkflowRun
		started, end string
	}{{pinned, v1, v1}, {upgrading, v1, v2}} {
		if err := r.Env.Temporal.SignalWorkflow(context.Background(), w.run.GetID(), "", demoworker.FinishSignal, nil); err != nil {
			t.Fatal(err)
		}
		var res demoworker.LongResult
		if err := w.run.Get(context.Background(), &res); err != nil {
			t.Fatal(err)
		}
		if res.StartedOn != w.started || res.FinishedOn != w.end {
			t.Fatalf("workflow %s ran on %s then %s, want %s then %s", w.run.GetID(), res.StartedOn, res.FinishedOn, w.started, w.end)
		}
	}

	r.Eventually(drainBound, "version "+v1+" scaled to zero after draining", func() (bool, string) {
		d := r.deployment(v1)
		return d == nil || ptr.Deref(d.Spec.Replicas, 1) == 0, deploymentState(d) + "; " + describe(r.Get())
	})
	// The pass that scales down writes its status after it acted, so the
	// status that shows why follows within moments: Drained (the version
	// describe of the drain cross-check can say so before the summary
	// does), or gone once the delete delay passed. Draining would mean the
	// controller scaled down a version Temporal did not report drained.
	r.Eventually(30*time.Second, "status saying why "+v1+" was scaled down", func() (bool, string) {
		twd := r.Get()
		st := versionStatus(twd, v1)
		return st == v1alpha1.VersionDrained || st == "", fmt.Sprintf("version %s scaled down while %q: %s", v1, st, describe(twd))
	})
	r.Eventually(drainBound, "version "+v1+" deleted in Kubernetes and Temporal", func() (bool, string) {
		d := r.deployment(v1)
		twd := r.Get()
		return d == nil && versionStatus(twd, v1) == "", deploymentState(d) + "; " + describe(twd)
	})
	if cur, _, _ := r.routing(); cur != v2 {
		t.Fatalf("after cleanup Temporal's current version is %q, want %s", cur, v2)
	}
}

// versionStatus is the status of build in the TWD's status, "" if absent.
func versionStatus(twd *v1alpha1.TemporalWorkerDeployment, build string) v1alpha1.VersionStatus {
	if v := workerVersionOf(twd, build); v != nil {
		return v.Status
	}
	return ""
}

// workerVersionOf is build in the TWD's status, nil if absent.
func workerVersionOf(twd *v1alpha1.TemporalWorkerDeployment, build string) *v1alpha1.WorkerVersion {
	for _, v := range append([]*v1alpha1.WorkerVersion{twd.Status.TargetVersion, twd.Status.CurrentVersion, twd.Status.RampingVersion}, ptrsOf(twd.Status.DeprecatedVersions)...) {
		if v != nil && v.BuildID == build {
			return v
		}
	}
	return nil
}

func ptrsOf(vs []v1alpha1.WorkerVersion) []*v1alpha1.WorkerVersion {
	out := make([]*v1alpha1.WorkerVersion, len(vs))
	for i := range vs {
		out[i] = &vs[i]
	}
	return out
}

// queryBuild asks a Long workflow which build ran its latest step.
func (r *rollout) queryBuild(run client.WorkflowRun) string {
	r.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	v, err := r.Env.Temporal.QueryWorkflow(ctx, run.GetID(), run.GetRunID(), demoworker.BuildIDQuery)
	if err != nil {
		return "unknown: " + err.Error()
	}
	var build string
	if err := v.Get(&build); err != nil {
		return "unknown: " + err.Error()
	}
	return build
}
