package workerdeployment

import (
	"errors"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/internal/planner"
)

var t0 = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

func TestNewStatusPlacesVersions(t *testing.T) {
	res := planner.Result{
		Versions: []planner.Version{
			{BuildID: "v1", Status: v1alpha1.VersionCurrent, Deployment: "w-v1"},
			{BuildID: "v0", Status: v1alpha1.VersionDrained, Deployment: "w-v0"},
			{BuildID: "v2", Status: v1alpha1.VersionRamping, Deployment: "w-v2", Target: true, RampPercentage: ptr.To[int32](20)},
		},
		Ready:       planner.Condition{Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonRamping, Message: "ramping"},
		Progressing: planner.Condition{Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonRamping, Message: "ramping"},
	}
	st := buildStatusOnly(v1alpha1.TemporalWorkerDeploymentStatus{}, 7, res, outcome{}, nil, t0)
	if st.TargetVersion.BuildID != "v2" || *st.TargetVersion.RampPercentage != 20 || st.CurrentVersion.BuildID != "v1" {
		t.Fatalf("target/current = %+v / %+v", st.TargetVersion, st.CurrentVersion)
	}
	if st.RampingVersion != nil {
		t.Errorf("the ramping target is reported as target only, got rampingVersion %+v", st.RampingVersion)
	}
	if len(st.DeprecatedVersions) != 1 || st.DeprecatedVersions[0].BuildID != "v0" {
		t.Errorf("deprecated = %+v", st.DeprecatedVersions)
	}
	ready := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionReady)
	if ready == nil || ready.Reason != v1alpha1.ReasonRamping || ready.ObservedGeneration != 7 || st.ObservedGeneration != 7 {
		t.Errorf("ready = %+v, observedGeneration %d", ready, st.ObservedGeneration)
	}
}

func TestNewStatusKeepsLastKnownWhenTemporalIsUnknown(t *testing.T) {
	healthy := metav1.NewTime(t0.Add(-time.Hour))
	old := v1alpha1.TemporalWorkerDeploymentStatus{
		TargetVersion: &v1alpha1.WorkerVersion{BuildID: "v1", Status: v1alpha1.VersionCurrent, HealthySince: &healthy},
	}
	res := planner.Result{
		Versions:    []planner.Version{{BuildID: "v1", Target: true}},
		Ready:       planner.Condition{Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonTemporalStateFetchFailed, Message: "x"},
		Progressing: planner.Condition{Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonTemporalStateFetchFailed, Message: "x"},
	}
	st := buildStatusOnly(old, 1, res, outcome{}, nil, t0)
	if st.TargetVersion.Status != v1alpha1.VersionCurrent || !st.TargetVersion.HealthySince.Equal(&healthy) {
		t.Fatalf("target = %+v", st.TargetVersion)
	}
	if st.CurrentVersion == nil || st.CurrentVersion.BuildID != "v1" {
		t.Errorf("current = %+v", st.CurrentVersion)
	}
}

func TestConditionTransitionTimeKeptWhileStatusHolds(t *testing.T) {
	cond := planner.Condition{Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonRolloutComplete, Message: "done"}
	res := planner.Result{Ready: cond, Progressing: planner.Condition{Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonRolloutComplete, Message: "done"}}
	first := buildStatusOnly(v1alpha1.TemporalWorkerDeploymentStatus{}, 1, res, outcome{}, nil, t0)
	before := meta.FindStatusCondition(first.Conditions, v1alpha1.ConditionReady).LastTransitionTime
	time.Sleep(1100 * time.Millisecond)
	second := buildStatusOnly(first, 2, res, outcome{}, nil, t0.Add(time.Minute))
	after := meta.FindStatusCondition(second.Conditions, v1alpha1.ConditionReady)
	if !after.LastTransitionTime.Equal(&before) || after.ObservedGeneration != 2 {
		t.Fatalf("transition time moved or generation stale: %+v", after)
	}
}

// TestSinceStart: the time a pass took comes off the plan's delay, so a
// step's pause ends when the plan said, however slow Temporal answered.
func TestSinceStart(t *testing.T) {
	cases := []struct{ requeue, elapsed, want time.Duration }{
		{4 * time.Second, time.Second, 3 * time.Second},
		{time.Minute, 20 * time.Millisecond, time.Minute - 20*time.Millisecond},
		{time.Second, 2 * time.Second, minRequeue},
	}
	for _, c := range cases {
		if got := sinceStart(c.requeue, c.elapsed); got != c.want {
			t.Errorf("sinceStart(%s, %s) = %s, want %s", c.requeue, c.elapsed, got, c.want)
		}
	}
}

func TestNewStatusReportsTheOutcome(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	res := planner.Result{
		Versions:    []planner.Version{{BuildID: "v2", Status: v1alpha1.VersionInactive, Target: true, Deployment: "w-v2"}},
		Ready:       planner.Condition{Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonWaitingForPromotion, Message: "making v2 current"},
		Progressing: planner.Condition{Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonWaitingForPromotion, Message: "making v2 current"},
	}
	out := outcome{
		failed:         []error{errors.New("SetCurrent: unavailable")},
		gate:           &v1alpha1.GateStatus{BuildID: "v2", WorkflowID: "g", Result: "Running"},
		updatedInPlace: &planner.UpdateDeployment{Name: "w-v2", BuildID: "v2", Message: "spec.template changed"},
	}
	st := buildStatusOnly(v1alpha1.TemporalWorkerDeploymentStatus{}, 4, res, out, nil, t0)
	for _, typ := range []string{v1alpha1.ConditionReady, v1alpha1.ConditionProgressing} {
		c := meta.FindStatusCondition(st.Conditions, typ)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != v1alpha1.ReasonPlanExecutionFailed || !strings.Contains(c.Message, "SetCurrent: unavailable") {
			t.Errorf("%s = %+v, want False/PlanExecutionFailed naming the failed step", typ, c)
		}
	}
	if st.Gate == nil || st.Gate.Result != "Running" {
		t.Errorf("gate = %+v, want the started run", st.Gate)
	}
	if v := st.TargetVersion; v == nil || v.UpdatedInPlaceAt == nil || v.UpdatedInPlaceReason != "spec.template changed" {
		t.Errorf("target = %+v, want the in-place update recorded", v)
	}
}

func TestKstatusConditionsFollowTheRolloutState(t *testing.T) {
	cases := map[string]struct {
		res                 planner.Report
		reconciling, stalld metav1.ConditionStatus
	}{
		"moving":   {planner.Report{State: planner.StateMoving, Progressing: planner.Condition{Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonRamping}}, metav1.ConditionTrue, metav1.ConditionFalse},
		"blocked":  {planner.Report{State: planner.StateBlocked, Progressing: planner.Condition{Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonGateFailed}}, metav1.ConditionFalse, metav1.ConditionTrue},
		"complete": {planner.Report{State: planner.StateComplete, Progressing: planner.Condition{Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonRolloutComplete}}, metav1.ConditionFalse, metav1.ConditionFalse},
		"a step failed": {withOutcome(planner.Report{State: planner.StateMoving}, outcome{failed: []error{errors.New("boom")}}),
			metav1.ConditionFalse, metav1.ConditionTrue},
	}
	for name, c := range cases {
		r, s := kstatusConditions(c.res)
		if r.Status != c.reconciling || s.Status != c.stalld || r.Reason != c.res.Progressing.Reason || s.Reason != c.res.Progressing.Reason {
			t.Errorf("%s: Reconciling=%s/%s Stalled=%s/%s, want %s and %s with Progressing's reason %q",
				name, r.Status, r.Reason, s.Status, s.Reason, c.reconciling, c.stalld, c.res.Progressing.Reason)
		}
	}
}

// TestNewStatusRecordsRevivals: a revival written this pass replaces the
// version's record and counts on; without one the record stays.
func TestNewStatusRecordsRevivals(t *testing.T) {
	earlier := &v1alpha1.VersionRevival{At: metav1.NewTime(t0.Add(-time.Hour)), Replicas: 1, VersionStatus: v1alpha1.VersionDraining, Count: 2, Message: "before"}
	old := v1alpha1.TemporalWorkerDeploymentStatus{
		DeprecatedVersions: []v1alpha1.WorkerVersion{{BuildID: "v1", Status: v1alpha1.VersionDraining, Revival: earlier}},
	}
	res := planner.Result{Versions: []planner.Version{
		{BuildID: "v1", Status: v1alpha1.VersionDraining, Deployment: "w-v1"},
		{BuildID: "v2", Status: v1alpha1.VersionCurrent, Deployment: "w-v2", Target: true},
	}}
	if st := buildStatusOnly(old, 1, res, outcome{}, nil, t0); st.DeprecatedVersions[0].Revival != earlier {
		t.Errorf("without a revival the record is %+v, want the previous one", st.DeprecatedVersions[0].Revival)
	}
	revival := &planner.Revival{At: t0, Replicas: 1, Status: v1alpha1.VersionDraining, Backlog: ptr.To[int64](4), Message: "tasks wait"}
	out := outcome{revived: []planner.Scale{{Name: "w-v1", BuildID: "v1", Replicas: 1, Reason: planner.ScaleRevive, Revival: revival}}}
	st := buildStatusOnly(old, 1, res, out, nil, t0)
	want := v1alpha1.VersionRevival{At: metav1.NewTime(t0), Replicas: 1, VersionStatus: v1alpha1.VersionDraining, Backlog: ptr.To[int64](4), Count: 3, Message: "tasks wait"}
	if got := st.DeprecatedVersions[0].Revival; got == nil || !equality.Semantic.DeepEqual(*got, want) {
		t.Errorf("revival recorded as %+v, want %+v", got, want)
	}
	if st.TargetVersion.Revival != nil {
		t.Errorf("the target got a revival record: %+v", st.TargetVersion.Revival)
	}
}

// buildStatusOnly is buildStatus's status.
func buildStatusOnly(old v1alpha1.TemporalWorkerDeploymentStatus, generation int64, res planner.Result, out outcome, taskQueues map[string][]string, now time.Time) v1alpha1.TemporalWorkerDeploymentStatus {
	st, _ := buildStatus(old, generation, res, out, taskQueues, now)
	return st
}

// TestShownReport: status shows the plan's projection only when Temporal
// took every write it assumes; otherwise what the pass read, and a prompt
// look when Temporal took some of them.
func TestShownReport(t *testing.T) {
	projected := &planner.Report{State: planner.StateMoving, RoutingPropagating: true, RequeueAfter: 200 * time.Millisecond}
	route := &planner.Routing{Op: planner.SetCurrent, BuildID: "v2"}
	res := planner.Result{Routing: route, DeleteTemporalVersions: []string{"v0"}, Projected: projected,
		State: planner.StateMoving, RequeueAfter: time.Second}
	for name, c := range map[string]struct {
		out       outcome
		projected bool
		requeue   time.Duration
	}{
		"all accepted":              {outcome{routed: route, deleted: []string{"v0"}}, true, 200 * time.Millisecond},
		"routing lost a race":       {outcome{deleted: []string{"v0"}, retrySoon: true}, false, minRequeue},
		"Temporal kept the version": {outcome{routed: route}, false, minRequeue},
		"nothing accepted":          {outcome{retrySoon: true}, false, time.Second},
		"a step failed":             {outcome{routed: route, deleted: []string{"v0"}, failed: []error{errors.New("boom")}}, false, time.Second},
	} {
		got := shownReport(res, c.out)
		if got.RoutingPropagating != c.projected || got.RequeueAfter != c.requeue {
			t.Errorf("%s: report %+v, want projected %v and requeue %s", name, got, c.projected, c.requeue)
		}
	}
}

// TestCompletedAtIsRecorded: the target's completion is a status field,
// kept while the build stays the target, gone with a new target.
func TestCompletedAtIsRecorded(t *testing.T) {
	done := planner.Result{State: planner.StateComplete, TargetCompleted: true,
		Versions: []planner.Version{{BuildID: "v1", Status: v1alpha1.VersionCurrent, Target: true}}}
	first := buildStatusOnly(v1alpha1.TemporalWorkerDeploymentStatus{}, 1, done, outcome{}, nil, t0)
	if c := first.TargetVersion.CompletedAt; c == nil || !c.Time.Equal(t0) {
		t.Fatalf("completedAt = %v, want %s", c, t0)
	}
	moving := planner.Result{State: planner.StateBlocked, Versions: []planner.Version{{BuildID: "v1", Status: v1alpha1.VersionDraining, Target: true}}}
	later := buildStatusOnly(first, 1, moving, outcome{}, nil, t0.Add(time.Hour))
	if c := later.TargetVersion.CompletedAt; c == nil || !c.Time.Equal(t0) {
		t.Errorf("completedAt = %v after the target lost its traffic, want it kept from %s", c, t0)
	}
	next := planner.Result{State: planner.StateMoving, Versions: []planner.Version{
		{BuildID: "v1", Status: v1alpha1.VersionCurrent}, {BuildID: "v2", Status: v1alpha1.VersionInactive, Target: true}}}
	st := buildStatusOnly(first, 2, next, outcome{}, nil, t0.Add(time.Hour))
	if st.TargetVersion.CompletedAt != nil || st.CurrentVersion.CompletedAt != nil {
		t.Errorf("completedAt on the new target %v or the old one %v, want neither", st.TargetVersion.CompletedAt, st.CurrentVersion.CompletedAt)
	}
}

// TestTargetSinceIsRecorded: when a build became the target is a status
// field (the progress deadline counts from it), kept while it stays the
// target, reset by a new target.
func TestTargetSinceIsRecorded(t *testing.T) {
	v1 := planner.Result{State: planner.StateMoving, Versions: []planner.Version{{BuildID: "v1", Status: v1alpha1.VersionNotRegistered, Target: true}}}
	first := buildStatusOnly(v1alpha1.TemporalWorkerDeploymentStatus{}, 1, v1, outcome{}, nil, t0)
	if s := first.TargetVersion.TargetSince; s == nil || !s.Time.Equal(t0) {
		t.Fatalf("targetSince = %v, want %s", s, t0)
	}
	later := buildStatusOnly(first, 2, v1, outcome{}, nil, t0.Add(time.Hour))
	if s := later.TargetVersion.TargetSince; s == nil || !s.Time.Equal(t0) {
		t.Errorf("targetSince = %v an hour later with the same target, want it kept from %s", s, t0)
	}
	v2 := planner.Result{State: planner.StateMoving, Versions: []planner.Version{
		{BuildID: "v1", Status: v1alpha1.VersionInactive}, {BuildID: "v2", Status: v1alpha1.VersionNotRegistered, Target: true}}}
	next := buildStatusOnly(later, 3, v2, outcome{}, nil, t0.Add(2*time.Hour))
	if s := next.TargetVersion.TargetSince; s == nil || !s.Time.Equal(t0.Add(2*time.Hour)) {
		t.Errorf("targetSince of the new target = %v, want %s", s, t0.Add(2*time.Hour))
	}
}
