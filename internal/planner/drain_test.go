package planner

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/internal/planner/drain"
)

// drainingV1: v2 is the current target; v1 has drained for two hours,
// and the controller has seen it drain all along.
func drainingV1(in *Input) {
	rolledOut(in)
	v1 := version("v1", draining)
	v1.DrainingSince = at(-2 * time.Hour)
	setVersion(in, v1)
	in.Namespace, in.Name = "shop", "orders"
	in.Drains = append(in.Drains, DrainRecord{BuildID: "v1", DrainingSince: at(-2 * time.Hour), SeenAt: at(-2 * time.Hour)})
}

func deadline(d time.Duration, a v1alpha1.DrainAction) func(*Input) {
	return func(in *Input) { in.Spec.Drain.MaxDuration, in.Spec.Drain.Action = d, a }
}

func nudge(in *Input) { in.Spec.Drain.Signal = "continue-as-new" }

func runs(n int, prefix string) []WorkflowRun {
	out := make([]WorkflowRun, n)
	for i := range out {
		out[i] = WorkflowRun{WorkflowID: fmt.Sprintf("%s-wf-%d", prefix, i), RunID: fmt.Sprintf("%s-run-%d", prefix, i)}
	}
	return out
}

// listed gives this pass's listing of build.
func listed(build string, rs []WorkflowRun) func(*Input) {
	return func(in *Input) {
		in.Pinned = append(in.Pinned, PinnedListing{BuildID: build, Count: len(rs), Runs: rs})
	}
}

// record replaces build's record, if there is one.
func record(r DrainRecord) func(*Input) {
	return func(in *Input) {
		for i := range in.Drains {
			if in.Drains[i].BuildID == r.BuildID {
				in.Drains[i] = r
				return
			}
		}
		in.Drains = append(in.Drains, r)
	}
}

func drainOf(res Result, build string) *DrainRecord {
	for _, v := range res.Versions {
		if v.BuildID == build {
			return v.Drain
		}
	}
	return nil
}

// eventReasons are the reasons of the drain rules' Events.
func eventReasons(res Result) []string {
	var out []string
	for _, e := range res.Events {
		switch e.Reason {
		case EventCancelPinned, EventTerminatePinned, EventSignalPinned, EventDrainDeadlinePassed:
			out = append(out, e.Reason)
		}
	}
	return out
}

type drainWant struct {
	// work is "Op build n" per DrainWork.
	work   []string
	events []string
	// overdue and pinned are the record's counts of build v1 (-1: no record).
	overdue, pinned int
	list            []string // DrainVersionsToList before the pass
	requeue         time.Duration
}

func checkDrain(t *testing.T, in Input, want drainWant) Result {
	t.Helper()
	// What the observer would have listed: exactly DrainVersionsToList.
	if got := DrainVersionsToList(without(in)); !reflect.DeepEqual(got, want.list) {
		t.Errorf("DrainVersionsToList = %v, want %v", got, want.list)
	}
	res := Plan(in)
	var work []string
	for _, w := range res.DrainWork {
		work = append(work, fmt.Sprintf("%s %s %d", w.Op, w.BuildID, len(w.Runs)))
	}
	if !reflect.DeepEqual(work, want.work) {
		t.Errorf("DrainWork = %v, want %v", work, want.work)
	}
	if got := eventReasons(res); !reflect.DeepEqual(got, want.events) {
		t.Errorf("Events = %v, want %v (%+v)", got, want.events, res.Events)
	}
	r := drainOf(res, "v1")
	switch {
	case want.overdue < 0 && r != nil && (r.Deadline != nil || r.ListedAt != nil || r.Overdue != 0):
		t.Errorf("v1 has a drain record with a deadline or a listing: %+v", *r)
	case want.overdue >= 0 && r == nil:
		t.Errorf("v1 has no drain record")
	case want.overdue >= 0 && (r.Overdue != want.overdue || r.PinnedWorkflows != want.pinned):
		t.Errorf("v1 record: overdue %d, pinned %d; want %d, %d", r.Overdue, r.PinnedWorkflows, want.overdue, want.pinned)
	}
	if want.requeue != 0 && res.RequeueAfter != want.requeue {
		t.Errorf("RequeueAfter = %s, want %s", res.RequeueAfter, want.requeue)
	}
	return res
}

// without drops this pass's listings: what the observer had before it listed.
func without(in Input) Input {
	in.Pinned = nil
	return in
}

func TestDrainDeadline(t *testing.T) {
	cancel := deadline(time.Hour, v1alpha1.DrainCancel)
	for name, c := range map[string]struct {
		in   Input
		want drainWant
	}{
		"past the deadline: cancellation requested, status counts them": {
			in:   with(base(), drainingV1, cancel, listed("v1", runs(3, "a"))),
			want: drainWant{work: []string{"Cancel v1 3"}, events: []string{EventCancelPinned}, overdue: 3, pinned: 3, list: []string{"v1"}, requeue: time.Minute},
		},
		"Terminate terminates": {
			in:   with(base(), drainingV1, deadline(time.Hour, v1alpha1.DrainTerminate), listed("v1", runs(2, "a"))),
			want: drainWant{work: []string{"Terminate v1 2"}, events: []string{EventTerminatePinned}, overdue: 2, pinned: 2, list: []string{"v1"}},
		},
		"DryRun only counts, with an Event": {
			in:   with(base(), drainingV1, deadline(time.Hour, v1alpha1.DrainDryRun), listed("v1", runs(4, "a"))),
			want: drainWant{events: []string{EventDrainDeadlinePassed}, overdue: 4, pinned: 4, list: []string{"v1"}},
		},
		"DryRun: the same count again is no new Event": {
			in: with(base(), drainingV1, deadline(time.Hour, v1alpha1.DrainDryRun), listed("v1", runs(4, "a")),
				record(DrainRecord{BuildID: "v1", DrainingSince: at(-2 * time.Hour), ListedAt: at(-11 * time.Minute), Overdue: 4, PinnedWorkflows: 4})),
			want: drainWant{overdue: 4, pinned: 4, list: []string{"v1"}},
		},
		"before the deadline: nothing listed, a requeue at the deadline": {
			in:   with(base(), drainingV1, deadline(2*time.Hour+30*time.Second, v1alpha1.DrainCancel)),
			want: drainWant{overdue: 0, requeue: 30 * time.Second},
		},
		"no open pinned workflow: nothing to do": {
			in:   with(base(), drainingV1, cancel, listed("v1", nil)),
			want: drainWant{overdue: 0, pinned: 0, list: []string{"v1"}},
		},
		"runs cancelled before are not asked again": {
			in: with(base(), drainingV1, cancel, listed("v1", runs(3, "a")),
				record(DrainRecord{BuildID: "v1", DrainingSince: at(-2 * time.Hour), ListedAt: at(-time.Minute), LastActionAt: at(-time.Minute),
					CancelRequested: 2, Pending: 1, StoppedRuns: []string{RunKey("a-run-0"), RunKey("a-run-2")}})),
			want: drainWant{work: []string{"Cancel v1 1"}, events: []string{EventCancelPinned}, overdue: 3, pinned: 3, list: []string{"v1"}},
		},
		"rate limit: at most maxDrainActionsPerPass a pass": {
			in:   with(base(), drainingV1, cancel, listed("v1", runs(50, "a"))),
			want: drainWant{work: []string{"Cancel v1 20"}, events: []string{EventCancelPinned}, overdue: 50, pinned: 50, list: []string{"v1"}, requeue: drain.ActionInterval},
		},
		"rate limit: no action within drainActionInterval of the last": {
			in: with(base(), drainingV1, cancel, listed("v1", runs(50, "a")),
				record(DrainRecord{BuildID: "v1", DrainingSince: at(-2 * time.Hour), ListedAt: at(-4 * time.Second), LastActionAt: at(-4 * time.Second)})),
			want: drainWant{overdue: 50, pinned: 50, requeue: 6 * time.Second},
		},
		"the budget is shared by the versions": {
			in: with(base(), drainingV1, cancel, func(in *Input) {
				v0 := version("v0", draining)
				v0.DrainingSince = at(-3 * time.Hour)
				setVersion(in, v0)
				setDep(in, running("v0"))
			}, record(DrainRecord{BuildID: "v0", DrainingSince: at(-3 * time.Hour), SeenAt: at(-3 * time.Hour)}), listed("v0", runs(15, "z")), listed("v1", runs(15, "a"))),
			want: drainWant{work: []string{"Cancel v0 15", "Cancel v1 5"}, events: []string{EventCancelPinned, EventCancelPinned}, overdue: 15, pinned: 15, list: []string{"v0", "v1"}},
		},
		"never when Temporal's state is unknown; status keeps the record": {
			in: with(base(), drainingV1, cancel, listed("v1", runs(3, "a")), record(DrainRecord{BuildID: "v1", Overdue: 7, PinnedWorkflows: 7}),
				func(in *Input) { in.Temporal = nil }),
			want: drainWant{overdue: 7, pinned: 7},
		},
		"never while another identity manages the worker deployment": {
			in:   with(base(), drainingV1, cancel, listed("v1", runs(3, "a")), func(in *Input) { in.Temporal.ManagerIdentity = "alice" }),
			want: drainWant{overdue: -1},
		},
		"never on the current version, even when its own status lags": {
			in: with(base(), drainingV1, cancel, listed("v1", runs(3, "a")), func(in *Input) {
				in.Temporal.CurrentBuildID, in.Spec.TargetBuildID = "v1", "v3"
			}),
			want: drainWant{overdue: -1},
		},
		"never on a ramping version": {
			in: with(base(), drainingV1, cancel, listed("v1", runs(3, "a")), func(in *Input) {
				in.Temporal.RampingBuildID, in.Temporal.RampPercentage = "v1", 10
			}),
			want: drainWant{overdue: -1},
		},
		"never on the target, even draining": {
			in: with(base(), drainingV1, cancel, listed("v1", runs(3, "a")), func(in *Input) {
				in.Spec.TargetBuildID = "v1"
			}),
			want: drainWant{overdue: -1},
		},
		"never when Temporal does not say since when it drains": {
			in: with(base(), drainingV1, cancel, listed("v1", runs(3, "a")), func(in *Input) {
				v1 := version("v1", draining)
				setVersion(in, v1)
			}),
			want: drainWant{overdue: -1},
		},
		"never while the TWD is being deleted": {
			in: with(base(), drainingV1, cancel, listed("v1", runs(3, "a")), func(in *Input) {
				in.Deletion = &Deletion{Object: "shop/orders", RequestedAt: t0, Policy: v1alpha1.DeletionWaitForDrain}
			}),
			want: drainWant{overdue: -1},
		},
		"clock skew: a drain Temporal dates two hours back, first seen now, is not overdue for another hour": {
			in:   with(base(), drainingV1, cancel, func(in *Input) { in.Drains = nil }, listed("v1", runs(3, "a"))),
			want: drainWant{overdue: 0, pinned: 3},
		},
		"clock skew: the deadline counts from the controller's first sight when that is later": {
			in: with(base(), drainingV1, cancel, listed("v1", runs(3, "a")),
				record(DrainRecord{BuildID: "v1", DrainingSince: at(-2 * time.Hour), SeenAt: at(-30 * time.Minute)})),
			want: drainWant{overdue: 0, pinned: 3},
		},
		"a version current again loses its record": {
			in: with(base(), drainingV1, cancel, record(DrainRecord{BuildID: "v1", Overdue: 3}), func(in *Input) {
				in.Temporal.CurrentBuildID, in.Spec.TargetBuildID = "v1", "v1"
				setVersion(in, version("v1", current))
				setVersion(in, version("v2", draining))
			}),
			want: drainWant{overdue: -1},
		},
	} {
		t.Run(name, func(t *testing.T) { checkDrain(t, c.in, c.want) })
	}
}

func TestDrainCancelReason(t *testing.T) {
	res := Plan(with(base(), drainingV1, deadline(time.Hour, v1alpha1.DrainCancel), listed("v1", runs(1, "a"))))
	if len(res.DrainWork) != 1 {
		t.Fatalf("DrainWork = %+v", res.DrainWork)
	}
	for _, want := range []string{"v1", "2h0m0s", "maxDrainDuration (1h0m0s)", "TemporalWorkerDeployment shop/orders", "default/worker"} {
		if !strings.Contains(res.DrainWork[0].Reason, want) {
			t.Errorf("reason %q does not name %q", res.DrainWork[0].Reason, want)
		}
	}
	r := drainOf(res, "v1")
	if r == nil || r.Deadline == nil || !r.Deadline.Equal(t0.Add(-time.Hour)) || !r.DrainingSince.Equal(t0.Add(-2*time.Hour)) || !r.ListedAt.Equal(t0) {
		t.Fatalf("record = %+v", r)
	}
}

func TestContinueAsNewSignal(t *testing.T) {
	for name, c := range map[string]struct {
		in   Input
		want drainWant
	}{
		"a draining version's runs are signalled": {
			in:   with(base(), drainingV1, nudge, listed("v1", runs(3, "a"))),
			want: drainWant{work: []string{"Signal v1 3"}, events: []string{EventSignalPinned}, overdue: 0, pinned: 3, list: []string{"v1"}},
		},
		"once per run": {
			in: with(base(), drainingV1, nudge, listed("v1", runs(3, "a")),
				record(DrainRecord{BuildID: "v1", DrainingSince: at(-2 * time.Hour), ListedAt: at(-time.Hour), Signalled: 1, SignalledRuns: []string{RunKey("a-run-1")}})),
			want: drainWant{work: []string{"Signal v1 2"}, events: []string{EventSignalPinned}, overdue: 0, pinned: 3, list: []string{"v1"}},
		},
		"listed again only after a quarter of the drain so far (at most 10 minutes)": {
			in: with(base(), drainingV1, nudge,
				record(DrainRecord{BuildID: "v1", DrainingSince: at(-2 * time.Hour), ListedAt: at(-9 * time.Minute)})),
			want: drainWant{overdue: 0, requeue: time.Minute},
		},
		"under a deadline that cancels, past it only cancellation": {
			in:   with(base(), drainingV1, nudge, deadline(time.Hour, v1alpha1.DrainCancel), listed("v1", runs(3, "a"))),
			want: drainWant{work: []string{"Cancel v1 3"}, events: []string{EventCancelPinned}, overdue: 3, pinned: 3, list: []string{"v1"}},
		},
		"under DryRun the signal goes on past the deadline": {
			in:   with(base(), drainingV1, nudge, deadline(time.Hour, v1alpha1.DrainDryRun), listed("v1", runs(3, "a"))),
			want: drainWant{work: []string{"Signal v1 3"}, events: []string{EventDrainDeadlinePassed, EventSignalPinned}, overdue: 3, pinned: 3, list: []string{"v1"}},
		},
		"a drained version is not signalled": {
			in: with(base(), drainingV1, nudge, listed("v1", runs(3, "a")), func(in *Input) {
				setVersion(in, version("v1", drained))
			}),
			want: drainWant{overdue: -1},
		},
	} {
		t.Run(name, func(t *testing.T) { checkDrain(t, c.in, c.want) })
	}
}

// TestDrainListing: when a draining version's pinned workflows are listed.
func TestDrainListing(t *testing.T) {
	since := at(-2 * time.Hour)
	cancel := deadline(time.Hour, v1alpha1.DrainCancel)
	for name, c := range map[string]struct {
		in   Input
		want []string
	}{
		"first look at this drain":          {with(base(), drainingV1, nudge), []string{"v1"}},
		"looked before this drain began":    {with(base(), drainingV1, nudge, record(DrainRecord{BuildID: "v1", ListedAt: at(-3 * time.Hour)})), []string{"v1"}},
		"looked 5 minutes ago, 2h into it":  {with(base(), drainingV1, nudge, record(DrainRecord{BuildID: "v1", DrainingSince: since, ListedAt: at(-5 * time.Minute)})), nil},
		"looked 10 minutes ago, 2h into it": {with(base(), drainingV1, nudge, record(DrainRecord{BuildID: "v1", DrainingSince: since, ListedAt: at(-10 * time.Minute)})), []string{"v1"}},
		"looked before the deadline passed": {with(base(), drainingV1, cancel, record(DrainRecord{BuildID: "v1", DrainingSince: since, ListedAt: at(-61 * time.Minute)})), []string{"v1"}},
		"runs left by the last pass: the rest after drainActionInterval": {
			with(base(), drainingV1, cancel, record(DrainRecord{BuildID: "v1", DrainingSince: since, ListedAt: at(-10 * time.Second), LastActionAt: at(-10 * time.Second), Pending: 5})), []string{"v1"}},
		"runs left, but acted 5 seconds ago": {
			with(base(), drainingV1, cancel, record(DrainRecord{BuildID: "v1", DrainingSince: since, ListedAt: at(-5 * time.Second), LastActionAt: at(-5 * time.Second), Pending: 5})), nil},
		"nothing left after the last pass": {
			with(base(), drainingV1, cancel, record(DrainRecord{BuildID: "v1", DrainingSince: since, ListedAt: at(-10 * time.Second), LastActionAt: at(-10 * time.Second)})), nil},
		"nothing configured":         {with(base(), drainingV1), nil},
		"only a deadline, not yet":   {with(base(), drainingV1, deadline(3*time.Hour, v1alpha1.DrainCancel)), nil},
		"Temporal unknown":           {with(base(), drainingV1, nudge, func(in *Input) { in.Temporal = nil }), nil},
		"the current version is not": {with(base(), rolledOut, nudge), nil},
	} {
		if got := DrainVersionsToList(c.in); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: DrainVersionsToList = %v, want %v", name, got, c.want)
		}
	}
}

func TestDrainNewDrainStartsCountingAgain(t *testing.T) {
	old := DrainRecord{BuildID: "v1", DrainingSince: at(-30 * time.Hour), CancelRequested: 4, StoppedRuns: []string{RunKey("a-run-0")}, Overdue: 4}
	in := with(base(), drainingV1, deadline(time.Hour, v1alpha1.DrainCancel), record(old), listed("v1", runs(2, "a")))
	res := Plan(in)
	r := drainOf(res, "v1")
	if r == nil || r.CancelRequested != 0 || !reflect.DeepEqual(r.StoppedRuns, old.StoppedRuns) || !r.DrainingSince.Equal(t0.Add(-2*time.Hour)) || !r.SeenAt.Equal(t0) {
		t.Fatalf("record = %+v", r)
	}
	// The new drain is first seen now: its deadline is an hour away.
	if len(res.DrainWork) != 0 || !r.Deadline.Equal(t0.Add(time.Hour)) {
		t.Fatalf("DrainWork = %+v, deadline %v: a drain first seen now is not overdue before maxDrainDuration has passed", res.DrainWork, r.Deadline)
	}
	res = Plan(with(in, func(in *Input) { in.Now, in.Drains = t0.Add(time.Hour), []DrainRecord{*r} }))
	if len(res.DrainWork) != 1 || !reflect.DeepEqual(res.DrainWork[0].Runs, runs(2, "a")[1:]) {
		t.Fatalf("DrainWork = %+v: a run cancelled in an earlier drain is not asked again", res.DrainWork)
	}
}

// TestDrainPending: runs beyond the pass's budget are pending, and the
// next listing comes as soon as the rate limit allows.
func TestDrainPending(t *testing.T) {
	in := with(base(), drainingV1, deadline(time.Hour, v1alpha1.DrainTerminate), func(in *Input) {
		in.Pinned = []PinnedListing{{BuildID: "v1", Count: 150, Runs: runs(100, "a")}}
	})
	res := Plan(in)
	r := drainOf(res, "v1")
	if r == nil || r.Pending != 130 || r.Overdue != 150 || len(res.DrainWork) != 1 || len(res.DrainWork[0].Runs) != drain.MaxActionsPerPass {
		t.Fatalf("record %+v, work %+v", r, res.DrainWork)
	}
	if res.RequeueAfter != drain.ActionInterval {
		t.Fatalf("RequeueAfter = %s, want %s", res.RequeueAfter, drain.ActionInterval)
	}
	// The executor records what it did; drain.ActionInterval later the
	// rest is listed.
	done := r.Done(DrainOpTerminate, res.DrainWork[0].Runs, t0)
	next := with(in, func(in *Input) {
		in.Now, in.Pinned, in.Drains = t0.Add(drain.ActionInterval), nil, []DrainRecord{done}
	})
	if got := DrainVersionsToList(next); !reflect.DeepEqual(got, []string{"v1"}) {
		t.Fatalf("DrainVersionsToList after the first batch = %v", got)
	}
	next.Now = t0.Add(drain.ActionInterval - time.Second)
	if got := DrainVersionsToList(next); got != nil {
		t.Fatalf("DrainVersionsToList within the rate limit = %v", got)
	}
}

// TestDrainRecordRoundTrip: status keeps times in whole seconds; a record
// read back is still the same drain as Temporal's sub-second time.
func TestDrainRecordRoundTrip(t *testing.T) {
	in := with(base(), drainingV1, nudge, func(in *Input) {
		v1 := version("v1", draining)
		v1.DrainingSince = at(-2*time.Hour + 300*time.Millisecond)
		setVersion(in, v1)
	}, record(DrainRecord{BuildID: "v1", DrainingSince: at(-2 * time.Hour), ListedAt: at(-time.Minute), Signalled: 3}))
	if got := DrainVersionsToList(in); got != nil {
		t.Fatalf("listed again a minute after the last look: %v", got)
	}
	if r := drainOf(Plan(in), "v1"); r == nil || r.Signalled != 3 {
		t.Fatalf("the same drain started counting again: %+v", r)
	}
}
