package workerdeployment

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/internal/notify"
	"github.com/rainbow-deploy/rainbow/internal/planner"
)

func TestNotificationOnlyOnceTheActionTookEffect(t *testing.T) {
	o := &observation{
		twd:           &v1alpha1.TemporalWorkerDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "orders"}},
		targetBuildID: "v2",
		input:         planner.Input{Temporal: &planner.TemporalState{CurrentBuildID: "v1", RampingBuildID: "v2", RampPercentage: 25}},
	}
	ramp := &planner.Routing{Op: planner.SetRamp, BuildID: "v2", RampPercentage: 75}
	promote := &planner.Routing{Op: planner.SetCurrent, BuildID: "v2"}
	type want struct {
		typ                       notify.Type
		buildID, current, ramping string
		ramp                      int32
	}
	for name, c := range map[string]struct {
		e    planner.Event
		out  outcome
		want *want
	}{
		"created":                  {planner.Event{Reason: planner.EventCreateDeployment, BuildID: "v2"}, outcome{created: true}, &want{notify.RolloutStarted, "v2", "v1", "v2", 25}},
		"create failed":            {planner.Event{Reason: planner.EventCreateDeployment, BuildID: "v2"}, outcome{}, nil},
		"ramped":                   {planner.Event{Reason: planner.EventRamp, BuildID: "v2"}, outcome{routed: ramp}, &want{notify.RolloutStep, "v2", "v1", "v2", 75}},
		"ramp refused":             {planner.Event{Reason: planner.EventRamp, BuildID: "v2"}, outcome{}, nil},
		"promoted":                 {planner.Event{Reason: planner.EventPromote, BuildID: "v2"}, outcome{routed: promote}, &want{notify.RolloutPromoted, "v2", "v2", "", 0}},
		"retired":                  {planner.Event{Reason: planner.EventDeleteDeployment, BuildID: "v0"}, outcome{deletedDeployments: []string{"v0"}}, &want{notify.VersionRetired, "v0", "v1", "v2", 25}},
		"another one retired":      {planner.Event{Reason: planner.EventDeleteDeployment, BuildID: "v0"}, outcome{deletedDeployments: []string{"v1"}}, nil},
		"aborted names the target": {planner.Event{Reason: v1alpha1.ReasonRolloutAborted}, outcome{}, &want{notify.RolloutAborted, "v2", "v1", "v2", 25}},
		"paused":                   {planner.Event{Reason: v1alpha1.ReasonPaused}, outcome{}, &want{notify.RolloutPaused, "v2", "v1", "v2", 25}},
		"not a rollout event":      {planner.Event{Reason: planner.EventScale, BuildID: "v2"}, outcome{}, nil},
	} {
		t.Run(name, func(t *testing.T) {
			n, ok := notification(o, c.e, c.out, time.Unix(0, 0).In(time.FixedZone("CET", 3600)))
			if c.want == nil {
				if ok {
					t.Fatalf("notified %+v, want nothing", n)
				}
				return
			}
			got := want{n.Type, n.BuildID, n.CurrentBuildID, n.RampingBuildID, n.RampPercentage}
			if !ok || got != *c.want || n.Namespace != "shop" || n.Name != "orders" || n.TargetBuildID != "v2" || n.Time.Location() != time.UTC {
				t.Errorf("notified %v %+v, want %+v", ok, n, *c.want)
			}
		})
	}
}

func TestPausedIsRecordedOnceWhenReadyTurnsPaused(t *testing.T) {
	paused := planner.Result{State: planner.StateMoving, Ready: planner.Condition{Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonPaused, Message: "spec.rollout.paused holds version v2 ramping 25%"}}
	for name, c := range map[string]struct {
		before string
		want   int
	}{
		"turns paused":   {v1alpha1.ReasonRamping, 1},
		"already paused": {v1alpha1.ReasonPaused, 0},
	} {
		t.Run(name, func(t *testing.T) {
			rec := events.NewFakeRecorder(10)
			r := &Reconciler{Recorder: rec, Clock: clocktesting.NewFakePassiveClock(time.Unix(0, 0))}
			twd := &v1alpha1.TemporalWorkerDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "orders"}}
			twd.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: c.before, Message: "m"}}
			r.recordEvents(&observation{twd: twd, targetBuildID: "v2"}, paused, outcome{})
			close(rec.Events)
			var got []string
			for e := range rec.Events {
				got = append(got, e)
			}
			if len(got) != c.want || (c.want == 1 && !strings.HasPrefix(got[0], "Normal Paused")) {
				t.Errorf("Events %q, want %d Normal Paused", got, c.want)
			}
		})
	}
}
