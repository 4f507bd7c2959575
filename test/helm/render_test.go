package helm

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/rainbow-deploy/rainbow/internal/admission"
)

// rendering is what `helm template` made of the rainbow chart.
type rendering struct {
	objects   []unstructured.Unstructured
	release   string
	namespace string
	fullname  string
	watch     []string // the watchNamespaces value
}

// renderChart runs helm template on charts/<chart> as release in namespace.
func renderChart(t *testing.T, chart, release, namespace string, args ...string) *rendering {
	t.Helper()
	out := mustHelm(t, append([]string{"template", release, "charts/" + chart, "--namespace", namespace}, args...)...)
	return &rendering{objects: decode(t, out), release: release, namespace: namespace}
}

// get returns the object of kind, namespace and name, nil if none.
func (r *rendering) get(kind, namespace, name string) *unstructured.Unstructured {
	for i := range r.objects {
		o := &r.objects[i]
		if o.GetKind() == kind && o.GetNamespace() == namespace && o.GetName() == name {
			return o
		}
	}
	return nil
}

func (r *rendering) ofKind(kind string) []unstructured.Unstructured {
	var out []unstructured.Unstructured
	for _, o := range r.objects {
		if o.GetKind() == kind {
			out = append(out, o)
		}
	}
	return out
}

// into converts an unstructured object into a typed one.
func into[T any](t testing.TB, obj *unstructured.Unstructured) *T {
	t.Helper()
	var out T
	if obj == nil {
		t.Fatalf("no %T rendered", out)
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(obj.Object, &out, true); err != nil {
		t.Fatalf("%s %s: %v", obj.GetKind(), obj.GetName(), err)
	}
	return &out
}

func (r *rendering) deployment(t testing.TB) *appsv1.Deployment {
	t.Helper()
	list := r.ofKind("Deployment")
	if len(list) != 1 {
		t.Fatalf("%d Deployments rendered, want 1", len(list))
	}
	return into[appsv1.Deployment](t, &list[0])
}

// args are the manager container's arguments as flag -> value ("" for a
// bare flag); the last of a repeated flag wins, as in the manager.
func (r *rendering) args(t testing.TB) map[string]string {
	t.Helper()
	c := r.deployment(t).Spec.Template.Spec.Containers
	if len(c) != 1 {
		t.Fatalf("%d containers, want 1", len(c))
	}
	out := map[string]string{}
	for _, a := range c[0].Args {
		k, v, _ := strings.Cut(a, "=")
		out[k] = v
	}
	return out
}

// dryRun sends the rendering to the API server (server-side apply, dry
// run), leaving out the objects of APIs this cluster does not serve
// (cert-manager's, the Prometheus Operator's).
func dryRun(t testing.TB, objects []unstructured.Unstructured) {
	t.Helper()
	var items []any
	for _, o := range objects {
		switch o.GroupVersionKind().Group {
		case "cert-manager.io", "monitoring.coreos.com":
			continue
		}
		items = append(items, o.Object)
	}
	list, err := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "List", "items": items})
	if err != nil {
		t.Fatal(err)
	}
	// --force-conflicts: the harness installed the CRDs with other managers.
	if _, err := env.Kubectl(list, "apply", "--server-side", "--force-conflicts", "--dry-run=server", "--field-manager=rainbow-test", "-f", "-"); err != nil {
		t.Fatalf("the API server refuses the rendering: %v", err)
	}
}

// namespace creates a namespace for t's test, deleted when it ends.
func namespace(t *testing.T, name string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"rainbow.temporal.io/test": "true"}}}
	if err := env.Kube.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := env.Kube.Delete(context.Background(), ns); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete namespace %s: %v", name, err)
		}
	})
	return name
}

// grants are RBAC rules expanded to "group/resource:verb" ("/secrets:get"
// for the core group), "group/resource:verb@name" for a rule limited to
// resourceNames, and "url /metrics:get" for non-resource URLs.
type grants map[string]bool

func grantsOf(rules []rbacv1.PolicyRule) grants {
	g := grants{}
	for _, r := range rules {
		names := r.ResourceNames
		if len(names) == 0 {
			names = []string{""}
		}
		for _, group := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					for _, n := range names {
						k := group + "/" + res + ":" + v
						if n != "" {
							k += "@" + n
						}
						g[k] = true
					}
				}
			}
		}
		for _, u := range r.NonResourceURLs {
			for _, v := range r.Verbs {
				g["url "+u+":"+v] = true
			}
		}
	}
	return g
}

func (g grants) String() string {
	keys := make([]string, 0, len(g))
	for k := range g {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return "[" + strings.Join(keys, ", ") + "]"
}

// generatedRules reads config/rbac/role.yaml, which controller-gen makes
// from the +kubebuilder:rbac markers: its ClusterRole's rules and its
// Role's (for the controller's own namespace).
func generatedRules(t testing.TB) (cluster, namespaced []rbacv1.PolicyRule) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(env.Root, "config", "rbac", "role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range decode(t, data) {
		role := into[rbacv1.ClusterRole](t, &o)
		if o.GetKind() == "ClusterRole" {
			cluster = append(cluster, role.Rules...)
		} else {
			namespaced = append(namespaced, role.Rules...)
		}
	}
	if len(cluster) == 0 || len(namespaced) == 0 {
		t.Fatal("config/rbac/role.yaml lacks its ClusterRole or its Role")
	}
	return cluster, namespaced
}

// scopes tells, for each "group/resource" the API server serves, whether it
// is namespaced.
func scopes(t testing.TB) map[string]bool {
	t.Helper()
	lists, err := env.Clients.Discovery().ServerPreferredResources()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, l := range lists {
		gv, _ := schema.ParseGroupVersion(l.GroupVersion)
		for _, r := range l.APIResources {
			out[gv.Group+"/"+r.Name] = r.Namespaced
		}
	}
	return out
}

// checkCommon checks what every rendering of the rainbow chart must hold:
// objects in the release namespace, a webhook that reaches the manager with
// the certificate it mounts, a hardened pod, and RBAC that grants the
// service account exactly the generated rules where it watches.
func (r *rendering) checkCommon(t *testing.T) {
	t.Helper()
	watch := r.watch
	sa := r.fullname + "-manager"
	if r.get("ServiceAccount", r.namespace, sa) == nil {
		t.Errorf("no ServiceAccount %s", sa)
	}
	for _, o := range r.objects {
		if o.GetLabels()["app.kubernetes.io/instance"] != r.release || o.GetLabels()["app.kubernetes.io/managed-by"] != "Helm" {
			t.Errorf("%s %s lacks the release's labels: %v", o.GetKind(), o.GetName(), o.GetLabels())
		}
		ns := o.GetNamespace()
		switch o.GetKind() {
		case "ClusterRole", "ClusterRoleBinding", "ValidatingWebhookConfiguration":
			if ns != "" || !strings.HasPrefix(o.GetName(), r.fullname+"-") {
				t.Errorf("cluster-scoped %s %s/%s: want no namespace and the prefix %s-", o.GetKind(), ns, o.GetName(), r.fullname)
			}
		case "APIService": // its name is the API's, one per cluster
			if ns != "" || o.GetName() != externalMetricsAPIService {
				t.Errorf("APIService %s/%s: want only %s", ns, o.GetName(), externalMetricsAPIService)
			}
		case "Role", "RoleBinding":
			if o.GetKind() == "RoleBinding" && ns == "kube-system" && o.GetName() == r.fullname+"-manager-auth-reader" {
				continue // the external metrics API's, checked by checkExternalMetrics
			}
			if ns != r.namespace && !slices.Contains(watch, ns) {
				t.Errorf("%s %s is in namespace %q, neither the release's nor a watched one", o.GetKind(), o.GetName(), ns)
			}
		default:
			if ns != r.namespace {
				t.Errorf("%s %s is in namespace %q, want the release's %s", o.GetKind(), o.GetName(), ns, r.namespace)
			}
		}
	}

	d := r.deployment(t)
	pod := d.Spec.Template.Spec
	c := pod.Containers[0]
	args := r.args(t)
	if pod.ServiceAccountName != sa {
		t.Errorf("serviceAccountName %q, want %s", pod.ServiceAccountName, sa)
	}
	if sc := c.SecurityContext; sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot ||
		sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Errorf("container securityContext %+v: want non-root, a read-only root filesystem, no privilege escalation", sc)
	}
	if c.LivenessProbe == nil || c.ReadinessProbe == nil {
		t.Error("the container lacks probes")
	}
	for _, svc := range r.ofKind("Service") {
		s := into[corev1.Service](t, &svc)
		for k, v := range s.Spec.Selector {
			if d.Spec.Template.Labels[k] != v {
				t.Errorf("Service %s selects %s=%s, which the pods lack (%v)", s.Name, k, v, d.Spec.Template.Labels)
			}
		}
		for _, p := range s.Spec.Ports {
			if !slices.ContainsFunc(c.Ports, func(cp corev1.ContainerPort) bool { return cp.Name == p.TargetPort.String() }) {
				t.Errorf("Service %s targets port %s, which the container lacks", s.Name, p.TargetPort.String())
			}
		}
	}

	// The webhook: the API server calls the Service, which reaches the
	// manager's --webhook-port, served with the mounted certificate.
	vwc := r.ofKind("ValidatingWebhookConfiguration")
	if len(vwc) != 1 {
		t.Fatalf("%d ValidatingWebhookConfigurations, want 1", len(vwc))
	}
	whc := into[admissionregistrationv1.ValidatingWebhookConfiguration](t, &vwc[0])
	svc := into[corev1.Service](t, r.get("Service", r.namespace, r.fullname+"-webhook"))
	// TemporalWorkerOwnedResources, TemporalWorkerDeployments, TemporalConnections.
	if len(whc.Webhooks) != 3 {
		t.Fatalf("%d webhooks, want 3: %+v", len(whc.Webhooks), whc.Webhooks)
	}
	for i, path := range []string{admission.Path, admission.WorkerDeploymentPath, admission.ConnectionPath} {
		if s := whc.Webhooks[i].ClientConfig.Service; s == nil || s.Name != svc.Name || s.Namespace != r.namespace || s.Path == nil || *s.Path != path {
			t.Errorf("webhook %d does not call Service %s/%s at %s: %+v", i, r.namespace, svc.Name, path, whc.Webhooks[i].ClientConfig)
		}
	}
	if !slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool {
		return p.Name == svc.Spec.Ports[0].TargetPort.String() && args["--webhook-port"] == fmt.Sprint(p.ContainerPort)
	}) {
		t.Errorf("the webhook Service's targetPort is not --webhook-port=%s (%+v)", args["--webhook-port"], c.Ports)
	}
	certSecret := r.fullname + "-webhook-cert"
	mounted := slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool {
		return m.MountPath == args["--webhook-cert-dir"] && slices.ContainsFunc(pod.Volumes, func(v corev1.Volume) bool {
			return v.Name == m.Name && v.Secret != nil && v.Secret.SecretName == certSecret
		})
	})
	if !mounted {
		t.Errorf("Secret %s is not mounted at --webhook-cert-dir=%s", certSecret, args["--webhook-cert-dir"])
	}
	if args["--webhook-cert-rotation"] == "" { // the built-in rotation
		want := map[string]string{
			"--webhook-secret":             r.namespace + "/" + certSecret,
			"--webhook-dns-name":           svc.Name + "." + r.namespace + ".svc",
			"--webhook-configuration-name": vwc[0].GetName(),
		}
		for k, v := range want {
			if args[k] != v {
				t.Errorf("%s=%q, want %q", k, args[k], v)
			}
		}
		if r.get("Secret", r.namespace, certSecret) == nil {
			t.Errorf("no Secret %s for the rotation to fill in", certSecret)
		}
	}
	for _, wh := range whc.Webhooks {
		if sel := wh.NamespaceSelector; len(watch) > 0 {
			want := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpIn, Values: watch}}}
			if !equalJSON(sel, want) {
				t.Errorf("webhook %s namespaceSelector %+v, want the watched namespaces %v", wh.Name, sel, watch)
			}
		} else if sel != nil {
			t.Errorf("webhook %s namespaceSelector %+v, want none (every namespace)", wh.Name, sel)
		}
	}
	if got := args["--watch-namespaces"]; got != strings.Join(watch, ",") {
		t.Errorf("--watch-namespaces=%q, want %q", got, strings.Join(watch, ","))
	}
	r.checkRBAC(t)
}

// checkRBAC checks that the bindings grant the service account the
// generated rules (config/rbac/role.yaml): its ClusterRole's everywhere or,
// with watch, the namespaced resources in each watched namespace and the
// cluster-scoped ones with a ClusterRole; its Role's in the release
// namespace; leader election's as config/rbac has them.
func (r *rendering) checkRBAC(t *testing.T) {
	t.Helper()
	watch := r.watch
	sa := r.fullname + "-manager"
	// What each binding grants the service account, by namespace ("" is
	// cluster-wide), excluding the owned-resources role the cases check.
	granted := map[string]grants{}
	for _, kind := range []string{"ClusterRoleBinding", "RoleBinding"} {
		for _, o := range r.ofKind(kind) {
			b := into[rbacv1.RoleBinding](t, &o)
			if len(b.Subjects) != 1 || b.Subjects[0].Kind != "ServiceAccount" || b.Subjects[0].Name != sa || b.Subjects[0].Namespace != r.namespace {
				t.Errorf("%s %s binds %+v, want only the ServiceAccount %s/%s", kind, b.Name, b.Subjects, r.namespace, sa)
			}
			if b.RoleRef.Name == authReaderRole && b.Namespace == "kube-system" {
				continue // Kubernetes' own role, checked by checkExternalMetrics
			}
			roleKind := strings.TrimSuffix(kind, "Binding")
			role := r.get(b.RoleRef.Kind, b.Namespace, b.RoleRef.Name)
			if b.RoleRef.Kind != roleKind || role == nil {
				t.Errorf("%s %s/%s refers to %s %s, which is not rendered beside it", kind, b.Namespace, b.Name, b.RoleRef.Kind, b.RoleRef.Name)
				continue
			}
			switch b.RoleRef.Name {
			case r.fullname + "-owned-resources", r.fullname + "-external-metrics", authReaderRole:
				continue // checked by checkOwnedResources and checkExternalMetrics
			}
			if granted[b.Namespace] == nil {
				granted[b.Namespace] = grants{}
			}
			for g := range grantsOf(into[rbacv1.ClusterRole](t, role).Rules) {
				granted[b.Namespace][g] = true
			}
		}
	}
	clusterRules, nsRules := generatedRules(t)
	scope := scopes(t)
	wantCluster, wantNamespaced := grants{}, grants{}
	for g := range grantsOf(clusterRules) {
		g = strings.Replace(g, "@rainbow-validating-webhook", "@"+r.fullname+"-validating-webhook", 1)
		resource, _, _ := strings.Cut(g, ":")
		group, res, _ := strings.Cut(resource, "/")
		res, _, _ = strings.Cut(res, "/") // a subresource is scoped as its resource
		namespaced, known := scope[group+"/"+res]
		if !known {
			t.Errorf("config/rbac/role.yaml grants %s, which the API server does not serve", g)
		}
		if len(watch) == 0 || !namespaced {
			wantCluster[g] = true
		} else {
			wantNamespaced[g] = true
		}
	}
	check := func(ns string, want grants) {
		if got := granted[ns]; !equalJSON(got.String(), want.String()) {
			t.Errorf("in namespace %q the service account is granted\n  %v\nwant\n  %v", ns, got, want)
		}
	}
	check("", wantCluster)
	own := grantsOf(nsRules)
	leader := grants{}
	if _, ok := r.args(t)["--leader-elect"]; ok {
		data, err := os.ReadFile(filepath.Join(env.Root, "config", "rbac", "leader_election_role.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		var role rbacv1.Role
		if err := yaml.Unmarshal(data, &role); err != nil {
			t.Fatal(err)
		}
		leader = grantsOf(role.Rules)
	}
	// The release namespace holds the Secret and the Lease; watched
	// namespaces the namespaced generated rules. It may be both.
	for _, ns := range append([]string{r.namespace}, watch...) {
		want := grants{}
		sets := []grants{}
		if slices.Contains(watch, ns) {
			sets = append(sets, wantNamespaced)
		}
		if ns == r.namespace {
			sets = append(sets, own, leader)
		}
		for _, set := range sets {
			for g := range set {
				want[g] = true
			}
		}
		check(ns, want)
	}
	for ns := range granted {
		if ns != "" && ns != r.namespace && !slices.Contains(watch, ns) {
			t.Errorf("the service account is granted %v in namespace %s, which it does not watch", granted[ns], ns)
		}
	}
}

func equalJSON(a, b any) bool { return mustJSON(a) == mustJSON(b) }

func mustJSON(v any) string {
	data, err := json.Marshal(v)
	if err != nil {
		return err.Error()
	}
	return string(data)
}
