package integration

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/dev/demoworker"
	"github.com/rainbow-deploy/rainbow/internal/planner"
	"github.com/rainbow-deploy/rainbow/internal/workload"
)

// exampleRollout creates the TemporalWorkerDeployment of an example
// (createExample) and waits for its first version to be current.
func exampleRollout(t *testing.T, file string, mutate func(*v1alpha1.TemporalWorkerDeployment)) (*rollout, string) {
	t.Helper()
	r, _ := createExample(t, file, mutate)
	v1 := r.BuildID()
	r.WaitCurrent(5*time.Minute, v1)
	return r, v1
}

// drainOf is build's status.drain, nil if none.
func drainOf(twd *v1alpha1.TemporalWorkerDeployment, build string) *v1alpha1.VersionDrain {
	if v := workerVersionOf(twd, build); v != nil {
		return v.Drain
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

// rollOutV2WithPinned starts n LongPinned workflows on v1 (an activity a
// minute, so that a cancellation ends them), rolls out v2 and waits for
// it to be current.
func (r *rollout) rollOutV2WithPinned(n int) ([]client.WorkflowRun, string) {
	r.Helper()
	var pinned []client.WorkflowRun
	for range n {
		pinned = append(pinned, r.startLongWith(demoworker.LongPinnedWorkflow, demoworker.LongInput{Tick: time.Minute}))
	}
	for _, run := range pinned {
		r.Eventually(30*time.Second, "the pinned workflow running", func() (bool, string) {
			on := r.queryBuild(run)
			return !strings.HasPrefix(on, "unknown"), on
		})
	}
	v2 := r.SetImage("v2")
	r.WaitCurrent(5*time.Minute, v2)
	return pinned, v2
}

// stopAction is a drainAction that ends the pinned workflows open past the
// deadline, and how each shows.
type stopAction struct {
	action v1alpha1.DrainAction
	// pinned workflows are started on v1.
	pinned int
	event  string
	// label of rainbow_drain_workflows_total.
	label string
	// done is the runs status counts for the action, other the runs of the
	// other action.
	done, other func(*v1alpha1.VersionDrain) int32
	// ended: the error the run's result gives.
	ended  func(error) bool
	status enumspb.WorkflowExecutionStatus
}

// TestDrainDeadline: examples/drain/deadline.yaml cancels the pinned
// workflow still open on v1 once v1 has drained longer than
// maxDrainDuration, and with drainAction Terminate terminates them, with
// the reason in their history, Events, the metric and status, no more
// than a pass's worth at a time; v1 then drains and is retired. Under
// DryRun the workflow is only counted.
func TestDrainDeadline(t *testing.T) {
	t.Parallel()
	cancelled := func(d *v1alpha1.VersionDrain) int32 { return d.CancelRequested }
	terminated := func(d *v1alpha1.VersionDrain) int32 { return d.Terminated }
	for _, a := range []stopAction{
		{action: v1alpha1.DrainCancel, pinned: 1, event: planner.EventCancelPinned, label: "cancel", done: cancelled, other: terminated,
			ended: temporal.IsCanceledError, status: enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED},
		// More runs than one pass may act on (20): passes at least 10s apart.
		{action: v1alpha1.DrainTerminate, pinned: 25, event: planner.EventTerminatePinned, label: "terminate", done: terminated, other: cancelled,
			ended: temporal.IsTerminatedError, status: enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED},
	} {
		t.Run(string(a.action), func(t *testing.T) {
			parallel(t)
			drainDeadlineStops(t, a)
		})
	}
	t.Run("DryRun", func(t *testing.T) {
		parallel(t)
		r, v1 := exampleRollout(t, "drain/deadline.yaml", func(twd *v1alpha1.TemporalWorkerDeployment) {
			twd.Spec.Sunset.DrainAction = v1alpha1.DrainDryRun
		})
		runs, _ := r.rollOutV2WithPinned(1)
		pinned := runs[0]
		twd := r.waitFor(2*time.Minute, "the pinned workflow counted overdue", func(twd *v1alpha1.TemporalWorkerDeployment) bool {
			d := drainOf(twd, v1)
			return d != nil && d.Overdue == 1
		})
		if d := drainOf(twd, v1); d.CancelRequested != 0 || d.Terminated != 0 || d.Deadline == nil || d.PinnedWorkflows != 1 {
			t.Fatalf("DryRun status: %s", drainText(d))
		}
		r.waitEvent(10*time.Second, planner.EventDrainDeadlinePassed)
		if n, ok := metric(t, "rainbow_drain_overdue_workflows", map[string]string{"namespace": r.Namespace, "name": r.Name}); !ok || n != 1 {
			t.Errorf("rainbow_drain_overdue_workflows = %v (%v), want 1", n, ok)
		}
		r.holdsWorkers(5*time.Second, v1)
		desc, err := r.Env.Temporal.DescribeWorkflowExecution(context.Background(), pinned.GetID(), pinned.GetRunID())
		if err != nil || desc.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
			t.Fatalf("under DryRun the pinned workflow is %v (%v), want running", desc.GetWorkflowExecutionInfo().GetStatus(), err)
		}
		if stop := stopOf(r, pinned); stop.cause != "" {
			t.Fatalf("DryRun stopped the workflow: %+v", stop)
		}
		if err := r.Env.Temporal.SignalWorkflow(context.Background(), pinned.GetID(), "", demoworker.FinishSignal, nil); err != nil {
			t.Fatal(err)
		}
	})
}

// drainDeadlineStops runs examples/drain/deadline.yaml with a.action: the
// pinned workflows open on v1 past maxDrainDuration are ended, v1 keeps
// its workers until then, and drains and is retired after.
func drainDeadlineStops(t *testing.T, a stopAction) {
	r, v1 := exampleRollout(t, "drain/deadline.yaml", func(twd *v1alpha1.TemporalWorkerDeployment) {
		if twd.Spec.Sunset.DrainAction != v1alpha1.DrainCancel || twd.Spec.Sunset.MaxDrainDuration == nil {
			t.Fatalf("the example's sunset: %+v", twd.Spec.Sunset)
		}
		twd.Spec.Sunset.DrainAction = a.action
		// Retired soon after it drains, to see that in the test.
		twd.Spec.Sunset.ScaledownDelay = &metav1.Duration{Duration: 5 * time.Second}
		twd.Spec.Sunset.DeleteDelay = &metav1.Duration{Duration: 5 * time.Second}
	})
	pinned, _ := r.rollOutV2WithPinned(a.pinned)
	promoted := time.Now()
	max := r.Get().Spec.Sunset.MaxDrainDuration.Duration
	n := int32(a.pinned)
	twd := r.waitFor(max+3*time.Minute, fmt.Sprintf("%d pinned workflows %s", n, a.label), func(twd *v1alpha1.TemporalWorkerDeployment) bool {
		d := drainOf(twd, v1)
		if d == nil || a.done(d) < n {
			if dep := r.deployment(v1); dep == nil || ptr.Deref(dep.Spec.Replicas, 1) == 0 {
				t.Fatalf("v1 lost its workers while pinned workflows were open: %s; %s", deploymentState(dep), drainText(d))
			}
			return false
		}
		return true
	})
	// Temporal's drain start, or the controller's first sight of the drain
	// if later (a second later, when the two fall either side of one), not
	// when this test saw v2 current, is what the deadline counts from.
	d := drainOf(twd, v1)
	var from time.Time
	if d.DrainingSince != nil {
		from = d.DrainingSince.Time
		if d.SeenAt != nil && d.SeenAt.After(from) {
			from = d.SeenAt.Time
		}
	}
	// The record drops its deadline once v1 is no longer draining (its runs
	// ended); on a busy machine the first look may come after that.
	deadline := metav1.Time{Time: from.Add(max)}
	deadlineShown := d.Deadline != nil && d.Deadline.Equal(&deadline) ||
		d.Deadline == nil && versionStatus(twd, v1) != v1alpha1.VersionDraining
	if d.DrainingSince == nil || d.SeenAt == nil || !deadlineShown || d.LastActionAt == nil ||
		d.LastActionAt.Before(&deadline) || a.done(d) != n || a.other(d) != 0 || d.Signalled != 0 || d.Pending != 0 ||
		d.Overdue < 1 || d.Overdue > n || len(d.StoppedRuns) != a.pinned {
		t.Fatalf("acted before the deadline, or status does not say: %s, drainingSince %v, lastActionAt %v, %d runs remembered, version %s",
			drainText(d), d.DrainingSince, d.LastActionAt, len(d.StoppedRuns), versionStatus(twd, v1))
	}
	r.Logf("%s: %d runs done %s after the test saw v2 current (maxDrainDuration %s); %s", a.action, n, time.Since(promoted).Round(time.Second), max, drainText(d))

	var stops []time.Time
	for _, run := range pinned {
		if err := run.Get(context.Background(), nil); !a.ended(err) {
			t.Fatalf("pinned workflow %s ended with %v, want %s", run.GetID(), err, a.status)
		}
		desc, err := r.Env.Temporal.DescribeWorkflowExecution(context.Background(), run.GetID(), run.GetRunID())
		if err != nil || desc.GetWorkflowExecutionInfo().GetStatus() != a.status {
			t.Fatalf("pinned workflow %s is %v (%v), want %s", run.GetID(), desc.GetWorkflowExecutionInfo().GetStatus(), err, a.status)
		}
		stop := stopOf(r, run)
		for _, want := range []string{"version " + v1, "maxDrainDuration (20s)", "TemporalWorkerDeployment " + r.Namespace + "/" + r.Name} {
			if !strings.Contains(stop.cause, want) {
				t.Errorf("workflow %s: the %s reason %q does not say %q", run.GetID(), a.label, stop.cause, want)
			}
		}
		if stop.identity != "rainbow-test" {
			t.Errorf("workflow %s: the %s request came from %q", run.GetID(), a.label, stop.identity)
		}
		stops = append(stops, stop.at)
	}
	slices.SortFunc(stops, func(x, y time.Time) int { return x.Compare(y) })
	// At most 20 runs a pass, passes at least 10s apart (Temporal's clock
	// against the controller's, both on this machine; the margin is for
	// the time a pass takes to reach its first call).
	for i := 20; i < len(stops); i++ {
		if gap := stops[i].Sub(stops[i-20]); gap < 5*time.Second {
			t.Errorf("21 runs %s within %s: %s to %s", a.label, gap, stops[i-20].Format(time.RFC3339Nano), stops[i].Format(time.RFC3339Nano))
		}
	}
	if len(stops) > 20 {
		r.Logf("%s: runs 1-20 ended within %s, run 21 %s after run 1", a.action,
			stops[19].Sub(stops[0]).Round(time.Millisecond), stops[20].Sub(stops[0]).Round(time.Millisecond))
	}
	r.checkStopEvents(a, int(n))
	if got, ok := metric(t, "rainbow_drain_workflows_total", map[string]string{"namespace": r.Namespace, "name": r.Name, "action": a.label}); !ok || got != float64(n) {
		t.Errorf("rainbow_drain_workflows_total{action=%s} = %v (%v), want %d", a.label, got, ok, n)
	}

	// With nothing pinned left, v1 drains and is retired as usual, after
	// the last run ended.
	var scaledDown string
	r.Eventually(drainBound, "version "+v1+" retired", func() (bool, string) {
		dep := r.deployment(v1)
		if dep != nil && ptr.Deref(dep.Spec.Replicas, 1) == 0 && dep.Annotations[workload.AnnotationScaledDownAt] != "" {
			scaledDown = dep.Annotations[workload.AnnotationScaledDownAt]
		}
		twd := r.Get()
		return dep == nil && versionStatus(twd, v1) == "", deploymentState(dep) + "; " + describe(twd)
	})
	if at, err := time.Parse(time.RFC3339, scaledDown); err != nil || at.Before(stops[len(stops)-1].Truncate(time.Second)) {
		t.Errorf("v1 scaled down at %q (%v), before its last pinned run ended at %s", scaledDown, err, stops[len(stops)-1])
	}
}

// checkStopEvents: the Events of a's action name at most 20 runs each,
// and together at least the n runs ended (a pass that failed part way is
// announced again when retried).
func (r *rollout) checkStopEvents(a stopAction, n int) {
	r.Helper()
	r.waitEvent(10*time.Second, a.event)
	list, err := r.Env.Clients.EventsV1().Events(r.Namespace).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		r.Fatal(err)
	}
	verb := "terminating"
	if a.action == v1alpha1.DrainCancel {
		verb = "requesting cancellation of"
	}
	var sum int
	var msgs []string
	for _, e := range list.Items {
		if e.Regarding.Name != r.Name || e.Reason != a.event {
			continue
		}
		var runs, open int
		if _, err := fmt.Sscanf(strings.TrimPrefix(e.Note, verb+" "), "%d of the %d", &runs, &open); err != nil || runs > 20 || runs > open {
			r.Errorf("Event %s: %q (%v) does not name at most 20 of the open runs", e.Reason, e.Note, err)
		}
		sum += runs
		msgs = append(msgs, e.Note)
	}
	if sum < n {
		r.Errorf("the %s Events name %d runs, want at least %d: %q", a.event, sum, n, msgs)
	}
}

// TestContinueAsNewSignal: examples/drain/continue-as-new.yaml signals the
// pinned workflow on v1 once v2 is current; the demo worker continues as
// new, its next run runs on v2 and completes there, and v1 drains without
// waiting for the workflow.
func TestContinueAsNewSignal(t *testing.T) {
	parallel(t)
	r, v1 := exampleRollout(t, "drain/continue-as-new.yaml", func(twd *v1alpha1.TemporalWorkerDeployment) {
		if s := twd.Spec.Sunset.ContinueAsNewSignal; s == nil || s.Name != demoworker.ContinueAsNewSignal {
			t.Fatalf("the example's signal %+v is not the demo worker's %q", s, demoworker.ContinueAsNewSignal)
		}
	})
	runs, v2 := r.rollOutV2WithPinned(1)
	pinned := runs[0]
	r.Eventually(time.Minute, "the workflow's next run on "+v2, func() (bool, string) {
		desc, err := r.Env.Temporal.DescribeWorkflowExecution(context.Background(), pinned.GetID(), "")
		if err != nil {
			return false, err.Error()
		}
		info := desc.GetWorkflowExecutionInfo()
		on := info.GetVersioningInfo().GetDeploymentVersion().GetBuildId()
		return info.GetExecution().GetRunId() != pinned.GetRunID() && on == v2,
			fmt.Sprintf("run %s on %q; %s", info.GetExecution().GetRunId(), on, drainText(drainOf(r.Get(), v1)))
	})
	if d := drainOf(r.Get(), v1); d == nil || d.Signalled != 1 || len(d.SignalledRuns) != 1 {
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
	r.Eventually(drainBound, "version "+v1+" drained", func() (bool, string) {
		twd := r.Get()
		st := versionStatus(twd, v1)
		return st == v1alpha1.VersionDrained || st == "", describe(twd)
	})
}

// stop is how a run was cancelled or terminated: the cause or reason,
// who asked and when, as its history shows; zero if neither.
type stop struct {
	cause, identity string
	at              time.Time
}

func stopOf(r *rollout, run client.WorkflowRun) stop {
	r.Helper()
	it := r.Env.Temporal.GetWorkflowHistory(context.Background(), run.GetID(), run.GetRunID(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			r.Fatalf("history: %v", err)
		}
		if a := e.GetWorkflowExecutionCancelRequestedEventAttributes(); a != nil {
			return stop{cause: a.GetCause(), identity: a.GetIdentity(), at: e.GetEventTime().AsTime()}
		}
		if a := e.GetWorkflowExecutionTerminatedEventAttributes(); a != nil {
			return stop{cause: a.GetReason(), identity: a.GetIdentity(), at: e.GetEventTime().AsTime()}
		}
	}
	return stop{}
}
