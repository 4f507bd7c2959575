package planner

import (
	"fmt"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/rainbow-deploy/rainbow/internal/ownedresource"
	"github.com/rainbow-deploy/rainbow/internal/workload"
)

// fuzzOwned adds owned resources, with recorded copies, to a fuzz input;
// Deployments get UIDs (some not yet).
func fuzzOwned(s *byteSource, in *Input) {
	in.Namespace, in.Name, in.TemporalNamespace = "ns", "w", "tns"
	for i := range in.Deployments {
		in.Deployments[i].UID = pick(s, "", "uid-"+in.Deployments[i].BuildID, "uid-"+in.Deployments[i].BuildID)
	}
	// The HPA as kubectl apply without --server-side leaves it: no null.
	dropped := hpa().Object
	delete(dropped["spec"].(map[string]any), "scaleTargetRef")
	objects := []map[string]any{nil, hpa().Object, pdb().Object, dropped,
		{"apiVersion": "v1", "kind": "ConfigMap", "data": map[string]any{"b": `{{ if eq .BuildID "b" }}{{ .Nope }}{{ end }}`}},
		// Admitted while the webhook was absent.
		{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding"},
		{"apiVersion": "apps/v1", "kind": "Deployment"},
		{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"namespace": "other"}}}
	in.BannedKinds = pick(s, nil, []string{"Deployment"}, []string{"ConfigMap"})
	for _, name := range []string{"h", "p"} {
		if !s.bool() {
			continue
		}
		or := OwnedResource{Name: name, Generation: int64(1 + s.intn(2)), Object: pick(s, objects...),
			Deleting: s.intn(4) == 0, Finalized: s.bool(), ClusterScoped: s.intn(4) == 0}
		or.Adopted = or.Finalized && s.bool()
		for _, b := range append(fuzzBuilds, "forged") {
			if s.bool() {
				// Anyone who may write status may record anything.
				kind := pick(s, "autoscaling/v2 HorizontalPodAutoscaler", "policy/v1 PodDisruptionBudget", "apps/v1 Deployment",
					"v1 ConfigMap", "rbac.authorization.k8s.io/v1 ClusterRole")
				apiVersion, kind, _ := strings.Cut(kind, " ")
				or.Copies = append(or.Copies, OwnedCopy{
					BuildID: b, APIVersion: apiVersion, Kind: kind,
					Name: pick(s, "", ownedresource.Name("w", name, b), "old"), Applied: s.bool(), Generation: int64(1 + s.intn(2)),
					Hash: pick(s, "", "x"), AppliedAt: pick(s, time.Time{}, t0.Add(-time.Minute), t0.Add(-time.Hour)),
				})
			}
		}
		in.OwnedResources = append(in.OwnedResources, or)
	}
}

// ownedViolations restates the rules of owned resources: copies only for
// versions with running workers, owned by their Deployment and named for
// their (TWD, TWOR, build); a running version's copy is only deleted when
// replaced or when its TWOR goes; a deleted TWOR is never applied and only
// it loses its finalizer; status lists each running version once.
func ownedViolations(in Input, r Result) []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	running := map[string]Deployment{}
	for _, d := range in.Deployments {
		if _, dup := running[d.BuildID]; dup {
			continue
		}
		if d.UID != "" && !(d.Replicas == 0 && d.ScaledDownAt != nil) {
			running[d.BuildID] = d
		} else {
			running[d.BuildID] = Deployment{} // seen, not running
		}
	}
	owned := map[string]OwnedResource{}
	for _, or := range in.OwnedResources {
		owned[or.Name] = or
	}
	for _, w := range r.OwnedResources {
		or, ok := owned[w.Name]
		if !ok {
			bad("work for unknown owned resource %s", w.Name)
			continue
		}
		applied := map[string]OwnedCopy{}
		for _, a := range w.Apply {
			b := a.Copy.BuildID
			d := running[b]
			switch {
			case or.Deleting:
				bad("%s is being deleted but its copy of %s is applied", w.Name, b)
			case d.UID == "":
				bad("%s: a copy is applied for %s, which has no running Deployment", w.Name, b)
			case a.Copy.Name != ownedresource.Name(in.Name, w.Name, b):
				bad("%s: copy of %s named %s", w.Name, b, a.Copy.Name)
			}
			if _, dup := applied[b]; dup {
				bad("%s: two copies applied for %s", w.Name, b)
			}
			applied[b] = a.Copy
			if gv, _ := schema.ParseGroupVersion(a.Copy.APIVersion); gv.Group == "rbac.authorization.k8s.io" || slices.Contains(in.BannedKinds, a.Copy.Kind) ||
				or.ClusterScoped || objectNamespace(or) != "" && objectNamespace(or) != in.Namespace {
				bad("%s: a copy of %s %s (cluster-scoped %v, banned %v, namespace %q) is applied", w.Name, a.Copy.APIVersion, a.Copy.Kind,
					or.ClusterScoped, in.BannedKinds, objectNamespace(or))
			}
			meta, _ := a.Object["metadata"].(map[string]any)
			refs, _ := meta["ownerReferences"].([]any)
			if len(refs) != 1 || refs[0].(map[string]any)["uid"] != d.UID || meta["namespace"] != in.Namespace {
				bad("%s: copy of %s has owners %v in namespace %v, want only Deployment %s", w.Name, b, refs, meta["namespace"], d.UID)
			}
		}
		for _, c := range w.Delete {
			if !recorded(or, c) {
				bad("%s: deletes %s %s, which its status never recorded", w.Name, c.Kind, c.Name)
			}
			errs = append(errs, deleteViolations(in, w.Name, c)...)
			if or.Deleting || running[c.BuildID].UID == "" {
				continue
			}
			if n, ok := applied[c.BuildID]; !ok || n.sameObject(c) {
				bad("%s: deletes the copy of running version %s without replacing it", w.Name, c.BuildID)
			}
		}
		if w.RemoveFinalizer && (!or.Deleting || !or.Finalized) {
			bad("%s: finalizer removed, but deleting=%v finalized=%v", w.Name, or.Deleting, or.Finalized)
		}
		if w.Adopt && or.Deleting {
			bad("%s: adopted while being deleted", w.Name)
		}
	}
	for _, st := range r.OwnedResourceStatus {
		if owned[st.Name].Deleting {
			bad("status planned for %s, which is being deleted", st.Name)
		}
		seen := map[string]bool{}
		for _, v := range st.Versions {
			if seen[v.Copy.BuildID] {
				bad("%s: status lists %s twice", st.Name, v.Copy.BuildID)
			}
			seen[v.Copy.BuildID] = true
		}
		for b, d := range running {
			if d.UID != "" && !seen[b] {
				bad("%s: status misses running version %s", st.Name, b)
			}
		}
	}
	return errs
}

func recorded(or OwnedResource, c OwnedCopy) bool {
	for _, rc := range or.Copies {
		if rc == c && rc.Name != "" {
			return true
		}
	}
	return false
}

func objectNamespace(or OwnedResource) string {
	md, _ := or.Object["metadata"].(map[string]any)
	ns, _ := md["namespace"].(string)
	return ns
}

// deleteViolations: status only names what to look at. Of every object the
// executor could find under a recorded copy's name (the copy the
// controller made for each version, a versioned Deployment, a look-alike
// owned by another Deployment, in another namespace or cluster-scoped),
// DeleteRefusal lets only a namespaced object of this namespace, of a kind
// not banned, go that carries the owned resource's and the TWD's labels
// and, as controller, an owner reference to the Deployment of its build ID.
func deleteViolations(in Input, owned string, c OwnedCopy) []error {
	var errs []error
	ours := func(d Deployment) map[string]string {
		return map[string]string{ownedresource.LabelOwnedResource: workload.WorkerLabel(owned), workload.LabelWorker: workload.WorkerLabel(in.Name), workload.LabelBuildID: d.BuildID}
	}
	var seen []ObservedObject
	all := append(slices.Clone(in.Deployments), Deployment{BuildID: "x", UID: "foreign"})
	for _, d := range all {
		ref := metav1.OwnerReference{APIVersion: "apps/v1", Kind: "Deployment", Name: d.Name, UID: types.UID(d.UID), Controller: ptr(true)}
		twd := metav1.OwnerReference{APIVersion: "temporal.io/v1alpha1", Kind: "TemporalWorkerDeployment", Name: in.Name, UID: "twd", Controller: ptr(true)}
		notController := ref
		notController.Controller = nil
		versioned := map[string]string{workload.LabelWorker: workload.WorkerLabel(in.Name), workload.LabelBuildID: d.BuildID}
		for _, o := range []ObservedObject{
			{Namespaced: true, Namespace: in.Namespace, UID: "c", Labels: ours(d), Owners: []metav1.OwnerReference{ref}},
			{Namespaced: true, Namespace: in.Namespace, UID: "c", Labels: ours(d), Owners: []metav1.OwnerReference{notController}},
			{Namespaced: true, Namespace: in.Namespace, UID: "c", Labels: ours(all[0]), Owners: []metav1.OwnerReference{ref}},
			{Namespaced: true, Namespace: in.Namespace, UID: "d", Labels: versioned, Owners: []metav1.OwnerReference{twd}},
			{Namespaced: true, Namespace: in.Namespace, UID: "u"},
			{Namespaced: true, Namespace: in.Namespace, UID: "u", Owners: []metav1.OwnerReference{ref}},
			{Namespaced: true, Namespace: "other", UID: "c", Labels: ours(d), Owners: []metav1.OwnerReference{ref}},
			{Namespaced: false, Namespace: in.Namespace, UID: "c", Labels: ours(d), Owners: []metav1.OwnerReference{ref}},
		} {
			seen = append(seen, o)
		}
	}
	for _, o := range seen {
		if DeleteRefusal(in, owned, c, o) != nil {
			continue
		}
		gv, _ := schema.ParseGroupVersion(c.APIVersion)
		ref := metav1.GetControllerOfNoCopy(&metav1.ObjectMeta{OwnerReferences: o.Owners})
		versionOwns := ref != nil && ref.Kind == "Deployment" && slices.ContainsFunc(in.Deployments, func(d Deployment) bool {
			return d.UID != "" && types.UID(d.UID) == ref.UID && d.BuildID == o.Labels[workload.LabelBuildID]
		})
		if !o.Namespaced || o.Namespace != in.Namespace || o.Labels[ownedresource.LabelOwnedResource] != workload.WorkerLabel(owned) ||
			!versionOwns || gv.Group == "rbac.authorization.k8s.io" || slices.Contains(in.BannedKinds, c.Kind) {
			errs = append(errs, fmt.Errorf("%s: %s %s may be deleted as %+v", owned, c.Kind, c.Name, o))
		}
	}
	return errs
}
