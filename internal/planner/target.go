package planner

import (
	"fmt"
	"time"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
)

// planTarget brings the target version to current: it creates and scales its
// Deployment, waits for its workers, checks who may write routing, and
// hands over to promote. It returns the first thing the rollout waits on.
func planTarget(v *view, p *plan) progress {
	if v.target == "" {
		return blockedBecause(v1alpha1.ReasonPlanGenerationFailed, "the target build ID is empty; the controller could not compute it from spec.template")
	}
	dep, exists := v.deps[v.target]
	rolling := false
	if exists {
		if v.onOtherServer(dep) {
			return targetOnOtherServer(v, p, dep)
		}
		syncTargetReplicas(v, p, dep)
		rolling = (v.connected() && syncTargetTemplate(v, p, dep)) || dep.Rolling
	} else {
		if msg, full := tooManyVersions(v); full {
			p.event(EventWarning, v1alpha1.ReasonTooManyVersions, msg)
			return blockedBecause(v1alpha1.ReasonTooManyVersions, msg)
		}
		if v.connected() {
			createTarget(v, p)
		}
	}

	if !v.known() {
		return temporalUnknown(v, p)
	}
	if v.temporal().CurrentBuildID == v.target {
		// A stale connection rolls its pods (planSync, this pass or the
		// next): not Ready until they run it, or Ready would flap.
		if rolling || (v.connected() && dep.ConnectionStale) {
			p.after(requeueWatch)
			return movingBecause(v1alpha1.ReasonWaitingForPollers, fmt.Sprintf(
				"version %s is current; rolling the changed pod template out to its Deployment %s in place", v.target, dep.Name))
		}
		return targetIsCurrent(v, p)
	}
	if v.in.Spec.AbortedBuildID != "" && v.in.Spec.AbortedBuildID == v.target {
		return abortRollout(v, p)
	}
	if prog, removed := rampWithoutWorkers(v, p); removed {
		return prog
	}
	if !exists {
		return movingBecause(v1alpha1.ReasonWaitingForPollers, fmt.Sprintf("creating the Deployment of version %s", v.target))
	}
	if rolling {
		p.after(requeueWatch)
		return pastDeadline(v, p, dep, movingBecause(v1alpha1.ReasonWaitingForPollers, fmt.Sprintf(
			"rolling the changed pod template of version %s out to its Deployment %s in place before it gets traffic", v.target, dep.Name)))
	}
	if m := v.otherManager(); m != "" {
		// Checked before the workers: nothing is routed either way, and
		// so the target need not be described while a person decides.
		msg := managedByOtherMessage(v, m)
		p.event(EventWarning, v1alpha1.ReasonManagedByOtherIdentity, msg)
		p.waitFor(WaitManager)
		return blockedBecause(v1alpha1.ReasonManagedByOtherIdentity, msg)
	}
	if prog, waiting := waitForWorkers(v, p, dep); waiting {
		return pastDeadline(v, p, dep, prog)
	}
	return promote(v, p)
}

// createTarget creates the target's Deployment with spec.replicas, or one
// replica for the autoscaler to take over from.
func createTarget(v *view, p *plan) {
	replicas := int32(1)
	if r := v.in.Spec.Replicas; r != nil {
		replicas = *r
	}
	p.res.CreateDeployment = &CreateDeployment{BuildID: v.target, Replicas: replicas}
	p.eventOn(v.target, EventNormal, EventCreateDeployment, fmt.Sprintf("creating the Deployment of version %s with %d replicas", v.target, replicas))
	p.after(requeueWatch)
}

// targetReplicas is the target's spec.replicas once this plan is applied:
// zero while it stays aborted for missing its progress deadline.
// With an autoscaler only our own scale-to-zero is undone (the spec went
// back to a version that was sunset); the autoscaler takes over from
// spec.replicas, or one replica. Its own scale-to-zero stands until work
// waits for the target (see stranded), which then gets one replica.
func targetReplicas(v *view, dep Deployment) int32 {
	if v.keepAborted(dep) {
		return 0
	}
	if want := v.specReplicas(); want != nil {
		return *want
	}
	if dep.Replicas == 0 && dep.ScaledDownAt != nil {
		return max(1, ptrValue(v.in.Spec.Replicas))
	}
	if v.stranded(dep) {
		return 1
	}
	return dep.Replicas
}

// specReplicas is spec.replicas, or nil when an autoscaler owns replicas:
// spec.replicas is unset, or an owned resource attaches an autoscaler to
// every version (the two would fight over the Deployment's replicas).
func (v *view) specReplicas() *int32 {
	if v.autoscaled() {
		return nil
	}
	return v.in.Spec.Replicas
}

func ptrValue(p *int32) int32 {
	if p == nil {
		return 0
	}
	return *p
}

// syncTargetReplicas applies targetReplicas. This is allowed while Temporal
// is unknown: it never removes workers the user did not ask to remove.
func syncTargetReplicas(v *view, p *plan, dep Deployment) {
	want := targetReplicas(v, dep)
	if want == dep.Replicas {
		return
	}
	why, msg := ScaleToSpec, fmt.Sprintf("scaling Deployment %s of version %s from %d to %d replicas (spec.replicas)", dep.Name, dep.BuildID, dep.Replicas, want)
	switch {
	case v.specReplicas() != nil:
	case dep.ScaledDownAt == nil:
		revive(v, p, dep)
		return
	default:
		why, msg = ScaleRestore, fmt.Sprintf("scaling Deployment %s of version %s back up to %d replicas: it is the target again", dep.Name, dep.BuildID, want)
	}
	p.scale(dep, want, why, EventScale, msg)
	p.after(requeueWatch)
}

// abortRollout keeps new workflows off a target whose rollout a person
// aborted: the ramp we set goes, someone else's stays, nothing is promoted
// and no gate starts, until the annotation goes or the template changes.
func abortRollout(v *view, p *plan) progress {
	t := v.temporal()
	msg := fmt.Sprintf("the rollout of version %s was aborted (annotation %s)", v.target, v1alpha1.AnnotationAbortRollout)
	evidence := abortEvidence(v)
	if evidence != "" {
		msg = fmt.Sprintf("the analysis aborted the rollout of version %s (annotation %s): %s", v.target, v1alpha1.AnnotationAbortRollout, evidence)
	} else if evidence = stepGateEvidence(v); evidence != "" {
		msg = fmt.Sprintf("a step gate aborted the rollout of version %s (annotation %s): %s", v.target, v1alpha1.AnnotationAbortRollout, evidence)
	}
	switch {
	case t.RampingBuildID != v.target:
	case v.ours(t.LastModifierIdentity) && v.canWriteRouting() && v.in.Spec.Strategy != v1alpha1.StrategyManual:
		p.route(Routing{Op: RemoveRamp}, EventRemoveRamp, fmt.Sprintf("removing the ramp of version %s: its rollout was aborted", v.target))
		msg += "; removing its ramp"
	default:
		msg += fmt.Sprintf("; its ramp of %d%% was set by %q and stays", t.RampPercentage, t.LastModifierIdentity)
	}
	if evidence != "" {
		return blockedBecause(v1alpha1.ReasonRolloutAborted, msg+abortAdvice(v))
	}
	return blockedBecause(v1alpha1.ReasonRolloutAborted, msg+
		"; new workflows go to the current version. To retry, remove the annotation; to roll back, set spec.template back")
}

// rampWithoutWorkers takes the ramp away from a target whose workers no
// longer poll: its share of new workflows would wait for workers that are
// gone. The rollout ramps again once they poll.
func rampWithoutWorkers(v *view, p *plan) (progress, bool) {
	tv, ok := v.tvs[v.target]
	if !ok || tv.mayHavePollers() || v.temporal().RampingBuildID != v.target ||
		!v.canWriteRouting() || v.in.Spec.Strategy == v1alpha1.StrategyManual {
		return progress{}, false
	}
	msg := fmt.Sprintf("removing the ramp of version %s: none of its workers polls Temporal any more; it ramps again once they do", v.target)
	p.route(Routing{Op: RemoveRamp}, EventRemoveRamp, msg)
	return movingBecause(v1alpha1.ReasonWaitingForPollers, msg), true
}

// syncTargetTemplate updates the target's Deployment in place when it runs
// another pod template than the spec: a custom build ID kept across a
// change that is not workflow code. A Deployment with no recorded hash gets
// one without a restart when its build ID proves it runs the spec's
// template, or when it carries the hash of the tool users migrate from
// (restarting every migrated worker would be the surprise); otherwise it
// may run any template and is updated. It reports whether an update starts
// now.
func syncTargetTemplate(v *view, p *plan, dep Deployment) bool {
	want := v.in.Spec.TemplateHash
	why := "spec.template changed"
	switch {
	case want == "" || dep.TemplateHash == want:
		return false
	case dep.TemplateHash == "" && (dep.BuildID == v.in.Spec.GeneratedBuildID || dep.MigratedHash):
		p.res.UpdateDeployment = &UpdateDeployment{Name: dep.Name, BuildID: dep.BuildID, HashOnly: true}
		return false
	case dep.TemplateHash == "":
		why = "it records no template hash and its build ID was not generated from spec.template, so it may run another template"
	}
	msg := fmt.Sprintf("updating Deployment %s in place: %s while the build ID stayed %s (spec.workerOptions.customBuildID), so this is a rolling update of the same version",
		dep.Name, why, dep.BuildID)
	p.res.UpdateDeployment = &UpdateDeployment{Name: dep.Name, BuildID: dep.BuildID, Message: msg}
	p.event(EventNormal, EventUpdateInPlace, msg)
	p.after(requeueWatch)
	return true
}

// tooManyVersions: creating the target would register one version more than
// Temporal allows and none can be deleted to make room.
func tooManyVersions(v *view) (string, bool) {
	max := v.in.Spec.MaxVersions
	if max <= 0 || !v.known() {
		return "", false
	}
	if v.status(v.target) != v1alpha1.VersionNotRegistered {
		return "", false // Temporal knows it already: no new version
	}
	var routed, draining, polled, kept int
	for _, b := range v.builds {
		if _, ok := v.tvs[b]; !ok || b == v.target || v.deletableInTemporal(b) {
			continue
		}
		kept++
		switch v.status(b) {
		case v1alpha1.VersionCurrent, v1alpha1.VersionRamping:
			routed++
		case v1alpha1.VersionDraining, v1alpha1.VersionUnknown:
			draining++
		default:
			polled++
		}
	}
	if kept+1 <= max {
		return "", false
	}
	return fmt.Sprintf("Temporal allows %d versions in worker deployment %s and %d cannot be deleted yet "+
		"(%d current or ramping, %d waiting to drain or of unknown drainage, %d drained or inactive but still polled by workers); "+
		"the Deployment of version %s is created once one of them is deleted. "+
		"Drained versions are removed after spec.sunset.scaledownDelay plus spec.sunset.deleteDelay",
		max, v.deploymentName(), kept, routed, draining, polled, v.target), true
}

// deletableInTemporal mirrors Temporal's own rule for deleting a version:
// not current or ramping, not draining, and no pollers.
func (v *view) deletableInTemporal(build string) bool {
	tv, ok := v.tvs[build]
	if !ok || tv.mayHavePollers() {
		return false
	}
	s := v.status(build)
	return s == v1alpha1.VersionDrained || s == v1alpha1.VersionInactive
}

// temporalUnknown: without Temporal's state nothing may be routed, scaled
// down or deleted.
func temporalUnknown(v *view, p *plan) progress {
	p.after(requeueTemporalDown)
	e := v.in.TemporalError
	if e != nil && e.Reason == v1alpha1.ReasonTemporalStateFetchFailed && !e.Since.IsZero() {
		// A throttle, or reads failing for a moment, is no failure:
		// CD tools must not fail a rollout that goes on seconds later.
		if lasted := v.now().Sub(e.Since); e.Throttled || lasted < TemporalOutageBound {
			if v.in.TargetShownReady {
				// Routing changes only by a write, and none is made
				// meanwhile: what status showed stands.
				return rolloutComplete(fmt.Sprintf("version %s is current as last read; reads of Temporal fail for the moment: %s", v.target, e.Message))
			}
			msg := e.Message
			if !e.Throttled {
				msg += fmt.Sprintf("; reported as an outage (TemporalStateFetchFailed) if reads still fail at %s",
					e.Since.Add(TemporalOutageBound).UTC().Format(time.RFC3339))
				p.afterDeadline(v.now(), e.Since.Add(TemporalOutageBound))
			}
			return movingBecause(v1alpha1.ReasonWaitingForTemporal, "waiting for Temporal: "+msg)
		}
	}
	if e != nil && e.Reason != "" {
		return blockedBecause(e.Reason, e.Message)
	}
	return blockedBecause(v1alpha1.ReasonTemporalStateFetchFailed, fmt.Sprintf(
		"could not read worker deployment %s from Temporal; check spec.workerOptions and the TemporalConnection it names", v.deploymentName()))
}

// waitForWorkers holds the rollout until the target's workers run and poll
// every task queue: Temporal must never route to a version nobody polls.
func waitForWorkers(v *view, p *plan, dep Deployment) (progress, bool) {
	if want := targetReplicas(v, dep); want == 0 {
		fix := "set spec.replicas above 0"
		if v.specReplicas() == nil {
			fix = "scale Deployment " + dep.Name + " up (or let its autoscaler do it)"
		}
		return movingBecause(v1alpha1.ReasonWaitingForPollers, fmt.Sprintf(
			"version %s has 0 replicas, so it cannot get traffic; %s", v.target, fix)), true
	}
	if dep.Replicas == 0 {
		p.after(requeueWatch)
		return movingBecause(v1alpha1.ReasonWaitingForPollers, fmt.Sprintf("waiting for Deployment %s of version %s to scale up", dep.Name, v.target)), true
	}
	if !dep.Available {
		p.after(requeueWatch)
		return movingBecause(v1alpha1.ReasonWaitingForPollers, fmt.Sprintf(
			"waiting for Deployment %s of version %s to become available; check its pods if this takes long", dep.Name, v.target)), true
	}
	tv, ok := v.tvs[v.target]
	var msg string
	wait := requeueTemporal
	switch {
	case !ok:
		msg = fmt.Sprintf("waiting for the workers of version %s to poll worker deployment %s in Temporal", v.target, v.deploymentName())
	case !tv.Described:
		msg = fmt.Sprintf("waiting to read the workers of version %s from Temporal", v.target)
	case !tv.TaskQueuesReady:
		msg = fmt.Sprintf("waiting for the workers of version %s to register all their task queues with Temporal", v.target)
		wait = requeueTaskQueues
		if !tv.RegisteredAt.IsZero() && v.now().Sub(tv.RegisteredAt) > taskQueuesDue {
			// Overdue: a task queue the current version has, or a type
			// that never registers. Look less often as it drags on,
			// unless its Deployment just became available again (an
			// in-place update): its new workers may bring the type.
			wait = backoff(v, tv.RegisteredAt)
			if !dep.AvailableSince.IsZero() {
				wait = min(wait, pollersWait(v, dep.AvailableSince))
			}
		}
	case !tv.HasPollers:
		msg = fmt.Sprintf("version %s is registered but no worker polls it", v.target)
	default:
		return progress{}, false
	}
	if wait == requeueTemporal && !dep.AvailableSince.IsZero() {
		wait = pollersWait(v, dep.AvailableSince)
	}
	p.after(wait)
	return movingBecause(v1alpha1.ReasonWaitingForPollers, msg), true
}

// pollersWait paces the look for the workers of an available target:
// every requeueTaskQueues for pollersDue after the Deployment became
// available, then backing off like any wait on Temporal.
func pollersWait(v *view, availableSince time.Time) time.Duration {
	if v.now().Sub(availableSince) < pollersDue {
		return requeueTaskQueues
	}
	return backoff(v, availableSince)
}

func managedByOtherMessage(v *view, manager string) string {
	return fmt.Sprintf("worker deployment %s is managed by identity %q, so this controller (%q) does not change its routing; "+
		"to hand control back run: temporal worker deployment manager-identity unset --deployment-name %s --identity %q",
		v.deploymentName(), manager, v.in.Identity, v.deploymentName(), manager)
}

// targetIsCurrent: the rollout is complete. A ramp we left on another
// version (the spec went back to the current version mid-ramp) is removed;
// a ramp someone else set is theirs.
func targetIsCurrent(v *view, p *plan) progress {
	t := v.temporal()
	msg := fmt.Sprintf("version %s is current", v.target)
	other := t.RampingBuildID
	if other == "" || other == v.target {
		return rolloutComplete(msg)
	}
	if v.ours(t.LastModifierIdentity) && v.canWriteRouting() && v.in.Spec.Strategy != v1alpha1.StrategyManual {
		p.route(Routing{Op: RemoveRamp}, EventRemoveRamp, fmt.Sprintf("removing the ramp of version %s: version %s is the target and current", other, v.target))
		return rolloutComplete(msg + fmt.Sprintf("; removing the ramp of version %s", other))
	}
	return rolloutComplete(msg + fmt.Sprintf("; version %s ramps %d%% (set by %q)", other, t.RampPercentage, t.LastModifierIdentity))
}

// CreateDeployment creates the target's Deployment.
type CreateDeployment struct {
	BuildID  string
	Replicas int32
}

// UpdateDeployment brings the target's Deployment to the spec's template.
type UpdateDeployment struct {
	Name    string
	BuildID string
	// HashOnly: only record the template hash, without touching the pod
	// template (a Deployment made before hashes were recorded must not
	// restart its pods for that alone).
	HashOnly bool
	// Message says why the template is updated, for status and the Event.
	Message string
}
