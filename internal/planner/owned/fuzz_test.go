package owned_test

import (
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/rainbow-deploy/rainbow/internal/fuzzsrc"
	"github.com/rainbow-deploy/rainbow/internal/ownedresource"
	"github.com/rainbow-deploy/rainbow/internal/planner/owned"
	"github.com/rainbow-deploy/rainbow/internal/planner/owned/ownedtest"
	"github.com/rainbow-deploy/rainbow/internal/workload"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// FuzzOwned checks on arbitrary inputs (copies recorded by anyone who may
// write status, TWORs admitted while the webhook was absent) that only
// running versions get copies, owned by their Deployment in the TWD's
// namespace; that nothing banned, cluster-scoped or of another namespace
// is applied (ApplyRefusal); and that no object is let go that is not
// provably the controller's copy (DeleteRefusal).
func FuzzOwned(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("owned copies"))
	f.Add([]byte{3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3, 2, 3, 8, 4, 6, 2, 6, 4, 3, 3, 8, 3, 2, 7, 9, 5})
	f.Fuzz(func(t *testing.T, data []byte) {
		in := fuzzInput(data)
		res := owned.Plan(in)
		for _, err := range ownedViolations(in, res) {
			t.Error(err)
		}
		if !reflect.DeepEqual(res, owned.Plan(fuzzInput(data))) {
			t.Error("Plan is not deterministic")
		}
	})
}

// TestOwnedRandom runs the invariants on many generated inputs as part of
// the normal test run.
func TestOwnedRandom(t *testing.T) {
	applied, deleted := 0, 0
	fuzzsrc.EachRandom(t, 2463534242, 5000, 128, func(data []byte) []error {
		in := fuzzInput(data)
		res := owned.Plan(in)
		for _, w := range res.Work {
			applied += len(w.Apply)
			deleted += len(w.Delete)
		}
		return ownedViolations(in, res)
	})
	if applied < 100 || deleted < 100 {
		t.Fatalf("%d copies applied and %d deleted: the generator misses the interesting cases", applied, deleted)
	}
}

var builds = []string{"v0", "v1", "v2", "v3"}

func fuzzInput(data []byte) owned.Input {
	s := fuzzsrc.New(data)
	in := owned.Input{Now: t0, Namespace: "ns", Name: "w", TemporalNamespace: "tns", DeploymentName: "ns/w",
		BannedKinds: fuzzsrc.Pick(s, nil, []string{"Deployment"}, []string{"ConfigMap"})}
	for _, b := range append(builds, "v1") {
		if s.Intn(4) != 0 {
			in.Deployments = append(in.Deployments, owned.Deployment{BuildID: b, Name: "w-" + b, UID: fuzzsrc.Pick(s, "", "uid-"+b, "uid-"+b), Running: s.Intn(3) != 0})
		}
	}
	objects := append([]map[string]any{nil,
		{"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "spec": map[string]any{"scaleTargetRef": nil, "maxReplicas": int64(5)}},
		{"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "spec": map[string]any{"selector": map[string]any{"matchLabels": nil}}},
	}, ownedtest.Hazards("v2")...)
	for _, name := range []string{"h", "p"} {
		if s.Intn(4) == 0 {
			continue
		}
		r := owned.Resource{Name: name, Generation: int64(1 + s.Intn(2)), Object: fuzzsrc.Pick(s, objects...),
			Deleting: s.Intn(4) == 0, Finalized: s.Bool(), Adopted: s.Bool(), ClusterScoped: s.Intn(4) == 0}
		r.Copies = ownedtest.Copies(s, "w", name, builds, t0)
		in.Resources = append(in.Resources, r)
	}
	return in
}

var yes = true

// ownedViolations restates the rules of owned resources: copies only for
// versions with running workers, owned by their Deployment and named for
// their (TWD, TWOR, build); a running version's copy is only deleted when
// replaced or when its TWOR goes; a deleted TWOR is never applied and only
// it loses its finalizer; status lists each running version once.
func ownedViolations(in owned.Input, r owned.Result) []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	running := map[string]owned.Deployment{}
	for _, d := range in.Deployments {
		if _, dup := running[d.BuildID]; dup {
			continue
		}
		if d.UID != "" && d.Running && d.BuildID != "" {
			running[d.BuildID] = d
		} else {
			running[d.BuildID] = owned.Deployment{} // seen, not running
		}
	}
	byName := map[string]owned.Resource{}
	for _, or := range in.Resources {
		byName[or.Name] = or
	}
	for _, w := range r.Work {
		or, ok := byName[w.Name]
		if !ok {
			bad("work for unknown owned resource %s", w.Name)
			continue
		}
		applied := map[string]owned.Copy{}
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
			if n, ok := applied[c.BuildID]; !ok || n.SameObject(c) {
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
	for _, st := range r.Status {
		if byName[st.Name].Deleting {
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

func recorded(or owned.Resource, c owned.Copy) bool {
	for _, rc := range or.Copies {
		if rc == c && rc.Name != "" {
			return true
		}
	}
	return false
}

func objectNamespace(or owned.Resource) string {
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
func deleteViolations(in owned.Input, name string, c owned.Copy) []error {
	var errs []error
	ours := func(d owned.Deployment) map[string]string {
		return map[string]string{ownedresource.LabelOwnedResource: workload.WorkerLabel(name), workload.LabelWorker: workload.WorkerLabel(in.Name), workload.LabelBuildID: d.BuildID}
	}
	var seen []owned.ObservedObject
	all := append(slices.Clone(in.Deployments), owned.Deployment{BuildID: "x", UID: "foreign"})
	for _, d := range all {
		ref := metav1.OwnerReference{APIVersion: "apps/v1", Kind: "Deployment", Name: d.Name, UID: types.UID(d.UID), Controller: &yes}
		twd := metav1.OwnerReference{APIVersion: "temporal.io/v1alpha1", Kind: "TemporalWorkerDeployment", Name: in.Name, UID: "twd", Controller: &yes}
		notController := ref
		notController.Controller = nil
		versioned := map[string]string{workload.LabelWorker: workload.WorkerLabel(in.Name), workload.LabelBuildID: d.BuildID}
		for _, o := range []owned.ObservedObject{
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
		if owned.DeleteRefusal(in, name, c, o) != nil {
			continue
		}
		gv, _ := schema.ParseGroupVersion(c.APIVersion)
		ref := metav1.GetControllerOfNoCopy(&metav1.ObjectMeta{OwnerReferences: o.Owners})
		versionOwns := ref != nil && ref.Kind == "Deployment" && slices.ContainsFunc(in.Deployments, func(d owned.Deployment) bool {
			return d.UID != "" && types.UID(d.UID) == ref.UID && d.BuildID == o.Labels[workload.LabelBuildID]
		})
		if !o.Namespaced || o.Namespace != in.Namespace || o.Labels[ownedresource.LabelOwnedResource] != workload.WorkerLabel(name) ||
			!versionOwns || gv.Group == "rbac.authorization.k8s.io" || slices.Contains(in.BannedKinds, c.Kind) {
			errs = append(errs, fmt.Errorf("%s: %s %s may be deleted as %+v", name, c.Kind, c.Name, o))
		}
	}
	return errs
}
