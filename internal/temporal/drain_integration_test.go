package temporal

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	sdktemporal "go.temporal.io/sdk/temporal"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/dev/demoworker"
	"github.com/rainbow-deploy/rainbow/internal/planner"
	"github.com/rainbow-deploy/rainbow/test/harness"
)

// TestPinnedWorkflowsOfADrainingVersion runs the calls of the drain
// deadline and the continue-as-new signal against the real server: the
// visibility query finds exactly the open pinned workflows of a version
// (the search attributes' names and formats), a cancel request records
// its reason in the history and a second one is a no-op, terminate
// records its reason and a second one is NotFound, a signal with the same
// request ID reaches the run once, and the demo worker's continue-as-new
// starts its next run on the current version.
func TestPinnedWorkflowsOfADrainingVersion(t *testing.T) {
	ht := needEnv(t)
	name, tq, identity := "drain-"+ht.Suffix, ht.TaskQueue("q"), "rainbow-test-"+ht.Suffix
	api := newAPI(ht, identity)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	startWorker(ht, name, "v1", tq)
	makeCurrent(ht, api, name, "v1", true)
	start := func(typ string) client.WorkflowRun {
		run, err := env.Temporal.ExecuteWorkflow(ctx, client.StartWorkflowOptions{TaskQueue: tq}, typ, demoworker.LongInput{Tick: time.Second})
		if err != nil {
			t.Fatalf("start %s: %v", typ, err)
		}
		return run
	}
	var pinned []client.WorkflowRun
	for range 4 {
		pinned = append(pinned, start(demoworker.LongPinnedWorkflow))
	}
	upgrading := start(demoworker.LongAutoUpgradeWorkflow)

	var l planner.PinnedListing
	ht.Eventually(30*time.Second, "the four pinned workflows listed", func() (bool, string) {
		var err error
		l, err = api.ListPinned(ctx, name, "v1", planner.PinnedPageSize)
		return err == nil && l.Count == 4 && len(l.Runs) == 4, fmt.Sprintf("%+v %v", l, err)
	})
	for _, r := range pinned {
		if !slices.Contains(l.Runs, planner.WorkflowRun{WorkflowID: r.GetID(), RunID: r.GetRunID()}) {
			t.Fatalf("pinned run %s missing from %+v", r.GetRunID(), l.Runs)
		}
	}
	if slices.ContainsFunc(l.Runs, func(r planner.WorkflowRun) bool { return r.WorkflowID == upgrading.GetID() }) {
		t.Fatalf("the auto-upgrade workflow was listed as pinned: %+v", l.Runs)
	}
	if l, err := api.ListPinned(ctx, name, "v1", 3); err != nil || l.Count != 4 || len(l.Runs) != 3 {
		t.Fatalf("a page of 3: %+v %v, want 3 runs and a count of 4", l, err)
	}
	if l, err := api.ListPinned(ctx, name, "v0", 3); err != nil || l.Count != 0 || len(l.Runs) != 0 {
		t.Fatalf("another version: %+v %v", l, err)
	}

	run := func(r client.WorkflowRun) planner.WorkflowRun {
		return planner.WorkflowRun{WorkflowID: r.GetID(), RunID: r.GetRunID()}
	}
	// Cancel: the reason is in the history; asking again changes nothing.
	reason := "rainbow: version v1 has been draining too long"
	for range 2 {
		if err := api.CancelRun(ctx, run(pinned[0]), reason); err != nil {
			t.Fatalf("CancelRun: %v", err)
		}
	}
	if err := pinned[0].Get(ctx, nil); !isCanceled(err) {
		t.Fatalf("the cancelled workflow ended with %v", err)
	}
	requested := events(ht, pinned[0], enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CANCEL_REQUESTED)
	if len(requested) != 1 || requested[0].GetWorkflowExecutionCancelRequestedEventAttributes().GetCause() != reason ||
		requested[0].GetWorkflowExecutionCancelRequestedEventAttributes().GetIdentity() != identity {
		t.Fatalf("cancel requests in the history: %v", requested)
	}
	if err := api.CancelRun(ctx, run(pinned[0]), reason); err != nil {
		t.Fatalf("CancelRun on a closed run: %v", err)
	}

	// Terminate: the reason is in the history; a closed run is NotFound.
	if err := api.TerminateRun(ctx, run(pinned[1]), reason); err != nil {
		t.Fatalf("TerminateRun: %v", err)
	}
	terminated := events(ht, pinned[1], enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED)
	if len(terminated) != 1 || terminated[0].GetWorkflowExecutionTerminatedEventAttributes().GetReason() != reason {
		t.Fatalf("terminations in the history: %v", terminated)
	}
	wantKind(ht, "terminate a closed run", api.TerminateRun(ctx, run(pinned[1]), reason), ErrNotFound)

	// A signal reaches a run once, however often it is sent.
	for range 3 {
		if err := api.SignalRun(ctx, run(pinned[2]), "ignored", []byte(`{"a": 1}`)); err != nil {
			t.Fatalf("SignalRun: %v", err)
		}
	}
	if got := events(ht, pinned[2], enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED); len(got) != 1 ||
		!strings.Contains(string(got[0].GetWorkflowExecutionSignaledEventAttributes().GetInput().GetPayloads()[0].GetData()), `"a"`) {
		t.Fatalf("signals in the history: %v", got)
	}
	wantKind(ht, "signal a closed run", api.SignalRun(ctx, run(pinned[1]), "ignored", nil), ErrNotFound)
	var e *Error
	if err := api.SignalRun(ctx, run(pinned[2]), "ignored", []byte("{")); !errors.As(err, &e) || !errors.Is(err, ErrRefused) {
		t.Fatalf("a signal input that is not JSON: %v", err)
	}

	// The continue-as-new signal on a draining version: the next run
	// starts on the current version and stays there.
	startWorker(ht, name, "v2", tq)
	makeCurrent(ht, api, name, "v2", false)
	// Temporal flags a pinned run's workflow task with the target change
	// only once the routing change reached the task queue's partitions:
	// under load that can come after the version shows as draining.
	st, _ := describeUntil(ht, api, name, 60*time.Second, "v1 draining since its deactivation, the change applied", func(s *planner.TemporalState) bool {
		v, _ := version(s, "v1")
		return v.Status == v1alpha1.VersionDraining && v.DrainingSince != nil && !s.RoutingPropagating
	})
	if v, _ := version(st, "v1"); time.Since(*v.DrainingSince) > time.Minute || time.Since(*v.DrainingSince) < 0 {
		t.Fatalf("v1 draining since %s", v.DrainingSince)
	}
	if v, _ := version(st, "v2"); v.DrainingSince != nil {
		t.Fatalf("current v2 draining since %s", v.DrainingSince)
	}
	if err := api.SignalRun(ctx, run(pinned[3]), demoworker.ContinueAsNewSignal, nil); err != nil {
		t.Fatalf("SignalRun: %v", err)
	}
	next := env.Temporal.GetWorkflow(ctx, pinned[3].GetID(), "")
	ht.Eventually(30*time.Second, "the next run on v2", func() (bool, string) {
		desc, err := env.Temporal.DescribeWorkflowExecution(ctx, pinned[3].GetID(), "")
		if err != nil {
			return false, err.Error()
		}
		info := desc.GetWorkflowExecutionInfo()
		vi := info.GetVersioningInfo()
		return info.GetExecution().GetRunId() != pinned[3].GetRunID() && vi.GetDeploymentVersion().GetBuildId() == "v2" &&
				vi.GetBehavior() == enumspb.VERSIONING_BEHAVIOR_PINNED,
			fmt.Sprintf("run %s on %s, %s", info.GetExecution().GetRunId(), vi.GetDeploymentVersion().GetBuildId(), vi.GetBehavior())
	})
	if err := env.Temporal.SignalWorkflow(ctx, pinned[3].GetID(), "", demoworker.FinishSignal, nil); err != nil {
		t.Fatal(err)
	}
	var res demoworker.LongResult
	if err := next.Get(ctx, &res); err != nil {
		t.Fatal(err)
	}
	ht.Logf("the continued run: %+v", res)
	if res.ContinuedFrom != "v1" || res.StartedOn != "v2" || res.FinishedOn != "v2" {
		t.Fatalf("the continued run: %+v, want from v1, on v2", res)
	}
	if !res.TargetChanged {
		t.Fatalf("the pinned run did not see Temporal's target-version-changed flag in the signal's workflow task: %+v", res)
	}
	if l, err := api.ListPinned(ctx, name, "v2", 10); err != nil || l.Count != 0 {
		// Visibility may lag a moment, but the run has closed by now.
		ht.Logf("v2's pinned workflows after the run closed: %+v %v", l, err)
	}
}

// makeCurrent waits for build's pollers and makes it current (taking the
// manager role first when first is set).
func makeCurrent(t *harness.T, api *API, name, build string, first bool) {
	t.Helper()
	ctx := context.Background()
	t.Eventually(30*time.Second, build+" polls its task queues", func() (bool, string) {
		d, err := api.DescribeVersion(ctx, name, build)
		return err == nil && d.HasPollers && len(d.TaskQueues) == 2, fmt.Sprintf("%+v %v", d, err)
	})
	_, tok := describeUntil(t, api, name, 10*time.Second, "a token", func(s *planner.TemporalState) bool { return s.Exists })
	var err error
	if first {
		if tok, err = api.BecomeManager(ctx, name, tok); err != nil {
			t.Fatalf("BecomeManager: %v", err)
		}
	}
	t.Eventually(20*time.Second, build+" current", func() (bool, string) {
		if _, err = api.SetCurrent(ctx, name, build, tok); err != nil {
			_, tok = describeUntil(t, api, name, 10*time.Second, "a token", func(s *planner.TemporalState) bool { return s.Exists })
			return false, err.Error()
		}
		return true, ""
	})
}

// events are the run's history events of one type.
func events(t *harness.T, run client.WorkflowRun, typ enumspb.EventType) []*historypb.HistoryEvent {
	t.Helper()
	var out []*historypb.HistoryEvent
	it := env.Temporal.GetWorkflowHistory(context.Background(), run.GetID(), run.GetRunID(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			t.Fatalf("history of %s: %v", run.GetID(), err)
		}
		if e.GetEventType() == typ {
			out = append(out, e)
		}
	}
	return out
}

func isCanceled(err error) bool { return sdktemporal.IsCanceledError(err) }
