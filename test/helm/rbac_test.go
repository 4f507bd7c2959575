package helm

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/rainbow-deploy/rainbow/test/harness"
)

// TestChartRBACIsNarrow installs the chart's RBAC (and nothing else) for
// real and asks the API server what the manager's service account may do.
// With watchNamespaces it reads Secrets only in those namespaces, nowhere
// else and not cluster-wide; in every case it lists no ConfigMaps and
// writes no webhook configuration but its release's.
func TestChartRBACIsNarrow(t *testing.T) {
	for _, tc := range []struct {
		name  string
		watch bool
	}{{"every namespace", false}, {"watchNamespaces", true}} {
		t.Run(tc.name, func(t *testing.T) {
			tt := env.NewTest(t)
			other := namespace(t, "other-"+tt.Suffix)
			release := "narrow-" + tt.Suffix
			var args []string
			var watched string
			if tc.watch {
				watched = namespace(t, "watched-"+tt.Suffix)
				args = []string{"--set", "watchNamespaces={" + watched + "}"}
			}
			r := renderChart(t, "rainbow", release, tt.Namespace, args...)
			fullname := release + "-rainbow"
			applyRBAC(t, r.objects)
			sa := "system:serviceaccount:" + tt.Namespace + ":" + fullname + "-manager"
			vwc := "admissionregistration.k8s.io/validatingwebhookconfigurations"
			want := []harness.Access{
				harness.Allow("patch", vwc, "", fullname+"-validating-webhook"),
				harness.Deny("patch", vwc, "", "someone-elses-webhook"),
				harness.Deny("update", vwc, "", "rainbow-validating-webhook"),
				harness.Deny("list", "/configmaps", other, ""),
				harness.Deny("watch", "/configmaps", other, ""),
				harness.Allow("create", "authentication.k8s.io/tokenreviews", "", ""),
			}
			if tc.watch {
				for _, v := range []string{"get", "list", "watch"} {
					want = append(want, harness.Allow(v, "/secrets", watched, ""), harness.Deny(v, "/secrets", other, ""), harness.Deny(v, "/secrets", "", ""))
				}
				want = append(want, harness.Deny("list", "/configmaps", watched, ""), harness.Allow("get", "/configmaps", watched, "input"))
			} else {
				want = append(want, harness.Allow("list", "/secrets", "", ""), harness.Allow("get", "/configmaps", other, "input"))
			}
			tt.CheckAccess(sa, want)
		})
	}
}

// applyRBAC creates the ServiceAccount, roles and bindings of a rendering,
// and deletes the cluster-scoped ones when the test ends (the namespaced
// ones go with their namespaces).
func applyRBAC(t *testing.T, objects []unstructured.Unstructured) {
	t.Helper()
	var items []any
	for _, o := range objects {
		if o.GetKind() == "ServiceAccount" || o.GroupVersionKind().Group == rbacv1.GroupName {
			items = append(items, o.Object)
		}
		if o.GetNamespace() == "" && o.GroupVersionKind().Group == rbacv1.GroupName {
			obj := o.DeepCopy()
			t.Cleanup(func() { _ = env.Kube.Delete(context.Background(), obj) })
		}
	}
	list, err := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "List", "items": items})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := env.Kubectl(list, "apply", "--server-side", "--field-manager=rainbow-test", "-f", "-"); err != nil {
		t.Fatal(err)
	}
}

// checkMetricsAuth checks --metrics-secure and the ClusterRole for
// Prometheus, both there when secure, both absent otherwise.
func (r *rendering) checkMetricsAuth(t *testing.T, secure bool) {
	t.Helper()
	_, flag := r.args(t)["--metrics-secure"]
	role := r.get("ClusterRole", "", r.fullname+"-metrics-reader")
	if flag != secure || (role != nil) != secure {
		t.Fatalf("--metrics-secure %v, ClusterRole %s-metrics-reader rendered %v: want both %v", flag, r.fullname, role != nil, secure)
	}
	if secure {
		if got := grantsOf(into[rbacv1.ClusterRole](t, role).Rules).String(); got != "[url /metrics:get]" {
			t.Errorf("%s-metrics-reader grants %s, want only get on /metrics", r.fullname, got)
		}
	}
}

// checkUserRoles checks the ClusterRoles aggregated into view, edit and
// admin: rendered when on, and neither writes status or finalizers.
func (r *rendering) checkUserRoles(t *testing.T, on bool) {
	t.Helper()
	labels := map[string][]string{
		"view": {"rbac.authorization.k8s.io/aggregate-to-view"},
		"edit": {"rbac.authorization.k8s.io/aggregate-to-edit", "rbac.authorization.k8s.io/aggregate-to-admin"},
	}
	for name, want := range labels {
		o := r.get("ClusterRole", "", r.fullname+"-"+name)
		if (o != nil) != on {
			t.Errorf("ClusterRole %s-%s rendered %v, want %v", r.fullname, name, o != nil, on)
			continue
		}
		if o == nil {
			continue
		}
		for _, l := range want {
			if o.GetLabels()[l] != "true" {
				t.Errorf("ClusterRole %s lacks the label %s=true", o.GetName(), l)
			}
		}
		for g := range grantsOf(into[rbacv1.ClusterRole](t, o).Rules) {
			resource, verb, _ := strings.Cut(g, ":")
			write := verb != "get" && verb != "list" && verb != "watch"
			if (write && (strings.HasSuffix(resource, "/status") || strings.HasSuffix(resource, "/finalizers"))) || !strings.HasPrefix(resource, "temporal.io/") {
				t.Errorf("ClusterRole %s grants %s", o.GetName(), g)
			}
		}
	}
}
