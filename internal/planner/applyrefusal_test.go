package planner

import (
	"strings"
	"testing"

	"github.com/rainbow-deploy/rainbow/internal/planner/owned"
)

// TestApplyRefusal: a TWOR the webhook would refuse, stored while it was
// absent, applies nothing and reports why for every version, naming the
// field; its previous copies stay.
func TestApplyRefusal(t *testing.T) {
	for name, tc := range map[string]struct {
		object        map[string]any
		clusterScoped bool
		want          string
	}{
		"an RBAC kind":   {map[string]any{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding"}, true, "spec.object.kind: Forbidden: ClusterRoleBinding objects"},
		"a banned kind":  {map[string]any{"apiVersion": "apps/v1", "kind": "Deployment"}, false, "spec.object.kind: Forbidden: Deployment objects cannot be attached"},
		"cluster-scoped": {map[string]any{"apiVersion": "v1", "kind": "Namespace"}, true, "spec.object.kind: Forbidden: Namespace is cluster-scoped"},
		"another namespace": {map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"namespace": "kube-system"}}, false,
			"spec.object.metadata.namespace: Forbidden"},
	} {
		t.Run(name, func(t *testing.T) {
			or := hpa()
			or.Object, or.ClusterScoped = tc.object, tc.clusterScoped
			in := ownedBase(func(in *Input) { in.BannedKinds = []string{"Deployment"} })
			prev := applied(in, hpa(), in.Deployments[0].BuildID, 0)
			or.Copies = []OwnedCopy{prev}
			res := Plan(with(in, func(in *Input) { in.OwnedResources = []OwnedResource{or} }))
			for _, w := range res.OwnedResources {
				if len(w.Apply) > 0 || len(w.Delete) > 0 {
					t.Errorf("work %+v: want nothing applied, the previous copy kept", w)
				}
			}
			st := res.OwnedResourceStatus[0]
			if len(st.Versions) == 0 {
				t.Fatal("no version reported")
			}
			for _, v := range st.Versions {
				if !strings.Contains(v.Error, tc.want) {
					t.Errorf("%s: error %q, want %q", v.Copy.BuildID, v.Error, tc.want)
				}
			}
		})
	}
	if err := owned.ApplyRefusal(ownedInput(ownedBase()), hpa()); err != nil {
		t.Errorf("an HPA refused: %v", err)
	}
}
