package planner

import (
	"testing"
	"time"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
)

// deleting: the TWD of base() was deleted a minute ago (WaitForDrain), and
// routing has been moved off: v1 drains, v2 is inactive.
func deleting() Input {
	return with(base(), func(in *Input) {
		in.Deletion = &Deletion{Object: "default/worker", RequestedAt: t0.Add(-time.Minute), Policy: v1alpha1.DeletionWaitForDrain, StatusShowedVersions: true}
		in.Temporal.CurrentBuildID = ""
		setVersion(in, version("v1", draining))
	})
}

func deleteDeps(names ...string) []string { return names }

func TestDeletion(t *testing.T) {
	const deletingReason = v1alpha1.ReasonDeleting
	runCases(t, cases{
		"a current version: new workflows go to unversioned workers first": {
			in: with(base(), func(in *Input) {
				in.Deletion = &Deletion{RequestedAt: t0, Policy: v1alpha1.DeletionWaitForDrain}
			}),
			want: expect{Routing: &Routing{Op: SetCurrent}, Ready: condFalse, Reason: deletingReason, Progressing: condTrue,
				Requeue: time.Second, Events: []string{deletingReason}},
		},
		"a ramp is removed before the current version": {
			in: with(base(), func(in *Input) {
				in.Deletion = &Deletion{RequestedAt: t0, Policy: v1alpha1.DeletionWaitForDrain}
				rampingTarget(in, 10, -time.Minute)
			}),
			want: expect{Routing: &Routing{Op: RemoveRamp}, Ready: condFalse, Reason: deletingReason, Progressing: condTrue,
				Requeue: time.Second, Events: []string{deletingReason}},
		},
		"WaitForDrain: a draining version keeps its workers": {
			in: deleting(),
			want: expect{Ready: condFalse, Reason: deletingReason, Progressing: condTrue, Requeue: 15 * time.Second,
				Message: "deletion waits for versions [v1] to drain"},
		},
		"WaitForDrain: the message says how to stop waiting": {
			in: deleting(),
			want: expect{Ready: condFalse, Reason: deletingReason, Progressing: condTrue, Requeue: 15 * time.Second,
				Message: `kubectl patch twd worker -n default --type=merge -p '{"spec":{"deletion":{"policy":"Immediate"}}}'`},
		},
		"WaitForDrain: the wait backs off to once a minute": {
			in: with(deleting(), func(in *Input) { in.Deletion.RequestedAt = t0.Add(-time.Hour) }),
			want: expect{Ready: condFalse, Reason: deletingReason, Progressing: condTrue, Requeue: time.Minute,
				Message: "spec.deletion.maxDrainWait is unset"},
		},
		"WaitForDrain: an unknown status keeps its workers too": {
			in: with(deleting(), func(in *Input) {
				setVersion(in, version("v1", drained))
				setVersion(in, version("v2", "Unknown"))
			}),
			want: expect{Ready: condFalse, Reason: deletingReason, Progressing: condTrue, Requeue: 15 * time.Second,
				Message: "versions [v2] to drain"},
		},
		"WaitForDrain: a draining version we scaled to zero gets a worker back": {
			in: with(deleting(), func(in *Input) { setDep(in, scaledDown("v1", -time.Hour)) }),
			want: expect{Scale: []Scale{{Name: "worker-v1", BuildID: "v1", Replicas: 1, Reason: ScaleRestore}},
				Ready: condFalse, Reason: deletingReason, Progressing: condTrue, Requeue: 15 * time.Second, Events: []string{EventScale}},
		},
		"WaitForDrain before maxDrainWait: wait until the deadline at the latest": {
			in: with(deleting(), func(in *Input) { in.Deletion.MaxDrainWait = time.Minute + 2*time.Second }),
			want: expect{Ready: condFalse, Reason: deletingReason, Progressing: condTrue, Requeue: 2 * time.Second,
				Message: "(spec.deletion.maxDrainWait)"},
		},
		"WaitForDrain after maxDrainWait: the workers go": {
			in: with(deleting(), func(in *Input) { in.Deletion.MaxDrainWait = time.Minute }),
			want: expect{Delete: deleteDeps("worker-v1", "worker-v2"), Ready: condFalse, Reason: deletingReason, Progressing: condTrue,
				Requeue: time.Second, Events: []string{deletingReason, deletingReason, deletingReason}},
		},
		"Immediate: the workers go without waiting": {
			in:   with(deleting(), func(in *Input) { in.Deletion.Policy = v1alpha1.DeletionImmediate }),
			want: expect{Delete: deleteDeps("worker-v1", "worker-v2"), Ready: condFalse, Reason: deletingReason, Progressing: condTrue, Requeue: time.Second, Events: []string{deletingReason, deletingReason}},
		},
		"every version drained or inactive: the workers go": {
			in:   with(deleting(), func(in *Input) { setVersion(in, version("v1", drained)) }),
			want: expect{Delete: deleteDeps("worker-v1", "worker-v2"), Ready: condFalse, Reason: deletingReason, Progressing: condTrue, Requeue: time.Second, Events: []string{deletingReason, deletingReason}},
		},
		"workers gone: unpolled versions are deleted from Temporal, skipping drainage": {
			in: with(deleting(), func(in *Input) {
				in.Deployments = nil
				in.Temporal.Versions[0].HasPollers = false
				in.Temporal.Versions[1].HasPollers = false
			}),
			want: expect{DeleteVersions: []string{"v1", "v2"}, SkipDrainage: true, Ready: condFalse, Reason: deletingReason,
				Progressing: condTrue, Requeue: time.Second, Events: []string{deletingReason}},
		},
		"workers gone: a polled version waits for Temporal to forget its pollers": {
			in: with(deleting(), func(in *Input) {
				in.Deployments = nil
				in.Temporal.Versions[1].HasPollers = false
			}),
			want: expect{DeleteVersions: []string{"v2"}, SkipDrainage: true, Ready: condFalse, Reason: deletingReason,
				Progressing: condTrue, Requeue: time.Second, Events: []string{deletingReason}, Message: "pollers of versions [v1]"},
		},
		"no versions left: the worker deployment is deleted and the finalizer goes": {
			in: with(deleting(), func(in *Input) {
				in.Deployments = nil
				in.Temporal.Versions = nil
			}),
			want: expect{DeleteWorkerDeployment: true, RemoveFinalizer: true, Ready: condFalse, Reason: deletingReason,
				Progressing: condTrue, Requeue: time.Minute, Events: []string{deletingReason}},
		},
		"nothing in Temporal: the finalizer goes": {
			in: with(deleting(), func(in *Input) {
				in.Deployments = nil
				in.Temporal = &TemporalState{}
			}),
			want: expect{RemoveFinalizer: true, Ready: condFalse, Reason: deletingReason, Progressing: condTrue, Requeue: time.Minute},
		},
		"Temporal unknown: nothing is deleted": {
			in: with(deleting(), func(in *Input) {
				in.Temporal = nil
				in.TemporalError = &Problem{Reason: v1alpha1.ReasonTemporalClientCreationFailed, Message: "dial failed"}
			}),
			want: expect{Ready: condFalse, Reason: v1alpha1.ReasonTemporalClientCreationFailed, Progressing: condFalse,
				Requeue: 10 * time.Second, Message: "deletion waits: dial failed"},
		},
		"connection gone and a version was reported: nothing is deleted": {
			in: with(deleting(), func(in *Input) {
				in.Temporal = nil
				in.Deployments = nil
				in.TemporalError = &Problem{Reason: v1alpha1.ReasonTemporalConnectionNotFound, Message: "no connection"}
			}),
			want: expect{Ready: condFalse, Reason: v1alpha1.ReasonTemporalConnectionNotFound, Progressing: condFalse,
				Requeue: 10 * time.Second, Message: v1alpha1.FinalizerCleanup},
		},
		"connection gone and no worker ever ran: the finalizer goes": {
			in: with(deleting(), func(in *Input) {
				in.Temporal = nil
				in.Deployments = nil
				in.Deletion.StatusShowedVersions = false
				in.TemporalError = &Problem{Reason: v1alpha1.ReasonTemporalConnectionNotFound, Message: "no connection"}
			}),
			want: expect{RemoveFinalizer: true, Ready: condFalse, Reason: deletingReason, Progressing: condTrue,
				Requeue: time.Minute, Events: []string{v1alpha1.ReasonTemporalConnectionNotFound}},
		},
		"connection not allowed and no worker ever ran: the finalizer goes": {
			in: with(deleting(), func(in *Input) {
				in.Temporal = nil
				in.Deployments = nil
				in.Deletion.StatusShowedVersions = false
				in.TemporalError = &Problem{Reason: v1alpha1.ReasonAddressNotAllowed, Message: "not allowed"}
			}),
			want: expect{RemoveFinalizer: true, Ready: condFalse, Reason: deletingReason, Progressing: condTrue,
				Requeue: time.Minute, Events: []string{v1alpha1.ReasonAddressNotAllowed}},
		},
		"connection not allowed and a version was reported: nothing is deleted": {
			in: with(deleting(), func(in *Input) {
				in.Temporal = nil
				in.Deployments = nil
				in.TemporalError = &Problem{Reason: v1alpha1.ReasonAddressNotAllowed, Message: "not allowed"}
			}),
			want: expect{Ready: condFalse, Reason: v1alpha1.ReasonAddressNotAllowed, Progressing: condFalse,
				Requeue: 10 * time.Second, Message: v1alpha1.FinalizerCleanup},
		},
		"another manager routes to a version: nothing is deleted": {
			in: with(base(), func(in *Input) {
				in.Deletion = &Deletion{RequestedAt: t0, Policy: v1alpha1.DeletionImmediate}
				in.Temporal.ManagerIdentity = "alice"
			}),
			want: expect{Ready: condFalse, Reason: v1alpha1.ReasonManagedByOtherIdentity, Progressing: condFalse,
				Requeue: 30 * time.Second, Events: []string{v1alpha1.ReasonManagedByOtherIdentity}},
		},
		"another manager routes nowhere: drained workers go, Temporal stays as it is": {
			in: with(deleting(), func(in *Input) {
				in.Temporal.ManagerIdentity = "alice"
				setVersion(in, version("v1", drained))
			}),
			want: expect{Delete: deleteDeps("worker-v1", "worker-v2"), Ready: condFalse, Reason: deletingReason, Progressing: condTrue,
				Requeue: time.Second, Events: []string{deletingReason, deletingReason}},
		},
		"another manager, workers gone: the finalizer goes and Temporal stays": {
			in: with(deleting(), func(in *Input) {
				in.Temporal.ManagerIdentity = "alice"
				in.Deployments = nil
			}),
			want: expect{RemoveFinalizer: true, Ready: condFalse, Reason: deletingReason, Progressing: condTrue,
				Requeue: time.Minute, Events: []string{v1alpha1.ReasonManagedByOtherIdentity}},
		},
	})
}

func TestDeletionCancelsARunningGate(t *testing.T) {
	in := with(deleting(), func(in *Input) {
		in.Spec.GateWorkflowType = "Gate"
		in.Gate = &GateRun{BuildID: "v2", Phase: GateRunning}
	})
	if got := Plan(in).CancelGate; got == nil || got.BuildID != "v2" {
		t.Fatalf("CancelGate = %+v, want the running gate of v2 cancelled", got)
	}
}
