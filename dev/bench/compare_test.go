package main

import (
	"image/png"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestFleetSizes(t *testing.T) {
	got, err := fleetSizes("10, 50,100")
	if err != nil || len(got) != 3 || got[2] != 100 {
		t.Fatalf("fleetSizes = %v, %v", got, err)
	}
	if got, err := fleetSizes("0"); err != nil || len(got) != 0 {
		t.Fatalf("0 should skip the phase: %v, %v", got, err)
	}
	for _, bad := range []string{"50,10", "x", "-1"} {
		if _, err := fleetSizes(bad); err == nil {
			t.Errorf("fleetSizes(%q) accepted", bad)
		}
	}
}

func TestCompareFlagsChanges(t *testing.T) {
	before := map[string]figure{"a": {Value: 1}, "b": {Value: 1}, "c": {Value: 1}, "gone": {Value: 1}}
	now := map[string]figure{"a": {Value: 1.5}, "b": {Value: 0.5}, "c": {Value: 1.05}, "new": {Value: 1}}
	flags := map[string]string{}
	for _, c := range compare(before, now) {
		flags[c.Figure] = c.Flag
	}
	want := map[string]string{"a": "worse", "b": "better", "c": ""}
	if len(flags) != len(want) {
		t.Fatalf("compared %v, want only the figures both runs have", flags)
	}
	for k, v := range want {
		if flags[k] != v {
			t.Errorf("%s flagged %q, want %q", k, flags[k], v)
		}
	}
}

func TestPreviousResultReadsTheOldFormat(t *testing.T) {
	dir := t.TempDir()
	old := filepath.Join(dir, "20260101-000000")
	if err := os.MkdirAll(old, 0o755); err != nil {
		t.Fatal(err)
	}
	doc := `{"scale": {"n": 100, "rolloutSeconds": 50, "rollout": {"seconds": 60}}}`
	if err := os.WriteFile(filepath.Join(old, "result.json"), []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	_, res, err := previousResult(dir, filepath.Join(dir, "20260102-000000"))
	if err != nil {
		t.Fatal(err)
	}
	if f, ok := figures(res)["N=100: roll out all after a shared image change"]; !ok || f.Value != 50 {
		t.Fatalf("figures = %v", figures(res))
	}
}

// Every phase that reports a figure is guarded.
func TestFiguresCoverThePhases(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	res := Result{
		Rollouts:    []Rollout{{ReactionSeconds: 0.3, EndToEndSeconds: 5, Current: t0, Ready: t0.Add(1100 * time.Millisecond)}},
		Retirements: []Retirement{{ControllerRPCs: map[string]float64{"DescribeWorkerDeployment": 6, "DeleteWorkerDeploymentVersion": 1}}, {ControllerRPCs: map[string]float64{"DescribeWorkerDeployment": 9}}},
		HandBacks:   []HandBack{{TWDs: 10, Window: Window{Seconds: 60, ReadsPerTWDMin: 0.4}, SeenSeconds: []float64{3, 5, 9}, StatusSeconds: []float64{4, 6, 10}}},
	}
	got := figures(res)
	for name, want := range map[string]float64{
		"AllAtOnce status showing the change after current, median":                             1.1,
		"Temporal calls per AllAtOnce rollout, retirement included":                             8,
		"manager role handed back, 10 waiting: seen, median":                                    5,
		"manager role handed back, 10 waiting: status shows it, median":                         6,
		"manager role handed back, 10 waiting: Temporal reads per TWD per minute while waiting": 0.4,
	} {
		if f, ok := got[name]; !ok || math.Abs(f.Value-want) > 1e-9 {
			t.Errorf("%s = %v (present %v), want %g", name, f.Value, ok, want)
		}
	}
}

func TestPlotScaleWritesAPNG(t *testing.T) {
	var scales []Scale
	for i, n := range []int{10, 50, 100} {
		s := Scale{N: n, RolloutSeconds: float64(5 * (i + 1)), RolloutStages: map[string]Stats{stageReady: {N: 1, Median: 0.4}}}
		s.Rollout = Window{Seconds: 60, TWDs: n, ReadsPerTWDMin: 2, CPUSecondsPerMin: 3, CPUByProcess: map[string]float64{"devenv": 60}}
		s.Idle = Window{Seconds: 60, TWDs: n, RSSMiB: 60 + float64(n)/10, PeakRSSMiB: 70 + float64(n)/10}
		scales = append(scales, s)
	}
	path := filepath.Join(t.TempDir(), "scale.png")
	if p := os.Getenv("BENCH_TEST_PLOT"); p != "" {
		path = p // to look at it
	}
	if err := plotScale(path, scales, "test"); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := png.Decode(f); err != nil {
		t.Fatalf("not a PNG: %v", err)
	}
}

func TestPeakRate(t *testing.T) {
	s := []rpcSample{{Seconds: 0, Counts: 0}, {Seconds: 1, Counts: 20}, {Seconds: 2, Counts: 22}, {Seconds: 11, Counts: 40}, {Seconds: 12, Counts: 42}}
	if got := peakRate(s, 0); got != 20 {
		t.Errorf("1 s peak = %g, want 20 (the burst)", got)
	}
	// Over 10 s: 0 -> 11 s is 40/11, 1 -> 11 s is 20/10, 2 -> 12 s is 20/10.
	if got, want := peakRate(s, 10), 40.0/11; got != want {
		t.Errorf("10 s peak = %g, want %g", got, want)
	}
	if got := peakRate(nil, 0); got != 0 {
		t.Errorf("no samples: %g", got)
	}
}

func TestTableLeavesOutSkippedPhases(t *testing.T) {
	rows := table(Result{Analysis: &AnalysisRun{TWDs: 10, Steps: analysisSteps, IntervalSeconds: 10, Completed: 10}})
	for _, r := range rows {
		if strings.Contains(r.Figure, "AllAtOnce") || strings.HasPrefix(r.Figure, "Progressive step") {
			t.Errorf("row %q of a skipped phase", r.Figure)
		}
	}
	if len(rows) != 4 {
		t.Errorf("%d rows, want the analysis phase's 4", len(rows))
	}
}
