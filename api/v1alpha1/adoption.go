package v1alpha1

// Annotations of a switch from Temporal's worker controller (the
// incumbent). The migrate command (kubectl rainbow migrate) writes them with
// the user's own credentials; docs/migration-from-twc.md explains each.
const (
	// AnnotationAdoptedBuildID on a TemporalWorkerDeployment is the build ID
	// the incumbent computed for the template the TWD was converted from. It
	// is the target while spec.template still hashes to
	// AnnotationAdoptedTemplateHash, so the switch starts no rollout; the
	// first template change makes Rainbow's own build ID the target.
	AnnotationAdoptedBuildID = "temporal.io/adopted-build-id"
	// AnnotationAdoptedTemplateHash is Rainbow's hash of spec.template when
	// it was converted.
	AnnotationAdoptedTemplateHash = "temporal.io/adopted-template-hash"
	// AnnotationAdoptionPending on a TemporalWorkerDeployment holds the
	// controller: it creates, scales, routes and deletes nothing while the
	// migrate command moves the incumbent's Deployments over to it.
	AnnotationAdoptionPending = "temporal.io/adoption-pending"
	// AnnotationTakeManagerFrom on a TemporalWorkerDeployment names the one
	// identity (the incumbent's) the controller takes the manager role of
	// the worker deployment from, with Temporal's conflict token.
	AnnotationTakeManagerFrom = "temporal.io/take-manager-from"
	// AnnotationAdoptedFrom on a versioned Deployment marks one the
	// controller did not create. Its pod template is never changed (that
	// would restart every worker); it is scaled and deleted by the same
	// rules as any version.
	AnnotationAdoptedFrom = "temporal.io/adopted-from"
)

// IncumbentName is the value of AnnotationAdoptedFrom for Deployments made
// by Temporal's worker controller.
const IncumbentName = "temporal-worker-controller"

// ReasonAdoptionPending: the migrate command has not finished handing the
// incumbent's Deployments over; the controller waits.
const ReasonAdoptionPending = "AdoptionPending"
