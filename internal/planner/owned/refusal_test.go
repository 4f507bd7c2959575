package owned

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/rainbow-deploy/rainbow/internal/ownedresource"
	"github.com/rainbow-deploy/rainbow/internal/workload"
)

// TestDeleteRefusal: a recorded copy is deleted only if what is found
// under its name is provably the controller's copy.
func TestDeleteRefusal(t *testing.T) {
	in := Input{Namespace: "default", Name: "worker", Deployments: []Deployment{
		{BuildID: "v1", Name: "worker-v1", UID: "uid-v1", Running: true},
		{BuildID: "v2", Name: "worker-v2", UID: "uid-v2", Running: true},
	}}
	d, yes := in.Deployments[0], true
	c := Copy{BuildID: d.BuildID, APIVersion: "autoscaling/v2", Kind: "HorizontalPodAutoscaler", Name: ownedresource.Name(in.Name, "hpa", d.BuildID)}
	labels := map[string]string{ownedresource.LabelOwnedResource: "hpa", workload.LabelWorker: workload.WorkerLabel(in.Name), workload.LabelBuildID: d.BuildID}
	owner := metav1.OwnerReference{APIVersion: "apps/v1", Kind: "Deployment", Name: d.Name, UID: types.UID("uid-" + d.BuildID), Controller: &yes}
	copyOf := func(mods ...func(*ObservedObject)) ObservedObject {
		o := ObservedObject{Namespaced: true, Namespace: in.Namespace, UID: "copy", Labels: labels, Owners: []metav1.OwnerReference{owner}}
		for _, m := range mods {
			m(&o)
		}
		return o
	}
	for name, tc := range map[string]struct {
		copy Copy
		obs  ObservedObject
		want string // "" = may be deleted
	}{
		"the copy the controller made": {c, copyOf(), ""},
		"cluster-scoped": {Copy{APIVersion: "v1", Kind: "Namespace", Name: "kube-system"}, copyOf(func(o *ObservedObject) { o.Namespaced, o.Namespace = false, "" }),
			"cluster-scoped"},
		"another namespace": {c, copyOf(func(o *ObservedObject) { o.Namespace = "other" }), `in namespace "other"`},
		"no labels":         {c, copyOf(func(o *ObservedObject) { o.Labels = nil }), "lacks the labels"},
		"another owned resource's copy": {c, copyOf(func(o *ObservedObject) {
			o.Labels = map[string]string{ownedresource.LabelOwnedResource: "pdb", workload.LabelWorker: workload.WorkerLabel(in.Name), workload.LabelBuildID: d.BuildID}
		}), "lacks the labels"},
		"no owner": {c, copyOf(func(o *ObservedObject) { o.Owners = nil }), "not controlled by a Deployment"},
		"owned, not controlled": {c, copyOf(func(o *ObservedObject) { r := owner; r.Controller = nil; o.Owners = []metav1.OwnerReference{r} }),
			"not controlled by a Deployment"},
		"controlled by a Deployment of another TWD": {c, copyOf(func(o *ObservedObject) { r := owner; r.UID = "elsewhere"; o.Owners = []metav1.OwnerReference{r} }),
			"is not the Deployment of its build ID"},
		"controlled by another version's Deployment": {c, copyOf(func(o *ObservedObject) {
			r := owner
			r.UID = types.UID("uid-" + in.Deployments[1].BuildID)
			o.Owners = []metav1.OwnerReference{r}
		}), "is not the Deployment of its build ID"},
		"a versioned Deployment": {Copy{APIVersion: "apps/v1", Kind: "Deployment", Name: d.Name}, ObservedObject{Namespaced: true, Namespace: in.Namespace, UID: "d",
			Labels: map[string]string{workload.LabelWorker: workload.WorkerLabel(in.Name), workload.LabelBuildID: d.BuildID}}, "lacks the labels"},
		"an RBAC kind, even one that looks like a copy": {Copy{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding", Name: "x"}, copyOf(),
			"RBAC kinds are always banned"},
		"a banned kind": {Copy{APIVersion: "batch/v1", Kind: "Job", Name: "x"}, copyOf(), "banned kinds"},
	} {
		t.Run(name, func(t *testing.T) {
			in := in
			in.BannedKinds = []string{"Job"}
			err := DeleteRefusal(in, "hpa", tc.copy, tc.obs)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("got %v, want a refusal with %q", err, tc.want)
			}
		})
	}
}
