package workerdeployment

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/internal/planner"
)

// series is every series of c as its label values joined by "/" in the
// order of the label names, with its value (a histogram's sample count).
func series(t *testing.T, c prometheus.Collector) map[string]float64 {
	t.Helper()
	ch := make(chan prometheus.Metric)
	go func() {
		c.Collect(ch)
		close(ch)
	}()
	out := map[string]float64{}
	for m := range ch {
		var d dto.Metric
		if err := m.Write(&d); err != nil {
			t.Fatal(err)
		}
		key := ""
		for i, l := range d.GetLabel() {
			if i > 0 {
				key += "/"
			}
			key += l.GetValue()
		}
		switch {
		case d.Gauge != nil:
			out[key] = d.GetGauge().GetValue()
		case d.Counter != nil:
			out[key] = d.GetCounter().GetValue()
		case d.Histogram != nil:
			out[key] = float64(d.GetHistogram().GetSampleCount())
		}
	}
	return out
}

// TestObserveRolloutStartsAndBlocks: a rollout that starts counts once;
// while it is blocked one series carries its reason, replaced when the
// reason changes and gone once it moves again or the TWD is deleted.
func TestObserveRolloutStartsAndBlocks(t *testing.T) {
	twd := &v1alpha1.TemporalWorkerDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: "m1", Name: "orders"}}
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	progressing := func(s metav1.ConditionStatus) []metav1.Condition {
		return []metav1.Condition{{Type: v1alpha1.ConditionProgressing, Status: s, LastTransitionTime: metav1.NewTime(now.Add(-time.Minute))}}
	}
	report := func(state planner.State, s metav1.ConditionStatus, reason string) planner.Report {
		return planner.Report{State: state, Progressing: planner.Condition{Status: s, Reason: reason}}
	}
	started := series(t, rolloutsStarted)[""]

	observeRollout(twd, progressing(metav1.ConditionFalse), nil, report(planner.StateMoving, metav1.ConditionTrue, v1alpha1.ReasonRamping), nil, now)
	observeRollout(twd, progressing(metav1.ConditionTrue), nil, report(planner.StateMoving, metav1.ConditionTrue, v1alpha1.ReasonRamping), nil, now)
	if got := series(t, rolloutsStarted)[""] - started; got != 1 {
		t.Errorf("rollouts started %v, want 1", got)
	}
	blocked := func(want map[string]float64) {
		t.Helper()
		got := map[string]float64{}
		for k, v := range series(t, rolloutBlocked) {
			if strings.HasPrefix(k, "orders/m1/") {
				got[k] = v
			}
		}
		if len(got) != len(want) {
			t.Errorf("rollout_blocked = %v, want %v", got, want)
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("rollout_blocked = %v, want %v", got, want)
			}
		}
	}
	blocked(map[string]float64{})

	observeRollout(twd, progressing(metav1.ConditionTrue), nil, report(planner.StateBlocked, metav1.ConditionFalse, v1alpha1.ReasonGateFailed), nil, now)
	blocked(map[string]float64{"orders/m1/GateFailed": 1})
	observeRollout(twd, progressing(metav1.ConditionFalse), nil, report(planner.StateBlocked, metav1.ConditionFalse, v1alpha1.ReasonRolloutAborted), nil, now)
	blocked(map[string]float64{"orders/m1/RolloutAborted": 1})
	observeRollout(twd, progressing(metav1.ConditionFalse), nil, report(planner.StateMoving, metav1.ConditionTrue, v1alpha1.ReasonRamping), nil, now)
	blocked(map[string]float64{})
	if got := series(t, rolloutsStarted)[""] - started; got != 2 {
		t.Errorf("rollouts started %v after the retry, want 2", got)
	}
	observeRollout(twd, progressing(metav1.ConditionTrue), nil, report(planner.StateBlocked, metav1.ConditionFalse, v1alpha1.ReasonProgressDeadlineExceeded), nil, now)
	forgetMetrics("m1", "orders")
	blocked(map[string]float64{})
}

// TestObserveDrainTimes: a draining version has its start as Temporal
// reports it; once drained its drain time is observed once and the
// series goes; an unknown Temporal state changes nothing.
func TestObserveDrainTimes(t *testing.T) {
	twd := &v1alpha1.TemporalWorkerDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: "m2", Name: "billing"}}
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	since, drained := now.Add(-2*time.Hour), now.Add(-time.Minute)
	report := func(v1Status v1alpha1.VersionStatus) planner.Report {
		return planner.Report{State: planner.StateComplete, Versions: []planner.Version{
			{BuildID: "v1", Status: v1Status}, {BuildID: "v2", Status: v1alpha1.VersionCurrent, Target: true},
		}}
	}
	seen := func(drainedSince *time.Time) *planner.TemporalState {
		return &planner.TemporalState{Versions: []planner.TemporalVersion{
			{BuildID: "v1", DrainingSince: &since, DrainedSince: drainedSince}, {BuildID: "v2", CurrentSince: &since},
		}}
	}
	draining := func() map[string]float64 {
		got := map[string]float64{}
		for k, v := range series(t, drainingSince) {
			if strings.HasSuffix(k, "/billing/m2") {
				got[k] = v
			}
		}
		return got
	}
	observed := series(t, drainDuration)[""]

	observeRollout(twd, nil, map[string]v1alpha1.VersionStatus{"v1": v1alpha1.VersionCurrent}, report(v1alpha1.VersionDraining), seen(nil), now)
	if got := draining(); len(got) != 1 || got["v1/billing/m2"] != float64(since.Unix()) {
		t.Errorf("draining since = %v, want v1 at %d", got, since.Unix())
	}
	observeRollout(twd, nil, map[string]v1alpha1.VersionStatus{"v1": v1alpha1.VersionDraining}, report(""), nil, now)
	if got := draining(); len(got) != 1 {
		t.Errorf("Temporal unknown: draining since = %v, want v1 kept", got)
	}
	prev := map[string]v1alpha1.VersionStatus{"v1": v1alpha1.VersionDraining, "v2": v1alpha1.VersionCurrent}
	observeRollout(twd, nil, prev, report(v1alpha1.VersionDrained), seen(&drained), now)
	if got := draining(); len(got) != 0 {
		t.Errorf("drained: draining since = %v, want no series", got)
	}
	if got := series(t, drainDuration)[""] - observed; got != 1 {
		t.Errorf("drain durations observed %v, want 1", got)
	}
	prev["v1"] = v1alpha1.VersionDrained
	observeRollout(twd, nil, prev, report(v1alpha1.VersionDrained), seen(&drained), now)
	if got := series(t, drainDuration)[""] - observed; got != 1 {
		t.Errorf("drain durations observed %v after a second pass, want still 1", got)
	}
}
