package planner

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
)

var window = t0.Add(-10 * time.Minute) // version("v2", Ramping)'s RampingSince

func TestJudge(t *testing.T) {
	fixed := Check{Name: "failures", Kind: v1alpha1.CheckWorkflowFailureRate, MaxPercent: ptr[int32](10), MinSamples: 20}
	vsCurrent := Check{Name: "failures", Kind: v1alpha1.CheckWorkflowFailureRate, CompareCurrent: true, MarginPercent: 5, MinSamples: 20}
	backlog := Check{Name: "backlog", Kind: v1alpha1.CheckBacklogAge, MaxAge: time.Minute}
	stuck := Check{Name: "stuck", Kind: v1alpha1.CheckWorkflowTaskFailures, MaxPercent: ptr[int32](0), MinSamples: 10}
	stuck5 := Check{Name: "stuck5", Kind: v1alpha1.CheckWorkflowTaskFailures, MaxPercent: ptr[int32](5), MinSamples: 10}
	for name, tc := range map[string]struct {
		check Check
		read  Reading
		since time.Time
		want  v1alpha1.AnalysisResult
		says  string
	}{
		"fixed bound, below":                {fixed, Reading{Closed: 40, Failed: 3}, window, v1alpha1.AnalysisPassed, "3 of 40"},
		"fixed bound, equal passes":         {fixed, Reading{Closed: 40, Failed: 4}, window, v1alpha1.AnalysisPassed, "within maxPercent 10%"},
		"fixed bound, above":                {fixed, Reading{Closed: 40, Failed: 5}, window, v1alpha1.AnalysisFailed, "above maxPercent 10%"},
		"fixed bound, too few samples":      {fixed, Reading{Closed: 19, Failed: 19}, window, v1alpha1.AnalysisInconclusive, "minSamples (20)"},
		"read failed":                       {fixed, Reading{Err: "visibility unavailable"}, window, v1alpha1.AnalysisInconclusive, "visibility unavailable"},
		"window unknown":                    {fixed, Reading{Closed: 40}, time.Time{}, v1alpha1.AnalysisInconclusive, "no window"},
		"vs current, within margin":         {vsCurrent, Reading{Closed: 100, Failed: 15, CurrentClosed: 100, CurrentFailed: 10}, window, v1alpha1.AnalysisPassed, "plus a margin of 5 points"},
		"vs current, above margin":          {vsCurrent, Reading{Closed: 100, Failed: 16, CurrentClosed: 100, CurrentFailed: 10}, window, v1alpha1.AnalysisFailed, "current version's 10.0%"},
		"vs current, current has too few":   {vsCurrent, Reading{Closed: 100, Failed: 90, CurrentClosed: 5}, window, v1alpha1.AnalysisInconclusive, "only 5 closed on the current version"},
		"vs current, same rate, no margin":  {Check{Name: "f", Kind: v1alpha1.CheckWorkflowFailureRate, CompareCurrent: true, MinSamples: 1}, Reading{Closed: 3, Failed: 1, CurrentClosed: 30, CurrentFailed: 10}, window, v1alpha1.AnalysisPassed, "within"},
		"backlog young":                     {backlog, Reading{BacklogAge: 59 * time.Second}, window, v1alpha1.AnalysisPassed, "bound 1m0s"},
		"backlog old":                       {backlog, Reading{BacklogAge: 2 * time.Minute}, window, v1alpha1.AnalysisFailed, "2m0s old"},
		"backlog needs no samples":          {backlog, Reading{}, window, v1alpha1.AnalysisPassed, "0s old"},
		"stuck, none":                       {stuck, Reading{OnTarget: 30}, window, v1alpha1.AnalysisPassed, "0 of 30 workflows on the target are stuck"},
		"stuck, one is above 0%":            {stuck, Reading{OnTarget: 30, Stuck: 1}, window, v1alpha1.AnalysisFailed, "above maxPercent 0%"},
		"stuck, too few on the target":      {stuck, Reading{OnTarget: 9, Stuck: 9}, window, v1alpha1.AnalysisInconclusive, "minSamples (10)"},
		"stuck, read failed":                {stuck, Reading{Err: "boom"}, window, v1alpha1.AnalysisInconclusive, "boom"},
		"stuck, equal passes":               {stuck5, Reading{OnTarget: 40, Stuck: 2}, window, v1alpha1.AnalysisPassed, "failing or timing out (5.0%)"},
		"stuck, above":                      {stuck5, Reading{OnTarget: 40, Stuck: 3}, window, v1alpha1.AnalysisFailed, "3 of 40"},
		"the window is named in the reason": {fixed, Reading{Closed: 40, Failed: 30}, window, v1alpha1.AnalysisFailed, "since 2026-03-01T11:50:00Z"},
	} {
		got, msg := Judge(tc.check, tc.read, tc.since)
		if got != tc.want || !strings.Contains(msg, tc.says) {
			t.Errorf("%s: Judge = %s (%s), want %s saying %q", name, got, msg, tc.want, tc.says)
		}
	}
}

// analysed: v2 ramps 10% under Progressive steps with one failure-rate
// check (maxPercent 10, minSamples 20, failureLimit 0), its 5m pause over.
func analysed(in *Input) {
	progressiveSteps(in)
	rampingTarget(in, 10, -time.Hour)
	in.Spec.Analysis = &Analysis{Interval: 30 * time.Second, Checks: []Check{
		{Name: "failures", Kind: v1alpha1.CheckWorkflowFailureRate, MaxPercent: ptr[int32](10), MinSamples: 20},
	}}
}

func read(closed, failed int64) func(*Input) {
	return func(in *Input) { in.Analysis.Readings = []Reading{{Check: "failures", Closed: closed, Failed: failed}} }
}

func lastFailed(n int32) func(*Input) {
	return func(in *Input) {
		in.Analysis.Last = &AnalysisRecord{BuildID: "v2", EvaluatedAt: t0.Add(-time.Minute), WindowStart: window,
			Checks: []CheckRecord{{Name: "failures", Result: v1alpha1.AnalysisFailed, ConsecutiveFailures: n, Message: "m"}}}
	}
}

func TestAnalysisDecides(t *testing.T) {
	removeRamp := &Routing{Op: RemoveRamp}
	next := &Routing{Op: SetRamp, BuildID: "v2", RampPercentage: 50}
	for name, tc := range map[string]struct {
		in      Input
		routing *Routing
		reason  string
		abort   bool
		says    string
	}{
		"passing checks end the step":              {with(base(), analysed, read(40, 1)), next, v1alpha1.ReasonRamping, false, "setting the ramp of version v2 to 50%"},
		"a failure beyond the limit aborts":        {with(base(), analysed, read(40, 30)), removeRamp, v1alpha1.ReasonRolloutAborted, true, "30 of 40"},
		"too few samples hold the step":            {with(base(), analysed, read(5, 0)), nil, v1alpha1.ReasonRamping, false, "holding the 10% ramp of version v2: check failures is Inconclusive"},
		"a failed read holds the step":             {with(base(), analysed, func(in *Input) { in.Analysis.Readings = []Reading{{Check: "failures", Err: "boom"}} }), nil, v1alpha1.ReasonRamping, false, "boom"},
		"no evaluation yet holds the step":         {with(base(), analysed), nil, v1alpha1.ReasonRamping, false, "not been evaluated yet"},
		"a failure within the limit holds":         {with(base(), analysed, limit(2), read(40, 30)), nil, v1alpha1.ReasonRamping, false, "is Failed"},
		"failures in a row beyond the limit abort": {with(base(), analysed, limit(2), lastFailed(2), read(40, 30)), removeRamp, v1alpha1.ReasonRolloutAborted, true, "failed 3 time(s) in a row"},
		"an inconclusive read keeps the count":     {with(base(), analysed, limit(2), lastFailed(2), read(5, 5)), nil, v1alpha1.ReasonRamping, false, "Inconclusive"},
		"a window differing in nanoseconds is the same": {with(base(), analysed, limit(2), lastFailed(2), func(in *Input) {
			in.Analysis.Last.WindowStart = window.Add(-time.Millisecond * 0).Truncate(time.Second)
			setVersion(in, withRampingSince(version("v2", v1alpha1.VersionRamping), ptr(window.Add(300*time.Millisecond))))
		}, read(40, 30)), removeRamp, v1alpha1.ReasonRolloutAborted, true, "3 time(s)"},
		"a new window counts afresh":              {with(base(), analysed, limit(2), lastFailed(2), newWindow, read(40, 30)), nil, v1alpha1.ReasonRamping, false, "is Failed"},
		"the last verdict stands between reads":   {with(base(), analysed, limit(2), lastFailed(1)), nil, v1alpha1.ReasonRamping, false, "is Failed"},
		"dry run aborts and holds nothing":        {with(base(), analysed, dryRun, read(40, 30)), next, v1alpha1.ReasonRamping, false, "setting the ramp"},
		"within its pause the step waits anyway":  {with(base(), analysed, func(in *Input) { in.Temporal.RampChangedAt = t0 }, read(5, 0)), nil, v1alpha1.ReasonRamping, false, "next step (50%)"},
		"a paused rollout still aborts":           {with(base(), analysed, func(in *Input) { in.Spec.Paused = true }, read(40, 30)), removeRamp, v1alpha1.ReasonRolloutAborted, true, "30 of 40"},
		"someone else's ramp stays on abort":      {with(base(), analysed, func(in *Input) { in.Temporal.LastModifierIdentity = "alice" }, read(40, 30)), nil, v1alpha1.ReasonRolloutAborted, true, `set by "alice" and stays`},
		"the last step is not promoted on a hold": {with(base(), analysed, func(in *Input) { in.Temporal.RampPercentage = 50 }, read(5, 0)), nil, v1alpha1.ReasonRamping, false, "holding the 50% ramp"},
	} {
		got := Plan(tc.in)
		if (got.Routing == nil) != (tc.routing == nil) || (got.Routing != nil && *got.Routing != *tc.routing) {
			t.Errorf("%s: Routing = %+v, want %+v", name, got.Routing, tc.routing)
		}
		if got.Ready.Reason != tc.reason || !strings.Contains(got.Ready.Message, tc.says) {
			t.Errorf("%s: Ready = %s (%s), want %s saying %q", name, got.Ready.Reason, got.Ready.Message, tc.reason, tc.says)
		}
		if (got.AbortRollout != nil) != tc.abort {
			t.Errorf("%s: AbortRollout = %+v, want set: %v", name, got.AbortRollout, tc.abort)
		}
		if tc.abort {
			if got.AbortRollout.BuildID != "v2" || got.Analysis == nil || got.Analysis.Aborted == "" || !hasEvent(got, v1alpha1.ReasonAnalysisFailed) {
				t.Errorf("%s: an abort records v2, the evidence in status and an AnalysisFailed Event; got %+v, %+v, %+v", name, got.AbortRollout, got.Analysis, got.Events)
			}
			if len(got.Scale) > 0 || len(got.DeleteDeployments) > 0 {
				t.Errorf("%s: an abort scales or deletes nothing, got %+v %+v", name, got.Scale, got.DeleteDeployments)
			}
		}
	}
}

func limit(n int32) func(*Input) {
	return func(in *Input) { in.Spec.Analysis.Checks[0].FailureLimit = n }
}

func dryRun(in *Input) { in.Spec.Analysis.DryRun = true }

// newWindow: v2 started ramping again (a retry) after the last record.
func newWindow(in *Input) {
	setVersion(in, withRampingSince(version("v2", v1alpha1.VersionRamping), at(-time.Minute)))
}

func withRampingSince(tv TemporalVersion, s *time.Time) TemporalVersion {
	tv.RampingSince = s
	return tv
}

func hasEvent(r Result, reason string) bool {
	for _, e := range r.Events {
		if e.Reason == reason {
			return true
		}
	}
	return false
}

func TestAnalysisDryRunReports(t *testing.T) {
	got := Plan(with(base(), analysed, dryRun, read(40, 30)))
	if !hasEvent(got, v1alpha1.ReasonAnalysisFailed) || got.Analysis == nil || got.Analysis.Checks[0].Result != v1alpha1.AnalysisFailed || got.Analysis.Aborted != "" {
		t.Fatalf("dry run: want an AnalysisFailed Event and the failed verdict in status, no abort; got %+v %+v", got.Events, got.Analysis)
	}
	// The next evaluation, still beyond the limit, says nothing new.
	again := Plan(with(base(), analysed, dryRun, lastFailed(1), read(40, 30)))
	if hasEvent(again, v1alpha1.ReasonAnalysisFailed) || again.Analysis.Checks[0].ConsecutiveFailures != 2 {
		t.Fatalf("dry run, still beyond the limit: want no second AnalysisFailed Event and 2 failures in a row; got %+v %+v", again.Events, again.Analysis)
	}
	// Failures that went back within the limit and beyond again are news.
	back := Plan(with(base(), analysed, dryRun, lastFailed(0), read(40, 30)))
	if !hasEvent(back, v1alpha1.ReasonAnalysisFailed) {
		t.Fatalf("dry run, beyond the limit again: want an AnalysisFailed Event; got %+v", back.Events)
	}
}

func TestAbortedByAnalysisKeepsEvidence(t *testing.T) {
	in := with(base(), analysed, func(in *Input) {
		in.Spec.AbortedBuildID = "v2"
		in.Analysis.Last = &AnalysisRecord{BuildID: "v2", WindowStart: window, Aborted: "check failures failed: 30 of 40"}
	})
	got := Plan(in)
	if got.Ready.Reason != v1alpha1.ReasonRolloutAborted || !strings.Contains(got.Ready.Message, "30 of 40") || !strings.Contains(got.Ready.Message, "kubectl rainbow retry") ||
		got.Routing == nil || got.Routing.Op != RemoveRamp {
		t.Fatalf("want RolloutAborted with the evidence and the ramp removed, got %s (%s) %+v", got.Ready.Reason, got.Ready.Message, got.Routing)
	}
	if got.Analysis == nil || got.Analysis.Aborted == "" || got.AbortRollout != nil {
		t.Fatalf("status keeps the evidence and the annotation is not set again: %+v %+v", got.Analysis, got.AbortRollout)
	}
	if _, due := AnalysisToRead(in); due {
		t.Fatalf("an aborted target is not read for")
	}
}

func TestAnalysisToRead(t *testing.T) {
	for name, tc := range map[string]struct {
		in  Input
		due bool
	}{
		"ramping, never evaluated":             {with(base(), analysed), true},
		"ramping, evaluated 1m ago":            {with(base(), analysed, lastFailed(1)), true},
		"ramping, evaluated 10s ago":           {with(base(), analysed, lastFailed(1), func(in *Input) { in.Analysis.Last.EvaluatedAt = t0.Add(-10 * time.Second) }), false},
		"evaluated 10s ago, in another window": {with(base(), analysed, lastFailed(1), newWindow, func(in *Input) { in.Analysis.Last.EvaluatedAt = t0.Add(-10 * time.Second) }), true},
		"idle: the target is current":          {with(base(), analysed, rolledOut, func(in *Input) { in.Temporal.RampingBuildID = "" }), false},
		"not ramping yet":                      {with(base(), progressiveSteps, func(in *Input) { in.Spec.Analysis = &Analysis{Checks: []Check{{Name: "x"}}} }), false},
		"no analysis":                          {with(base(), progressiveSteps, func(in *Input) { rampingTarget(in, 10, -time.Hour) }), false},
		"Temporal unknown":                     {with(base(), analysed, func(in *Input) { in.Temporal = nil }), false},
	} {
		r, due := AnalysisToRead(tc.in)
		if due != tc.due {
			t.Errorf("%s: due = %v, want %v", name, due, tc.due)
		}
		if due && (r.BuildID != "v2" || r.CurrentBuildID != "v1" || !r.Since.Equal(window) && name != "evaluated 10s ago, in another window") {
			t.Errorf("%s: read %+v, want v2 against v1 since %s", name, r, window)
		}
	}
}

// TestAnalysisEndsStep: an evaluation waits its turn in the namespace's
// budget only when its verdict may end the step; during the pause, before
// the step's gate succeeded, while paused or in a dry run it can only
// abort, and takes spare budget.
func TestAnalysisEndsStep(t *testing.T) {
	stepGated := func(in *Input) { in.Spec.Steps[0].Gate = &StepGate{WorkflowType: "Check"} }
	inPause := func(in *Input) { in.Temporal.RampChangedAt = t0.Add(-time.Minute) }
	for name, tc := range map[string]struct {
		in   Input
		ends bool
	}{
		"pause over":                 {with(base(), analysed), true},
		"within the pause":           {with(base(), analysed, inPause), false},
		"pause over, rollout paused": {with(base(), analysed, func(in *Input) { in.Spec.Paused = true }), false},
		"pause over, dry run":        {with(base(), analysed, dryRun), false},
		"ramp at no step (steps changed)": {with(base(), analysed, inPause, func(in *Input) {
			in.Temporal.RampPercentage = 30
		}), true},
		"pause timed from the start of the ramp": {with(base(), analysed, func(in *Input) { in.Temporal.RampChangedAt = time.Time{} }), true},
		"pause over, step gate running":          {with(base(), analysed, stepGated, stepRun(GateRunning, -time.Minute)), false},
		"pause over, step gate succeeded":        {with(base(), analysed, stepGated, stepRun(GateSucceeded, -time.Minute)), true},
		"pause over, another step's gate succeeded": {with(base(), analysed, stepGated, stepRun(GateSucceeded, -time.Minute),
			func(in *Input) { in.Gate.Step = 50 }), false},
	} {
		rd, due := AnalysisToRead(tc.in)
		if !due || rd.EndsStep != tc.ends {
			t.Errorf("%s: due %v, EndsStep = %v, want due and %v", name, due, rd.EndsStep, tc.ends)
		}
	}
}

// TestAnalysisDeferred: an evaluation the budget deferred reads nothing and
// records nothing; the step does not end on the last verdict, which is older
// than an interval, and the TWD asks again when its reservation has room,
// or an interval later without one.
func TestAnalysisDeferred(t *testing.T) {
	passed := func(in *Input) {
		in.Analysis.Last = &AnalysisRecord{BuildID: "v2", EvaluatedAt: t0.Add(-time.Minute), WindowStart: window,
			Checks: []CheckRecord{{Name: "failures", Result: v1alpha1.AnalysisPassed, Message: "m"}}}
	}
	deferred := func(wait time.Duration) func(*Input) {
		return func(in *Input) { in.Analysis.Deferred, in.Analysis.BudgetWait = true, wait }
	}
	for name, tc := range map[string]struct {
		in      Input
		advance bool
		requeue time.Duration
		says    string
	}{
		"a reservation: back when it has room": {with(base(), analysed, passed, deferred(7*time.Second)), false, 7 * time.Second, "waits for its turn"},
		"no reservation: an interval later":    {with(base(), analysed, passed, deferred(0)), false, 30 * time.Second, "waits for its turn"},
		"never evaluated: says both":           {with(base(), analysed, deferred(3*time.Second)), false, 3 * time.Second, "not been evaluated yet"},
		"within the pause the pause holds": {with(base(), analysed, passed, deferred(0), func(in *Input) { in.Temporal.RampChangedAt = t0.Add(-4 * time.Minute) }),
			false, 30 * time.Second, "next step (50%)"},
		"a dry run does not wait for it": {with(base(), analysed, passed, dryRun, deferred(0)), true, 0, "setting the ramp"},
		"not deferred, the last pass ends the step": {with(base(), analysed, passed, func(in *Input) {
			in.Analysis.Last.EvaluatedAt = t0.Add(-time.Second)
		}), true, 0, "setting the ramp"},
	} {
		got := Plan(tc.in)
		if advanced := got.Routing != nil && got.Routing.Op == SetRamp; advanced != tc.advance {
			t.Errorf("%s: Routing = %+v, want advancing: %v", name, got.Routing, tc.advance)
		}
		if !strings.Contains(got.Ready.Message, tc.says) {
			t.Errorf("%s: Ready says %q, want %q", name, got.Ready.Message, tc.says)
		}
		if tc.requeue > 0 && got.RequeueAfter != tc.requeue {
			t.Errorf("%s: RequeueAfter = %s, want %s", name, got.RequeueAfter, tc.requeue)
		}
		if !tc.in.Analysis.Deferred {
			continue
		}
		kept := got.Analysis != nil && len(got.AnalysisResults) == 0 &&
			(tc.in.Analysis.Last == nil && got.Analysis.EvaluatedAt.IsZero() || tc.in.Analysis.Last != nil && reflect.DeepEqual(*got.Analysis, *tc.in.Analysis.Last))
		if !kept {
			t.Errorf("%s: a deferred evaluation records nothing new: %+v, %+v", name, got.Analysis, got.AnalysisResults)
		}
	}
}
