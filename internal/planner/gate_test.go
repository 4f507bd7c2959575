package planner

import (
	"strings"
	"testing"
	"time"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
)

// checkTerminateGate compares the build ID and checks that the reason,
// which goes into the run's history, names the version and the request.
func checkTerminateGate(t *testing.T, got, want *TerminateGate) {
	t.Helper()
	switch {
	case got == nil && want == nil:
	case got == nil || want == nil || got.BuildID != want.BuildID:
		t.Errorf("TerminateGate = %+v, want %+v", got, want)
	case !strings.Contains(got.Reason, got.BuildID) || !strings.Contains(got.Reason, "cancellation request"):
		t.Errorf("TerminateGate reason %q does not name the version and its cancellation request", got.Reason)
	}
}

// TestGateEnding: a gate run nobody needs is cancelled, and terminated if
// it is still running GateCancelGrace after the request; the next gate
// starts only once it has ended.
func TestGateEnding(t *testing.T) {
	gated := func(in *Input) { in.Spec.GateWorkflowType = "Validate" }
	// requested: the run of build, its cancellation requested at t0+ago.
	requested := func(build string, ago time.Duration) func(*Input) {
		return func(in *Input) {
			in.Gate = &GateRun{BuildID: build, Phase: GateRunning, StartedAt: t0.Add(-time.Hour), CancelRequestedAt: t0.Add(ago)}
		}
	}
	waiting := "waiting for the gate workflow on version v1 to end"
	runCases(t, cases{
		"cancelled 10s ago, still running: the target's gate waits, looked at again backing off": {
			in: with(base(), gated, requested("v1", -10*time.Second)),
			want: expect{Ready: condFalse, Reason: v1alpha1.ReasonWaitingForPromotion, Progressing: condTrue, Requeue: 2500 * time.Millisecond,
				Message: waiting},
		},
		"cancelled 28s ago: looked at again exactly at the end of the grace period": {
			in: with(base(), gated, requested("v1", -28*time.Second)),
			want: expect{Ready: condFalse, Reason: v1alpha1.ReasonWaitingForPromotion, Progressing: condTrue, Requeue: 2 * time.Second,
				Message: "terminated at 2026-03-01T12:00:02Z if still running"},
		},
		"the grace period has passed: terminated, and the target's gate still waits": {
			in: with(base(), gated, requested("v1", -GateCancelGrace)),
			want: expect{TerminateGate: &TerminateGate{BuildID: "v1"}, Ready: condFalse, Reason: v1alpha1.ReasonWaitingForPromotion,
				Progressing: condTrue, Requeue: time.Second, Events: []string{EventTerminateGate}, Message: waiting},
		},
		"long past the grace period (a restart in between): terminated": {
			in: with(base(), gated, requested("v1", -time.Hour)),
			want: expect{TerminateGate: &TerminateGate{BuildID: "v1"}, Ready: condFalse, Reason: v1alpha1.ReasonWaitingForPromotion,
				Progressing: condTrue, Requeue: time.Second, Events: []string{EventTerminateGate}, Message: waiting},
		},
		"past the grace period, Temporal unknown: nothing until it is back": {
			in:   with(base(), gated, requested("v1", -time.Hour), func(in *Input) { in.Temporal = nil }),
			want: expect{Ready: condFalse, Reason: v1alpha1.ReasonTemporalStateFetchFailed, Progressing: condFalse, Requeue: 10 * time.Second},
		},
		"the target's own run asked to cancel, then needed again: no verdict from it, ended first": {
			in: with(base(), gated, requested("v2", -time.Minute)),
			want: expect{TerminateGate: &TerminateGate{BuildID: "v2"}, Ready: condFalse, Reason: v1alpha1.ReasonWaitingForPromotion,
				Progressing: condTrue, Requeue: time.Second, Events: []string{EventTerminateGate},
				Message: "waiting for the gate workflow on version v2 to end"},
		},
		"the spec dropped the gate: the rollout goes on while the run is ended": {
			in: with(base(), requested("v2", -time.Minute)),
			want: expect{Routing: &Routing{Op: SetCurrent, BuildID: "v2"}, TerminateGate: &TerminateGate{BuildID: "v2"}, Ready: condFalse,
				Reason: v1alpha1.ReasonWaitingForPromotion, Progressing: condTrue, Requeue: time.Second,
				Events: []string{EventPromote, EventTerminateGate}},
		},
		"the cancelled run ended: the target's gate starts": {
			in: with(base(), gated, func(in *Input) { in.Gate = &GateRun{BuildID: "v1", Phase: GateCancelled} }),
			want: expect{StartGate: &StartGate{BuildID: "v2", WorkflowType: "Validate", TaskQueue: "orders"}, Ready: condFalse, Reason: v1alpha1.ReasonWaitingForPromotion,
				Progressing: condTrue, Requeue: time.Second, Events: []string{EventStartGate}},
		},
		"the gate's input cannot be read: blocked, saying why": {
			in: with(base(), gated, func(in *Input) { in.Spec.GateInput.Problem = "ConfigMap gate-input has no key \"input\"" }),
			want: expect{Ready: condFalse, Reason: v1alpha1.ReasonGateCannotStart, Progressing: condFalse, Requeue: 30 * time.Second,
				Events: []string{v1alpha1.ReasonGateCannotStart}, Message: `cannot start gate workflow Validate on version v2: ConfigMap gate-input has no key "input"`},
		},
		"the target polls no workflow task queue: the gate cannot run there": {
			in: with(base(), gated, func(in *Input) {
				v2 := version("v2", v1alpha1.VersionInactive)
				v2.WorkflowTaskQueue = ""
				setVersion(in, v2)
			}),
			want: expect{Ready: condFalse, Reason: v1alpha1.ReasonGateCannotStart, Progressing: condFalse, Requeue: 30 * time.Second,
				Events: []string{v1alpha1.ReasonGateCannotStart}, Message: "poll no workflow task queue"},
		},
		"the gate starts with its input and timeout": {
			in: with(base(), gated, func(in *Input) { in.Spec.GateInput.Data, in.Spec.GateTimeout = []byte(`{"a":1}`), time.Hour }),
			want: expect{StartGate: &StartGate{BuildID: "v2", WorkflowType: "Validate", TaskQueue: "orders", Input: []byte(`{"a":1}`), Timeout: time.Hour},
				Ready: condFalse, Reason: v1alpha1.ReasonWaitingForPromotion, Progressing: condTrue, Requeue: time.Second, Events: []string{EventStartGate}},
		},
		"a ramping target does not wait for an old run": {
			in:   with(base(), gated, progressiveSteps, requested("v1", -5*time.Second), func(in *Input) { rampingTarget(in, 10, -time.Minute) }),
			want: expect{Ready: condFalse, Reason: v1alpha1.ReasonRamping, Progressing: condTrue, Requeue: 1250 * time.Millisecond},
		},
	})
}

// TestDeletionEndsTheGateFirst: a deletion cancels a running gate,
// terminates it after the grace period, and lets the finalizer go only
// once the run has ended.
func TestDeletionEndsTheGateFirst(t *testing.T) {
	gone := func(in *Input) {
		in.Deployments = nil
		in.Temporal.CurrentBuildID = ""
		in.Temporal.Versions = nil
	}
	run := func(ago time.Duration) func(*Input) {
		return func(in *Input) {
			in.Gate = &GateRun{BuildID: "v2", Phase: GateRunning}
			if ago != 0 {
				in.Gate.CancelRequestedAt = t0.Add(ago)
			}
		}
	}
	runCases(t, cases{
		"nothing left but a running gate: cancelled, the finalizer stays": {
			in: with(deleting(), gone, run(0)),
			want: expect{CancelGate: &CancelGate{BuildID: "v2", Reason: "the TemporalWorkerDeployment is being deleted"}, Ready: condFalse,
				Reason: v1alpha1.ReasonDeleting, Progressing: condTrue, Requeue: time.Second, Events: []string{EventCancelGate},
				Message: "waiting for the gate workflow on version v2 to end"},
		},
		"cancelled 5s ago: the finalizer still stays": {
			in: with(deleting(), gone, run(-5*time.Second)),
			want: expect{Ready: condFalse, Reason: v1alpha1.ReasonDeleting, Progressing: condTrue, Requeue: 1250 * time.Millisecond,
				Message: "terminated at 2026-03-01T12:00:25Z if still running"},
		},
		"past the grace period: terminated": {
			in: with(deleting(), gone, run(-time.Minute)),
			want: expect{TerminateGate: &TerminateGate{BuildID: "v2"}, Ready: condFalse, Reason: v1alpha1.ReasonDeleting, Progressing: condTrue,
				Requeue: time.Second, Events: []string{EventTerminateGate}},
		},
		"the run ended: the worker deployment and the finalizer go": {
			in: with(deleting(), gone, func(in *Input) { in.Gate = &GateRun{BuildID: "v2", Phase: GateCancelled} }),
			want: expect{DeleteWorkerDeployment: true, RemoveFinalizer: true, Ready: condFalse, Reason: v1alpha1.ReasonDeleting, Progressing: condTrue,
				Requeue: time.Minute, Events: []string{v1alpha1.ReasonDeleting}},
		},
	})
}
