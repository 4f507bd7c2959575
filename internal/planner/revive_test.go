package planner

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
)

// zeroed is a Deployment someone else (an autoscaler, a person) scaled to
// zero: no ScaledDownAt.
func zeroed(build string) Deployment {
	return Deployment{BuildID: build, Name: "worker-" + build, Replicas: 0, Available: true, Server: here}
}

func backlog(build string, n int64) func(*Input) {
	return func(in *Input) {
		for i := range in.Temporal.Versions {
			if in.Temporal.Versions[i].BuildID == build {
				in.Temporal.Versions[i].Backlog = ptr(n)
			}
		}
	}
}

// autoscaledTarget: no spec.replicas, the target v2 is current, v1 drains.
func autoscaledTarget(in *Input) {
	rolledOut(in)
	in.Spec.Replicas = nil
}

// TestStrandedVersions: a version someone else scaled to zero is never
// taken for drained, and gets one worker back once work waits for it;
// without waiting work its autoscaler's scale-to-zero stands.
func TestStrandedVersions(t *testing.T) {
	revived := func(build string, st v1alpha1.VersionStatus, backlog *int64) []Scale {
		return []Scale{{Name: "worker-" + build, BuildID: build, Replicas: 1, Reason: ScaleRevive,
			Revival: &Revival{At: t0, FromReplicas: 0, Replicas: 1, Status: st, Backlog: backlog}}}
	}
	runCases(t, cases{
		"draining, zeroed by an autoscaler, tasks wait: one worker back": {
			in:   with(base(), autoscaledTarget, func(in *Input) { setDep(in, zeroed("v1")) }, backlog("v1", 3)),
			want: ready(expect{Scale: revived("v1", draining, ptr[int64](3)), Requeue: 30 * time.Second, Events: []string{EventScale}}),
		},
		"draining, zeroed, no task waits: left at zero, and not taken for drained": {
			in:   with(base(), autoscaledTarget, func(in *Input) { setDep(in, zeroed("v1")) }, backlog("v1", 0)),
			want: ready(expect{Requeue: time.Minute}),
		},
		"draining, zeroed, backlog not read: one worker back": {
			in:   with(base(), autoscaledTarget, func(in *Input) { setDep(in, zeroed("v1")) }),
			want: ready(expect{Scale: revived("v1", draining, nil), Requeue: 30 * time.Second, Events: []string{EventScale}}),
		},
		"draining, zeroed by hand under spec.replicas: one worker back too": {
			in:   with(base(), rolledOut, func(in *Input) { setDep(in, zeroed("v1")) }, backlog("v1", 1)),
			want: ready(expect{Scale: revived("v1", draining, ptr[int64](1)), Requeue: 30 * time.Second, Events: []string{EventScale}}),
		},
		"the current target zeroed by its autoscaler, tasks wait: one worker back": {
			in:   with(base(), autoscaledTarget, func(in *Input) { setDep(in, zeroed("v2")) }, backlog("v2", 2)),
			want: ready(expect{Scale: revived("v2", v1alpha1.VersionCurrent, ptr[int64](2)), Requeue: 30 * time.Second, Events: []string{EventScale}}),
		},
		"the current target zeroed, nothing waits: its autoscaler's zero stands": {
			in:   with(base(), autoscaledTarget, func(in *Input) { setDep(in, zeroed("v2")) }, backlog("v2", 0)),
			want: ready(expect{Requeue: time.Minute}),
		},
		"the current target zeroed under spec.replicas: back to spec.replicas": {
			in: with(base(), rolledOut, func(in *Input) { setDep(in, zeroed("v2")) }, backlog("v2", 0)),
			want: ready(expect{Scale: []Scale{{Name: "worker-v2", BuildID: "v2", Replicas: 3, Reason: ScaleToSpec}},
				Requeue: 30 * time.Second, Events: []string{EventScale}}),
		},
		"a ramping version other than the target, zeroed, tasks wait: one worker back": {
			in: with(base(), func(in *Input) {
				in.Spec.TargetBuildID, in.Spec.Strategy, in.Spec.Replicas = "v3", v1alpha1.StrategyManual, nil
				in.Temporal.RampingBuildID, in.Temporal.RampPercentage = "v2", 10
				setVersion(in, version("v2", ramping))
				setVersion(in, version("v3", inactive))
				setDep(in, zeroed("v2"))
				setDep(in, running("v3"))
			}, backlog("v2", 4)),
			want: expect{Scale: revived("v2", ramping, ptr[int64](4)), Ready: condFalse, Reason: v1alpha1.ReasonWaitingForPromotion, Progressing: condTrue,
				Requeue: 30 * time.Second, Events: []string{EventScale}},
		},
		"drained, zeroed by someone else: sunset records the time, as before": {
			in: with(base(), autoscaledTarget, func(in *Input) {
				tv := version("v1", drained)
				tv.DrainedSince = at(-2 * time.Hour)
				setVersion(in, tv)
				setDep(in, zeroed("v1"))
			}, backlog("v1", 5)),
			want: ready(expect{Scale: []Scale{{Name: "worker-v1", BuildID: "v1", Replicas: 0, Reason: ScaleSunset}},
				Requeue: 30 * time.Second, Events: []string{EventScaleDown}}),
		},
		"zeroed on another Temporal server: left alone": {
			in: with(base(), autoscaledTarget, func(in *Input) {
				in.Server = serverA
				for i := range in.Deployments {
					in.Deployments[i].Server = serverA
				}
				d := zeroed("v1")
				d.Server = serverB
				setDep(in, d)
			}, backlog("v1", 3)),
			want: ready(expect{Requeue: time.Minute}),
		},
		"Temporal unknown: nothing scaled up or down": {
			in: with(base(), autoscaledTarget, func(in *Input) {
				setDep(in, zeroed("v1"))
				in.Temporal = nil
			}),
			want: expect{Ready: condFalse, Reason: v1alpha1.ReasonTemporalStateFetchFailed, Progressing: condFalse, Requeue: 10 * time.Second},
		},
	})
}

func TestStrandedVersionMessage(t *testing.T) {
	res := Plan(with(base(), autoscaledTarget, func(in *Input) { setDep(in, zeroed("v1")) }, backlog("v1", 3)))
	if len(res.Events) != 1 || !strings.Contains(res.Events[0].Message, "3 task(s) of its pinned workflows wait") {
		t.Errorf("events = %+v, want one saying what waits", res.Events)
	}
	// Status tells the same as the Event, without naming the Deployment.
	if len(res.Scale) != 1 || res.Scale[0].Revival == nil || !strings.HasSuffix(res.Events[0].Message, ": "+res.Scale[0].Revival.Message) {
		t.Errorf("scale %s: the revival's message is not the Event's reason (%q)", scalesText(res.Scale), res.Events[0].Message)
	}
}

// TestStrandedDuringDeletion: while a deletion waits for drainage, a
// zeroed draining version with waiting tasks gets its worker back too.
func TestStrandedDuringDeletion(t *testing.T) {
	in := with(base(), autoscaledTarget, func(in *Input) {
		in.Temporal.CurrentBuildID = ""
		setVersion(in, version("v2", draining))
		setDep(in, zeroed("v1"))
		in.Deletion = &Deletion{Object: "default/worker", RequestedAt: t0.Add(-time.Minute), Policy: v1alpha1.DeletionWaitForDrain}
	}, backlog("v1", 1))
	got := Plan(in).Scale
	want := []Scale{{Name: "worker-v1", BuildID: "v1", Replicas: 1, Reason: ScaleRevive,
		Revival: &Revival{At: t0, Replicas: 1, Status: draining, Backlog: ptr[int64](1)}}}
	if !reflect.DeepEqual(withoutRevivalMessages(t, got), want) {
		t.Errorf("Scale = %s, want %s", scalesText(got), scalesText(want))
	}
}

func TestBacklogsToRead(t *testing.T) {
	in := with(base(), autoscaledTarget, func(in *Input) {
		setDep(in, zeroed("v1"))
		setDep(in, zeroed("v2"))
		setVersion(in, version("v0", drained))
		setDep(in, zeroed("v0"))
		setVersion(in, version("v3", draining))
		setDep(in, running("v3"))
	})
	if got, want := BacklogsToRead(in), []string{"v1", "v2"}; !reflect.DeepEqual(got, want) {
		t.Errorf("BacklogsToRead = %v, want %v (the zeroed versions Temporal may hand work)", got, want)
	}
	in.Temporal = nil
	if got := BacklogsToRead(in); got != nil {
		t.Errorf("BacklogsToRead without Temporal = %v, want none", got)
	}
}
