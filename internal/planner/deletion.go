package planner

import (
	"fmt"
	"strings"
	"time"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
)

// planDeletion plans the next step of removing a deleted TWD's footprint,
// one step per pass so that each acts on a fresh observation:
//
//  1. Without Temporal's state nothing is deleted. The exception: the TWD
//     never ran a worker and its connection is gone, so Temporal holds
//     nothing of it and the finalizer goes.
//  2. Another manager's routing is theirs: while it routes new workflows
//     to a version, nothing is deleted; otherwise the workers go (after
//     draining, below) and Temporal is left as it is.
//  3. New workflows move to unversioned workers: the ramp goes first, then
//     the current version.
//  4. WaitForDrain keeps a version's workers until Temporal reports it
//     drained or inactive, up to spec.deletion.maxDrainWait after the
//     deletion request; a draining version we scaled to zero gets a worker
//     back. Immediate skips the wait.
//  5. Every Deployment is deleted.
//  6. Each version is deleted from Temporal once nothing polls it, then
//     the worker deployment, and the finalizer goes; not while a gate run
//     is still open (it is ended first: cancelStaleGate).
func planDeletion(v *view, p *plan) progress {
	del := v.in.Deletion
	name := v.deploymentName()
	if !v.known() {
		if e := v.in.TemporalError; e != nil && neverReachable(e.Reason) && !del.StatusShowedVersions && len(v.deps) == 0 {
			p.res.RemoveFinalizer = true
			p.event(EventWarning, e.Reason, fmt.Sprintf("not cleaning up worker deployment %s in Temporal: %s; it never ran a worker", name, e.Message))
			return movingBecause(v1alpha1.ReasonDeleting, "removing the finalizer: this TemporalWorkerDeployment never ran a worker")
		}
		p.after(requeueTemporalDown)
		msg := "cannot read worker deployment " + name + " from Temporal"
		if e := v.in.TemporalError; e != nil && e.Message != "" {
			msg = e.Message
		}
		reason := v1alpha1.ReasonTemporalStateFetchFailed
		if e := v.in.TemporalError; e != nil && e.Reason != "" {
			reason = e.Reason
		}
		return blockedBecause(reason, "deletion waits: "+msg+"; its workers and versions stay until it can reach Temporal "+
			"(to give up on cleaning up Temporal, remove the finalizer "+v1alpha1.FinalizerCleanup+" by hand)")
	}
	t := v.temporal()
	other := v.otherManager()
	if other != "" {
		if routed := routedBuilds(t); len(routed) > 0 {
			msg := fmt.Sprintf("deletion waits: identity %q manages worker deployment %s and routes new workflows to versions %v "+
				"of this TemporalWorkerDeployment; route them elsewhere or clear the manager identity, and deletion goes on", other, name, routed)
			p.event(EventWarning, v1alpha1.ReasonManagedByOtherIdentity, msg)
			p.waitFor(WaitRouting)
			return blockedBecause(v1alpha1.ReasonManagedByOtherIdentity, msg)
		}
	} else {
		switch {
		case t.RampingBuildID != "":
			p.route(Routing{Op: RemoveRamp}, v1alpha1.ReasonDeleting, fmt.Sprintf("removing the ramp of version %s of worker deployment %s", t.RampingBuildID, name))
			return movingBecause(v1alpha1.ReasonDeleting, "removing the ramp of worker deployment "+name)
		case t.CurrentBuildID != "":
			p.route(Routing{Op: SetCurrent}, v1alpha1.ReasonDeleting, fmt.Sprintf("new workflows of worker deployment %s now go to unversioned workers", name))
			return movingBecause(v1alpha1.ReasonDeleting, "moving new workflows of worker deployment "+name+" to unversioned workers")
		}
	}
	if prog, waiting := waitForDrain(v, p); waiting {
		return prog
	}
	if len(v.deps) > 0 {
		var names []string
		for _, b := range v.builds {
			if d, ok := v.deps[b]; ok {
				names = append(names, d.Name)
				reason := "its TemporalWorkerDeployment is being deleted"
				p.res.DeleteDeployments = append(p.res.DeleteDeployments, DeleteDeployment{Name: d.Name, BuildID: b, Reason: reason, Running: true})
				p.event(EventNormal, v1alpha1.ReasonDeleting, fmt.Sprintf("deleting Deployment %s: %s", d.Name, reason))
			}
		}
		p.after(requeueTemporal)
		return movingBecause(v1alpha1.ReasonDeleting, fmt.Sprintf("deleting Deployments %s", strings.Join(names, ", ")))
	}
	if prog, waiting := gateEnding(v); waiting {
		return prog
	}
	if other != "" {
		p.res.RemoveFinalizer = true
		p.event(EventWarning, v1alpha1.ReasonManagedByOtherIdentity,
			fmt.Sprintf("leaving worker deployment %s in Temporal as it is: identity %q manages it", name, other))
		return movingBecause(v1alpha1.ReasonDeleting, "removing the finalizer; worker deployment "+name+" stays in Temporal")
	}
	return deleteFromTemporal(v, p)
}

// waitForDrain holds the workers of versions that may still run pinned
// workflows, as spec.deletion asks.
func waitForDrain(v *view, p *plan) (progress, bool) {
	del := v.in.Deletion
	if del.Policy == v1alpha1.DeletionImmediate {
		return progress{}, false
	}
	var open []string
	for _, b := range v.builds {
		if _, ok := v.deps[b]; ok && v.getsWork(b) {
			open = append(open, b)
		}
	}
	if len(open) == 0 {
		return progress{}, false
	}
	if del.MaxDrainWait > 0 {
		deadline := del.RequestedAt.Add(del.MaxDrainWait)
		if !v.now().Before(deadline) {
			p.event(EventWarning, v1alpha1.ReasonDeleting, fmt.Sprintf(
				"spec.deletion.maxDrainWait (%s) has passed: deleting the workers of versions %v although Temporal does not report them drained",
				del.MaxDrainWait, open))
			return progress{}, false
		}
		p.afterDeadline(v.now(), deadline)
	}
	for _, b := range open {
		restoreWorkers(v, p, v.deps[b])
	}
	// Drainage shows only in a describe: look often at first, then back
	// off to once a minute for long-running workflows.
	p.after(min(requeueIdle, max(requeueDrainingMin, v.now().Sub(del.RequestedAt)/4)))
	bound := "until Temporal reports them drained (spec.deletion.maxDrainWait is unset)"
	if del.MaxDrainWait > 0 {
		bound = fmt.Sprintf("until Temporal reports them drained, or until %s (spec.deletion.maxDrainWait)",
			del.RequestedAt.Add(del.MaxDrainWait).UTC().Format(time.RFC3339))
	}
	return movingBecause(v1alpha1.ReasonDeleting, fmt.Sprintf(
		"deletion waits for versions %v to drain: workflows pinned to them may still run, so their workers stay %s; "+
			"to delete them now run: %s",
		open, bound, immediateCommand(del.Object))), true
}

// immediateCommand switches a deletion to the Immediate policy.
func immediateCommand(object string) string {
	ns, name, ok := strings.Cut(object, "/")
	if !ok {
		ns, name = "<namespace>", "<name>"
	}
	return fmt.Sprintf(`kubectl patch twd %s -n %s --type=merge -p '{"spec":{"deletion":{"policy":"Immediate"}}}'`, name, ns)
}

// deleteFromTemporal deletes the versions nothing polls any more, then the
// worker deployment, then lets the finalizer go.
func deleteFromTemporal(v *view, p *plan) progress {
	name := v.deploymentName()
	var polled, deleting []string
	for _, b := range v.builds {
		tv, ok := v.tvs[b]
		switch {
		case !ok:
		case tv.mayHavePollers():
			polled = append(polled, b)
		default:
			deleting = append(deleting, b)
		}
	}
	if len(deleting) > 0 {
		p.res.DeleteTemporalVersions = deleting
		p.res.SkipDrainage = true
		p.event(EventNormal, v1alpha1.ReasonDeleting, fmt.Sprintf("deleting versions %v of worker deployment %s from Temporal", deleting, name))
		p.after(requeueTemporal)
	}
	if len(polled) > 0 {
		p.after(requeuePollersGone)
		return movingBecause(v1alpha1.ReasonDeleting, fmt.Sprintf("waiting for Temporal to forget the pollers of versions %v before deleting them; "+
			"their workers are stopped, and Temporal drops a poller after its poller history TTL (5 minutes by default)", polled))
	}
	if len(deleting) > 0 {
		return movingBecause(v1alpha1.ReasonDeleting, fmt.Sprintf("deleting versions %v from Temporal", deleting))
	}
	p.res.RemoveFinalizer = true
	if v.temporal().Exists {
		p.res.DeleteWorkerDeployment = true
		p.event(EventNormal, v1alpha1.ReasonDeleting, fmt.Sprintf("deleting worker deployment %s from Temporal", name))
	}
	return movingBecause(v1alpha1.ReasonDeleting, "deleting worker deployment "+name+" from Temporal")
}

// routedBuilds are the versions new workflows go to.
func routedBuilds(t TemporalState) []string {
	var out []string
	for _, b := range []string{t.CurrentBuildID, t.RampingBuildID} {
		if b != "" {
			out = append(out, b)
		}
	}
	return out
}

// neverReachable: with this problem the controller cannot reach Temporal
// until someone changes the connection, so a TWD that never ran a worker
// is let go rather than held for a cleanup with nothing to clean.
func neverReachable(reason string) bool {
	return reason == v1alpha1.ReasonTemporalConnectionNotFound || reason == v1alpha1.ReasonAddressNotAllowed
}
