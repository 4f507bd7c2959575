package workerdeployment

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	enumspb "go.temporal.io/api/enums/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
)

// guardMapper knows the kinds of these tests, and their scope.
func guardMapper() meta.RESTMapper {
	m := meta.NewDefaultRESTMapper(nil)
	m.Add(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, meta.RESTScopeNamespace)
	m.Add(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, meta.RESTScopeNamespace)
	m.Add(schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}, meta.RESTScopeRoot)
	m.Add(schema.GroupVersionKind{Group: "autoscaling", Version: "v2", Kind: "HorizontalPodAutoscaler"}, meta.RESTScopeNamespace)
	m.Add(schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRoleBinding"}, meta.RESTScopeRoot)
	m.Add(schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "RoleBinding"}, meta.RESTScopeNamespace)
	return m
}

func guardTWOR(t *testing.T, name string, object map[string]any) *v1alpha1.TemporalWorkerOwnedResource {
	raw, err := json.Marshal(object)
	if err != nil {
		t.Fatal(err)
	}
	return &v1alpha1.TemporalWorkerOwnedResource{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "shop", Generation: 1},
		Spec:       v1alpha1.TemporalWorkerOwnedResourceSpec{WorkerRef: v1alpha1.WorkerReference{Name: "orders"}, Object: apiextensionsv1.JSON{Raw: raw}},
	}
}

// TestStoredForbiddenOwnedResources: TemporalWorkerOwnedResources the
// webhook would refuse, stored while it was absent (a RoleBinding, a
// cluster-scoped Namespace, a ConfigMap for another namespace), make no
// copy: each says why in its Ready condition, naming the field, and the
// rollout goes on. A status that lists the version's Deployment, a
// bystander ConfigMap and a Namespace as copies to delete deletes none.
func TestStoredForbiddenOwnedResources(t *testing.T) {
	f := newFixture(t)
	f.mapper = guardMapper()
	dep := f.runningDeployment()
	f.registered(true, enumspb.WORKER_DEPLOYMENT_VERSION_STATUS_CURRENT)
	binding := guardTWOR(t, "binding", map[string]any{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
		"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
		"subjects": []any{map[string]any{"kind": "User", "name": "mallory"}}})
	ns := guardTWOR(t, "namespace", map[string]any{"apiVersion": "v1", "kind": "Namespace"})
	elsewhere := guardTWOR(t, "elsewhere", map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"namespace": "kube-system"}})
	bystander := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "bystander", Namespace: "shop"}}
	kubeSystem := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kube-system"}}
	binding.Status.Versions = []v1alpha1.OwnedResourceVersion{
		{BuildID: "x1", APIVersion: "apps/v1", Kind: "Deployment", ResourceName: dep.Name},
		{BuildID: "x2", APIVersion: "v1", Kind: "ConfigMap", ResourceName: bystander.Name},
		{BuildID: "x3", APIVersion: "v1", Kind: "Namespace", ResourceName: kubeSystem.Name},
	}
	f.objects = append(f.objects, binding, ns, elsewhere, bystander, kubeSystem)

	kube, _, _ := f.reconcile()
	for _, w := range kube {
		if strings.HasPrefix(w, "delete") {
			t.Errorf("write %q: status is no list of things to delete", w)
		}
	}
	ctx := context.Background()
	for _, o := range []client.Object{dep, bystander, kubeSystem} {
		if err := f.client.Get(ctx, client.ObjectKeyFromObject(o), o); err != nil || o.GetDeletionTimestamp() != nil {
			t.Errorf("%s: %v (deleting: %v)", o.GetName(), err, o.GetDeletionTimestamp())
		}
	}
	var bindings rbacv1.RoleBindingList
	if err := f.client.List(ctx, &bindings); err != nil || len(bindings.Items) > 0 {
		t.Errorf("RoleBindings %v (%v): want none made", bindings.Items, err)
	}
	for name, want := range map[string]string{
		"binding":   "spec.object.kind: Forbidden: RoleBinding objects (rbac.authorization.k8s.io) cannot be attached",
		"namespace": "spec.object.kind: Forbidden: Namespace is cluster-scoped",
		"elsewhere": "spec.object.metadata.namespace: Forbidden",
	} {
		var or v1alpha1.TemporalWorkerOwnedResource
		if err := f.client.Get(ctx, client.ObjectKey{Namespace: "shop", Name: name}, &or); err != nil {
			t.Fatal(err)
		}
		c := meta.FindStatusCondition(or.Status.Conditions, v1alpha1.ConditionReady)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != v1alpha1.ReasonApplyFailed || !strings.Contains(c.Message, want) {
			t.Errorf("%s: Ready %+v, want ApplyFailed with %q", name, c, want)
		}
		if slices.ContainsFunc(or.Status.Versions, func(v v1alpha1.OwnedResourceVersion) bool { return v.Applied || strings.HasPrefix(v.BuildID, "x") }) {
			t.Errorf("%s: versions %+v: want nothing applied, and the listed objects forgotten", name, or.Status.Versions)
		}
	}
}
