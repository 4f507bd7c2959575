package planner

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
)

const me = "rainbow-controller"

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func ptr[T any](v T) *T { return &v }

// at is t0+d as a pointer, for the optional timestamps.
func at(d time.Duration) *time.Time { return ptr(t0.Add(d)) }

// registeredAt gives each build a fixed registration time, oldest first.
var registeredAt = map[string]time.Duration{
	"v0": -72 * time.Hour, "v1": -48 * time.Hour, "v2": -time.Hour, "v3": -10 * time.Minute,
}

// running is an available Deployment with 3 replicas.
// here is the server the TWD's connection names in these tests.
var here = Server{Address: "temporal:7233"}

func running(build string) Deployment {
	return Deployment{BuildID: build, Name: "worker-" + build, Replicas: 3, Available: true, Server: here}
}

// scaledDown is a Deployment the controller scaled to zero at t0+d.
func scaledDown(build string, d time.Duration) Deployment {
	return Deployment{BuildID: build, Name: "worker-" + build, Replicas: 0, Available: true, ScaledDownAt: at(d), Server: here}
}

// version is a registered version whose workers poll every task queue.
func version(build string, s v1alpha1.VersionStatus) TemporalVersion {
	tv := TemporalVersion{BuildID: build, Status: s, RegisteredAt: t0.Add(registeredAt[build]), Described: true, TaskQueuesReady: true, HasPollers: true,
		WorkflowTaskQueue: "orders"}
	switch s {
	case v1alpha1.VersionCurrent:
		tv.CurrentSince, tv.LastCurrentAt = at(-24*time.Hour), at(-24*time.Hour)
	case v1alpha1.VersionRamping:
		tv.RampingSince = at(-10 * time.Minute)
	case v1alpha1.VersionDraining:
		tv.LastCurrentAt = at(-24 * time.Hour)
	case v1alpha1.VersionDrained:
		tv.LastCurrentAt, tv.DrainedSince = at(-24*time.Hour), at(-10*time.Minute)
	}
	return tv
}

// base: v1 is current, v2 is the target, registered and polled (AllAtOnce).
func base() Input {
	return Input{
		Now:            t0,
		Identity:       me,
		DeploymentName: "default/worker",
		Server:         here,
		Spec: Spec{
			TargetBuildID:  "v2",
			Replicas:       ptr[int32](3),
			Strategy:       v1alpha1.StrategyAllAtOnce,
			ScaledownDelay: time.Hour,
			DeleteDelay:    24 * time.Hour,
		},
		Deployments: []Deployment{running("v1"), running("v2")},
		Temporal: &TemporalState{
			Exists:               true,
			ManagerIdentity:      me,
			LastModifierIdentity: me,
			CurrentBuildID:       "v1",
			Versions:             []TemporalVersion{version("v1", v1alpha1.VersionCurrent), version("v2", v1alpha1.VersionInactive)},
		},
	}
}

func progressiveSteps(in *Input) {
	in.Spec.Strategy = v1alpha1.StrategyProgressive
	in.Spec.Steps = []Step{{RampPercentage: 10, Pause: 5 * time.Minute}, {RampPercentage: 50, Pause: 10 * time.Minute}}
}

// rampingTarget makes v2 ramp pct%, changed at t0+changed.
func rampingTarget(in *Input, pct int32, changed time.Duration) {
	in.Temporal.RampingBuildID = "v2"
	in.Temporal.RampPercentage = pct
	in.Temporal.RampChangedAt = t0.Add(changed)
	setVersion(in, version("v2", v1alpha1.VersionRamping))
}

func with(in Input, mods ...func(*Input)) Input {
	for _, m := range mods {
		m(&in)
	}
	return in
}

func setVersion(in *Input, tv TemporalVersion) {
	for i := range in.Temporal.Versions {
		if in.Temporal.Versions[i].BuildID == tv.BuildID {
			in.Temporal.Versions[i] = tv
			return
		}
	}
	in.Temporal.Versions = append(in.Temporal.Versions, tv)
}

func dropVersion(in *Input, build string) {
	var out []TemporalVersion
	for _, tv := range in.Temporal.Versions {
		if tv.BuildID != build {
			out = append(out, tv)
		}
	}
	in.Temporal.Versions = out
}

// setDep sets a Deployment; one naming no server runs on the input's.
func setDep(in *Input, d Deployment) {
	if d.Server == (Server{}) {
		d.Server = in.Server
	}
	for i := range in.Deployments {
		if in.Deployments[i].BuildID == d.BuildID {
			in.Deployments[i] = d
			return
		}
	}
	in.Deployments = append(in.Deployments, d)
}

func dropDep(in *Input, build string) {
	var out []Deployment
	for _, d := range in.Deployments {
		if d.BuildID != build {
			out = append(out, d)
		}
	}
	in.Deployments = out
}

// expect lists every action a case expects; nil or empty means none.
type expect struct {
	Create         *CreateDeployment
	Update         *UpdateDeployment
	Scale          []Scale
	Delete         []string // Deployment names
	Sync           []SyncDeployment
	Routing        *Routing
	BecomeManager  bool
	StartGate      *StartGate
	CancelGate     *CancelGate
	TerminateGate  *TerminateGate // BuildID compared; Reason checked by checkTerminateGate
	DeleteVersions []string
	// Deletion only.
	SkipDrainage           bool
	DeleteWorkerDeployment bool
	RemoveFinalizer        bool
	Ready                  metav1.ConditionStatus
	Reason                 string // of Ready (and of Progressing unless the rollout is complete)
	Progressing            metav1.ConditionStatus
	Requeue                time.Duration
	Events                 []string // reasons, in order
	Message                string   // substring of the Ready message
}

// withoutMessage drops the free-form message, which check tests apart.
func withoutMessage(u *UpdateDeployment) *UpdateDeployment {
	if u == nil {
		return nil
	}
	c := *u
	c.Message = ""
	return &c
}

// withoutRevivalMessages drops the free-form message of revivals, after
// checking that each says why.
func withoutRevivalMessages(t *testing.T, scales []Scale) []Scale {
	t.Helper()
	out := slices.Clone(scales)
	for i, s := range out {
		if s.Revival == nil {
			continue
		}
		if !strings.Contains(s.Revival.Message, "scaled to zero by someone else") {
			t.Errorf("revival message %q does not say why", s.Revival.Message)
		}
		r := *s.Revival
		r.Message = ""
		out[i].Revival = &r
	}
	return out
}

func scalesText(scales []Scale) string {
	var b strings.Builder
	for _, s := range scales {
		fmt.Fprintf(&b, "%+v", s)
		if r := s.Revival; r != nil {
			backlog := "unread"
			if r.Backlog != nil {
				backlog = fmt.Sprint(*r.Backlog)
			}
			fmt.Fprintf(&b, " revived at %s from %d to %d, %s, backlog %s", r.At.Format(time.RFC3339), r.FromReplicas, r.Replicas, r.Status, backlog)
		}
		b.WriteString("; ")
	}
	return b.String()
}

func check(t *testing.T, in Input, want expect) Result {
	t.Helper()
	got := Plan(in)
	if !reflect.DeepEqual(got.CreateDeployment, want.Create) {
		t.Errorf("CreateDeployment = %+v, want %+v", got.CreateDeployment, want.Create)
	}
	if u := got.UpdateDeployment; u != nil && !u.HashOnly && !strings.Contains(u.Message, "in place") {
		t.Errorf("UpdateDeployment.Message = %q, want why the Deployment is updated in place", u.Message)
	}
	if !reflect.DeepEqual(withoutMessage(got.UpdateDeployment), want.Update) {
		t.Errorf("UpdateDeployment = %+v, want %+v", got.UpdateDeployment, want.Update)
	}
	if !reflect.DeepEqual(withoutRevivalMessages(t, got.Scale), want.Scale) {
		t.Errorf("Scale = %s, want %s", scalesText(got.Scale), scalesText(want.Scale))
	}
	var deleted []string
	for _, d := range got.DeleteDeployments {
		deleted = append(deleted, d.Name)
	}
	if !reflect.DeepEqual(deleted, want.Delete) {
		t.Errorf("DeleteDeployments = %v, want %v", deleted, want.Delete)
	}
	if !reflect.DeepEqual(got.SyncDeployments, want.Sync) {
		t.Errorf("SyncDeployments = %+v, want %+v", got.SyncDeployments, want.Sync)
	}
	if !reflect.DeepEqual(got.Routing, want.Routing) {
		t.Errorf("Routing = %+v, want %+v", got.Routing, want.Routing)
	}
	if got.BecomeManager != want.BecomeManager {
		t.Errorf("BecomeManager = %v, want %v", got.BecomeManager, want.BecomeManager)
	}
	if !reflect.DeepEqual(got.StartGate, want.StartGate) {
		t.Errorf("StartGate = %+v, want %+v", got.StartGate, want.StartGate)
	}
	if !reflect.DeepEqual(got.CancelGate, want.CancelGate) {
		t.Errorf("CancelGate = %+v, want %+v", got.CancelGate, want.CancelGate)
	}
	checkTerminateGate(t, got.TerminateGate, want.TerminateGate)
	if !reflect.DeepEqual(got.DeleteTemporalVersions, want.DeleteVersions) {
		t.Errorf("DeleteTemporalVersions = %v, want %v", got.DeleteTemporalVersions, want.DeleteVersions)
	}
	if got.SkipDrainage != want.SkipDrainage || got.DeleteWorkerDeployment != want.DeleteWorkerDeployment || got.RemoveFinalizer != want.RemoveFinalizer {
		t.Errorf("SkipDrainage, DeleteWorkerDeployment, RemoveFinalizer = %v, %v, %v, want %v, %v, %v",
			got.SkipDrainage, got.DeleteWorkerDeployment, got.RemoveFinalizer, want.SkipDrainage, want.DeleteWorkerDeployment, want.RemoveFinalizer)
	}
	if got.Ready.Status != want.Ready || got.Ready.Reason != want.Reason {
		t.Errorf("Ready = %s/%s (%s), want %s/%s", got.Ready.Status, got.Ready.Reason, got.Ready.Message, want.Ready, want.Reason)
	}
	wantProgReason := want.Reason
	if want.Ready == metav1.ConditionTrue {
		wantProgReason = v1alpha1.ReasonRolloutComplete
	}
	if got.Progressing.Status != want.Progressing || got.Progressing.Reason != wantProgReason {
		t.Errorf("Progressing = %s/%s, want %s/%s", got.Progressing.Status, got.Progressing.Reason, want.Progressing, wantProgReason)
	}
	if got.RequeueAfter != want.Requeue {
		t.Errorf("RequeueAfter = %s, want %s", got.RequeueAfter, want.Requeue)
	}
	var reasons []string
	for _, e := range got.Events {
		reasons = append(reasons, e.Reason)
	}
	if !reflect.DeepEqual(reasons, want.Events) {
		t.Errorf("Events = %v, want %v (%+v)", reasons, want.Events, got.Events)
	}
	if want.Message != "" && !strings.Contains(got.Ready.Message, want.Message) {
		t.Errorf("Ready message %q does not contain %q", got.Ready.Message, want.Message)
	}
	if t.Failed() {
		t.Logf("Ready message: %s", got.Ready.Message)
	}
	return got
}

const (
	condTrue  = metav1.ConditionTrue
	condFalse = metav1.ConditionFalse
)

// rolledOut: v2 is the target and current; v1, the old version, drains.
func rolledOut(in *Input) {
	in.Temporal.CurrentBuildID = "v2"
	setVersion(in, version("v2", v1alpha1.VersionCurrent))
	setVersion(in, version("v1", v1alpha1.VersionDraining))
}

// ready completes e with the conditions of a complete rollout.
func ready(e expect) expect {
	e.Ready, e.Reason, e.Progressing = condTrue, v1alpha1.ReasonRolloutComplete, condFalse
	return e
}
