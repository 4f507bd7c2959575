package planner

import (
	"fmt"
	"time"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
)

// gate runs the gate workflow on the target before it gets any traffic. It
// returns hold=true while the rollout must wait or has stopped. A target
// that already ramps passed its gate, unless a failure of it is observed:
// then its ramp is removed, which sends all new workflows back to the
// current version (Manual never writes routing, so it only reports). The
// target's gate starts only once a run being ended (cancelStaleGate) has.
func gate(v *view, p *plan) (prog progress, hold bool) {
	typ := v.in.Spec.GateWorkflowType
	if typ == "" {
		return progress{}, false
	}
	run := v.in.Gate
	ending := run != nil && run.Phase == GateRunning && (run.BuildID != v.target || run.Step != 0 || !run.CancelRequestedAt.IsZero())
	if run != nil && (run.BuildID != v.target || run.Step != 0 || run.Phase == GateCancelled || ending) {
		// A run for an older target says nothing about this one, and a
		// cancelled run (the version stopped being the target for a
		// while) gave no verdict: it runs again, once the one being
		// cancelled has ended. A step's run is not this gate's.
		run = nil
	}
	ramping := v.status(v.target) == v1alpha1.VersionRamping

	if run != nil && run.Phase == GateFailed {
		msg := fmt.Sprintf("gate workflow %s failed on version %s: %s; fix the worker and change spec.template to roll out a new version",
			typ, v.target, run.Message)
		p.event(EventWarning, v1alpha1.ReasonGateFailed, msg)
		if ramping && v.in.Spec.Strategy != v1alpha1.StrategyManual {
			p.route(Routing{Op: RemoveRamp}, EventRemoveRamp, fmt.Sprintf("removing the ramp of version %s: its gate workflow failed", v.target))
		}
		return blockedBecause(v1alpha1.ReasonGateFailed, msg), true
	}
	if ramping {
		return progress{}, false
	}
	switch {
	case ending:
		// One gate run at a time: status records one, and the run being
		// ended must stay in it until it has (cancelStaleGate).
		old := v.in.Gate
		return movingBecause(v1alpha1.ReasonWaitingForPromotion, fmt.Sprintf(
			"waiting for the gate workflow on version %s to end (%s) before starting gate workflow %s on version %s",
			old.BuildID, endingNote(old), typ, v.target)), true
	case run == nil:
		return startGate(v, p, typ), true
	case run.Phase == GateSucceeded:
		return progress{}, false
	default:
		p.after(backoff(v, run.StartedAt))
		return movingBecause(v1alpha1.ReasonWaitingForPromotion, fmt.Sprintf("gate workflow %s running on version %s", typ, v.target)), true
	}
}

// startGate starts the gate on the target's workflow task queue, with its
// input, or says what keeps it from starting.
func startGate(v *view, p *plan, typ string) progress {
	spec := v.in.Spec
	if msg := spec.GateInput.Problem; msg != "" {
		msg = fmt.Sprintf("cannot start gate workflow %s on version %s: %s", typ, v.target, msg)
		p.after(requeueWatch)
		p.event(EventWarning, v1alpha1.ReasonGateCannotStart, msg)
		return blockedBecause(v1alpha1.ReasonGateCannotStart, msg)
	}
	queue := v.tvs[v.target].WorkflowTaskQueue
	if queue == "" {
		msg := fmt.Sprintf("cannot start gate workflow %s: the workers of version %s poll no workflow task queue for it to run on", typ, v.target)
		p.after(requeueWatch)
		p.event(EventWarning, v1alpha1.ReasonGateCannotStart, msg)
		return blockedBecause(v1alpha1.ReasonGateCannotStart, msg)
	}
	p.res.StartGate = &StartGate{BuildID: v.target, WorkflowType: typ, TaskQueue: queue, Input: spec.GateInput.Data, Timeout: spec.GateTimeout}
	p.event(EventNormal, EventStartGate, fmt.Sprintf("starting gate workflow %s pinned to version %s", typ, v.target))
	p.after(requeueTemporal)
	return movingBecause(v1alpha1.ReasonWaitingForPromotion, fmt.Sprintf("starting gate workflow %s on version %s", typ, v.target))
}

// GateCancelGrace is how long a gate workflow run the controller asked to
// cancel may take to end before the controller terminates it. A gate that
// honours cancellation ends at its next workflow task, a second or so
// after the request while its workers run; 30s also covers that task
// timing out once on a worker that died (Temporal's default workflow task
// timeout is 10s) and a short clean-up of the gate's own (undoing a smoke
// test). It is not longer because, until the run ends, it keeps its
// version draining and the next target's gate waits for it.
const GateCancelGrace = 30 * time.Second

// cancelStaleGate ends a gate run that nobody needs any more: one still
// running for a version that is no longer the target, after the spec
// dropped its gate, or while the TWD is deleted. Pinned to its version, it
// would keep that version draining. Its cancellation is requested first;
// a run still running GateCancelGrace after that request (status keeps
// its time, so restarts do not reset it) is terminated. A run whose
// cancellation was requested is ended even if its version became the
// target again: it gave no verdict, and the gate runs anew after it.
func cancelStaleGate(v *view, p *plan) {
	run := v.in.Gate
	deleting := v.in.Deletion != nil
	requested := run != nil && !run.CancelRequestedAt.IsZero()
	if run == nil || run.Phase != GateRunning || !v.known() || (!requested && !deleting && gateNeeded(v, run.BuildID, run.Step)) {
		return
	}
	if requested {
		terminateCancelledGate(v, p, run)
		return
	}
	why := fmt.Sprintf("version %s is no longer the target", run.BuildID)
	switch {
	case deleting:
		why = "the TemporalWorkerDeployment is being deleted"
	case run.BuildID == v.target && run.Step != 0:
		why = fmt.Sprintf("version %s no longer ramps at step %d%%, or the step has no gate any more", run.BuildID, run.Step)
	case run.BuildID == v.target:
		why = "spec.rollout.gate was removed"
	}
	p.res.CancelGate = &CancelGate{BuildID: run.BuildID, Step: run.Step, Reason: why}
	p.event(EventNormal, EventCancelGate, fmt.Sprintf("cancelling the %s running on version %s: %s", gateName(run.Step), run.BuildID, why))
	p.after(requeueTemporal)
}

// terminateCancelledGate terminates a run GateCancelGrace after its
// cancellation was requested; until then it looks again, backing off, to
// see it end by itself, and exactly at the deadline.
func terminateCancelledGate(v *view, p *plan, run *GateRun) {
	deadline := run.CancelRequestedAt.Add(GateCancelGrace)
	if v.now().Before(deadline) {
		p.after(min(backoff(v, run.CancelRequestedAt), deadline.Sub(v.now())))
		return
	}
	p.res.TerminateGate = &TerminateGate{BuildID: run.BuildID, Step: run.Step, Reason: fmt.Sprintf(
		"rainbow: the gate workflow on version %s did not end within %s of its cancellation request (%s); nobody needs its verdict",
		run.BuildID, GateCancelGrace, run.CancelRequestedAt.UTC().Format(time.RFC3339))}
	p.event(EventNormal, EventTerminateGate, fmt.Sprintf(
		"terminating the gate workflow running on version %s: it did not end within %s of its cancellation request", run.BuildID, GateCancelGrace))
	p.after(requeueTemporal)
}

// endingNote says where a run being ended stands.
func endingNote(run *GateRun) string {
	if run.CancelRequestedAt.IsZero() {
		return "cancelling it"
	}
	return fmt.Sprintf("cancellation requested at %s; terminated at %s if still running",
		run.CancelRequestedAt.UTC().Format(time.RFC3339), run.CancelRequestedAt.Add(GateCancelGrace).UTC().Format(time.RFC3339))
}

// gateEnding holds a deletion's last steps (deleting versions from
// Temporal, removing the finalizer) while a gate run is still open: it is
// cancelled, then terminated (cancelStaleGate), and once the finalizer is
// gone nothing would end it.
func gateEnding(v *view) (progress, bool) {
	run := v.in.Gate
	if run == nil || run.Phase != GateRunning {
		return progress{}, false
	}
	return movingBecause(v1alpha1.ReasonDeleting, fmt.Sprintf(
		"waiting for the gate workflow on version %s to end (%s) before deleting worker deployment %s from Temporal",
		run.BuildID, endingNote(run), v.deploymentName())), true
}

// GatePhase is the state of a gate workflow run.
type GatePhase string

const (
	GateRunning   GatePhase = "Running"
	GateSucceeded GatePhase = "Succeeded"
	GateFailed    GatePhase = "Failed"
	// GateCancelled: the run was cancelled because its version stopped
	// being the target, or it ended otherwise than completing after its
	// cancellation was requested (terminated, say): no verdict.
	GateCancelled GatePhase = "Cancelled"
)

// GateRun is a gate workflow run pinned to BuildID.
type GateRun struct {
	BuildID string
	// Step is the rampPercentage of the step whose gate this is; 0 for
	// spec.rollout.gate.
	Step    int32
	Phase   GatePhase
	Message string
	// StartedAt is when the run started; zero if unknown.
	StartedAt time.Time
	// CancelRequestedAt is when the controller requested the cancellation
	// of this still running run (status.gate.cancelRequestedAt); zero if
	// it did not.
	CancelRequestedAt time.Time
}

// StartGate starts the gate workflow pinned to BuildID.
type StartGate struct {
	BuildID string
	// Step is the rampPercentage of the step whose gate this is; 0 for
	// spec.rollout.gate. Each has a workflow ID of its own.
	Step         int32
	WorkflowType string
	// TaskQueue is the target's workflow task queue it runs on.
	TaskQueue string
	Input     []byte
	Timeout   time.Duration
}

// GateInput is the gate's input as read for a pass.
type GateInput struct {
	Data []byte
	// Problem says why inputFrom could not be read; empty when it was.
	Problem string
}

// CancelGate cancels the gate workflow run of BuildID.
type CancelGate struct {
	BuildID string
	Step    int32
	// Reason says why nobody needs the run any more.
	Reason string
}

// TerminateGate terminates the gate workflow run of BuildID.
type TerminateGate struct {
	BuildID string
	Step    int32
	// Reason goes into the run's history.
	Reason string
}
