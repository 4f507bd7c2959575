package helm

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"

	"github.com/rainbow-deploy/rainbow/internal/admission"
	"github.com/rainbow-deploy/rainbow/internal/backlog"
	"github.com/rainbow-deploy/rainbow/internal/externalmetrics"
	"github.com/rainbow-deploy/rainbow/internal/manager"
	"github.com/rainbow-deploy/rainbow/internal/temporal"
)

// TestLint runs helm lint on both charts, also with --strict (warnings
// fail), and with values that need no cluster API beyond Kubernetes'.
func TestLint(t *testing.T) {
	for _, args := range [][]string{
		{"charts/rainbow-crds"},
		{"charts/rainbow"},
		{"charts/rainbow", "--set", "watchNamespaces={team-a,team-b}", "--set", "replicas=2", "--set", "ownedResources.anyKind=true", "--set", "externalMetrics.enabled=true"},
	} {
		for _, strict := range []bool{false, true} {
			a := append([]string{"lint"}, args...)
			if strict {
				a = append(a, "--strict")
			}
			if out, err := helm(t, a...); err != nil {
				t.Errorf("%v\n%s", err, out)
			}
		}
	}
}

// TestTemplate renders the rainbow chart with interesting values, checks
// each rendering (checkCommon and the case's own checks) and sends it to the
// API server as a server-side dry run.
func TestTemplate(t *testing.T) {
	cases := []struct {
		name string
		// watch are namespaces to create and pass as watchNamespaces;
		// "release" stands for the release namespace.
		watch []string
		args  []string
		check func(t *testing.T, r *rendering)
	}{{
		name: "defaults",
		check: func(t *testing.T, r *rendering) {
			args := r.args(t)
			d := r.deployment(t)
			if *d.Spec.Replicas != 2 || args["--identity"] != manager.DefaultIdentity || args["--max-versions"] != fmt.Sprint(manager.DefaultMaxVersions) ||
				args["--owned-resource-banned-kinds"] != strings.Join(admission.DefaultBannedKinds, ",") || args["--webhook-cert-rotation"] != "" {
				t.Errorf("replicas %d, args %v: want the manager's defaults and the built-in rotation", *d.Spec.Replicas, args)
			}
			if _, ok := args["--leader-elect"]; !ok {
				t.Error("no --leader-elect")
			}
			if v, ok := args["--allowed-temporal-hosts"]; ok {
				t.Errorf("--allowed-temporal-hosts=%q by default, want none (any address)", v)
			}
			if img := d.Spec.Template.Spec.Containers[0].Image; img != "rainbow.local/manager:"+chartAppVersion(t) {
				t.Errorf("image %s, want rainbow.local/manager tagged with the appVersion", img)
			}
			if len(r.ofKind("ServiceMonitor"))+len(r.ofKind("Certificate"))+len(r.ofKind("Issuer")) > 0 || r.get("Service", r.namespace, r.fullname+"-metrics") == nil {
				t.Error("want a metrics Service and no ServiceMonitor, Certificate or Issuer")
			}
			if args["--backlog-interval"] != backlog.DefaultInterval.String() {
				t.Errorf("--backlog-interval=%q, want the manager's default %s", args["--backlog-interval"], backlog.DefaultInterval)
			}
			r.checkExternalMetrics(t, false)
			r.checkOwnedResources(t, nil, nil)
			r.checkMetricsAuth(t, true)
			r.checkUserRoles(t, true)
			r.checkHighlyAvailable(t, "preferred")
		},
	}, {
		name: "required anti-affinity",
		args: []string{"--set", "podAntiAffinity=required"},
		check: func(t *testing.T, r *rendering) {
			r.checkHighlyAvailable(t, "required")
		},
	}, {
		name: "one replica without leader election, recreated on update, no PodDisruptionBudget",
		args: []string{"--set", "leaderElection.enabled=false", "--set", "replicas=1", "--set", "updateStrategy.type=Recreate",
			"--set", "podDisruptionBudget.enabled=false", "--set", "podAntiAffinity=none"},
		check: func(t *testing.T, r *rendering) {
			d := r.deployment(t)
			if _, ok := r.args(t)["--leader-elect"]; ok || *d.Spec.Replicas != 1 || d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType ||
				d.Spec.Strategy.RollingUpdate != nil || d.Spec.Template.Spec.Affinity != nil || len(r.ofKind("PodDisruptionBudget")) > 0 {
				t.Errorf("replicas %d, strategy %+v, affinity %+v, %d PodDisruptionBudgets: want one replica without --leader-elect, Recreate, no affinity and no budget",
					*d.Spec.Replicas, d.Spec.Strategy, d.Spec.Template.Spec.Affinity, len(r.ofKind("PodDisruptionBudget")))
			}
		},
	}, {
		name: "metrics without authentication, no user roles",
		args: []string{"--set", "metrics.secure=false", "--set", "rbac.userRoles=false"},
		check: func(t *testing.T, r *rendering) {
			r.checkMetricsAuth(t, false)
			r.checkUserRoles(t, false)
		},
	}, {
		name: "allowed Temporal hosts",
		args: []string{"--set", "temporal.allowedHosts={temporal.example.com:7233,*.tmprl.cloud:7233}"},
		check: func(t *testing.T, r *rendering) {
			got := r.args(t)["--allowed-temporal-hosts"]
			if _, err := temporal.ParseAllowedHosts(got); err != nil || got != "temporal.example.com:7233,*.tmprl.cloud:7233" {
				t.Errorf("--allowed-temporal-hosts=%q (%v), want the value's list, which the manager parses", got, err)
			}
		},
	}, {
		name:  "watchNamespaces",
		watch: []string{"team-a", "team-b"},
		check: func(t *testing.T, r *rendering) { r.checkOwnedResources(t, nil, nil) },
	}, {
		name:  "watchNamespaces with the release namespace and any kind",
		watch: []string{"release", "team-c"},
		args:  []string{"--set", "ownedResources.anyKind=true"},
		check: func(t *testing.T, r *rendering) {
			r.checkOwnedResources(t, r.watch, []rbacv1.PolicyRule{anyKind})
		},
	}, {
		name: "cert-manager",
		args: []string{"--set", "webhook.certManager.enabled=true", "--api-versions", "cert-manager.io/v1"},
		check: func(t *testing.T, r *rendering) {
			r.checkCertManager(t, map[string]any{"kind": "Issuer", "name": r.fullname + "-selfsigned"})
			if r.get("Issuer", r.namespace, r.fullname+"-selfsigned") == nil {
				t.Error("no self-signed Issuer")
			}
		},
	}, {
		name: "cert-manager with an issuer of one's own",
		args: []string{"--set", "webhook.certManager.enabled=true", "--set", "webhook.certManager.issuerRef.kind=ClusterIssuer",
			"--set", "webhook.certManager.issuerRef.name=corp-ca", "--set", "webhook.certManager.duration=720h", "--api-versions", "cert-manager.io/v1"},
		check: func(t *testing.T, r *rendering) {
			r.checkCertManager(t, map[string]any{"kind": "ClusterIssuer", "name": "corp-ca"})
			if len(r.ofKind("Issuer")) != 0 {
				t.Error("an Issuer is rendered although issuerRef names one")
			}
		},
	}, {
		name: "ServiceMonitor",
		args: []string{"--set", "metrics.serviceMonitor.enabled=true", "--set", "metrics.serviceMonitor.labels.release=prom",
			"--api-versions", "monitoring.coreos.com/v1"},
		check: func(t *testing.T, r *rendering) {
			sm := r.get("ServiceMonitor", r.namespace, r.fullname)
			svc := r.get("Service", r.namespace, r.fullname+"-metrics")
			if sm == nil || svc == nil {
				t.Fatal("no ServiceMonitor or no metrics Service")
			}
			sel, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
			for k, v := range sel {
				if svc.GetLabels()[k] != v {
					t.Errorf("the ServiceMonitor selects %s=%s, which the metrics Service lacks", k, v)
				}
			}
			if r.get("Service", r.namespace, r.fullname+"-webhook").GetLabels()["app.kubernetes.io/component"] == sel["app.kubernetes.io/component"] {
				t.Error("the ServiceMonitor also selects the webhook Service")
			}
			eps, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
			if len(eps) != 1 || eps[0].(map[string]any)["port"] != "metrics" || sm.GetLabels()["release"] != "prom" {
				t.Errorf("ServiceMonitor endpoints %v, labels %v", eps, sm.GetLabels())
			}
			// --metrics-secure: HTTPS, with Prometheus' own token.
			if ep := eps[0].(map[string]any); ep["scheme"] != "https" || ep["bearerTokenFile"] == nil {
				t.Errorf("ServiceMonitor endpoint %v: want scheme https and Prometheus' token", ep)
			}
		},
	}, {
		name: "external metrics",
		args: []string{"--set", "externalMetrics.enabled=true", "--set", "backlog.interval=1m", "--set", "backlog.all=true"},
		check: func(t *testing.T, r *rendering) {
			r.checkExternalMetrics(t, true)
			args := r.args(t)
			if _, all := args["--backlog-all"]; !all || args["--backlog-interval"] != "1m" {
				t.Errorf("args %v: want --backlog-interval=1m and --backlog-all", args)
			}
		},
	}, {
		name:  "external metrics with cert-manager and watchNamespaces",
		watch: []string{"team-d"},
		args:  []string{"--set", "externalMetrics.enabled=true", "--set", "webhook.certManager.enabled=true", "--api-versions", "cert-manager.io/v1"},
		check: func(t *testing.T, r *rendering) {
			r.checkExternalMetrics(t, true)
			r.checkCertManager(t, map[string]any{"kind": "Issuer", "name": r.fullname + "-selfsigned"})
		},
	}, {
		name: "two replicas",
		args: []string{"--set", "replicas=2"},
		check: func(t *testing.T, r *rendering) {
			if _, ok := r.args(t)["--leader-elect"]; !ok || *r.deployment(t).Spec.Replicas != 2 {
				t.Error("want 2 replicas with --leader-elect")
			}
		},
	}, {
		name: "any kind",
		args: []string{"--set", "ownedResources.anyKind=true"},
		check: func(t *testing.T, r *rendering) {
			r.checkOwnedResources(t, []string{""}, []rbacv1.PolicyRule{anyKind})
		},
	}, {
		name: "everything else",
		args: []string{"--set", "identity=team-x", "--set", "maxVersions=0", "--set", "webhook.bannedKinds=null",
			"--set", "metrics.enabled=false", "--set", "ownedResources.extraRules[0].apiGroups={keda.sh}",
			"--set", "ownedResources.extraRules[0].resources={scaledobjects}", "--set", "image.repository=registry.example/rainbow/manager",
			"--set", "image.digest=sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
			"--set", "nodeSelector.pool=system", "--set", "tolerations[0].operator=Exists", "--set", "podAnnotations.team=x",
			"--set", "extraArgs={--zap-stacktrace-level=panic}", "--set", "logging.level=debug"},
		check: func(t *testing.T, r *rendering) {
			args := r.args(t)
			want := map[string]string{"--identity": "team-x", "--max-versions": "0", "--owned-resource-banned-kinds": "",
				"--metrics-bind-address": "0", "--zap-stacktrace-level": "panic", "--zap-log-level": "debug"}
			for k, v := range want {
				if got, ok := args[k]; !ok || got != v {
					t.Errorf("%s=%q, want %q", k, got, v)
				}
			}
			pod := r.deployment(t).Spec.Template
			if pod.Spec.Containers[0].Image != "registry.example/rainbow/manager@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef" ||
				pod.Spec.NodeSelector["pool"] != "system" || len(pod.Spec.Tolerations) != 1 || pod.Annotations["team"] != "x" {
				t.Errorf("image, nodeSelector, tolerations or podAnnotations not taken from the values: %+v", pod)
			}
			if r.get("Service", r.namespace, r.fullname+"-metrics") != nil {
				t.Error("a metrics Service although metrics are off")
			}
			r.checkOwnedResources(t, []string{""}, []rbacv1.PolicyRule{{APIGroups: []string{"keda.sh"}, Resources: []string{"scaledobjects"}, Verbs: ownedVerbs}})
		},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tt := env.NewTest(t)
			var watch []string
			for _, w := range tc.watch {
				if w == "release" {
					watch = append(watch, tt.Namespace)
				} else {
					watch = append(watch, namespace(t, w+"-"+tt.Suffix))
				}
			}
			args := tc.args
			if len(watch) > 0 {
				args = append(args, "--set", "watchNamespaces={"+strings.Join(watch, ",")+"}")
			}
			r := renderChart(t, "rainbow", "rainbow", tt.Namespace, args...)
			r.fullname, r.watch = "rainbow", watch
			r.checkCommon(t)
			tc.check(t, r)
			dryRun(t, r.objects)
		})
	}
}

// TestTemplateRefuses checks the values the chart refuses, with a message
// that says what to do.
func TestTemplateRefuses(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--set", "leaderElection.enabled=false"}, "leaderElection.enabled=false with replicas=2"},
		{[]string{"--set", "leaderElection.enabled=false", "--set", "replicas=1"}, "leaderElection.enabled=false with a surge in updateStrategy (maxSurge 1)"},
		// Kubernetes' default surge, 25%, is a surge too.
		{[]string{"--set", "leaderElection.enabled=false", "--set", "replicas=1", "--set", "updateStrategy.rollingUpdate=null"},
			"leaderElection.enabled=false with a surge in updateStrategy (maxSurge 25%)"},
		{[]string{"--set", "podAntiAffinity=soft"}, "/podAntiAffinity"},
		{[]string{"--set", "metrics.serviceMonitor.enabled=true"}, "pass --api-versions monitoring.coreos.com/v1"},
		{[]string{"--set", "metrics.serviceMonitor.enabled=true", "--set", "metrics.enabled=false", "--api-versions", "monitoring.coreos.com/v1"}, "needs metrics.enabled"},
		{[]string{"--set", "webhook.certManager.enabled=true"}, "pass --api-versions cert-manager.io/v1"},
		{[]string{"--set", "metrics.prometheusRule.enabled=true"}, "pass --api-versions monitoring.coreos.com/v1"},
		{[]string{"--set", "metrics.prometheusRule.enabled=true", "--set", "metrics.enabled=false", "--api-versions", "monitoring.coreos.com/v1"}, "metrics.prometheusRule.enabled needs metrics.enabled"},
		{[]string{"--set", "metrics.grafanaDashboard.labels.grafana_dashboard=1"}, "/metrics/grafanaDashboard/labels/grafana_dashboard"},
		{[]string{"--set", "watchNamespace=team-a"}, "additional properties 'watchNamespace' not allowed"},
		{[]string{"--set", "watchNamespaces={Team_A}"}, "watchNamespaces/0"},
		{[]string{"--set", "backlog.interval=15"}, "/backlog/interval"},
		{[]string{"--set", "temporal.allowedHosts={https://temporal.example.com}"}, "/temporal/allowedHosts/0"},
	} {
		_, err := helm(t, append([]string{"template", "rainbow", "charts/rainbow"}, tc.args...)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("helm template %v: %v, want an error with %q", tc.args, err, tc.want)
		}
	}
}

var (
	ownedVerbs = []string{"get", "create", "update", "patch", "delete"}
	anyKind    = rbacv1.PolicyRule{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: ownedVerbs}
)

// checkOwnedResources checks the role <fullname>-owned-resources: rules in
// each of namespaces ("" for a ClusterRole), or none at all; and that no
// other role has a wildcard.
func (r *rendering) checkOwnedResources(t *testing.T, namespaces []string, rules []rbacv1.PolicyRule) {
	t.Helper()
	name := r.fullname + "-owned-resources"
	var found []string
	for _, o := range r.objects {
		if o.GetKind() != "ClusterRole" && o.GetKind() != "Role" {
			continue
		}
		role := into[rbacv1.ClusterRole](t, &o)
		if role.Name == name {
			found = append(found, o.GetNamespace())
			if !equalJSON(role.Rules, rules) {
				t.Errorf("%s %s/%s rules %+v, want %+v", o.GetKind(), o.GetNamespace(), name, role.Rules, rules)
			}
			continue
		}
		for _, rule := range role.Rules {
			if slices.Contains(rule.Resources, "*") || slices.Contains(rule.Verbs, "*") || slices.Contains(rule.APIGroups, "*") {
				t.Errorf("%s %s grants a wildcard: %+v", o.GetKind(), role.Name, rule)
			}
		}
	}
	slices.Sort(found)
	namespaces = slices.Sorted(slices.Values(namespaces))
	if !slices.Equal(found, namespaces) {
		t.Errorf("%s in namespaces %q, want %q", name, found, namespaces)
	}
}

// checkCertManager checks that cert-manager issues the webhook's
// certificate into the mounted Secret and injects its CA, and that the
// manager's own rotation is off.
func (r *rendering) checkCertManager(t *testing.T, issuerRef map[string]any) {
	t.Helper()
	name := r.fullname + "-webhook-cert"
	cert := r.get("Certificate", r.namespace, name)
	if cert == nil {
		t.Fatalf("no Certificate %s", name)
	}
	secret, _, _ := unstructured.NestedString(cert.Object, "spec", "secretName")
	dns, _, _ := unstructured.NestedStringSlice(cert.Object, "spec", "dnsNames")
	ref, _, _ := unstructured.NestedMap(cert.Object, "spec", "issuerRef")
	if secret != name || !slices.Contains(dns, r.fullname+"-webhook."+r.namespace+".svc") || !equalJSON(ref, issuerRef) {
		t.Errorf("Certificate secretName %q, dnsNames %v, issuerRef %v: want %s, the webhook Service's name and %v", secret, dns, ref, name, issuerRef)
	}
	vwc := r.ofKind("ValidatingWebhookConfiguration")[0]
	if got := vwc.GetAnnotations()["cert-manager.io/inject-ca-from"]; got != r.namespace+"/"+name {
		t.Errorf("cert-manager.io/inject-ca-from = %q, want %s/%s", got, r.namespace, name)
	}
	args := r.args(t)
	if args["--webhook-cert-rotation"] != "false" || r.get("Secret", r.namespace, name) != nil {
		t.Errorf("--webhook-cert-rotation=%q and a Secret rendered: want the rotation off and the Secret left to cert-manager", args["--webhook-cert-rotation"])
	}
}

const authReaderRole = "extension-apiserver-authentication-reader"

var externalMetricsAPIService = externalmetrics.APIServiceName

// checkExternalMetrics checks the external metrics API: with enabled, the
// manager serves it (--external-metrics), the APIService sends it to the
// webhook's Service and gets its caBundle as the webhook configuration does
// (from the manager's rotation, which may update that APIService only, or
// from cert-manager), and the service account may read the front proxy's
// settings in kube-system; without, none of it.
func (r *rendering) checkExternalMetrics(t *testing.T, enabled bool) {
	t.Helper()
	_, flag := r.args(t)["--external-metrics"]
	api := r.get("APIService", "", externalMetricsAPIService)
	reader := r.get("RoleBinding", "kube-system", r.fullname+"-manager-auth-reader")
	role := r.get("ClusterRole", "", r.fullname+"-external-metrics")
	if !enabled {
		if flag || api != nil || reader != nil || role != nil {
			t.Errorf("external metrics off, yet --external-metrics %v, APIService %v, auth reader %v, ClusterRole %v", flag, api != nil, reader != nil, role != nil)
		}
		return
	}
	if !flag || api == nil || reader == nil {
		t.Fatalf("--external-metrics %v, APIService %v, auth reader RoleBinding %v: want all", flag, api != nil, reader != nil)
	}
	svc, _, _ := unstructured.NestedMap(api.Object, "spec", "service")
	want := map[string]any{"name": r.fullname + "-webhook", "namespace": r.namespace, "port": int64(443)}
	if !equalJSON(svc, want) {
		t.Errorf("APIService service %v, want the webhook Service %v", svc, want)
	}
	if group, _, _ := unstructured.NestedString(api.Object, "spec", "group"); group != "external.metrics.k8s.io" {
		t.Errorf("APIService group %q", group)
	}
	if ca, ok, _ := unstructured.NestedFieldNoCopy(api.Object, "spec", "caBundle"); ok {
		t.Errorf("APIService caBundle %v rendered: helm upgrade would overwrite what the rotation or cert-manager filled in", ca)
	}
	b := into[rbacv1.RoleBinding](t, reader)
	if b.RoleRef.Kind != "Role" || b.RoleRef.Name != authReaderRole {
		t.Errorf("RoleBinding %s/%s refers to %s %s, want Role %s", b.Namespace, b.Name, b.RoleRef.Kind, b.RoleRef.Name, authReaderRole)
	}
	certManager := r.args(t)["--webhook-cert-rotation"] == "false"
	inject := api.GetAnnotations()["cert-manager.io/inject-ca-from"]
	if certManager {
		if inject != r.namespace+"/"+r.fullname+"-webhook-cert" || role != nil {
			t.Errorf("with cert-manager: inject-ca-from %q, ClusterRole %v: want the webhook's Certificate injected and no rights on APIServices", inject, role != nil)
		}
		return
	}
	if inject != "" || role == nil {
		t.Fatalf("with the built-in rotation: inject-ca-from %q, ClusterRole %v: want no annotation, and a ClusterRole for the rotation", inject, role != nil)
	}
	got := grantsOf(into[rbacv1.ClusterRole](t, role).Rules)
	for _, g := range []string{"apiregistration.k8s.io/apiservices:update@" + externalMetricsAPIService, "apiregistration.k8s.io/apiservices:get", "apiregistration.k8s.io/apiservices:watch"} {
		if !got[g] {
			t.Errorf("ClusterRole %s lacks %s: %v", role.GetName(), g, got)
		}
	}
	for _, rule := range into[rbacv1.ClusterRole](t, role).Rules {
		if slices.Contains(rule.Verbs, "update") && !slices.Equal(rule.ResourceNames, []string{externalMetricsAPIService}) {
			t.Errorf("ClusterRole %s may update %v, want only the APIService %s", role.GetName(), rule.ResourceNames, externalMetricsAPIService)
		}
	}
	crb := r.get("ClusterRoleBinding", "", role.GetName())
	if crb == nil || into[rbacv1.ClusterRoleBinding](t, crb).RoleRef.Name != role.GetName() {
		t.Errorf("no ClusterRoleBinding %s of the ClusterRole", role.GetName())
	}
}

func chartAppVersion(t testing.TB) string {
	t.Helper()
	var chart struct{ AppVersion string }
	readYAML(t, "charts/rainbow/Chart.yaml", &chart)
	return chart.AppVersion
}

func readYAML(t testing.TB, rel string, into any) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(env.Root, rel))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, into); err != nil {
		t.Fatalf("%s: %v", rel, err)
	}
}

// TestCRDsChart renders rainbow-crds: the CRDs of config/crd/bases and the
// admission policy of config/crd/deletion-policy.yaml, unchanged but for
// the chart's labels and the keep annotation; each value turns off what it
// says; the API server accepts the rendering.
func TestCRDsChart(t *testing.T) {
	r := renderChart(t, "rainbow-crds", "rainbow-crds", "rainbow-system")
	files, err := filepath.Glob(filepath.Join(env.Root, "config", "crd", "bases", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no CRDs in config/crd/bases: %v", err)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		want := decode(t, data)[0]
		got := r.get("CustomResourceDefinition", "", want.GetName())
		if got == nil {
			t.Errorf("CRD %s is not rendered", want.GetName())
			continue
		}
		if !equalJSON(got.Object["spec"], want.Object["spec"]) {
			t.Errorf("CRD %s: the rendered spec differs from %s", want.GetName(), f)
		}
		into[apiextensionsv1.CustomResourceDefinition](t, got)
		if got.GetAnnotations()["helm.sh/resource-policy"] != "keep" || got.GetLabels()["app.kubernetes.io/instance"] != "rainbow-crds" {
			t.Errorf("CRD %s: annotations %v, labels %v: want helm.sh/resource-policy: keep and the release's labels", got.GetName(), got.GetAnnotations(), got.GetLabels())
		}
	}
	data, err := os.ReadFile(filepath.Join(env.Root, "config", "crd", "deletion-policy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range decode(t, data) {
		got := r.get(want.GetKind(), "", want.GetName())
		if got == nil || !equalJSON(got.Object["spec"], want.Object["spec"]) {
			t.Errorf("%s %s is not rendered as config/crd/deletion-policy.yaml has it", want.GetKind(), want.GetName())
		}
	}
	if len(r.objects) != len(files)+2 {
		t.Errorf("%d objects rendered, want the %d CRDs and the policy with its binding", len(r.objects), len(files))
	}
	dryRun(t, r.objects)

	off := renderChart(t, "rainbow-crds", "rainbow-crds", "rainbow-system", "--set", "deletionPolicy.enabled=false", "--set", "keepOnUninstall=false")
	for _, o := range off.objects {
		if o.GetKind() != "CustomResourceDefinition" || o.GetAnnotations()["helm.sh/resource-policy"] != "" {
			t.Errorf("with deletionPolicy and keepOnUninstall off: %s %s, annotations %v", o.GetKind(), o.GetName(), o.GetAnnotations())
		}
	}
}

// checkHighlyAvailable checks the chart's defaults for more than one
// replica: leader election, a rolling update that starts the new pod before
// stopping an old one, the anti-affinity antiAffinity ("preferred" or
// "required") on the pods' own labels, and a PodDisruptionBudget of the
// controller's pods.
func (r *rendering) checkHighlyAvailable(t *testing.T, antiAffinity string) {
	t.Helper()
	d := r.deployment(t)
	if _, ok := r.args(t)["--leader-elect"]; !ok {
		t.Error("no --leader-elect")
	}
	if ru := d.Spec.Strategy.RollingUpdate; d.Spec.Strategy.Type != appsv1.RollingUpdateDeploymentStrategyType || ru == nil ||
		ru.MaxSurge.String() != "1" || ru.MaxUnavailable.String() != "0" {
		t.Errorf("strategy %+v, want a RollingUpdate with maxSurge 1 and maxUnavailable 0", d.Spec.Strategy)
	}
	var terms []corev1.PodAffinityTerm
	if a := d.Spec.Template.Spec.Affinity; a != nil && a.PodAntiAffinity != nil {
		for _, w := range a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
			if antiAffinity == "preferred" {
				terms = append(terms, w.PodAffinityTerm)
			}
		}
		if antiAffinity == "required" {
			terms = a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution
		}
	}
	podLabels := labels.Set(d.Spec.Template.Labels)
	if len(terms) != 1 || terms[0].TopologyKey != "kubernetes.io/hostname" || terms[0].LabelSelector == nil ||
		!labels.SelectorFromSet(terms[0].LabelSelector.MatchLabels).Matches(podLabels) {
		t.Errorf("affinity %+v: want one %s anti-affinity term per node (kubernetes.io/hostname) that selects the controller's pods %v",
			d.Spec.Template.Spec.Affinity, antiAffinity, podLabels)
	}
	pdbs := r.ofKind("PodDisruptionBudget")
	if len(pdbs) != 1 {
		t.Fatalf("%d PodDisruptionBudgets, want one", len(pdbs))
	}
	pdb := into[policyv1.PodDisruptionBudget](t, &pdbs[0])
	if pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.String() != "1" || pdb.Spec.MinAvailable != nil || pdb.Spec.Selector == nil ||
		!labels.SelectorFromSet(pdb.Spec.Selector.MatchLabels).Matches(podLabels) {
		t.Errorf("PodDisruptionBudget %+v: want maxUnavailable 1 of the controller's pods %v", pdb.Spec, podLabels)
	}
}
