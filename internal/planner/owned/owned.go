package owned

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/rainbow-deploy/rainbow/internal/ownedresource"
	"github.com/rainbow-deploy/rainbow/internal/workload"
)

// ownedResync is how long an unchanged copy goes without being applied
// again. Copies are not watched, so this bounds how long a copy deleted or
// edited by hand stays so.
const ownedResync = 10 * time.Minute

// planOwned decides the copies of every TemporalWorkerOwnedResource: one
// per version with running workers, applied when it is missing, out of
// date or due for a resync; deleted when its version is sunset or its
// TWOR is deleted. A TWOR that cannot be rendered for a version keeps that
// version's previous copy and reports why; it touches nothing else.
func planOwned(v *view, p *plan) {
	running := v.running()
	for _, or := range v.in.Resources {
		if or.Deleting {
			planOwnedDeletion(or, p)
			continue
		}
		work := Work{Name: or.Name, Adopt: !or.Adopted}
		st := Status{Name: or.Name, Generation: or.Generation}
		recorded := map[string]Copy{}
		for _, c := range or.Copies {
			recorded[c.BuildID] = c
		}
		for _, d := range running {
			prev, had := recorded[d.BuildID]
			delete(recorded, d.BuildID)
			u, err := v.render(or, d)
			if err != nil {
				prev.BuildID, prev.Applied = d.BuildID, false
				st.Versions = append(st.Versions, Version{Copy: prev, Error: err.Error()})
				continue
			}
			next := Copy{
				BuildID: d.BuildID, APIVersion: u.GetAPIVersion(), Kind: u.GetKind(), Name: u.GetName(),
				Generation: or.Generation, Hash: ownedresource.Hash(u),
			}
			if had && prev.Name != "" && !prev.sameObject(next) {
				work.Delete = append(work.Delete, prev) // its kind or name changed
			}
			if due, at := resyncDue(v, prev, next); had && !due {
				st.Versions = append(st.Versions, Version{Copy: prev})
				p.after(at)
				continue
			}
			work.Apply = append(work.Apply, Apply{Copy: next, Object: u.Object})
			st.Versions = append(st.Versions, Version{Copy: next})
		}
		// Copies of versions that no longer run go; the status keeps each
		// until its deletion succeeds.
		for _, b := range slices.Sorted(maps.Keys(recorded)) {
			if c := recorded[b]; c.Name != "" {
				work.Delete = append(work.Delete, c)
				st.Versions = append(st.Versions, Version{Copy: c, Deleting: true})
			}
		}
		sort.Slice(st.Versions, func(i, j int) bool { return st.Versions[i].Copy.BuildID < st.Versions[j].Copy.BuildID })
		p.res.Status = append(p.res.Status, st)
		if work.Adopt || len(work.Apply) > 0 || len(work.Delete) > 0 {
			p.res.Work = append(p.res.Work, work)
		}
	}
}

// planOwnedDeletion deletes every copy a deleted TWOR recorded; the
// executor then removes its finalizer.
func planOwnedDeletion(or Resource, p *plan) {
	work := Work{Name: or.Name, RemoveFinalizer: or.Finalized}
	for _, c := range or.Copies {
		if c.Name != "" {
			work.Delete = append(work.Delete, c)
		}
	}
	if work.RemoveFinalizer || len(work.Delete) > 0 {
		p.res.Work = append(p.res.Work, work)
	}
}

// resyncDue: the copy must be applied, and if not, when it will be.
func resyncDue(v *view, prev, next Copy) (bool, time.Duration) {
	if !prev.Applied || !prev.sameObject(next) || prev.Generation != next.Generation || prev.Hash != next.Hash || prev.AppliedAt.IsZero() {
		return true, 0
	}
	left := prev.AppliedAt.Add(ownedResync).Sub(v.now())
	return left <= 0, left
}

func (c Copy) sameObject(o Copy) bool {
	return c.APIVersion == o.APIVersion && c.Kind == o.Kind && c.Name == o.Name
}

// running are the versions that get copies: those the planner says run,
// with a UID for the owner reference, by build ID (the first Deployment of
// a build ID counts).
func (v *view) running() []Deployment {
	byBuild := map[string]Deployment{}
	for _, d := range v.in.Deployments {
		if _, dup := byBuild[d.BuildID]; !dup && d.BuildID != "" {
			byBuild[d.BuildID] = d
		}
	}
	var out []Deployment
	for _, b := range slices.Sorted(maps.Keys(byBuild)) {
		if d := byBuild[b]; d.UID != "" && d.Running {
			out = append(out, d)
		}
	}
	return out
}

func (v *view) render(or Resource, d Deployment) (*unstructured.Unstructured, error) {
	if or.Object == nil {
		return nil, fmt.Errorf("spec.object is not a JSON object")
	}
	if err := ApplyRefusal(v.in, or); err != nil {
		return nil, err
	}
	u, err := ownedresource.Render(or.Object, ownedresource.Target{
		Namespace:              v.in.Namespace,
		WorkerDeployment:       v.in.Name,
		OwnedResource:          or.Name,
		BuildID:                d.BuildID,
		DeploymentName:         d.Name,
		DeploymentUID:          d.UID,
		Selector:               d.Selector,
		TemporalNamespace:      v.in.TemporalNamespace,
		TemporalDeploymentName: v.in.DeploymentName,
	})
	if err == nil && u.GetNamespace() != v.in.Namespace {
		err = fmt.Errorf("the copy would be made in namespace %q, not %q", u.GetNamespace(), v.in.Namespace)
	}
	return u, err
}

// ApplyRefusal re-checks at apply time what the admission webhook checks,
// for a TWOR admitted while the webhook was absent or under older rules:
// no copy of a banned kind (RBAC kinds always), of a cluster-scoped kind,
// or in another namespace than the TWOR's. The error names the field to
// fix; the planner reports it for every version and applies nothing.
func ApplyRefusal(in Input, or Resource) error {
	apiVersion, _ := or.Object["apiVersion"].(string)
	kind, _ := or.Object["kind"].(string)
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return fmt.Errorf("spec.object.apiVersion: %w", err)
	}
	if why := ownedresource.BannedKind(schema.GroupKind{Group: gv.Group, Kind: kind}, in.BannedKinds); why != "" {
		return fmt.Errorf("spec.object.kind: Forbidden: %s; nothing is applied: change spec.object.kind or delete this object", why)
	}
	if or.ClusterScoped {
		return fmt.Errorf("spec.object.kind: Forbidden: %s is cluster-scoped; copies are only made in the namespace %q: change spec.object.kind or delete this object", kind, in.Namespace)
	}
	if md, ok := or.Object["metadata"].(map[string]any); ok {
		if ns, _ := md["namespace"].(string); ns != "" && ns != in.Namespace {
			return fmt.Errorf("spec.object.metadata.namespace: Forbidden: copies are only made in the namespace %q: remove the field", in.Namespace)
		}
	}
	return nil
}

// ObservedObject is what the executor read of the object a recorded copy
// names, just before it deletes it.
type ObservedObject struct {
	// Namespaced: the API server serves the kind as a namespaced one.
	Namespaced bool
	Namespace  string
	UID        string
	Labels     map[string]string
	Owners     []metav1.OwnerReference
}

// DeleteRefusal says why the object a recorded copy of owned resource
// owned names may not be deleted, or nil if it may. Status is not proof:
// only a copy the controller made is deleted, one that carries its labels
// (the TWD's, the owned resource's, a build ID) and, as controller, an
// owner reference to that build's Deployment of this TWD; never an object
// of a banned or cluster-scoped kind, nor one in another namespace. The
// executor deletes with the observed UID as a precondition.
func DeleteRefusal(in Input, owned string, c Copy, o ObservedObject) error {
	gv, err := schema.ParseGroupVersion(c.APIVersion)
	if err != nil {
		return fmt.Errorf("apiVersion %q: %w", c.APIVersion, err)
	}
	if why := ownedresource.BannedKind(schema.GroupKind{Group: gv.Group, Kind: c.Kind}, in.BannedKinds); why != "" {
		return fmt.Errorf("%s", why)
	}
	if !o.Namespaced {
		return fmt.Errorf("%s is cluster-scoped; copies are namespaced", c.Kind)
	}
	if o.Namespace != in.Namespace || o.UID == "" {
		return fmt.Errorf("it is in namespace %q, not %q", o.Namespace, in.Namespace)
	}
	if o.Labels[ownedresource.LabelOwnedResource] != workload.WorkerLabel(owned) || o.Labels[workload.LabelWorker] != workload.WorkerLabel(in.Name) {
		return fmt.Errorf("it lacks the labels %s=%s and %s=%s of this owned resource's copies",
			ownedresource.LabelOwnedResource, workload.WorkerLabel(owned), workload.LabelWorker, workload.WorkerLabel(in.Name))
	}
	ref := metav1.GetControllerOfNoCopy(&metav1.ObjectMeta{OwnerReferences: o.Owners})
	if ref == nil || ref.APIVersion != "apps/v1" || ref.Kind != "Deployment" || ref.UID == "" {
		return fmt.Errorf("it is not controlled by a Deployment of TemporalWorkerDeployment %s", in.Name)
	}
	for _, d := range in.Deployments {
		if d.UID == string(ref.UID) && d.BuildID == o.Labels[workload.LabelBuildID] {
			return nil
		}
	}
	return fmt.Errorf("its controller, Deployment %s, is not the Deployment of its build ID %q of TemporalWorkerDeployment %s",
		ref.Name, o.Labels[workload.LabelBuildID], in.Name)
}

// Autoscaled: a TWOR puts an autoscaler on every version (its copies get
// the version's Deployment as their scaleTargetRef: a sentinel, null or
// {}, or an HPA's that kubectl's client-side apply dropped), so replicas
// are the autoscaler's and spec.replicas only sizes a new Deployment.
func Autoscaled(resources []Resource) bool {
	for _, or := range resources {
		if !or.Deleting && ownedresource.AttachesAutoscaler(or.Object) {
			return true
		}
	}
	return false
}
