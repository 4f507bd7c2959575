package workerdeployment

import (
	"context"
	"fmt"
	"strings"
	"testing"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/integrations/argocd"
	"github.com/rainbow-deploy/rainbow/internal/planner"
	"github.com/rainbow-deploy/rainbow/internal/temporal"
)

// passStatus runs one pass and returns the TWD as written, with what
// kstatus and the shipped Argo CD health check make of it.
func (f *fixture) passStatus() (v1alpha1.TemporalWorkerDeployment, status.Status, string) {
	f.t.Helper()
	f.reconcile()
	var got v1alpha1.TemporalWorkerDeployment
	if err := f.client.Get(context.Background(), client.ObjectKeyFromObject(f.twd), &got); err != nil {
		f.t.Fatal(err)
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&got)
	if err != nil {
		f.t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: obj}
	u.SetAPIVersion(v1alpha1.GroupVersion.String())
	u.SetKind("TemporalWorkerDeployment")
	k, err := status.Compute(u)
	if err != nil {
		f.t.Fatal(err)
	}
	h, err := argocd.RunHealth(argocd.HealthScript(), u.Object)
	if err != nil {
		f.t.Fatal(err)
	}
	return got, k.Status, h.Status
}

// completeStatus is the status of a rollout of the fixture's spec that
// made build current, as of generation 1.
func completeStatus(build string) v1alpha1.TemporalWorkerDeploymentStatus {
	st := v1alpha1.TemporalWorkerDeploymentStatus{ObservedGeneration: 1,
		CurrentVersion: &v1alpha1.WorkerVersion{BuildID: build, Status: v1alpha1.VersionCurrent}}
	st.TargetVersion = st.CurrentVersion.DeepCopy()
	for typ, s := range map[string]metav1.ConditionStatus{v1alpha1.ConditionReady: metav1.ConditionTrue, v1alpha1.ConditionProgressing: metav1.ConditionFalse,
		v1alpha1.ConditionReconciling: metav1.ConditionFalse, v1alpha1.ConditionStalled: metav1.ConditionFalse} {
		st.Conditions = append(st.Conditions, metav1.Condition{Type: typ, Status: s, Reason: v1alpha1.ReasonRolloutComplete, ObservedGeneration: 1,
			LastTransitionTime: metav1.Now()})
	}
	return st
}

// TestNewSpecWhileTemporalThrottles: a spec the controller has not acted on
// yet, read while Temporal throttles or fails reads for a moment (as it
// does right after a routing change), is progressing: never Stalled, which
// kstatus reads as Failed and Argo CD as Degraded.
func TestNewSpecWhileTemporalThrottles(t *testing.T) {
	for name, fault := range map[string]func(*stubTemporal){
		"throttled":        func(s *stubTemporal) { s.busy = true },
		"failing a moment": func(s *stubTemporal) { s.unavailable = true },
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			old := f.build()
			f.runningDeployment()
			f.registered(true, enumspb.WORKER_DEPLOYMENT_VERSION_STATUS_CURRENT)
			f.twd.Status = completeStatus(old)
			// The spec moves on: a new template, generation 2.
			f.twd.Generation = 2
			f.twd.Spec.Template.Spec.Containers[0].Image = "orders:v2"
			fault(f.temporal)
			got, k, health := f.passStatus()
			if got.Status.ObservedGeneration != 2 {
				t.Errorf("observedGeneration = %d, want 2: status must follow the spec", got.Status.ObservedGeneration)
			}
			for _, c := range got.Status.Conditions {
				if c.Reason != v1alpha1.ReasonWaitingForTemporal {
					t.Errorf("%s: reason %s (%s), want %s", c.Type, c.Reason, c.Message, v1alpha1.ReasonWaitingForTemporal)
				}
			}
			if c := findCond(got.Status.Conditions, v1alpha1.ConditionStalled); c.Status != metav1.ConditionFalse {
				t.Errorf("Stalled = %+v, want False", c)
			}
			if c := findCond(got.Status.Conditions, v1alpha1.ConditionProgressing); c.Status != metav1.ConditionTrue {
				t.Errorf("Progressing = %+v, want True", c)
			}
			if k != status.InProgressStatus || health != "Progressing" {
				t.Errorf("kstatus %s, Argo CD %s; want InProgress and Progressing", k, health)
			}
		})
	}
}

// TestReadyOnlyOnceTemporalAppliedTheRouting: the pass that makes the
// target current, and every pass while Temporal reports the change still
// being applied to the task queues, leave Ready False and
// status.currentVersion as it was; the first pass that reads it applied
// reports the target current.
func TestReadyOnlyOnceTemporalAppliedTheRouting(t *testing.T) {
	f := newFixture(t)
	build := f.build()
	f.runningDeployment()
	f.registered(false, enumspb.WORKER_DEPLOYMENT_VERSION_STATUS_INACTIVE)
	got, k, health := f.passStatus()
	if w := f.temporal.writes; len(w) != 1 {
		t.Fatalf("Temporal writes %v, want the one making %s current", w, build)
	}
	notYet := func(when string) {
		t.Helper()
		c := findCond(got.Status.Conditions, v1alpha1.ConditionReady)
		if c.Status == metav1.ConditionTrue || c.Reason != v1alpha1.ReasonWaitingForTemporal || got.Status.CurrentVersion != nil {
			t.Errorf("%s: Ready %+v, currentVersion %+v; want Ready False (%s) and no current version", when, c, got.Status.CurrentVersion, v1alpha1.ReasonWaitingForTemporal)
		}
		if got.Status.TargetVersion == nil || got.Status.TargetVersion.Status == v1alpha1.VersionCurrent {
			t.Errorf("%s: targetVersion %+v, want it not shown current yet", when, got.Status.TargetVersion)
		}
		if k != status.InProgressStatus || health != "Progressing" {
			t.Errorf("%s: kstatus %s, Argo CD %s; want InProgress and Progressing", when, k, health)
		}
	}
	notYet("right after the routing write")

	f.twd = &got
	f.registered(true, enumspb.WORKER_DEPLOYMENT_VERSION_STATUS_CURRENT)
	f.temporal.state.RoutingConfigUpdateState = enumspb.ROUTING_CONFIG_UPDATE_STATE_IN_PROGRESS
	got, k, health = f.passStatus()
	notYet("while Temporal applies it")

	f.twd = &got
	f.temporal.state.RoutingConfigUpdateState = enumspb.ROUTING_CONFIG_UPDATE_STATE_COMPLETED
	got, k, health = f.passStatus()
	if c := findCond(got.Status.Conditions, v1alpha1.ConditionReady); c.Status != metav1.ConditionTrue ||
		got.Status.CurrentVersion == nil || got.Status.CurrentVersion.BuildID != build {
		t.Errorf("once applied: Ready %+v, currentVersion %+v; want Ready and %s current", c, got.Status.CurrentVersion, build)
	}
	if k != status.CurrentStatus || health != "Healthy" {
		t.Errorf("once applied: kstatus %s, Argo CD %s; want Current and Healthy", k, health)
	}
}

// TestUnansweredWriteIsNoFailure: a Temporal write that gets no answer for
// a moment (unavailable, timed out) leaves the plan's conditions as they
// are, saying it is retried; any other failed write, or one past the
// outage bound, is PlanExecutionFailed and Stalled.
func TestUnansweredWriteIsNoFailure(t *testing.T) {
	moving := planner.Report{State: planner.StateMoving,
		Ready:       planner.Condition{Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonWaitingForPromotion, Message: "making version v2 current"},
		Progressing: planner.Condition{Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonWaitingForPromotion, Message: "making version v2 current"}}
	unavailable := &temporal.Error{Op: "SetCurrent", Err: serviceerror.NewUnavailable("connection refused")}
	late := &temporal.Error{Op: "SetCurrent", Err: context.DeadlineExceeded}
	kubeLate := fmt.Errorf("update Deployment: %w", context.DeadlineExceeded)
	refused := &temporal.Error{Op: "SetCurrent", Kind: temporal.ErrRefused, Err: serviceerror.NewFailedPrecondition("no")}
	for name, tc := range map[string]struct {
		errs      []error
		momentary bool
		stalled   bool
	}{
		"unavailable for a moment":     {errs: []error{unavailable}, momentary: true},
		"timed out for a moment":       {errs: []error{late}, momentary: true},
		"past the bound":               {errs: []error{unavailable}, stalled: true},
		"refused":                      {errs: []error{refused}, stalled: true},
		"refused and unavailable":      {errs: []error{refused, unavailable}, stalled: true},
		"a Kubernetes write timed out": {errs: []error{kubeLate}, stalled: true},
	} {
		t.Run(name, func(t *testing.T) {
			if got := unanswered(tc.errs); got != (tc.momentary || name == "past the bound") {
				t.Errorf("unanswered(%v) = %v", tc.errs, got)
			}
			res := withOutcome(moving, outcome{failed: tc.errs, momentary: tc.momentary})
			_, stalled := kstatusConditions(res)
			if (stalled.Status == metav1.ConditionTrue) != tc.stalled {
				t.Errorf("Stalled = %s (%s: %s), want stalled %v", stalled.Status, stalled.Reason, stalled.Message, tc.stalled)
			}
			if tc.momentary && (res.Progressing.Status != metav1.ConditionTrue || !strings.Contains(res.Progressing.Message, "retrying")) {
				t.Errorf("Progressing = %+v, want True and saying the write is retried", res.Progressing)
			}
		})
	}
}

// TestStatusKeepsTheRoutingTemporalStillApplies: while Temporal applies a
// routing change, status keeps the current version and the ramp it showed.
func TestStatusKeepsTheRoutingTemporalStillApplies(t *testing.T) {
	pct := func(p int32) *int32 { return &p }
	old := v1alpha1.TemporalWorkerDeploymentStatus{
		CurrentVersion: &v1alpha1.WorkerVersion{BuildID: "v0", Status: v1alpha1.VersionCurrent},
		TargetVersion:  &v1alpha1.WorkerVersion{BuildID: "v1", Status: v1alpha1.VersionRamping, RampPercentage: pct(25)},
	}
	res := planner.Result{RoutingPropagating: true, Versions: []planner.Version{
		{BuildID: "v0", Status: v1alpha1.VersionDraining},
		{BuildID: "v1", Status: v1alpha1.VersionCurrent, Target: true},
	}}
	st := buildStatusOnly(old, 2, res, outcome{}, nil, t0)
	if c := st.CurrentVersion; c == nil || c.BuildID != "v0" || c.Status != v1alpha1.VersionCurrent {
		t.Errorf("currentVersion = %+v, want v0 Current until Temporal applied the change", c)
	}
	if tv := st.TargetVersion; tv == nil || tv.Status != v1alpha1.VersionRamping || tv.RampPercentage == nil || *tv.RampPercentage != 25 {
		t.Errorf("targetVersion = %+v, want v1 still Ramping 25%%", tv)
	}
	res.RoutingPropagating = false
	st = buildStatusOnly(old, 2, res, outcome{}, nil, t0)
	if c := st.CurrentVersion; c == nil || c.BuildID != "v1" {
		t.Errorf("once applied, currentVersion = %+v, want v1", c)
	}
}

// TestStatusShowsTheAppliedRoutingAWriteReplaces: a pass that reads a ramp
// Temporal has applied since the last status, and replaces it at once
// (the step's pause is over), shows that ramp while the next is applied:
// it is what new workflows get meanwhile, not the routing shown before it.
func TestStatusShowsTheAppliedRoutingAWriteReplaces(t *testing.T) {
	pct := func(p int32) *int32 { return &p }
	old := v1alpha1.TemporalWorkerDeploymentStatus{
		CurrentVersion: &v1alpha1.WorkerVersion{BuildID: "v0", Status: v1alpha1.VersionCurrent},
		TargetVersion:  &v1alpha1.WorkerVersion{BuildID: "v1", Status: v1alpha1.VersionInactive},
	}
	next := &planner.Routing{Op: planner.SetRamp, BuildID: "v1", RampPercentage: 75}
	res := planner.Result{Routing: next, Versions: []planner.Version{
		{BuildID: "v0", Status: v1alpha1.VersionCurrent},
		{BuildID: "v1", Status: v1alpha1.VersionRamping, RampPercentage: pct(25), Target: true},
	}, Projected: &planner.Report{RoutingPropagating: true, Routes: true, Versions: []planner.Version{
		{BuildID: "v0", Status: v1alpha1.VersionCurrent},
		{BuildID: "v1", Status: v1alpha1.VersionRamping, RampPercentage: pct(75), Target: true},
	}}}
	st := buildStatusOnly(old, 2, res, outcome{routed: next}, nil, t0)
	if tv := st.TargetVersion; tv == nil || tv.Status != v1alpha1.VersionRamping || tv.RampPercentage == nil || *tv.RampPercentage != 25 {
		t.Errorf("targetVersion = %+v, want v1 Ramping 25%%, the ramp Temporal applied, while 75%% is applied", tv)
	}
	// Read while still applying, the routing status showed stands.
	res.RoutingPropagating = true
	st = buildStatusOnly(old, 2, res, outcome{routed: next}, nil, t0)
	if tv := st.TargetVersion; tv == nil || tv.Status != v1alpha1.VersionInactive || tv.RampPercentage != nil {
		t.Errorf("targetVersion = %+v, want v1 Inactive as shown, Temporal not having applied the 25%% ramp", tv)
	}
}
