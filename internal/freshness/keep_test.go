package freshness

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/internal/planner"
	"github.com/rainbow-deploy/rainbow/internal/temporal"
)

func TestSettlesOnlyWhenNothingMoves(t *testing.T) {
	done := func(mut func(*planner.Result)) planner.Result {
		r := planner.Result{
			State:    planner.StateComplete,
			Ready:    planner.Condition{Status: metav1.ConditionTrue},
			Versions: []planner.Version{{BuildID: "v2", Status: v1alpha1.VersionCurrent, Deployment: "w-v2"}, {BuildID: "v1", Status: v1alpha1.VersionDrained, Deployment: "w-v1"}},
		}
		if mut != nil {
			mut(&r)
		}
		return r
	}
	cases := map[string]struct {
		res  planner.Result
		want bool
	}{
		"complete, old version drained":                  {done(nil), true},
		"rollout not complete":                           {done(func(r *planner.Result) { r.State, r.Ready.Status = planner.StateMoving, metav1.ConditionFalse }), false},
		"a version drains":                               {done(func(r *planner.Result) { r.Versions[1].Status = v1alpha1.VersionDraining }), false},
		"a version's status unknown":                     {done(func(r *planner.Result) { r.Versions[1].Status = "" }), false},
		"a version waits for its deletion from Temporal": {done(func(r *planner.Result) { r.Versions[1].Deployment = "" }), false},
		"a scale pending":                                {done(func(r *planner.Result) { r.Scale = []planner.Scale{{Name: "w-v1"}} }), false},
		"a Temporal version to delete":                   {done(func(r *planner.Result) { r.DeleteTemporalVersions = []string{"v0"} }), false},
		"a routing write":                                {done(func(r *planner.Result) { r.Routing = &planner.Routing{Op: planner.RemoveRamp} }), false},
		"an in-place update":                             {done(func(r *planner.Result) { r.UpdateDeployment = &planner.UpdateDeployment{Name: "w-v2"} }), false},
	}
	for name, tc := range cases {
		if got := Settles(tc.res); got != tc.want {
			t.Errorf("%s: Settles = %v, want %v", name, got, tc.want)
		}
	}
}

func TestSameRoutingSeesEveryChange(t *testing.T) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	base := temporal.DeploymentSummary{CurrentBuildID: "v2", RoutingChangedAt: at, LatestBuildID: "v2", LatestCreatedAt: at}
	if !SameRouting(base, base) {
		t.Fatal("a summary differs from itself")
	}
	changes := map[string]func(*temporal.DeploymentSummary){
		"current":       func(s *temporal.DeploymentSummary) { s.CurrentBuildID = "v3" },
		"ramp":          func(s *temporal.DeploymentSummary) { s.RampingBuildID, s.RampPercentage = "v3", 5 },
		"routing time":  func(s *temporal.DeploymentSummary) { s.RoutingChangedAt = at.Add(time.Second) },
		"new version":   func(s *temporal.DeploymentSummary) { s.LatestBuildID = "v3" },
		"re-registered": func(s *temporal.DeploymentSummary) { s.LatestCreatedAt = at.Add(time.Second) },
		"ramp percent":  func(s *temporal.DeploymentSummary) { s.RampPercentage = 7 },
	}
	for name, mut := range changes {
		s := base
		mut(&s)
		if SameRouting(base, s) {
			t.Errorf("a change of %s went unnoticed", name)
		}
	}
}

func TestSettlesWhileWaitingOnAPerson(t *testing.T) {
	res := planner.Result{State: planner.StateMoving, WaitsFor: planner.WaitRouting}
	if !Settles(res) {
		t.Fatal("a TWD that only waits for a Manual promotion is not served from the shared list")
	}
	res.WaitsFor = ""
	if Settles(res) {
		t.Fatal("a moving rollout counted as settled")
	}
}

func TestSettledForWaitsLongerOnlyForAWatchedManager(t *testing.T) {
	manager, routing := planner.Result{WaitsFor: planner.WaitManager}, planner.Result{WaitsFor: planner.WaitRouting}
	cases := []struct {
		name    string
		res     planner.Result
		watched bool
		want    time.Duration
	}{
		{"complete", planner.Result{}, false, SettledMaxAge},
		{"waiting for a routing change", routing, true, SettledMaxAge},
		{"waiting for the manager, unwatched", manager, false, ManagerMaxAge},
		{"waiting for the manager, watched: a fallback only", manager, true, ManagerWatchedMaxAge},
	}
	for _, tc := range cases {
		if got := SettledFor(tc.res, tc.watched); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}

func TestManagerWake(t *testing.T) {
	described := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cases := []struct {
		name     string
		run      time.Time
		answered bool
		now      time.Time
		want     bool
	}{
		{"no run since", time.Time{}, true, described.Add(time.Hour), false},
		{"a run after the describe: the manager may have changed", described.Add(time.Second), true, described.Add(10 * time.Second), true},
		{"a run just before the describe: the clocks may differ", described.Add(-RunClockSlack + time.Millisecond), true, described.Add(time.Second), true},
		{"a run well before the describe: the describe saw it", described.Add(-RunClockSlack - time.Millisecond), true, described.Add(time.Second), false},
		{"no answer, described recently", time.Time{}, false, described.Add(ManagerMaxAge - time.Second), false},
		{"no answer, at the unwatched pace", time.Time{}, false, described.Add(ManagerMaxAge), true},
	}
	for _, tc := range cases {
		if got := ManagerWake(described, tc.run, tc.answered, tc.now); got != tc.want {
			t.Errorf("%s: %t, want %t", tc.name, got, tc.want)
		}
	}
}

func TestRunsSinceCoversTheOldestDescribe(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	got := RunsSince([]time.Time{t0.Add(time.Minute), t0, t0.Add(time.Second)})
	if want := t0.Add(-RunClockSlack); !got.Equal(want) {
		t.Fatalf("since %s, want %s", got, want)
	}
}
