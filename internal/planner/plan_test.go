package planner

import (
	"reflect"
	"testing"
	"time"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
)

const (
	current  = v1alpha1.VersionCurrent
	ramping  = v1alpha1.VersionRamping
	inactive = v1alpha1.VersionInactive
	draining = v1alpha1.VersionDraining
	drained  = v1alpha1.VersionDrained
)

type cases = map[string]struct {
	in   Input
	want expect
}

func runCases(t *testing.T, cs cases) {
	t.Helper()
	for name, tc := range cs {
		t.Run(name, func(t *testing.T) { check(t, tc.in, tc.want) })
	}
}

func TestTarget(t *testing.T) {
	runCases(t, cases{
		"first version: Deployment created with spec.replicas": {
			in: with(base(), func(in *Input) {
				in.Spec.TargetBuildID = "v1"
				in.Deployments = nil
				in.Temporal = &TemporalState{}
			}),
			want: expect{Create: &CreateDeployment{BuildID: "v1", Replicas: 3},
				Ready: condFalse, Reason: v1alpha1.ReasonWaitingForPollers, Progressing: condTrue, Requeue: 30 * time.Second,
				Events: []string{EventCreateDeployment}},
		},
		"first version with an autoscaler: one replica": {
			in: with(base(), func(in *Input) {
				in.Spec.TargetBuildID = "v1"
				in.Spec.Replicas = nil
				in.Deployments = nil
				in.Temporal = &TemporalState{}
			}),
			want: expect{Create: &CreateDeployment{BuildID: "v1", Replicas: 1},
				Ready: condFalse, Reason: v1alpha1.ReasonWaitingForPollers, Progressing: condTrue, Requeue: 30 * time.Second,
				Events: []string{EventCreateDeployment}},
		},
		"target not available: wait for the Deployment watch": {
			in: with(base(), func(in *Input) { in.Deployments[1].Available = false }),
			want: expect{Ready: condFalse, Reason: v1alpha1.ReasonWaitingForPollers, Progressing: condTrue, Requeue: 30 * time.Second,
				Message: "worker-v2 of version v2 to become available"},
		},
		"spec.replicas is 0: never routed": {
			in: with(base(), func(in *Input) {
				in.Spec.Replicas = ptr[int32](0)
				in.Deployments[1].Replicas = 0
			}),
			want: expect{Ready: condFalse, Reason: v1alpha1.ReasonWaitingForPollers, Progressing: condTrue, Requeue: time.Minute,
				Message: "set spec.replicas above 0"},
		},
		"target not registered: poll Temporal": {
			in:   with(base(), func(in *Input) { dropVersion(in, "v2") }),
			want: expect{Ready: condFalse, Reason: v1alpha1.ReasonWaitingForPollers, Progressing: condTrue, Requeue: time.Second},
		},
		"target not registered, Deployment just available: look soon": {
			in: with(base(), func(in *Input) {
				dropVersion(in, "v2")
				in.Deployments[1].AvailableSince = t0.Add(-3 * time.Second)
			}),
			want: expect{Ready: condFalse, Reason: v1alpha1.ReasonWaitingForPollers, Progressing: condTrue, Requeue: 200 * time.Millisecond},
		},
		"target listed, not yet readable, Deployment just available: look soon": {
			in: with(base(), func(in *Input) {
				tv := version("v2", inactive)
				tv.Described = false
				setVersion(in, tv)
				in.Deployments[1].AvailableSince = t0.Add(-time.Second)
			}),
			want: expect{Ready: condFalse, Reason: v1alpha1.ReasonWaitingForPollers, Progressing: condTrue, Requeue: 200 * time.Millisecond,
				Message: "waiting to read the workers"},
		},
		"target not registered long after its Deployment became available: the look backs off": {
			in: with(base(), func(in *Input) {
				dropVersion(in, "v2")
				in.Deployments[1].AvailableSince = t0.Add(-2 * time.Minute)
			}),
			want: expect{Ready: condFalse, Reason: v1alpha1.ReasonWaitingForPollers, Progressing: condTrue, Requeue: 30 * time.Second},
		},
		"task queues not ready: no routing": {
			in: with(base(), func(in *Input) {
				tv := version("v2", inactive)
				tv.TaskQueuesReady = false
				tv.RegisteredAt = t0.Add(-time.Second)
				setVersion(in, tv)
			}),
			want: expect{Ready: condFalse, Reason: v1alpha1.ReasonWaitingForPollers, Progressing: condTrue, Requeue: 200 * time.Millisecond,
				Message: "register all their task queues"},
		},
		"task queues overdue: the look backs off": {
			in: with(base(), func(in *Input) {
				tv := version("v2", inactive)
				tv.TaskQueuesReady = false
				tv.RegisteredAt = t0.Add(-2 * time.Minute)
				setVersion(in, tv)
			}),
			want: expect{Ready: condFalse, Reason: v1alpha1.ReasonWaitingForPollers, Progressing: condTrue, Requeue: 30 * time.Second,
				Message: "register all their task queues"},
		},
		"task queues overdue, but the Deployment just became available again (an in-place update): a look every 200ms": {
			in: with(base(), func(in *Input) {
				tv := version("v2", inactive)
				tv.TaskQueuesReady = false
				tv.RegisteredAt = t0.Add(-2 * time.Minute)
				setVersion(in, tv)
				in.Deployments[1].AvailableSince = t0.Add(-9 * time.Second)
			}),
			want: expect{Ready: condFalse, Reason: v1alpha1.ReasonWaitingForPollers, Progressing: condTrue, Requeue: 200 * time.Millisecond,
				Message: "register all their task queues"},
		},
		"registered but nobody polls: no routing": {
			in: with(base(), func(in *Input) {
				tv := version("v2", inactive)
				tv.HasPollers = false
				setVersion(in, tv)
			}),
			want: expect{Ready: condFalse, Reason: v1alpha1.ReasonWaitingForPollers, Progressing: condTrue, Requeue: time.Second},
		},
		"worker deployment not in Temporal yet": {
			in: with(base(), func(in *Input) {
				in.Deployments = []Deployment{running("v2")}
				in.Temporal = &TemporalState{}
			}),
			want: expect{Ready: condFalse, Reason: v1alpha1.ReasonWaitingForPollers, Progressing: condTrue, Requeue: time.Second},
		},
		"too many versions: target not created": {
			in: with(base(), func(in *Input) {
				in.Spec.TargetBuildID = "v3"
				in.Spec.MaxVersions = 2
				setVersion(in, version("v2", draining))
			}),
			want: expect{Ready: condFalse, Reason: v1alpha1.ReasonTooManyVersions, Progressing: condFalse, Requeue: time.Minute,
				Events: []string{v1alpha1.ReasonTooManyVersions}, Message: "1 waiting to drain"},
		},
		"too many versions: a version of unknown status takes its place": {
			in: with(base(), func(in *Input) {
				in.Spec.TargetBuildID = "v3"
				in.Spec.MaxVersions = 2
				tv := version("v2", v1alpha1.VersionUnknown)
				tv.HasPollers = false
				setVersion(in, tv)
				dropDep(in, "v2")
			}),
			want: expect{Ready: condFalse, Reason: v1alpha1.ReasonTooManyVersions, Progressing: condFalse, Requeue: time.Minute,
				Events: []string{v1alpha1.ReasonTooManyVersions}, Message: "1 waiting to drain or of unknown drainage"},
		},
		"too many versions: a drained version without pollers makes room": {
			in: with(base(), func(in *Input) {
				in.Spec.TargetBuildID = "v3"
				in.Spec.MaxVersions = 2
				tv := version("v2", drained)
				tv.DrainedSince, tv.HasPollers = at(-2*time.Hour), false
				setVersion(in, tv)
				setDep(in, scaledDown("v2", -time.Hour))
			}),
			want: expect{Create: &CreateDeployment{BuildID: "v3", Replicas: 3},
				Ready: condFalse, Reason: v1alpha1.ReasonWaitingForPollers, Progressing: condTrue, Requeue: 30 * time.Second,
				Events: []string{EventCreateDeployment}},
		},
		"too many versions: a registered target is no new version": {
			in: with(base(), func(in *Input) {
				in.Spec.MaxVersions = 1
				dropDep(in, "v2")
			}),
			want: expect{Create: &CreateDeployment{BuildID: "v2", Replicas: 3},
				Ready: condFalse, Reason: v1alpha1.ReasonWaitingForPollers, Progressing: condTrue, Requeue: 30 * time.Second,
				Events: []string{EventCreateDeployment}},
		},
		"empty target build ID": {
			in:   with(base(), func(in *Input) { in.Spec.TargetBuildID = "" }),
			want: expect{Ready: condFalse, Reason: v1alpha1.ReasonPlanGenerationFailed, Progressing: condFalse, Requeue: time.Minute},
		},
	})
}

func TestTemporalUnknown(t *testing.T) {
	unknown := func(in *Input) {
		in.Temporal = nil
		// Both would be sunset if Temporal said they were drained.
		in.Deployments = append(in.Deployments, scaledDown("v0", -72*time.Hour), running("va"))
	}
	runCases(t, cases{
		"nothing routed, scaled down or deleted": {
			in: with(base(), unknown),
			want: expect{Ready: condFalse, Reason: v1alpha1.ReasonTemporalStateFetchFailed, Progressing: condFalse,
				Requeue: 10 * time.Second, Message: "spec.workerOptions"},
		},
		"the caller's reason wins": {
			in: with(base(), unknown, func(in *Input) {
				in.TemporalError = &Problem{Reason: "TemporalConnectionNotFound", Message: `TemporalConnection "prod" not found`}
			}),
			want: expect{Ready: condFalse, Reason: "TemporalConnectionNotFound", Progressing: condFalse,
				Requeue: 10 * time.Second, Message: `"prod" not found`},
		},
		"the target is still created": {
			in: with(base(), unknown, func(in *Input) { dropDep(in, "v2") }),
			want: expect{Create: &CreateDeployment{BuildID: "v2", Replicas: 3},
				Ready: condFalse, Reason: v1alpha1.ReasonTemporalStateFetchFailed, Progressing: condFalse,
				Requeue: 10 * time.Second, Events: []string{EventCreateDeployment}},
		},
		"the target still follows spec.replicas": {
			in: with(base(), unknown, func(in *Input) { in.Deployments[1].Replicas = 1 }),
			want: expect{Scale: []Scale{{Name: "worker-v2", BuildID: "v2", Replicas: 3, Reason: ScaleToSpec}},
				Ready: condFalse, Reason: v1alpha1.ReasonTemporalStateFetchFailed, Progressing: condFalse,
				Requeue: 10 * time.Second, Events: []string{EventScale}},
		},
	})
}

func TestManager(t *testing.T) {
	runCases(t, cases{
		"held by another identity: no routing": {
			in: with(base(), func(in *Input) { in.Temporal.ManagerIdentity = "alice" }),
			want: expect{Ready: condFalse, Reason: v1alpha1.ReasonManagedByOtherIdentity, Progressing: condFalse, Requeue: 30 * time.Second,
				Events: []string{v1alpha1.ReasonManagedByOtherIdentity}, Message: `manager-identity unset --deployment-name default/worker --identity "alice"`},
		},
		"held by another identity, target current: ready": {
			in: with(base(), func(in *Input) {
				in.Temporal.ManagerIdentity = "alice"
				in.Temporal.CurrentBuildID = "v2"
				setVersion(in, version("v2", current))
				setVersion(in, version("v1", draining))
			}),
			want: expect{Ready: condTrue, Reason: v1alpha1.ReasonRolloutComplete, Progressing: condFalse, Requeue: time.Minute},
		},
		"no manager: claim it before writing routing": {
			in: with(base(), func(in *Input) { in.Temporal.ManagerIdentity = "" }),
			want: expect{BecomeManager: true, Routing: &Routing{Op: SetCurrent, BuildID: "v2"},
				Ready: condFalse, Reason: v1alpha1.ReasonWaitingForPromotion, Progressing: condTrue, Requeue: time.Second,
				Events: []string{EventBecomeManager, EventPromote}},
		},
		"no manager and nothing to write: not claimed": {
			in: with(base(), func(in *Input) {
				in.Temporal.ManagerIdentity = ""
				in.Spec.Strategy = v1alpha1.StrategyManual
			}),
			want: expect{Ready: condFalse, Reason: v1alpha1.ReasonWaitingForPromotion, Progressing: condTrue, Requeue: 30 * time.Second},
		},
		"held by another identity: drained Deployments still scaled down, Temporal versions kept": {
			in: with(base(), func(in *Input) {
				in.Temporal.ManagerIdentity = "alice"
				old := version("v0", drained)
				old.DrainedSince = at(-2 * time.Hour)
				gone := version("va", drained)
				gone.HasPollers = false
				setVersion(in, old)
				setVersion(in, gone)
				setDep(in, running("v0"))
			}),
			want: expect{Scale: []Scale{{Name: "worker-v0", BuildID: "v0", Replicas: 0, Reason: ScaleSunset}},
				Ready: condFalse, Reason: v1alpha1.ReasonManagedByOtherIdentity, Progressing: condFalse, Requeue: 30 * time.Second,
				Events: []string{v1alpha1.ReasonManagedByOtherIdentity, EventScaleDown}},
		},
	})
}

func TestStrategies(t *testing.T) {
	targetCurrent := func(in *Input) {
		in.Temporal.CurrentBuildID = "v2"
		setVersion(in, version("v2", current))
		setVersion(in, version("v1", draining))
	}
	otherRamp := func(in *Input) {
		in.Temporal.RampingBuildID = "v0"
		in.Temporal.RampPercentage = 20
		setVersion(in, version("v0", ramping))
		setDep(in, running("v0"))
	}
	manual := func(in *Input) { in.Spec.Strategy = v1alpha1.StrategyManual }
	runCases(t, cases{
		"AllAtOnce: target made current": {
			in: base(),
			want: expect{Routing: &Routing{Op: SetCurrent, BuildID: "v2"},
				Ready: condFalse, Reason: v1alpha1.ReasonWaitingForPromotion, Progressing: condTrue, Requeue: time.Second,
				Events: []string{EventPromote}},
		},
		"AllAtOnce: a ramping target (strategy changed mid-ramp) made current": {
			in: with(base(), func(in *Input) { rampingTarget(in, 30, -time.Minute) }),
			want: expect{Routing: &Routing{Op: SetCurrent, BuildID: "v2"},
				Ready: condFalse, Reason: v1alpha1.ReasonWaitingForPromotion, Progressing: condTrue, Requeue: time.Second,
				Events: []string{EventPromote}},
		},
		"AllAtOnce: another version's ramp removed first": {
			in: with(base(), otherRamp),
			want: expect{Routing: &Routing{Op: RemoveRamp},
				Ready: condFalse, Reason: v1alpha1.ReasonWaitingForPromotion, Progressing: condTrue, Requeue: time.Second,
				Events: []string{EventRemoveRamp}},
		},
		"Manual: waits for a person": {
			in: with(base(), manual, func(in *Input) { in.Temporal.ManagerIdentity = "" }),
			want: expect{Ready: condFalse, Reason: v1alpha1.ReasonWaitingForPromotion, Progressing: condTrue, Requeue: 30 * time.Second,
				Message: "spec.rollout.strategy is Manual: make version v2 current with: temporal worker deployment set-current-version --deployment-name default/worker --build-id v2"},
		},
		// Found by the soak: after an AllAtOnce rollout the controller holds
		// the manager role, and Temporal refused the plain command.
		"Manual: the role we still hold is taken first": {
			in: with(base(), manual),
			want: expect{Ready: condFalse, Reason: v1alpha1.ReasonWaitingForPromotion, Progressing: condTrue, Requeue: 30 * time.Second,
				Message: "manager-identity set --deployment-name default/worker --self; make version v2 current with: temporal worker deployment set-current-version --deployment-name default/worker --build-id v2; then release the role"},
		},
		"Manual: a ramp is left alone": {
			in:   with(base(), manual, func(in *Input) { rampingTarget(in, 30, -time.Minute) }),
			want: expect{Ready: condFalse, Reason: v1alpha1.ReasonWaitingForPromotion, Progressing: condTrue, Requeue: 30 * time.Second},
		},
		"target current: rollout complete": {
			in:   with(base(), targetCurrent),
			want: expect{Ready: condTrue, Reason: v1alpha1.ReasonRolloutComplete, Progressing: condFalse, Requeue: time.Minute},
		},
		"target current: the ramp we left on another version is removed": {
			in: with(base(), targetCurrent, otherRamp),
			want: expect{Routing: &Routing{Op: RemoveRamp},
				Ready: condTrue, Reason: v1alpha1.ReasonRolloutComplete, Progressing: condFalse, Requeue: time.Second,
				Events: []string{EventRemoveRamp}},
		},
		"target current: a ramp someone else set is kept": {
			in: with(base(), targetCurrent, otherRamp, func(in *Input) {
				in.Temporal.LastModifierIdentity = "alice"
				in.Temporal.ManagerIdentity = ""
			}),
			want: expect{Ready: condTrue, Reason: v1alpha1.ReasonRolloutComplete, Progressing: condFalse, Requeue: time.Minute,
				Message: `version v0 ramps 20% (set by "alice")`},
		},
		"unknown strategy": {
			in:   with(base(), func(in *Input) { in.Spec.Strategy = "Canary" }),
			want: expect{Ready: condFalse, Reason: v1alpha1.ReasonPlanGenerationFailed, Progressing: condFalse, Requeue: time.Minute},
		},
	})
}

func TestProgressive(t *testing.T) {
	firstVersion := func(in *Input) {
		in.Temporal.CurrentBuildID = ""
		dropVersion(in, "v1")
		dropDep(in, "v1")
	}
	rampTo := func(pct int32) *Routing { return &Routing{Op: SetRamp, BuildID: "v2", RampPercentage: pct} }
	makeCurrent := &Routing{Op: SetCurrent, BuildID: "v2"}
	runCases(t, cases{
		"first version: current directly": {
			in: with(base(), progressiveSteps, firstVersion),
			want: expect{Routing: makeCurrent, Ready: condFalse, Reason: v1alpha1.ReasonWaitingForPromotion, Progressing: condTrue,
				Requeue: time.Second, Events: []string{EventPromote}},
		},
		"unversioned workers poll: ramp from them": {
			in: with(base(), progressiveSteps, firstVersion, func(in *Input) { in.Temporal.UnversionedPollers = true }),
			want: expect{Routing: rampTo(10), Ready: condFalse, Reason: v1alpha1.ReasonRamping, Progressing: condTrue,
				Requeue: time.Second, Events: []string{EventRamp}},
		},
		"starts at the first step": {
			in: with(base(), progressiveSteps),
			want: expect{Routing: rampTo(10), Ready: condFalse, Reason: v1alpha1.ReasonRamping, Progressing: condTrue,
				Requeue: time.Second, Events: []string{EventRamp}},
		},
		"before the pause ends: requeue exactly at the deadline": {
			in: with(base(), progressiveSteps, func(in *Input) { rampingTarget(in, 10, -4*time.Minute-30*time.Second) }),
			want: expect{Ready: condFalse, Reason: v1alpha1.ReasonRamping, Progressing: condTrue, Requeue: 30 * time.Second,
				Message: "ramping 10% to v2, next step (50%) at 2026-03-01T12:00:30Z"},
		},
		"one second before the deadline": {
			in:   with(base(), progressiveSteps, func(in *Input) { rampingTarget(in, 10, -5*time.Minute+time.Second) }),
			want: expect{Ready: condFalse, Reason: v1alpha1.ReasonRamping, Progressing: condTrue, Requeue: time.Second},
		},
		"at the deadline: next step": {
			in: with(base(), progressiveSteps, func(in *Input) { rampingTarget(in, 10, -5*time.Minute) }),
			want: expect{Routing: rampTo(50), Ready: condFalse, Reason: v1alpha1.ReasonRamping, Progressing: condTrue,
				Requeue: time.Second, Events: []string{EventRamp}},
		},
		"after the deadline: next step": {
			in: with(base(), progressiveSteps, func(in *Input) { rampingTarget(in, 10, -time.Hour) }),
			want: expect{Routing: rampTo(50), Ready: condFalse, Reason: v1alpha1.ReasonRamping, Progressing: condTrue,
				Requeue: time.Second, Events: []string{EventRamp}},
		},
		"last step before its deadline": {
			in: with(base(), progressiveSteps, func(in *Input) { rampingTarget(in, 50, -9*time.Minute) }),
			want: expect{Ready: condFalse, Reason: v1alpha1.ReasonRamping, Progressing: condTrue, Requeue: time.Minute,
				Message: "ramping 50% to v2, becomes current at 2026-03-01T12:01:00Z"},
		},
		"last step done: current": {
			in: with(base(), progressiveSteps, func(in *Input) { rampingTarget(in, 50, -10*time.Minute) }),
			want: expect{Routing: makeCurrent, Ready: condFalse, Reason: v1alpha1.ReasonWaitingForPromotion, Progressing: condTrue,
				Requeue: time.Second, Events: []string{EventPromote}},
		},
		"steps changed mid-ramp: first step above, at once": {
			in: with(base(), progressiveSteps, func(in *Input) { rampingTarget(in, 30, -time.Second) }),
			want: expect{Routing: rampTo(50), Ready: condFalse, Reason: v1alpha1.ReasonRamping, Progressing: condTrue,
				Requeue: time.Second, Events: []string{EventRamp}},
		},
		"steps changed mid-ramp, ramp above every step: current": {
			in: with(base(), progressiveSteps, func(in *Input) { rampingTarget(in, 80, -time.Second) }),
			want: expect{Routing: makeCurrent, Ready: condFalse, Reason: v1alpha1.ReasonWaitingForPromotion, Progressing: condTrue,
				Requeue: time.Second, Events: []string{EventPromote}},
		},
		"no ramp change time: timed from RampingSince": {
			in: with(base(), progressiveSteps, func(in *Input) {
				rampingTarget(in, 10, 0)
				in.Temporal.RampChangedAt = time.Time{} // version("v2", ramping) ramps since -10m
			}),
			want: expect{Routing: rampTo(50), Ready: condFalse, Reason: v1alpha1.ReasonRamping, Progressing: condTrue,
				Requeue: time.Second, Events: []string{EventRamp}},
		},
		"no ramp time at all: hold": {
			in: with(base(), progressiveSteps, func(in *Input) {
				rampingTarget(in, 10, 0)
				in.Temporal.RampChangedAt = time.Time{}
				in.Temporal.Versions[1].RampingSince = nil
			}),
			want: expect{Ready: condFalse, Reason: v1alpha1.ReasonRamping, Progressing: condTrue, Requeue: time.Minute,
				Message: "cannot be timed"},
		},
		"another version ramps: replaced by the first step in one write": {
			in: with(base(), progressiveSteps, func(in *Input) {
				in.Temporal.RampingBuildID = "v0"
				in.Temporal.RampPercentage = 20
				setVersion(in, version("v0", ramping))
			}),
			want: expect{Routing: rampTo(10), Ready: condFalse, Reason: v1alpha1.ReasonRamping, Progressing: condTrue,
				Requeue: time.Second, Events: []string{EventRamp}},
		},
		"steps not increasing": {
			in: with(base(), progressiveSteps, func(in *Input) {
				in.Spec.Steps = []Step{{RampPercentage: 50}, {RampPercentage: 10}}
			}),
			want: expect{Ready: condFalse, Reason: v1alpha1.ReasonPlanGenerationFailed, Progressing: condFalse, Requeue: time.Minute,
				Message: "spec.rollout.steps[1]"},
		},
	})
}

func TestGate(t *testing.T) {
	gated := func(in *Input) { in.Spec.GateWorkflowType = "Validate" }
	run := func(build string, phase GatePhase) func(*Input) {
		return func(in *Input) {
			in.Gate = &GateRun{BuildID: build, Phase: phase, Message: "assertion failed: orders total"}
		}
	}
	start := &StartGate{BuildID: "v2", WorkflowType: "Validate", TaskQueue: "orders"}
	runCases(t, cases{
		"no run: gate started": {
			in: with(base(), gated),
			want: expect{StartGate: start, Ready: condFalse, Reason: v1alpha1.ReasonWaitingForPromotion, Progressing: condTrue,
				Requeue: time.Second, Events: []string{EventStartGate}},
		},
		"a run for an older target: gate started": {
			in: with(base(), gated, run("v1", GateSucceeded)),
			want: expect{StartGate: start, Ready: condFalse, Reason: v1alpha1.ReasonWaitingForPromotion, Progressing: condTrue,
				Requeue: time.Second, Events: []string{EventStartGate}},
		},
		"a run still going for an older target: cancelled, and the target's gate waits for it to end": {
			in: with(base(), gated, run("v1", GateRunning)),
			want: expect{CancelGate: &CancelGate{BuildID: "v1", Reason: "version v1 is no longer the target"}, Ready: condFalse,
				Reason: v1alpha1.ReasonWaitingForPromotion, Progressing: condTrue, Requeue: time.Second, Events: []string{EventCancelGate},
				Message: "waiting for the gate workflow on version v1 to end"},
		},
		"the spec dropped the gate while it runs: cancelled, and the rollout goes on": {
			in: with(base(), run("v2", GateRunning)),
			want: expect{Routing: &Routing{Op: SetCurrent, BuildID: "v2"}, CancelGate: &CancelGate{BuildID: "v2", Reason: "spec.rollout.gate was removed"}, Ready: condFalse,
				Reason: v1alpha1.ReasonWaitingForPromotion, Progressing: condTrue, Requeue: time.Second, Events: []string{EventPromote, EventCancelGate}},
		},
		"a running gate while Temporal is unknown: nothing cancelled": {
			in:   with(base(), run("v1", GateRunning), func(in *Input) { in.Temporal = nil }),
			want: expect{Ready: condFalse, Reason: v1alpha1.ReasonTemporalStateFetchFailed, Progressing: condFalse, Requeue: 10 * time.Second},
		},
		"running for two minutes: the look backs off": {
			in: with(base(), gated, run("v2", GateRunning), func(in *Input) { in.Gate.StartedAt = t0.Add(-2 * time.Minute) }),
			want: expect{Ready: condFalse, Reason: v1alpha1.ReasonWaitingForPromotion, Progressing: condTrue, Requeue: 30 * time.Second,
				Message: "gate workflow Validate running on version v2"},
		},
		"a cancelled run of the target: the gate runs again": {
			in: with(base(), gated, run("v2", GateCancelled)),
			want: expect{StartGate: start, Ready: condFalse, Reason: v1alpha1.ReasonWaitingForPromotion, Progressing: condTrue,
				Requeue: time.Second, Events: []string{EventStartGate}},
		},
		"running: wait": {
			in: with(base(), gated, run("v2", GateRunning)),
			want: expect{Ready: condFalse, Reason: v1alpha1.ReasonWaitingForPromotion, Progressing: condTrue, Requeue: time.Second,
				Message: "gate workflow Validate running on version v2"},
		},
		"succeeded: AllAtOnce promotes": {
			in: with(base(), gated, run("v2", GateSucceeded)),
			want: expect{Routing: &Routing{Op: SetCurrent, BuildID: "v2"}, Ready: condFalse, Reason: v1alpha1.ReasonWaitingForPromotion,
				Progressing: condTrue, Requeue: time.Second, Events: []string{EventPromote}},
		},
		"succeeded: Progressive ramps": {
			in: with(base(), gated, progressiveSteps, run("v2", GateSucceeded)),
			want: expect{Routing: &Routing{Op: SetRamp, BuildID: "v2", RampPercentage: 10}, Ready: condFalse, Reason: v1alpha1.ReasonRamping,
				Progressing: condTrue, Requeue: time.Second, Events: []string{EventRamp}},
		},
		"failed: rollout stops": {
			in: with(base(), gated, run("v2", GateFailed)),
			want: expect{Ready: condFalse, Reason: v1alpha1.ReasonGateFailed, Progressing: condFalse, Requeue: time.Minute,
				Events: []string{v1alpha1.ReasonGateFailed}, Message: "assertion failed: orders total"},
		},
		"failed while ramping: the ramp is removed": {
			in: with(base(), gated, progressiveSteps, run("v2", GateFailed), func(in *Input) { rampingTarget(in, 10, -time.Minute) }),
			want: expect{Routing: &Routing{Op: RemoveRamp}, Ready: condFalse, Reason: v1alpha1.ReasonGateFailed, Progressing: condFalse,
				Requeue: time.Second, Events: []string{v1alpha1.ReasonGateFailed, EventRemoveRamp}},
		},
		"failed while ramping under Manual: only reported": {
			in: with(base(), gated, run("v2", GateFailed), func(in *Input) {
				in.Spec.Strategy = v1alpha1.StrategyManual
				rampingTarget(in, 10, -time.Minute)
			}),
			want: expect{Ready: condFalse, Reason: v1alpha1.ReasonGateFailed, Progressing: condFalse, Requeue: time.Minute,
				Events: []string{v1alpha1.ReasonGateFailed}},
		},
		"target ramps: the gate is not run again": {
			in:   with(base(), gated, progressiveSteps, func(in *Input) { rampingTarget(in, 10, -time.Minute) }),
			want: expect{Ready: condFalse, Reason: v1alpha1.ReasonRamping, Progressing: condTrue, Requeue: time.Minute},
		},
		"Manual: the gate still runs": {
			in: with(base(), gated, func(in *Input) { in.Spec.Strategy = v1alpha1.StrategyManual }),
			want: expect{StartGate: start, Ready: condFalse, Reason: v1alpha1.ReasonWaitingForPromotion, Progressing: condTrue,
				Requeue: time.Second, Events: []string{EventStartGate}},
		},
		"the gate waits for pollers": {
			in:   with(base(), gated, func(in *Input) { dropVersion(in, "v2") }),
			want: expect{Ready: condFalse, Reason: v1alpha1.ReasonWaitingForPollers, Progressing: condTrue, Requeue: time.Second},
		},
	})
}

func TestRollback(t *testing.T) {
	// v2 is current; the spec goes back to v1.
	back := func(in *Input) {
		in.Spec.TargetBuildID = "v1"
		in.Spec.GateWorkflowType = "Validate"
		progressiveSteps(in)
		in.Temporal.CurrentBuildID = "v2"
		setVersion(in, version("v2", current))
		setVersion(in, version("v1", draining))
	}
	rollback := expect{Routing: &Routing{Op: SetCurrent, BuildID: "v1"}, Ready: condFalse, Reason: v1alpha1.ReasonWaitingForPromotion,
		Progressing: condTrue, Requeue: time.Second, Events: []string{EventRolledBack}}
	runCases(t, cases{
		"draining version that was current: current at once, no gate or steps": {
			in:   with(base(), back),
			want: rollback,
		},
		"drained recently and still running: current at once": {
			in:   with(base(), back, func(in *Input) { setVersion(in, version("v1", drained)) }),
			want: rollback,
		},
		"drained and scaled down long ago: a full rollout": {
			in: with(base(), back, func(in *Input) {
				tv := version("v1", drained)
				tv.DrainedSince, tv.HasPollers = at(-48*time.Hour), false
				setVersion(in, tv)
				setDep(in, scaledDown("v1", -47*time.Hour))
			}),
			want: expect{Scale: []Scale{{Name: "worker-v1", BuildID: "v1", Replicas: 3, Reason: ScaleToSpec}},
				Ready: condFalse, Reason: v1alpha1.ReasonWaitingForPollers, Progressing: condTrue, Requeue: 30 * time.Second,
				Events: []string{EventScale}},
		},
		"drained and scaled down long ago, autoscaler: back at one replica": {
			in: with(base(), back, func(in *Input) {
				in.Spec.Replicas = nil
				tv := version("v1", drained)
				tv.DrainedSince, tv.HasPollers = at(-48*time.Hour), false
				setVersion(in, tv)
				setDep(in, scaledDown("v1", -47*time.Hour))
			}),
			want: expect{Scale: []Scale{{Name: "worker-v1", BuildID: "v1", Replicas: 1, Reason: ScaleRestore}},
				Ready: condFalse, Reason: v1alpha1.ReasonWaitingForPollers, Progressing: condTrue, Requeue: 30 * time.Second,
				Events: []string{EventScale}},
		},
		"draining but only ever ramped: gate and steps": {
			in: with(base(), back, func(in *Input) {
				tv := version("v1", draining)
				tv.LastCurrentAt = nil
				setVersion(in, tv)
				in.Gate = &GateRun{BuildID: "v1", Phase: GateSucceeded}
			}),
			want: expect{Routing: &Routing{Op: SetRamp, BuildID: "v1", RampPercentage: 10}, Ready: condFalse, Reason: v1alpha1.ReasonRamping,
				Progressing: condTrue, Requeue: time.Second, Events: []string{EventRamp}},
		},
		"someone else took the traffic away: not undone": {
			in: with(base(), back, func(in *Input) {
				in.Temporal.ManagerIdentity = ""
				in.Temporal.LastModifierIdentity = "alice"
			}),
			want: expect{Ready: condFalse, Reason: v1alpha1.ReasonRoutingChangedExternally, Progressing: condFalse, Requeue: 30 * time.Second,
				Events: []string{v1alpha1.ReasonRoutingChangedExternally}, Message: `made by "alice"`},
		},
		// Found by the soak: Temporal reports a version draining, then
		// drained, once the gate pinned to it by an override has run.
		"someone else's last change, a target Temporal never routed but reports draining (its gate ran): a normal rollout": {
			in: with(base(), back, func(in *Input) {
				in.Temporal.ManagerIdentity = ""
				in.Temporal.LastModifierIdentity = "alice"
				in.Temporal.ReportsActivation = true
				tv := version("v1", draining)
				tv.LastCurrentAt, tv.FirstActivatedAt = nil, nil
				setVersion(in, tv)
				in.Gate = &GateRun{BuildID: "v1", Phase: GateSucceeded}
			}),
			want: expect{BecomeManager: true, Routing: &Routing{Op: SetRamp, BuildID: "v1", RampPercentage: 10}, Ready: condFalse, Reason: v1alpha1.ReasonRamping,
				Progressing: condTrue, Requeue: time.Second, Events: []string{EventBecomeManager, EventRamp}},
		},
		"someone else took the traffic of a target Temporal had routed: not undone": {
			in: with(base(), back, func(in *Input) {
				in.Temporal.ManagerIdentity = ""
				in.Temporal.LastModifierIdentity = "alice"
				in.Temporal.ReportsActivation = true
				tv := version("v1", draining)
				tv.FirstActivatedAt = at(-time.Hour)
				setVersion(in, tv)
			}),
			want: expect{Ready: condFalse, Reason: v1alpha1.ReasonRoutingChangedExternally, Progressing: condFalse, Requeue: 30 * time.Second,
				Events: []string{v1alpha1.ReasonRoutingChangedExternally}, Message: `made by "alice"`},
		},
		"someone else's change, but the target drained long ago: a normal rollout": {
			in: with(base(), back, func(in *Input) {
				in.Spec.Strategy = v1alpha1.StrategyAllAtOnce
				in.Spec.GateWorkflowType = ""
				in.Temporal.ManagerIdentity = ""
				in.Temporal.LastModifierIdentity = "alice"
				tv := version("v1", drained)
				tv.DrainedSince = at(-48 * time.Hour)
				setVersion(in, tv)
			}),
			want: expect{BecomeManager: true, Routing: &Routing{Op: SetCurrent, BuildID: "v1"}, Ready: condFalse,
				Reason: v1alpha1.ReasonWaitingForPromotion, Progressing: condTrue, Requeue: time.Second,
				Events: []string{EventBecomeManager, EventPromote}},
		},
		"someone else took the traffic of a completed target long ago: still not undone": {
			in: with(base(), back, func(in *Input) {
				in.Spec.Strategy = v1alpha1.StrategyAllAtOnce
				in.Spec.GateWorkflowType = ""
				in.Temporal.ManagerIdentity = ""
				in.Temporal.LastModifierIdentity = "alice"
				in.TargetHadCompleted = true
				tv := version("v1", drained)
				tv.DrainedSince = at(-48 * time.Hour)
				setVersion(in, tv)
			}),
			want: expect{Ready: condFalse, Reason: v1alpha1.ReasonRoutingChangedExternally, Progressing: condFalse, Requeue: 30 * time.Second,
				Events: []string{v1alpha1.ReasonRoutingChangedExternally}, Message: `made by "alice"`},
		},
		"Manual: someone else's routing is how Manual works": {
			in: with(base(), back, func(in *Input) {
				in.Spec.Strategy = v1alpha1.StrategyManual
				in.Spec.GateWorkflowType = ""
				in.Temporal.ManagerIdentity = ""
				in.Temporal.LastModifierIdentity = "alice"
			}),
			want: expect{Ready: condFalse, Reason: v1alpha1.ReasonWaitingForPromotion, Progressing: condTrue, Requeue: 30 * time.Second},
		},
		"Manual: no rollback": {
			in: with(base(), back, func(in *Input) {
				in.Spec.Strategy = v1alpha1.StrategyManual
				in.Gate = &GateRun{BuildID: "v1", Phase: GateSucceeded}
			}),
			want: expect{Ready: condFalse, Reason: v1alpha1.ReasonWaitingForPromotion, Progressing: condTrue, Requeue: 30 * time.Second},
		},
	})
}

func TestSunset(t *testing.T) {
	old := func(mod func(*TemporalVersion)) func(*Input) {
		return func(in *Input) {
			tv := version("v1", drained)
			mod(&tv)
			setVersion(in, tv)
		}
	}
	scaleV1 := func(n int32, why ScaleReason) []Scale {
		return []Scale{{Name: "worker-v1", BuildID: "v1", Replicas: n, Reason: why}}
	}
	runCases(t, cases{
		"draining: workers kept": {
			in:   with(base(), rolledOut),
			want: ready(expect{Requeue: time.Minute}),
		},
		"drained long before scaledownDelay: idle requeue": {
			in:   with(base(), rolledOut, old(func(tv *TemporalVersion) { tv.DrainedSince = at(-50 * time.Minute) })),
			want: ready(expect{Requeue: time.Minute}),
		},
		"drained just before scaledownDelay: requeue exactly at the deadline": {
			in:   with(base(), rolledOut, old(func(tv *TemporalVersion) { tv.DrainedSince = at(-time.Hour + 20*time.Second) })),
			want: ready(expect{Requeue: 20 * time.Second}),
		},
		"drained for scaledownDelay: scaled to zero": {
			in: with(base(), rolledOut, old(func(tv *TemporalVersion) { tv.DrainedSince = at(-time.Hour) })),
			want: ready(expect{Scale: scaleV1(0, ScaleSunset), Requeue: 30 * time.Second,
				Events: []string{EventScaleDown}}),
		},
		"drained, at zero without the annotation: scaled again to record the time": {
			in: with(base(), rolledOut, old(func(tv *TemporalVersion) { tv.DrainedSince = at(-2 * time.Hour) }),
				func(in *Input) { in.Deployments[0].Replicas = 0 }),
			want: ready(expect{Scale: scaleV1(0, ScaleSunset), Requeue: 30 * time.Second,
				Events: []string{EventScaleDown}}),
		},
		"scaled down before deleteDelay: requeue at the deadline": {
			in: with(base(), rolledOut, old(func(tv *TemporalVersion) { tv.DrainedSince, tv.HasPollers = at(-25*time.Hour), false }),
				func(in *Input) { setDep(in, scaledDown("v1", -24*time.Hour+45*time.Second)) }),
			want: ready(expect{Requeue: 45 * time.Second}),
		},
		"scaled down for deleteDelay: Deployment deleted": {
			in: with(base(), rolledOut, old(func(tv *TemporalVersion) { tv.DrainedSince, tv.HasPollers = at(-25*time.Hour), false }),
				func(in *Input) { setDep(in, scaledDown("v1", -24*time.Hour)) }),
			want: ready(expect{Delete: []string{"worker-v1"}, Requeue: time.Minute, Events: []string{EventDeleteDeployment}}),
		},
		"scaled down for deleteDelay, pollers not yet forgotten: Deployment deleted, look when they may be": {
			in: with(base(), rolledOut, old(func(tv *TemporalVersion) { tv.DrainedSince = at(-25 * time.Hour) }),
				func(in *Input) { setDep(in, scaledDown("v1", -24*time.Hour)) }),
			want: ready(expect{Delete: []string{"worker-v1"}, Requeue: 20 * time.Second, Events: []string{EventDeleteDeployment}}),
		},
		"Deployment gone, no pollers: deleted from Temporal": {
			in: with(base(), rolledOut, old(func(tv *TemporalVersion) { tv.HasPollers = false }),
				func(in *Input) { dropDep(in, "v1") }),
			want: ready(expect{DeleteVersions: []string{"v1"}, Requeue: time.Second, Events: []string{EventDeleteVersion}}),
		},
		"Deployment gone, pollers linger: kept in Temporal": {
			in:   with(base(), rolledOut, old(func(tv *TemporalVersion) {}), func(in *Input) { dropDep(in, "v1") }),
			want: ready(expect{Requeue: 20 * time.Second}),
		},
		"draining without a Deployment: kept in Temporal": {
			in: with(base(), rolledOut, func(in *Input) {
				tv := version("v1", draining)
				tv.HasPollers = false
				setVersion(in, tv)
				dropDep(in, "v1")
			}),
			want: ready(expect{Requeue: time.Minute}),
		},
		"unknown status: workers kept": {
			in:   with(base(), rolledOut, func(in *Input) { setVersion(in, version("v1", v1alpha1.VersionUnknown)) }),
			want: ready(expect{Requeue: time.Minute}),
		},
		"unknown status after we scaled it down: a worker restored, nothing deleted": {
			in: with(base(), rolledOut, func(in *Input) {
				tv := version("v1", v1alpha1.VersionUnknown)
				tv.HasPollers = false
				setVersion(in, tv)
				setDep(in, scaledDown("v1", -48*time.Hour))
			}),
			want: ready(expect{Scale: scaleV1(1, ScaleRestore), Requeue: 30 * time.Second, Events: []string{EventScale}}),
		},
		"unknown status without a Deployment or pollers: kept in Temporal": {
			in: with(base(), rolledOut, func(in *Input) {
				tv := version("v1", v1alpha1.VersionUnknown)
				tv.HasPollers = false
				setVersion(in, tv)
				dropDep(in, "v1")
			}),
			want: ready(expect{Requeue: time.Minute}),
		},
		"drained time unknown: kept": {
			in:   with(base(), rolledOut, old(func(tv *TemporalVersion) { tv.DrainedSince = nil })),
			want: ready(expect{Requeue: time.Minute}),
		},
		"draining again after it was scaled down: workers restored": {
			in:   with(base(), rolledOut, func(in *Input) { setDep(in, scaledDown("v1", -time.Hour)) }),
			want: ready(expect{Scale: scaleV1(1, ScaleRestore), Requeue: 30 * time.Second, Events: []string{EventScale}}),
		},
		"current and ramping versions other than the target keep their workers": {
			in: with(base(), func(in *Input) {
				in.Spec.TargetBuildID = "v3"
				in.Spec.Strategy = v1alpha1.StrategyManual
				in.Temporal.RampingBuildID = "v2"
				in.Temporal.RampPercentage = 10
				setVersion(in, version("v2", ramping))
				setVersion(in, version("v3", inactive))
				setDep(in, running("v3"))
			}),
			want: expect{Ready: condFalse, Reason: v1alpha1.ReasonWaitingForPromotion, Progressing: condTrue, Requeue: 30 * time.Second},
		},
		"never registered and superseded: scaled down at once": {
			in: with(base(), rolledOut, func(in *Input) { dropVersion(in, "v1") }),
			want: ready(expect{Scale: scaleV1(0, ScaleSunset), Requeue: 30 * time.Second,
				Events: []string{EventScaleDown}}),
		},
		"never registered, worker deployment missing in Temporal: kept": {
			in:   with(base(), func(in *Input) { in.Temporal = &TemporalState{} }),
			want: expect{Ready: condFalse, Reason: v1alpha1.ReasonWaitingForPollers, Progressing: condTrue, Requeue: time.Second},
		},
		"never registered and scaled down for deleteDelay: deleted": {
			in: with(base(), rolledOut, func(in *Input) {
				dropVersion(in, "v1")
				setDep(in, scaledDown("v1", -24*time.Hour))
			}),
			want: ready(expect{Delete: []string{"worker-v1"}, Requeue: time.Minute, Events: []string{EventDeleteDeployment}}),
		},
		"inactive and superseded: kept scaledownDelay after the next version registered": {
			in:   inactiveSuperseded(t0.Add(50*time.Minute - 15*time.Second)),
			want: ready(expect{Requeue: 15 * time.Second}),
		},
		"inactive and superseded for scaledownDelay: scaled down": {
			in: inactiveSuperseded(t0.Add(50 * time.Minute)),
			want: ready(expect{Scale: []Scale{{Name: "worker-v2", BuildID: "v2", Replicas: 0, Reason: ScaleSunset}},
				Requeue: 30 * time.Second, Events: []string{EventScaleDown}}),
		},
		"inactive and newest, target not registered yet: kept": {
			in: with(base(), func(in *Input) {
				in.Spec.TargetBuildID = "v3"
				setDep(in, running("v3"))
			}),
			want: expect{Ready: condFalse, Reason: v1alpha1.ReasonWaitingForPollers, Progressing: condTrue, Requeue: time.Second},
		},
		"inactive and newer than the target (spec went back): timed from its registration": {
			in: with(base(), func(in *Input) { in.Spec.TargetBuildID = "v1" }),
			want: ready(expect{Scale: []Scale{{Name: "worker-v2", BuildID: "v2", Replicas: 0, Reason: ScaleSunset}},
				Requeue: 30 * time.Second, Events: []string{EventScaleDown}}),
		},
	})
}

// inactiveSuperseded: v3 is current (registered at t0-10m); v2 registered
// before it and never got traffic.
func inactiveSuperseded(now time.Time) Input {
	return with(base(), func(in *Input) {
		in.Now = now
		in.Spec.TargetBuildID = "v3"
		in.Deployments = []Deployment{running("v2"), running("v3")}
		in.Temporal.CurrentBuildID = "v3"
		in.Temporal.Versions = []TemporalVersion{version("v2", inactive), version("v3", current)}
	})
}

func TestReplicas(t *testing.T) {
	promoted := expect{Routing: &Routing{Op: SetCurrent, BuildID: "v2"}, Ready: condFalse, Reason: v1alpha1.ReasonWaitingForPromotion,
		Progressing: condTrue, Requeue: time.Second}
	withScale := func(e expect, s ...Scale) expect {
		e.Scale = s
		e.Events = []string{EventScale, EventPromote}
		return e
	}
	runCases(t, cases{
		"target follows spec.replicas": {
			in:   with(base(), func(in *Input) { in.Deployments[1].Replicas = 1 }),
			want: withScale(promoted, Scale{Name: "worker-v2", BuildID: "v2", Replicas: 3, Reason: ScaleToSpec}),
		},
		"older versions keep their replicas": {
			in:   with(base(), func(in *Input) { in.Spec.Replicas = ptr[int32](5) }),
			want: withScale(promoted, Scale{Name: "worker-v2", BuildID: "v2", Replicas: 5, Reason: ScaleToSpec}),
		},
		"autoscaler: replicas left alone": {
			in: with(base(), func(in *Input) {
				in.Spec.Replicas = nil
				in.Deployments[1].Replicas = 7
			}),
			want: func() expect { e := promoted; e.Events = []string{EventPromote}; return e }(),
		},
		"autoscaler: a target we scaled down comes back at one replica": {
			in: with(base(), func(in *Input) {
				in.Spec.Replicas = nil
				setDep(in, scaledDown("v2", -time.Hour))
			}),
			want: expect{Scale: []Scale{{Name: "worker-v2", BuildID: "v2", Replicas: 1, Reason: ScaleRestore}},
				Ready: condFalse, Reason: v1alpha1.ReasonWaitingForPollers, Progressing: condTrue, Requeue: 30 * time.Second,
				Events: []string{EventScale}},
		},
		"spec.replicas 0 scales the target down and stops its rollout": {
			in: with(base(), func(in *Input) { in.Spec.Replicas = ptr[int32](0) }),
			want: expect{Scale: []Scale{{Name: "worker-v2", BuildID: "v2", Replicas: 0, Reason: ScaleToSpec}},
				Ready: condFalse, Reason: v1alpha1.ReasonWaitingForPollers, Progressing: condTrue, Requeue: 30 * time.Second,
				Events: []string{EventScale}},
		},
	})
}

func TestRequeueNearestDeadline(t *testing.T) {
	// The next step is due in 1m, the old version's scale-down in 30s.
	in := with(base(), progressiveSteps, func(in *Input) {
		rampingTarget(in, 10, -4*time.Minute)
		tv := version("v0", drained)
		tv.DrainedSince = at(-time.Hour + 30*time.Second)
		setVersion(in, tv)
		setDep(in, running("v0"))
	})
	check(t, in, expect{Ready: condFalse, Reason: v1alpha1.ReasonRamping, Progressing: condTrue, Requeue: 30 * time.Second})
}

func TestVersionsForStatus(t *testing.T) {
	in := with(base(), func(in *Input) {
		rampingTarget(in, 10, -time.Minute)
		setDep(in, running("v0")) // never registered
	})
	pct := int32(10)
	want := []Version{
		{BuildID: "v0", Status: v1alpha1.VersionNotRegistered, Deployment: "worker-v0"},
		{BuildID: "v1", Status: current, Deployment: "worker-v1", CurrentSince: at(-24 * time.Hour)},
		{BuildID: "v2", Status: ramping, Deployment: "worker-v2", Target: true, RampPercentage: &pct, RampingSince: at(-10 * time.Minute)},
	}
	if got := Plan(in).Versions; !reflect.DeepEqual(got, want) {
		t.Errorf("Versions =\n%+v\nwant\n%+v", got, want)
	}

	in.Temporal = nil
	for _, v := range Plan(in).Versions {
		if v.Status != "" {
			t.Errorf("version %s: status %q with Temporal unknown, want empty", v.BuildID, v.Status)
		}
	}
}

func TestPlanDoesNotModifyInput(t *testing.T) {
	in := with(base(), func(in *Input) {
		in.Deployments = []Deployment{running("v2"), running("v1"), scaledDown("v0", -48*time.Hour)}
	})
	before := with(base(), func(c *Input) {
		c.Deployments = []Deployment{running("v2"), running("v1"), scaledDown("v0", -48*time.Hour)}
	})
	a, b := Plan(in), Plan(in)
	if !reflect.DeepEqual(in, before) {
		t.Errorf("Plan modified its input")
	}
	if !reflect.DeepEqual(a, b) {
		t.Errorf("Plan is not deterministic")
	}
}
