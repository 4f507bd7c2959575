package dashboard

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
)

func twdAt(target string, status v1alpha1.VersionStatus, ramp *int32) *v1alpha1.TemporalWorkerDeployment {
	twd := &v1alpha1.TemporalWorkerDeployment{}
	twd.Namespace, twd.Name = "ns", "orders"
	if target != "" {
		twd.Status.TargetVersion = &v1alpha1.WorkerVersion{BuildID: target, Status: status, RampPercentage: ramp}
	}
	return twd
}

func TestHistoryKeepsChangesOnly(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	h := NewHistory()
	steps := []*v1alpha1.TemporalWorkerDeployment{
		twdAt("", "", nil), // no target yet: nothing to record
		twdAt("v1", v1alpha1.VersionInactive, nil),
		twdAt("v1", v1alpha1.VersionCurrent, nil),
		twdAt("v1", v1alpha1.VersionCurrent, nil), // unchanged
		twdAt("v2", v1alpha1.VersionInactive, nil),
		twdAt("v2", v1alpha1.VersionRamping, ptr.To[int32](25)),
		twdAt("v2", v1alpha1.VersionRamping, ptr.To[int32](25)),
		twdAt("v2", v1alpha1.VersionRamping, ptr.To[int32](75)),
		twdAt("v2", v1alpha1.VersionCurrent, nil),
	}
	for i, s := range steps {
		h.Observe(s, t0.Add(time.Duration(i)*time.Second))
	}
	want := []RampPoint{
		{t0.Add(1 * time.Second), "v1", 0},
		{t0.Add(2 * time.Second), "v1", 100},
		{t0.Add(4 * time.Second), "v2", 0},
		{t0.Add(5 * time.Second), "v2", 25},
		{t0.Add(7 * time.Second), "v2", 75},
		{t0.Add(8 * time.Second), "v2", 100},
	}
	if d := cmp.Diff(want, h.Points("ns", "orders")); d != "" {
		t.Fatalf("history (-want +got):\n%s", d)
	}
	h.Forget("ns", "orders")
	if got := h.Points("ns", "orders"); len(got) != 0 {
		t.Fatalf("after Forget: %v", got)
	}
}

func TestHistoryIsBounded(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	h := NewHistory()
	for i := 0; i < maxPoints+10; i++ {
		h.Observe(twdAt("v2", v1alpha1.VersionRamping, ptr.To(int32(i%2))), t0.Add(time.Duration(i)*time.Second))
	}
	got := h.Points("ns", "orders")
	if len(got) != maxPoints || !got[len(got)-1].At.Equal(t0.Add(time.Duration(maxPoints+9)*time.Second)) {
		t.Fatalf("kept %d points ending %v, want the newest %d", len(got), got[len(got)-1].At, maxPoints)
	}
}

func TestChartDrawsSteps(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	points := []RampPoint{{t0, "v2", 0}, {t0.Add(time.Minute), "v2", 25}, {t0.Add(2 * time.Minute), "v2", 100}}
	c := NewChart(points, t0.Add(10*time.Minute))
	// x: 600 per 10 minutes; y: 120 is 0%, 0 is 100%.
	want := "0.0,120.0 60.0,120.0 60.0,90.0 120.0,90.0 120.0,0.0 600.0,0.0"
	if c.Line != want {
		t.Fatalf("line %q, want %q", c.Line, want)
	}
	// A young history spans chartSpan, not the few seconds it has.
	if c := NewChart(points[:1], t0.Add(time.Second)); c.Line != "0.0,120.0 2.0,120.0" {
		t.Fatalf("short line %q", c.Line)
	}
	if c := NewChart(nil, t0); c.Line != "" {
		t.Fatalf("empty history drew %q", c.Line)
	}
}
