package planner

import (
	"testing"
	"time"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
)

func TestProgressDeadline(t *testing.T) {
	const exceeded = v1alpha1.ReasonProgressDeadlineExceeded
	waiting := v1alpha1.ReasonWaitingForPollers
	// started: v2 became the target at t0+d, with a 10m deadline.
	started := func(d time.Duration) func(*Input) {
		return func(in *Input) {
			in.Namespace, in.Name = "default", "worker"
			in.Spec.ProgressDeadline = 10 * time.Minute
			in.TargetSince = t0.Add(d)
		}
	}
	late := started(-11 * time.Minute)
	abort := func(in *Input) { in.Spec.ProgressDeadlineAbort = true }
	crashing := func(in *Input) {
		setDep(in, Deployment{BuildID: "v2", Name: "worker-v2", Replicas: 3, ReadyReplicas: 1})
		dropVersion(in, "v2")
	}
	wrongQueue := func(in *Input) {
		tv := version("v2", v1alpha1.VersionInactive)
		tv.TaskQueuesReady, tv.MissingTaskQueues = false, []string{"orders (Activity)", "orders (Workflow)"}
		setVersion(in, tv)
	}
	abortedAtZero := func(in *Input) {
		setDep(in, Deployment{BuildID: "v2", Name: "worker-v2", Replicas: 0})
		dropVersion(in, "v2")
	}
	scaleDownV2 := []Scale{{Name: "worker-v2", BuildID: "v2", Replicas: 0, Reason: ScaleAbort}}

	runCases(t, cases{
		"pods not ready within the deadline: waiting, looked at when it passes": {
			in:   with(base(), started(-9*time.Minute-50*time.Second), crashing),
			want: expect{Ready: condFalse, Reason: waiting, Progressing: condTrue, Requeue: 10 * time.Second},
		},
		"pods not ready past the deadline: failed, saying how many and where to look": {
			in: with(base(), late, crashing),
			want: expect{Ready: condFalse, Reason: exceeded, Progressing: condFalse, Requeue: 30 * time.Second,
				Message: "2 of 3 pods of Deployment worker-v2 are not ready; look with: kubectl -n default describe deployment worker-v2; kubectl -n default logs deployment/worker-v2 --previous"},
		},
		"past the deadline new workflows stay on the current version": {
			in: with(base(), late, crashing),
			want: expect{Ready: condFalse, Reason: exceeded, Progressing: condFalse, Requeue: 30 * time.Second,
				Message: "new workflows stay on version v1"},
		},
		"workers polling the wrong task queue past the deadline: the missing queues named": {
			in: with(base(), late, wrongQueue),
			want: expect{Ready: condFalse, Reason: exceeded, Progressing: condFalse, Requeue: time.Minute,
				Message: "its workers do not poll task queue orders (Activity), orders (Workflow), which the current version v1 polls"},
		},
		"workers that never poll the worker deployment past the deadline": {
			in: with(base(), late, func(in *Input) { dropVersion(in, "v2") }),
			want: expect{Ready: condFalse, Reason: exceeded, Progressing: condFalse, Requeue: time.Second,
				Message: "no worker of it polled worker deployment default/worker"},
		},
		"registered without pollers past the deadline": {
			in: with(base(), late, func(in *Input) {
				tv := version("v2", v1alpha1.VersionInactive)
				tv.HasPollers = false
				setVersion(in, tv)
			}),
			want: expect{Ready: condFalse, Reason: exceeded, Progressing: condFalse, Requeue: time.Second,
				Message: "none of its workers polls it now"},
		},
		"workers ready past the deadline: promoted as usual": {
			in: with(base(), late),
			want: expect{Routing: &Routing{Op: SetCurrent, BuildID: "v2"}, Ready: condFalse, Reason: v1alpha1.ReasonWaitingForPromotion,
				Progressing: condTrue, Requeue: time.Second, Events: []string{EventPromote}},
		},
		"Manual waiting for a person past the deadline is not failed, nor aborted": {
			in: with(base(), late, abort, func(in *Input) { in.Spec.Strategy = v1alpha1.StrategyManual }),
			want: expect{Ready: condFalse, Reason: v1alpha1.ReasonWaitingForPromotion, Progressing: condTrue, Requeue: 30 * time.Second,
				Message: "make version v2 current"},
		},
		"no deadline: waits as before": {
			in:   with(base(), late, crashing, func(in *Input) { in.Spec.ProgressDeadline = 0 }),
			want: expect{Ready: condFalse, Reason: waiting, Progressing: condTrue, Requeue: 30 * time.Second},
		},
		"status not yet recording the start: the clock starts now": {
			in: with(base(), late, crashing, func(in *Input) {
				in.TargetSince = time.Time{}
				setDep(in, Deployment{BuildID: "v2", Name: "worker-v2", Replicas: 3, CreatedAt: t0.Add(-time.Hour)})
			}),
			want: expect{Ready: condFalse, Reason: waiting, Progressing: condTrue, Requeue: 30 * time.Second},
		},
		"a Deployment created after the target started (the version limit held it): counted from its creation": {
			in: with(base(), late, crashing, func(in *Input) {
				setDep(in, Deployment{BuildID: "v2", Name: "worker-v2", Replicas: 3, CreatedAt: t0.Add(-5 * time.Minute)})
			}),
			want: expect{Ready: condFalse, Reason: waiting, Progressing: condTrue, Requeue: 30 * time.Second},
		},
		"a target that had traffic before is not failed by the deadline": {
			in: with(base(), late, crashing, func(in *Input) {
				tv := version("v2", v1alpha1.VersionInactive)
				tv.FirstActivatedAt = at(-20 * time.Minute)
				setVersion(in, tv)
			}),
			want: expect{Ready: condFalse, Reason: waiting, Progressing: condTrue, Requeue: 30 * time.Second},
		},
		"a target status showed complete is not failed by the deadline": {
			in:   with(base(), late, crashing, func(in *Input) { in.TargetHadCompleted = true }),
			want: expect{Ready: condFalse, Reason: waiting, Progressing: condTrue, Requeue: 30 * time.Second},
		},
		"a template changed in place this pass restarts the clock": {
			in: with(base(), late, func(in *Input) {
				in.Spec.TemplateHash = "h2"
				setDep(in, Deployment{BuildID: "v2", Name: "worker-v2", Replicas: 3, Available: true, TemplateHash: "h1"})
			}),
			want: expect{Update: &UpdateDeployment{Name: "worker-v2", BuildID: "v2"}, Ready: condFalse, Reason: waiting, Progressing: condTrue,
				Requeue: 30 * time.Second, Events: []string{EventUpdateInPlace}},
		},
		"abort: the failed target, and only it, is scaled to zero": {
			in: with(base(), late, crashing, abort),
			want: expect{Scale: scaleDownV2, Ready: condFalse, Reason: exceeded, Progressing: condFalse, Requeue: 30 * time.Second,
				Events: []string{EventScaleDown}, Message: "its rollout is aborted and its Deployment scaled to zero"},
		},
		"abort replaces a scale to a new spec.replicas": {
			in: with(base(), late, crashing, abort, func(in *Input) { in.Spec.Replicas = ptr[int32](5) }),
			want: expect{Scale: scaleDownV2, Ready: condFalse, Reason: exceeded, Progressing: condFalse, Requeue: 30 * time.Second,
				Events: []string{EventScaleDown}, Message: "aborted"},
		},
		"abort: an aborted target polling the wrong task queue still says so": {
			in: with(base(), late, abort, wrongQueue, func(in *Input) { setDep(in, Deployment{BuildID: "v2", Name: "worker-v2", Replicas: 0}) }),
			want: expect{Ready: condFalse, Reason: exceeded, Progressing: condFalse, Requeue: time.Minute,
				Message: "its workers do not poll task queue orders (Activity), orders (Workflow)"},
		},
		"abort: an aborted target stays at zero": {
			in: with(base(), late, abort, abortedAtZero),
			want: expect{Ready: condFalse, Reason: exceeded, Progressing: condFalse, Requeue: time.Minute,
				Message: "Deployment worker-v2 has no pods left; what was missing is in the first ProgressDeadlineExceeded Warning Event: kubectl -n default events --for temporalworkerdeployment/worker"},
		},
		"abort: an aborted target stays at zero while Temporal cannot be read": {
			in:   with(base(), late, abort, abortedAtZero, func(in *Input) { in.Temporal = nil }),
			want: expect{Ready: condFalse, Reason: v1alpha1.ReasonTemporalStateFetchFailed, Progressing: condFalse, Requeue: 10 * time.Second},
		},
		"abort: a raised deadline scales it back up": {
			in: with(base(), late, abort, abortedAtZero, func(in *Input) { in.Spec.ProgressDeadline = time.Hour }),
			want: expect{Scale: []Scale{{Name: "worker-v2", BuildID: "v2", Replicas: 3, Reason: ScaleToSpec}}, Ready: condFalse, Reason: waiting,
				Progressing: condTrue, Requeue: 30 * time.Second, Events: []string{EventScale}},
		},
		"abort: removing progressDeadlineAbort scales it back up, still exceeded": {
			in: with(base(), late, abortedAtZero),
			want: expect{Scale: []Scale{{Name: "worker-v2", BuildID: "v2", Replicas: 3, Reason: ScaleToSpec}}, Ready: condFalse, Reason: exceeded,
				Progressing: condFalse, Requeue: 30 * time.Second, Events: []string{EventScale}},
		},
		"abort: never a target with traffic": {
			in: with(base(), late, abort, func(in *Input) {
				setDep(in, Deployment{BuildID: "v2", Name: "worker-v2", Replicas: 3})
				tv := version("v2", v1alpha1.VersionDraining)
				setVersion(in, tv)
			}),
			want: expect{Ready: condFalse, Reason: waiting, Progressing: condTrue, Requeue: 30 * time.Second},
		},
		"abort: a person's abort annotation still wins": {
			in:   with(base(), late, crashing, abort, func(in *Input) { in.Spec.AbortedBuildID = "v2" }),
			want: expect{Ready: condFalse, Reason: v1alpha1.ReasonRolloutAborted, Progressing: condFalse, Requeue: time.Minute},
		},
	})
}
