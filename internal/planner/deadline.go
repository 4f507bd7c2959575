package planner

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/internal/workerenv"
)

// pastDeadline turns a wait for the target's workers into a failure once
// spec.rollout.progressDeadline has passed and the target never had
// traffic: a crash-looping or misconfigured version would otherwise wait
// forever, and CD tools never see it fail. It only changes what status
// says, and, with ProgressDeadlineAbort, scales the target itself to zero:
// nothing routed is touched. A wait that ends later (the pods come up
// after all) moves on as usual.
func pastDeadline(v *view, p *plan, dep Deployment, waiting progress) progress {
	deadline, ok := v.progressDeadline()
	if !ok || (p.res.UpdateDeployment != nil && p.res.UpdateDeployment.Name == dep.Name) {
		return waiting // a template just changed in place: its clock restarts
	}
	if v.now().Before(deadline) {
		p.afterDeadline(v.now(), deadline)
		return waiting
	}
	if !v.neverRouted(v.target) {
		return waiting
	}
	msg := fmt.Sprintf("version %s did not get workers polling Temporal within spec.rollout.progressDeadline (%s, passed at %s): %s",
		v.target, v.in.Spec.ProgressDeadline, deadline.UTC().Format(time.RFC3339), missingWorkers(v, dep))
	if v.in.Spec.ProgressDeadlineAbort {
		if dep.Replicas > 0 {
			p.unscale(dep.Name) // spec.replicas, applied earlier this pass
			p.scale(dep, 0, ScaleAbort, EventScaleDown, fmt.Sprintf(
				"scaling Deployment %s of version %s to zero: it missed spec.rollout.progressDeadline and never had traffic (spec.rollout.progressDeadlineAbort)", dep.Name, v.target))
		}
		msg += "; spec.rollout.progressDeadlineAbort is set, so its rollout is aborted and its Deployment scaled to zero"
	}
	msg += fmt.Sprintf("; new workflows stay on %s. Fix the worker and change spec.template to roll out a new version, or raise spec.rollout.progressDeadline to wait longer for this one",
		currentName(v))
	return blockedBecause(v1alpha1.ReasonProgressDeadlineExceeded, msg)
}

// progressDeadline is when the target's wait for workers fails: the
// deadline after it became the target, or after its Deployment was created
// or updated in place if later (a wait for the version limit or an
// in-place fix restarts the clock). Until status records the start, it
// counts from now.
func (v *view) progressDeadline() (time.Time, bool) { return progressDeadline(v.in) }

func progressDeadline(in Input) (time.Time, bool) {
	d := in.Spec.ProgressDeadline
	if d <= 0 {
		return time.Time{}, false
	}
	start := in.TargetSince
	if start.IsZero() {
		return in.Now.Add(d), true
	}
	// The first Deployment of a build counts, as in newView.
	if i := slices.IndexFunc(in.Deployments, func(d Deployment) bool { return d.BuildID == in.Spec.TargetBuildID }); i >= 0 && in.Deployments[i].CreatedAt.After(start) {
		start = in.Deployments[i].CreatedAt
	}
	return start.Add(d), true
}

// AbortDue: the target's progress deadline has passed under
// ProgressDeadlineAbort, so the plan may scale it to zero on Temporal's
// word that it never had traffic. That word must come from a read of the
// worker deployment, not from its absence in a lagging list
// (internal/freshness).
func AbortDue(in Input) bool {
	deadline, ok := progressDeadline(in)
	return ok && in.Spec.ProgressDeadlineAbort && !in.TargetHadCompleted && !in.Now.Before(deadline)
}

// neverRouted: Temporal shows that the build never got traffic, so it has
// no pinned workflows of routed traffic and losing its workers strands none.
func (v *view) neverRouted(build string) bool {
	if !v.known() || v.in.TargetHadCompleted {
		return false
	}
	switch v.status(build) {
	case v1alpha1.VersionNotRegistered:
		return true
	case v1alpha1.VersionInactive:
		return v.tvs[build].FirstActivatedAt == nil
	}
	return false
}

// keepAborted: a target scaled to zero for missing its deadline under
// ProgressDeadlineAbort stays there (also while Temporal cannot be read),
// until the template or the deadline changes.
func (v *view) keepAborted(dep Deployment) bool {
	if dep.Replicas != 0 || !v.in.Spec.ProgressDeadlineAbort || v.in.TargetHadCompleted {
		return false
	}
	deadline, ok := v.progressDeadline()
	return ok && !v.now().Before(deadline) && (!v.known() || v.neverRouted(v.target))
}

// missingWorkers says what the target lacks, and where to look.
func missingWorkers(v *view, dep Deployment) string {
	ns := v.in.Namespace
	tv, registered := v.tvs[v.target]
	switch {
	case dep.Replicas > 0 && (!dep.Available || dep.Rolling):
		ready := min(dep.ReadyReplicas, dep.Replicas)
		return fmt.Sprintf("%d of %d pods of Deployment %s are not ready; look with: kubectl -n %s describe deployment %s; kubectl -n %s logs deployment/%s --previous",
			dep.Replicas-ready, dep.Replicas, dep.Name, ns, dep.Name, ns, dep.Name)
	case registered && len(tv.MissingTaskQueues) > 0:
		// Registered task queues stay after the workers go: this holds
		// past an abort too.
		return fmt.Sprintf("its workers do not poll task queue %s, which the current version %s polls (Temporal routes to a version only if it polls them all); "+
			"check the task queues the worker code registers, and look with: temporal worker deployment describe-version --deployment-name %s --build-id %s",
			strings.Join(tv.MissingTaskQueues, ", "), v.temporal().CurrentBuildID, v.deploymentName(), v.target)
	case dep.Replicas == 0 && v.in.Spec.ProgressDeadlineAbort:
		// The pods that showed what was wrong are gone; the Warning
		// Event of the first report keeps it.
		return fmt.Sprintf("Deployment %s has no pods left; what was missing is in the first %s Warning Event: kubectl -n %s events --for temporalworkerdeployment/%s",
			dep.Name, v1alpha1.ReasonProgressDeadlineExceeded, ns, v.in.Name)
	case dep.Replicas == 0:
		return fmt.Sprintf("Deployment %s has no pods; look with: kubectl -n %s describe deployment %s", dep.Name, ns, dep.Name)
	case registered && tv.Described && !tv.HasPollers:
		return fmt.Sprintf("it is registered in worker deployment %s but none of its workers polls it now; look with: kubectl -n %s logs deployment/%s",
			v.deploymentName(), ns, dep.Name)
	case !registered:
		return fmt.Sprintf("its pods run but no worker of it polled worker deployment %s in Temporal namespace %s; check that the worker reads %s, %s and %s "+
			"(the controller sets them in its pods), and look with: kubectl -n %s logs deployment/%s",
			v.deploymentName(), v.in.TemporalNamespace, workerenv.Namespace, workerenv.DeploymentName, workerenv.BuildID, ns, dep.Name)
	}
	return fmt.Sprintf("it is registered in worker deployment %s but its workers do not poll all its task queues; look with: temporal worker deployment describe-version --deployment-name %s --build-id %s; kubectl -n %s logs deployment/%s",
		v.deploymentName(), v.deploymentName(), v.target, ns, dep.Name)
}

// currentName names where new workflows go meanwhile.
func currentName(v *view) string {
	if c := v.temporal().CurrentBuildID; c != "" {
		return "version " + c
	}
	return "unversioned workers"
}
