// Package owned decides the copies of TemporalWorkerOwnedResources: one per
// version with running workers, applied when missing, changed or due, and
// deleted only when what is found under a recorded name is provably the
// controller's copy. It is pure; the planner builds Input from its view and
// merges Result into its own.
package owned

import (
	"time"
)

// Input is what the owned-resource rules read.
type Input struct {
	Now time.Time
	// Namespace and Name are the TWD's, which copies are named, labelled
	// and placed after.
	Namespace, Name string
	// TemporalNamespace and DeploymentName (the Temporal worker
	// deployment's) are for the templates.
	TemporalNamespace, DeploymentName string
	// Resources are the TemporalWorkerOwnedResources naming the TWD,
	// sorted by name.
	Resources []Resource
	// BannedKinds are the kinds no copy may be, in any group (the
	// webhook's list); the RBAC kinds are banned whatever it says.
	BannedKinds []string
	// Deployments are the TWD's versioned Deployments, in any order.
	Deployments []Deployment
}

// Deployment is one versioned Deployment of the TWD.
type Deployment struct {
	BuildID, Name string
	// UID is for the owner references of copies; a Deployment without
	// one gets none yet.
	UID string
	// Running: its version keeps workers (the planner's call: any
	// Deployment but those it scaled to zero at sunset).
	Running bool
	// Selector is its pod selector's labels when it is not ours (an
	// adopted Deployment keeps its maker's); nil means ours.
	Selector map[string]string
}

// Result is the owned resources' part of a plan.
type Result struct {
	// Work are the owned resources with something to do.
	Work []Work
	// Status is each owned resource's status if every apply and delete
	// of Work succeeds; the executor records failures.
	Status []Status
	// RequeueAfter is when the next copy falls due for a resync; zero
	// when none does.
	RequeueAfter time.Duration
}

// Plan decides the copies of every owned resource (planOwned).
func Plan(in Input) Result {
	p := &plan{}
	planOwned(&view{in: in}, p)
	return p.res
}

type view struct{ in Input }

func (v *view) now() time.Time { return v.in.Now }

// plan accumulates the Result.
type plan struct{ res Result }

// after asks to be looked at again within d.
func (p *plan) after(d time.Duration) {
	if d > 0 && (p.res.RequeueAfter == 0 || d < p.res.RequeueAfter) {
		p.res.RequeueAfter = d
	}
}

// Resource is a TemporalWorkerOwnedResource naming the TWD.
type Resource struct {
	Name       string
	Generation int64
	// Object is spec.object decoded; nil when it is not a JSON object.
	Object map[string]any
	// Deleting: it has a deletion timestamp.
	Deleting bool
	// Adopted: it has the cleanup finalizer and the TWD as its controller.
	Adopted bool
	// Finalized: it has the cleanup finalizer.
	Finalized bool
	// Copies are the copies its status records. Anyone who may write the
	// status may write them: they say what to look at, never what is ours.
	Copies []Copy
	// ClusterScoped: the API server serves spec.object's kind as a
	// cluster-scoped one (false when the kind is unknown).
	ClusterScoped bool
}

// Copy is one version's copy of an owned resource.
type Copy struct {
	BuildID    string
	APIVersion string
	Kind       string
	// Name is empty when no copy was ever attempted.
	Name string
	// Applied: the last apply of this copy succeeded.
	Applied    bool
	Generation int64
	Hash       string
	// AppliedAt is when it was last applied; zero if never.
	AppliedAt time.Time
}

// Work is what to do for one owned resource.
type Work struct {
	Name string
	// Adopt adds the cleanup finalizer and the TWD as controller.
	Adopt bool
	// Apply are copies to server-side apply.
	Apply []Apply
	// Delete are copies to delete: of sunset versions, of an earlier kind
	// or name, or of a deleted owned resource.
	Delete []Copy
	// RemoveFinalizer once every Delete succeeded.
	RemoveFinalizer bool
}

// Apply is one copy to apply. Object is complete: name, namespace,
// labels and the owner reference to the version's Deployment.
type Apply struct {
	Copy   Copy
	Object map[string]any
}

// Status is an owned resource's status.versions, by build ID.
type Status struct {
	Name       string
	Generation int64
	Versions   []Version
}

// Version is the copy of one version, or why there is none.
type Version struct {
	Copy Copy
	// Error says why it could not be rendered; the previous copy stays.
	Error string
	// Deleting: the version no longer runs and its copy is deleted.
	Deleting bool
}
