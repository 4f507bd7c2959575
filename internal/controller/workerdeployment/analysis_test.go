package workerdeployment

import (
	"reflect"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/internal/planner"
)

// TestAnalysisRecordRoundTrip: what status keeps of an evaluation reads
// back as the planner wrote it, in whole seconds, so that the planner
// finds its window and failure counts again on the next pass.
func TestAnalysisRecordRoundTrip(t *testing.T) {
	at := time.Date(2026, 11, 27, 6, 0, 0, 0, time.UTC)
	rec := &planner.AnalysisRecord{BuildID: "v2", EvaluatedAt: at, WindowStart: at.Add(-time.Minute), Aborted: "evidence", AbortedAt: at,
		Checks: []planner.CheckRecord{{Name: "failures", Result: v1alpha1.AnalysisFailed, ConsecutiveFailures: 2, Message: "m"}}}
	if got := analysisRecord(analysisStatus(rec)); !reflect.DeepEqual(got, rec) {
		t.Fatalf("round trip: %+v, want %+v", got, rec)
	}
	if analysisStatus(nil) != nil || analysisRecord(nil) != nil {
		t.Fatalf("no record must read as none")
	}
}

// TestAnalysisSpecDefaults: objects written before a default existed get
// the CRD's defaults.
func TestAnalysisSpecDefaults(t *testing.T) {
	got := analysisSpec(&v1alpha1.AnalysisSpec{Checks: []v1alpha1.AnalysisCheck{
		{Name: "f", Kind: v1alpha1.CheckWorkflowFailureRate, Compare: v1alpha1.CompareCurrent, MarginPercent: ptr.To[int32](3)},
		{Name: "b", Kind: v1alpha1.CheckBacklogAge, MaxAge: &metav1.Duration{Duration: time.Minute}, MinSamples: 5, FailureLimit: 2},
		{Name: "n", Kind: v1alpha1.CheckWorkflowTaskFailures, MaxPercent: ptr.To[int32](0)},
	}})
	want := &planner.Analysis{Interval: 30 * time.Second, Checks: []planner.Check{
		{Name: "f", Kind: v1alpha1.CheckWorkflowFailureRate, CompareCurrent: true, MarginPercent: 3, MinSamples: 20},
		{Name: "b", Kind: v1alpha1.CheckBacklogAge, MaxAge: time.Minute, MinSamples: 5, FailureLimit: 2},
		{Name: "n", Kind: v1alpha1.CheckWorkflowTaskFailures, MaxPercent: ptr.To[int32](0), MinSamples: 20},
	}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("analysisSpec = %+v, want %+v", got, want)
	}
	if analysisSpec(nil) != nil || analysisSpec(&v1alpha1.AnalysisSpec{}) != nil {
		t.Fatalf("no checks must be no analysis")
	}
}

// TestVisibilityCounts: the read budget is charged what an evaluation
// counts: the outcome counts shared by failure-rate checks, two shared by
// the workflow-task checks, none for backlog checks.
func TestVisibilityCounts(t *testing.T) {
	fixed := planner.Check{Kind: v1alpha1.CheckWorkflowFailureRate}
	compare := planner.Check{Kind: v1alpha1.CheckWorkflowFailureRate, CompareCurrent: true}
	stuck := planner.Check{Kind: v1alpha1.CheckWorkflowTaskFailures}
	backlog := planner.Check{Kind: v1alpha1.CheckBacklogAge}
	for name, tc := range map[string]struct {
		checks []planner.Check
		want   int
	}{
		"backlog only":            {[]planner.Check{backlog}, 0},
		"one fixed bound":         {[]planner.Check{fixed, fixed}, 1},
		"compare with current":    {[]planner.Check{compare}, 2},
		"fixed and compare share": {[]planner.Check{fixed, compare, backlog}, 2},
		"stuck twice":             {[]planner.Check{stuck, stuck}, 2},
		"stuck and a compare":     {[]planner.Check{stuck, compare}, 4},
	} {
		if got := visibilityCounts(tc.checks); got != tc.want {
			t.Errorf("%s: %d counts, want %d", name, got, tc.want)
		}
	}
	// The budget must hold the costliest evaluation, or it is never served.
	if every := visibilityCounts([]planner.Check{fixed, compare, stuck, backlog}); every > analysisBurst {
		t.Errorf("an evaluation of every kind costs %d counts, more than the budget's burst of %d", every, analysisBurst)
	}
}

// TestAnalysisBudget: evaluations that may end a step are served in the
// order they asked, each TWD coming back for its reservation when it has
// room; those that can only abort take only counts nobody waits for; a
// reservation no longer needed is given back; counts go out at the
// budget's pace however late the TWDs come back.
func TestAnalysisBudget(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	twd := func(name string) types.NamespacedName { return types.NamespacedName{Namespace: "ns", Name: name} }
	b := &analysisBudget{rps: 2} // burst 4: one evaluation of 4 counts, then one every 2 s
	for i, s := range []struct {
		at       time.Duration
		twd      string
		conn     string
		n        int
		endsStep bool
		release  bool
		wait     time.Duration
		ok       bool
	}{
		{at: 0, twd: "a", conn: "c", n: 4, endsStep: true, ok: true},
		{at: 0, twd: "b", conn: "c", n: 4, endsStep: true, wait: 2 * time.Second},
		{at: 0, twd: "c", conn: "c", n: 4, endsStep: true, wait: 4 * time.Second},
		{at: 0, twd: "d", conn: "c", n: 4, wait: 0},                                     // spare only: none
		{at: 0, twd: "e", conn: "other", n: 4, ok: true},                                // another namespace, its own budget
		{at: time.Second, twd: "b", conn: "c", n: 4, endsStep: true, wait: time.Second}, // woken early: keeps its turn
		{at: 2 * time.Second, twd: "b", conn: "c", n: 4, endsStep: true, ok: true},
		{at: 3 * time.Second, twd: "c", release: true},                                      // no longer due
		{at: 3 * time.Second, twd: "d", conn: "c", n: 4, endsStep: true, wait: time.Second}, // pause over; c's counts given back
		{at: 4 * time.Second, twd: "d", conn: "c", n: 4, endsStep: true, ok: true},
		{at: 6 * time.Second, twd: "f", conn: "c", n: 2, ok: true}, // spare again
		{at: 6 * time.Second, twd: "g", conn: "c", n: 4, endsStep: true, wait: time.Second},
		{at: 6 * time.Second, twd: "g", conn: "c", n: 2, endsStep: true, ok: true}, // fewer checks: asks afresh
		// Turns that come due while the TWDs wait for a worker still go out
		// at the budget's pace, not together.
		{at: 6 * time.Second, twd: "h1", conn: "late", n: 4, endsStep: true, ok: true},
		{at: 6 * time.Second, twd: "h2", conn: "late", n: 4, endsStep: true, wait: 2 * time.Second},
		{at: 6 * time.Second, twd: "h3", conn: "late", n: 4, endsStep: true, wait: 4 * time.Second},
		{at: 16 * time.Second, twd: "h2", conn: "late", n: 4, endsStep: true, ok: true},
		{at: 16 * time.Second, twd: "h3", conn: "late", n: 4, endsStep: true, wait: 2 * time.Second},
		{at: 16 * time.Second, twd: "h4", conn: "late", n: 4, wait: 0}, // spare: the pace is spent
		{at: 18 * time.Second, twd: "h3", conn: "late", n: 4, endsStep: true, ok: true},
	} {
		now := t0.Add(s.at)
		if s.release {
			b.release(twd(s.twd), now)
			continue
		}
		wait, ok := b.take(twd(s.twd), s.conn, s.n, s.endsStep, now)
		if ok != s.ok || wait != s.wait {
			t.Errorf("step %d: %s at %s: wait %s, ok %v; want %s, %v", i, s.twd, s.at, wait, ok, s.wait, s.ok)
		}
	}
}
