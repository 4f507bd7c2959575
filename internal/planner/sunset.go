package planner

import (
	"fmt"
	"time"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/internal/planner/drain"
)

// planSunset retires versions other than the target once Temporal says they
// get no more work: scale to zero after spec.sunset.scaledownDelay, delete
// the Deployment deleteDelay later, then delete the version from Temporal
// once no worker polls it. Without Temporal's state it does nothing.
func planSunset(v *view, p *plan) {
	if !v.known() {
		return
	}
	for _, b := range v.builds {
		if d, ok := v.deps[b]; ok && b != v.target {
			sunsetDeployment(v, p, d)
		}
	}
	if !v.propagating() {
		deleteTemporalVersions(v, p)
	}
}

func sunsetDeployment(v *view, p *plan, d Deployment) {
	if v.getsWork(d.BuildID) {
		restoreWorkers(v, p, d)
		if v.status(d.BuildID) == v1alpha1.VersionDraining {
			p.after(drainingPoll(v))
			// A summary stuck on draining keeps workers running until
			// the cross-check; look when it falls due, not up to a
			// draining poll later.
			if due, ok := drain.CrossCheckAt(summary(v.tvs[d.BuildID], v.in.Temporal)); ok {
				p.afterDeadline(v.now(), due)
			}
		}
		return
	}
	if v.propagating() {
		// Partitions that have not applied the change yet may still
		// send the version new workflows: nothing is retired until
		// Temporal has (awaitPropagation looks again).
		return
	}
	due, ok := scaleDownAt(v, d.BuildID)
	if !ok {
		return
	}
	now := v.now()
	if d.Replicas > 0 || d.ScaledDownAt == nil {
		if now.Before(due) {
			p.afterDeadline(now, due)
			return
		}
		p.scale(d, 0, ScaleSunset, EventScaleDown, fmt.Sprintf("scaling Deployment %s of version %s to zero: %s",
			d.Name, d.BuildID, sunsetWhy(v, d.BuildID)))
		p.after(requeueWatch)
		return
	}
	deleteAt := d.ScaledDownAt.Add(v.in.Spec.DeleteDelay)
	if now.Before(deleteAt) {
		p.afterDeadline(now, deleteAt)
		return
	}
	reason := fmt.Sprintf("version %s has had no workers for spec.sunset.deleteDelay (%s)", d.BuildID, v.in.Spec.DeleteDelay)
	p.res.DeleteDeployments = append(p.res.DeleteDeployments, DeleteDeployment{Name: d.Name, BuildID: d.BuildID, Reason: reason})
	p.eventOn(d.BuildID, EventNormal, EventDeleteDeployment, fmt.Sprintf("deleting Deployment %s: %s", d.Name, reason))
	if tv, ok := v.tvs[d.BuildID]; ok && tv.mayHavePollers() {
		// Next, the version waits for Temporal to forget its workers'
		// polls (deleteTemporalVersions): look then, not only when the
		// Deployment's deletion is seen.
		p.after(requeuePollersGone)
	}
}

// restoreWorkers: a version we scaled to zero gets work again (a pinned
// workflow made it draining, or someone made it current). Its workflows
// would stall without workers, so bring one back. A version someone else
// scaled to zero gets one back once work waits for it (see stranded).
func restoreWorkers(v *view, p *plan, d Deployment) {
	if v.stranded(d) {
		revive(v, p, d)
		return
	}
	if d.Replicas != 0 || d.ScaledDownAt == nil {
		return
	}
	p.scale(d, 1, ScaleRestore, EventScale, fmt.Sprintf("scaling Deployment %s of version %s back up to 1 replica: Temporal reports it %s",
		d.Name, d.BuildID, v.status(d.BuildID)))
	p.after(requeueWatch)
}

// scaleDownAt is when a version that gets no work may lose its workers.
//   - Drained: ScaledownDelay after Temporal saw it drained, for queries on
//     closed workflows.
//   - Inactive (registered, never current or ramping): only workflows
//     explicitly pinned to it can run there. It is kept ScaledownDelay after
//     it was superseded, see supersededAt.
//   - NotRegistered: its workers never polled this worker deployment, so it
//     had no workflows: at once. But only if the worker deployment exists;
//     otherwise we may be looking at the wrong one, and keep everything.
func scaleDownAt(v *view, build string) (time.Time, bool) {
	switch v.status(build) {
	case v1alpha1.VersionDrained:
		if s := v.tvs[build].DrainedSince; s != nil {
			return s.Add(v.in.Spec.ScaledownDelay), true
		}
	case v1alpha1.VersionInactive:
		if s, ok := supersededAt(v, build); ok {
			return s.Add(v.in.Spec.ScaledownDelay), true
		}
	case v1alpha1.VersionNotRegistered:
		if v.temporal().Exists {
			return v.now(), true
		}
	}
	return time.Time{}, false
}

// supersededAt bounds when an Inactive version stopped being the target,
// from data Temporal keeps: the registration of the next newer version
// (which came after the spec moved on). If it is the newest registered and
// the target is registered too, the spec went back to an older version and
// its own registration time is used. Otherwise it is unknown: keep it.
func supersededAt(v *view, build string) (time.Time, bool) {
	own := v.tvs[build].RegisteredAt
	if own.IsZero() {
		return time.Time{}, false
	}
	var next time.Time
	for _, b := range v.builds {
		t := v.tvs[b].RegisteredAt
		if t.After(own) && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	if !next.IsZero() {
		return next, true
	}
	if _, ok := v.tvs[v.target]; ok {
		return own, true
	}
	return time.Time{}, false
}

func sunsetWhy(v *view, build string) string {
	switch v.status(build) {
	case v1alpha1.VersionDrained:
		return fmt.Sprintf("Temporal reports it drained and spec.sunset.scaledownDelay (%s) has passed", v.in.Spec.ScaledownDelay)
	case v1alpha1.VersionInactive:
		return fmt.Sprintf("it never got traffic and was superseded more than spec.sunset.scaledownDelay (%s) ago", v.in.Spec.ScaledownDelay)
	default:
		return "its workers never registered with Temporal and it is no longer the target"
	}
}

// deleteTemporalVersions removes versions whose Deployment is gone, once
// Temporal would allow it (drained or inactive, no pollers). Another
// manager's deployment is left alone: Temporal would refuse anyway.
func deleteTemporalVersions(v *view, p *plan) {
	if v.otherManager() != "" {
		return
	}
	for _, b := range v.builds {
		if _, hasDep := v.deps[b]; hasDep || b == v.target {
			continue
		}
		if !v.deletableInTemporal(b) {
			if tv, ok := v.tvs[b]; ok && tv.mayHavePollers() && !v.getsWork(b) {
				// Its workers are gone; Temporal forgets their polls
				// after its poller history TTL.
				p.after(requeuePollersGone)
			}
			continue
		}
		p.res.DeleteTemporalVersions = append(p.res.DeleteTemporalVersions, b)
		p.after(requeueTemporal) // show the deletion in status promptly
		p.event(EventNormal, EventDeleteVersion, fmt.Sprintf("deleting version %s from worker deployment %s: it has no Deployment, no pollers and no open workflows", b, v.deploymentName()))
	}
}

// drainingPoll paces describes while a version drains: drainage shows only
// in a describe. Right after a promotion most old versions drain within
// seconds, so look often then, backing off to once a minute for versions
// whose workflows run long.
func drainingPoll(v *view) time.Duration {
	since := time.Duration(0)
	if cur := v.tvs[v.temporal().CurrentBuildID].CurrentSince; cur != nil {
		since = v.now().Sub(*cur)
	}
	return min(requeueIdle, max(requeueDrainingMin, since/4))
}
