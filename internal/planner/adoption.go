package planner

import (
	"fmt"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
)

// planAdoptionPending: the migrate command is moving the incumbent's
// Deployments over to this TWD. Until it is done a version may look like it
// has no Deployment, and creating one would start a second set of workers,
// so nothing is created, scaled, routed or deleted.
func planAdoptionPending(v *view, p *plan) progress {
	p.after(requeueAdoption)
	return movingBecause(v1alpha1.ReasonAdoptionPending, fmt.Sprintf(
		"waiting for the migrate command to hand over the Deployments of Temporal's worker controller; it removes the annotation %s when done. "+
			"If it was interrupted, run it again: kubectl rainbow migrate --namespace %s", v1alpha1.AnnotationAdoptionPending, v.in.Namespace))
}

// takeManagerRole takes the manager role of the worker deployment from the
// identity the TWD names (the incumbent's, written by the migrate command),
// and from no other. The describe's conflict token makes it fail, rather
// than overwrite, if the role changed hands since.
func takeManagerRole(v *view, p *plan) {
	from := v.in.Spec.TakeManagerFrom
	if !v.known() || from == "" || v.temporal().ManagerIdentity != from || from == v.in.Identity {
		return
	}
	p.res.BecomeManager = true
	p.event(EventNormal, EventTakeManagerRole, fmt.Sprintf(
		"taking the manager role of worker deployment %s from %q, as annotation %s asks; this controller (%q) now decides its routing",
		v.deploymentName(), from, v1alpha1.AnnotationTakeManagerFrom, v.in.Identity))
}
