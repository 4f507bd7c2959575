package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/dev/demoworker"
)

// exampleRollout creates the TemporalWorkerDeployment of an example
// (createExample) and waits for its first version to be current.
func exampleRollout(t *testing.T, file string, mutate func(*v1alpha1.TemporalWorkerDeployment)) (*rollout, string) {
	t.Helper()
	r, _ := createExample(t, file, mutate)
	v1 := r.buildID()
	r.waitCurrent(2*time.Minute, v1)
	return r, v1
}

// drainOf is build's status.drain, nil if none.
func drainOf(twd *v1alpha1.TemporalWorkerDeployment, build string) *v1alpha1.VersionDrain {
	for _, v := range append([]*v1alpha1.WorkerVersion{twd.Status.TargetVersion, twd.Status.CurrentVersion, twd.Status.RampingVersion}, ptrsOf(twd.Status.DeprecatedVersions)...) {
		if v != nil && v.BuildID == build {
			return v.Drain
		}
	}
	return nil
}

func drainText(d *v1alpha1.VersionDrain) string {
	if d == nil {
		return "no drain status"
	}
	return fmt.Sprintf("drain: pinned=%d overdue=%d cancelRequested=%d terminated=%d signalled=%d pending=%d deadline=%v listedAt=%v",
		d.PinnedWorkflows, d.Overdue, d.CancelRequested, d.Terminated, d.Signalled, d.Pending, d.Deadline, d.ListedAt)
}

// rollOutV2WithPinned starts a LongPinned workflow on v1, rolls out v2 and waits for
// it to be current.
func (r *rollout) rollOutV2WithPinned() (client.WorkflowRun, string) {
	r.Helper()
	pinned := r.startLong(demoworker.LongPinnedWorkflow)
	r.Eventually(30*time.Second, "the pinned workflow running", func() (bool, string) {
		on := r.queryBuild(pinned)
		return !strings.HasPrefix(on, "unknown"), on
	})
	r.setImage("v2")
	v2 := r.buildID()
	r.waitCurrent(2*time.Minute, v2)
	return pinned, v2
}

// TestDrainDeadline: examples/drain/deadline.yaml cancels the pinned
// workflow still open on v1 once v1 has drained longer than
// maxDrainDuration, with the reason in its history, an Event, the metric
// and status; under DryRun the workflow is only counted.
func TestDrainDeadline(t *testing.T) {
	t.Run("Cancel", func(t *testing.T) {
		t.Parallel()
		r, v1 := exampleRollout(t, "drain/deadline.yaml", func(twd *v1alpha1.TemporalWorkerDeployment) {
			if twd.Spec.Sunset.DrainAction != v1alpha1.DrainCancel || twd.Spec.Sunset.MaxDrainDuration == nil {
				t.Fatalf("the example's sunset: %+v", twd.Spec.Sunset)
			}
		})
		pinned, _ := r.rollOutV2WithPinned()
		promoted := time.Now()
		max := r.get().Spec.Sunset.MaxDrainDuration.Duration
		twd := r.waitFor(max+time.Minute, "the pinned workflow's cancellation requested", func(twd *v1alpha1.TemporalWorkerDeployment) bool {
			d := drainOf(twd, v1)
			return d != nil && d.CancelRequested == 1
		})
		// Temporal's drain start, not when this test saw v2 current, is
		// what the deadline counts from.
		d := drainOf(twd, v1)
		if d.DrainingSince == nil || d.Deadline == nil || d.LastActionAt == nil || !d.Deadline.Equal(&metav1.Time{Time: d.DrainingSince.Add(max)}) ||
			d.LastActionAt.Before(d.Deadline) || d.Overdue != 1 || len(d.StoppedRuns) != 1 {
			t.Fatalf("cancelled before the deadline, or status does not say: %s, drainingSince %v, lastActionAt %v", drainText(d), d.DrainingSince, d.LastActionAt)
		}
		r.Logf("cancellation requested %s after the test saw v2 current (maxDrainDuration %s); %s", time.Since(promoted).Round(time.Second), max, drainText(d))
		err := pinned.Get(context.Background(), nil)
		if !temporal.IsCanceledError(err) {
			t.Fatalf("the pinned workflow ended with %v, want cancelled", err)
		}
		cause, identity := cancelRequest(r, pinned)
		for _, want := range []string{"version " + v1, "maxDrainDuration (20s)", "TemporalWorkerDeployment " + r.Namespace + "/" + r.Name} {
			if !strings.Contains(cause, want) {
				t.Errorf("the cancel request's cause %q does not say %q", cause, want)
			}
		}
		if identity != "rainbow-test" {
			t.Errorf("the cancel request came from %q", identity)
		}
		r.waitEvent(10*time.Second, "CancelPinnedWorkflows")
		if n, ok := metric(t, "rainbow_drain_workflows_total", map[string]string{"namespace": r.Namespace, "name": r.Name, "action": "cancel"}); !ok || n != 1 {
			t.Errorf("rainbow_drain_workflows_total{action=cancel} = %v (%v), want 1", n, ok)
		}
		// With nothing pinned left, v1 drains and retires as usual.
		r.Eventually(2*time.Minute, "version "+v1+" drained", func() (bool, string) {
			twd := r.get()
			st := versionStatus(twd, v1)
			return st == v1alpha1.VersionDrained || st == "", describe(twd)
		})
	})
	t.Run("DryRun", func(t *testing.T) {
		t.Parallel()
		r, v1 := exampleRollout(t, "drain/deadline.yaml", func(twd *v1alpha1.TemporalWorkerDeployment) {
			twd.Spec.Sunset.DrainAction = v1alpha1.DrainDryRun
		})
		pinned, _ := r.rollOutV2WithPinned()
		twd := r.waitFor(2*time.Minute, "the pinned workflow counted overdue", func(twd *v1alpha1.TemporalWorkerDeployment) bool {
			d := drainOf(twd, v1)
			return d != nil && d.Overdue == 1
		})
		if d := drainOf(twd, v1); d.CancelRequested != 0 || d.Terminated != 0 || d.Deadline == nil || d.PinnedWorkflows != 1 {
			t.Fatalf("DryRun status: %s", drainText(d))
		}
		r.waitEvent(10*time.Second, "DrainDeadlinePassed")
		if n, ok := metric(t, "rainbow_drain_overdue_workflows", map[string]string{"namespace": r.Namespace, "name": r.Name}); !ok || n != 1 {
			t.Errorf("rainbow_drain_overdue_workflows = %v (%v), want 1", n, ok)
		}
		r.holdsWorkers(5*time.Second, v1)
		desc, err := r.Env.Temporal.DescribeWorkflowExecution(context.Background(), pinned.GetID(), pinned.GetRunID())
		if err != nil || desc.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
			t.Fatalf("under DryRun the pinned workflow is %v (%v), want running", desc.GetWorkflowExecutionInfo().GetStatus(), err)
		}
		if cause, _ := cancelRequest(r, pinned); cause != "" {
			t.Fatalf("DryRun requested a cancellation: %q", cause)
		}
		if err := r.Env.Temporal.SignalWorkflow(context.Background(), pinned.GetID(), "", demoworker.FinishSignal, nil); err != nil {
			t.Fatal(err)
		}
	})
}

// TestContinueAsNewSignal: examples/drain/continue-as-new.yaml signals the
// pinned workflow on v1 once v2 is current; the demo worker continues as
// new, its next run runs on v2 and completes there, and v1 drains without
// waiting for the workflow.
func TestContinueAsNewSignal(t *testing.T) {
	r, v1 := exampleRollout(t, "drain/continue-as-new.yaml", func(twd *v1alpha1.TemporalWorkerDeployment) {
		if s := twd.Spec.Sunset.ContinueAsNewSignal; s == nil || s.Name != demoworker.ContinueAsNewSignal {
			t.Fatalf("the example's signal %+v is not the demo worker's %q", s, demoworker.ContinueAsNewSignal)
		}
	})
	pinned, v2 := r.rollOutV2WithPinned()
	r.Eventually(time.Minute, "the workflow's next run on "+v2, func() (bool, string) {
		desc, err := r.Env.Temporal.DescribeWorkflowExecution(context.Background(), pinned.GetID(), "")
		if err != nil {
			return false, err.Error()
		}
		info := desc.GetWorkflowExecutionInfo()
		on := info.GetVersioningInfo().GetDeploymentVersion().GetBuildId()
		return info.GetExecution().GetRunId() != pinned.GetRunID() && on == v2,
			fmt.Sprintf("run %s on %q; %s", info.GetExecution().GetRunId(), on, drainText(drainOf(r.get(), v1)))
	})
	if d := drainOf(r.get(), v1); d == nil || d.Signalled != 1 || len(d.SignalledRuns) != 1 {
		t.Fatalf("status after the signal: %s", drainText(d))
	}
	r.waitEvent(10*time.Second, "SignalPinnedWorkflows")
	if err := r.Env.Temporal.SignalWorkflow(context.Background(), pinned.GetID(), "", demoworker.FinishSignal, nil); err != nil {
		t.Fatal(err)
	}
	var res demoworker.LongResult
	if err := r.Env.Temporal.GetWorkflow(context.Background(), pinned.GetID(), "").Get(context.Background(), &res); err != nil {
		t.Fatal(err)
	}
	if res.ContinuedFrom != v1 || res.StartedOn != v2 || res.FinishedOn != v2 {
		t.Fatalf("the continued run: %+v, want continued from %s, run on %s", res, v1, v2)
	}
	r.Eventually(2*time.Minute, "version "+v1+" drained", func() (bool, string) {
		twd := r.get()
		st := versionStatus(twd, v1)
		return st == v1alpha1.VersionDrained || st == "", describe(twd)
	})
}

// cancelRequest is the cause and identity of the run's cancel request, ""
// if none.
func cancelRequest(r *rollout, run client.WorkflowRun) (cause, identity string) {
	r.Helper()
	it := r.Env.Temporal.GetWorkflowHistory(context.Background(), run.GetID(), run.GetRunID(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			r.Fatalf("history: %v", err)
		}
		if a := e.GetWorkflowExecutionCancelRequestedEventAttributes(); a != nil {
			return a.GetCause(), a.GetIdentity()
		}
	}
	return "", ""
}
