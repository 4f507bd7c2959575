package helm

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/rainbow-deploy/rainbow/internal/admission"
	"github.com/rainbow-deploy/rainbow/internal/backlog"
	"github.com/rainbow-deploy/rainbow/internal/controller/workerdeployment"
	"github.com/rainbow-deploy/rainbow/internal/manager"
)

// TestChartMatchesKustomize renders both charts with their default values
// as the releases rainbow-crds and rainbow in rainbow-system and compares
// them with config/default, so that the two ways to install cannot drift
// apart: the same objects under the same names, the same CRDs, RBAC,
// webhook and pod. The charts may only add the metrics Service, and the
// manager's arguments that restate its defaults.
//
// config/default with the component config/components/external-metrics is
// compared with the chart's externalMetrics.enabled in the same way.
func TestChartMatchesKustomize(t *testing.T) {
	t.Run("config/default", func(t *testing.T) { compareWithKustomize(t, "config/default") })
	t.Run("external metrics", func(t *testing.T) {
		// kustomize takes the component from an overlay of config/default,
		// and only by a relative path.
		dir, err := os.MkdirTemp(filepath.Join(env.Root, ".cache"), "helm-test-overlay-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		overlay := "resources:\n  - ../../config/default\ncomponents:\n  - ../../config/components/external-metrics\n"
		if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(overlay), 0o644); err != nil {
			t.Fatal(err)
		}
		compareWithKustomize(t, dir, "--set", "externalMetrics.enabled=true")
	})
}

// compareWithKustomize compares what kubectl kustomize makes of dir with
// both charts rendered with chartArgs.
func compareWithKustomize(t *testing.T, dir string, chartArgs ...string) {
	t.Helper()
	out, err := env.Kubectl(nil, "kustomize", dir)
	if err != nil {
		t.Fatal(err)
	}
	charts := renderChart(t, "rainbow", "rainbow", "rainbow-system", chartArgs...)
	charts.objects = append(charts.objects, renderChart(t, "rainbow-crds", "rainbow-crds", "rainbow-system").objects...)
	// The chart's name for the generated Role of the webhook's Secret,
	// which config/rbac calls rainbow-manager like the ClusterRole: with
	// watchNamespaces, the release namespace may also hold the Role
	// rainbow-manager of the controller's namespaced rules.
	renamed := map[string]string{"Role/rainbow-manager": "rainbow-webhook-cert", "RoleBinding/rainbow-manager": "rainbow-webhook-cert"}
	matched := map[*unstructured.Unstructured]bool{}
	for _, k := range decode(t, out) {
		if k.GetKind() == "Namespace" { // helm install --create-namespace
			continue
		}
		name := k.GetName()
		if n, ok := renamed[k.GetKind()+"/"+name]; ok {
			name = n
		}
		c := charts.get(k.GetKind(), k.GetNamespace(), name)
		if c == nil {
			t.Errorf("config/default has %s %s/%s, the charts do not", k.GetKind(), k.GetNamespace(), name)
			continue
		}
		matched[c] = true
		what := k.GetKind() + " " + k.GetName()
		switch k.GetKind() {
		case "CustomResourceDefinition", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding", "APIService":
			sameJSON(t, what+": spec", c.Object["spec"], k.Object["spec"])
		case "ClusterRole", "Role":
			sameJSON(t, what+": rules", grantsOf(into[rbacv1.ClusterRole](t, c).Rules).String(), grantsOf(into[rbacv1.ClusterRole](t, &k).Rules).String())
		case "ClusterRoleBinding", "RoleBinding":
			cb, kb := into[rbacv1.RoleBinding](t, c), into[rbacv1.RoleBinding](t, &k)
			kb.RoleRef.Name = cb.RoleRef.Name // renamed above
			sameJSON(t, what+": roleRef and subjects", []any{cb.RoleRef, cb.Subjects}, []any{kb.RoleRef, kb.Subjects})
		case "Service":
			sameJSON(t, what+": ports", c.Object["spec"].(map[string]any)["ports"], k.Object["spec"].(map[string]any)["ports"])
		case "Secret":
			sameJSON(t, what+": type", c.Object["type"], k.Object["type"])
		case "ValidatingWebhookConfiguration":
			sameJSON(t, what+": webhooks", c.Object["webhooks"], k.Object["webhooks"])
		case "Deployment":
			comparePods(t, into[appsv1.Deployment](t, c), into[appsv1.Deployment](t, &k))
			sameJSON(t, what+": strategy", c.Object["spec"].(map[string]any)["strategy"], k.Object["spec"].(map[string]any)["strategy"])
		case "PodDisruptionBudget":
			sameJSON(t, what+": maxUnavailable", c.Object["spec"].(map[string]any)["maxUnavailable"], k.Object["spec"].(map[string]any)["maxUnavailable"])
		case "ServiceAccount":
		default:
			t.Errorf("config/default has %s, which this test does not compare yet", what)
		}
	}
	for i := range charts.objects {
		c := &charts.objects[i]
		if !matched[c] && !(c.GetKind() == "Service" && c.GetName() == "rainbow-metrics") {
			t.Errorf("the charts render %s %s/%s, config/default does not", c.GetKind(), c.GetNamespace(), c.GetName())
		}
	}
}

// comparePods compares the chart's Deployment with config/manager's: the
// same pod but for the image (the chart tags it with its appVersion) and
// labels; the chart's extra arguments are the manager's defaults.
func comparePods(t *testing.T, chart, kust *appsv1.Deployment) {
	t.Helper()
	sameJSON(t, "Deployment: replicas", chart.Spec.Replicas, kust.Spec.Replicas)
	sameJSON(t, "Deployment: pod annotations", chart.Spec.Template.Annotations, kust.Spec.Template.Annotations)
	defaults := []string{"--identity=" + manager.DefaultIdentity, fmt.Sprintf("--max-versions=%d", manager.DefaultMaxVersions),
		"--owned-resource-banned-kinds=" + strings.Join(admission.DefaultBannedKinds, ","), "--zap-log-level=info", "--zap-encoder=json",
		"--backlog-interval=" + backlog.DefaultInterval.String(), fmt.Sprintf("--analysis-visibility-rps=%g", float64(workerdeployment.DefaultAnalysisRPS))}
	cp, kp := chart.Spec.Template.Spec.DeepCopy(), kust.Spec.Template.Spec.DeepCopy()
	cc, kc := &cp.Containers[0], &kp.Containers[0]
	cc.Args = slices.DeleteFunc(cc.Args, func(a string) bool { return slices.Contains(defaults, a) })
	slices.Sort(cc.Args)
	slices.Sort(kc.Args)
	if repo, _, _ := strings.Cut(kc.Image, ":"); !strings.HasPrefix(cc.Image, repo+":") {
		t.Errorf("image %s, want the repository of config/manager's %s", cc.Image, kc.Image)
	}
	cc.Image, kc.Image, cc.ImagePullPolicy = "", "", ""
	sameJSON(t, "Deployment: pod spec (without the image and the manager's default arguments)", cp, kp)
}

func sameJSON(t *testing.T, what string, chart, kust any) {
	t.Helper()
	if !equalJSON(chart, kust) {
		t.Errorf("%s differ:\n  charts:         %s\n  config/default: %s", what, mustJSON(chart), mustJSON(kust))
	}
}
