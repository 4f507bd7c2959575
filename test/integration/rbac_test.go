package integration

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/test/harness"
)

// TestManagerRoleIsNarrow asks the API server what config/rbac (which
// TestMain applied) lets the controller's service account do: write only
// its own webhook configuration, read ConfigMaps one by one but never list
// or watch them, and check the tokens and rights of who scrapes /metrics.
// The chart's rendering, with watched namespaces, is TestChartRBACIsNarrow
// (test/helm).
func TestManagerRoleIsNarrow(t *testing.T) {
	parallel(t)
	tt := env.NewTest(t)
	tt.CheckAccess(managerUser, []harness.Access{
		harness.Deny("update", "admissionregistration.k8s.io/validatingwebhookconfigurations", "", "someone-elses-webhook"),
		harness.Deny("patch", "admissionregistration.k8s.io/validatingwebhookconfigurations", "", "someone-elses-webhook"),
		harness.Deny("delete", "admissionregistration.k8s.io/validatingwebhookconfigurations", "", "rainbow-validating-webhook"),
		harness.Allow("update", "admissionregistration.k8s.io/validatingwebhookconfigurations", "", "rainbow-validating-webhook"),
		harness.Allow("patch", "admissionregistration.k8s.io/validatingwebhookconfigurations", "", "rainbow-validating-webhook"),
		harness.Deny("list", "/configmaps", "", ""),
		harness.Deny("list", "/configmaps", tt.Namespace, ""),
		harness.Deny("watch", "/configmaps", tt.Namespace, ""),
		harness.Allow("get", "/configmaps", tt.Namespace, "gate-input"),
		harness.Allow("create", "authentication.k8s.io/tokenreviews", "", ""),
		harness.Allow("create", "authorization.k8s.io/subjectaccessreviews", "", ""),
	})
}

// TestMetricsNeedAnAuthorizedToken runs the manager binary with
// --metrics-secure, as the manifests do, with the controller's own
// permissions: /metrics refuses a request without a token (401) and one
// with the token of a service account not bound to rainbow-metrics-reader
// (403), and serves Rainbow's metrics to one that is. The manager checks
// each token with a TokenReview and a SubjectAccessReview, which its role
// must allow.
func TestMetricsNeedAnAuthorizedToken(t *testing.T) {
	parallel(t)
	tt := env.NewTest(t)
	ctx := context.Background()
	// A connection of the watched namespace, so that the binary calls
	// Temporal and has Rainbow's own counters to show.
	newConnection(tt, "local", v1.TemporalConnectionSpec{HostPort: env.Info.TemporalAddress})
	log, addr, _ := startManagerBinary(t, impersonatingKubeconfig(t, managerUser), "--watch-namespaces="+tt.Namespace, "--metrics-secure")

	token := func(sa string) string {
		t.Helper()
		if err := env.Kube.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: tt.Namespace, Name: sa}}); err != nil {
			t.Fatal(err)
		}
		req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}
		req, err := env.Clients.CoreV1().ServiceAccounts(tt.Namespace).CreateToken(ctx, sa, req, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return req.Status.Token
	}
	reader, other := token("prometheus"), token("nosy")
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "metrics-reader-" + tt.Namespace},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "rainbow-metrics-reader"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: tt.Namespace, Name: "prometheus"}},
	}
	if err := env.Kube.Create(ctx, binding); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Kube.Delete(context.Background(), binding) })

	// The certificate is the manager's own, self-signed.
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	get := func(token string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, "https://"+addr+"/metrics", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := hc.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	expect := func(who, token string, code int, want string) {
		t.Helper()
		tt.Eventually(2*time.Minute, fmt.Sprintf("GET /metrics %s: %d with %q", who, code, want), func() (bool, string) {
			got, body := get(token)
			return got == code && strings.Contains(body, want), fmt.Sprintf("%d %.300s\nmanager log:\n%s", got, body, log.String())
		})
	}
	expect("with the token of a service account bound to rainbow-metrics-reader", reader, http.StatusOK, "rainbow_temporal_rpcs_total")
	expect("without a token", "", http.StatusUnauthorized, "Unauthorized")
	// controller-runtime answers 500 when the API server rejects a token.
	if code, body := get("not-a-token"); code == http.StatusOK {
		t.Errorf("a made-up token got the metrics: %.200s", body)
	}
	expect("with the token of a service account without the role", other, http.StatusForbidden, "Authorization denied")
	if code, _ := get(reader); code != http.StatusOK {
		t.Errorf("the reader's token got %d after the others were refused", code)
	}
	// Plain HTTP is not served at all.
	if resp, err := http.Get("http://" + addr + "/metrics"); err == nil {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Errorf("plain HTTP served the metrics: %.200s", body)
		}
	}
}

// TestUserRolesAggregate binds Kubernetes' own edit and view ClusterRoles
// in a namespace: config/rbac's rainbow-edit and rainbow-view, aggregated
// into them by kube-controller-manager, let an editor create, change and
// delete the three kinds but write none of their status (which the
// controller trusts: status.versions names the copies it looks at), and
// let a viewer read them but not Secrets, nor write anything.
func TestUserRolesAggregate(t *testing.T) {
	parallel(t)
	tt := env.NewTest(t)
	ctx := context.Background()
	const editor, viewer = "rbac-test-editor", "rbac-test-viewer"
	for user, role := range map[string]string{editor: "edit", viewer: "view"} {
		if err := env.Kube.Create(ctx, harness.UserBinding(tt.Namespace, role, "ClusterRole", role, user)); err != nil {
			t.Fatal(err)
		}
	}
	kinds := []string{"temporalworkerdeployments", "temporalconnections", "temporalworkerownedresources"}
	var want []harness.Access
	for _, k := range kinds {
		r := "temporal.io/" + k
		for _, v := range []string{"create", "update", "patch", "delete", "deletecollection", "get", "list", "watch"} {
			want = append(want, harness.Allow(v, r, tt.Namespace, ""))
		}
		for _, v := range []string{"update", "patch"} {
			want = append(want, harness.Deny(v, r+"/status", tt.Namespace, ""), harness.Deny(v, r+"/finalizers", tt.Namespace, ""))
		}
	}
	tt.CheckAccess(editor, want)
	want = nil
	for _, k := range kinds {
		r := "temporal.io/" + k
		for _, v := range []string{"get", "list", "watch"} {
			want = append(want, harness.Allow(v, r, tt.Namespace, ""), harness.Allow(v, r+"/status", tt.Namespace, ""))
		}
		for _, v := range []string{"create", "update", "patch", "delete"} {
			want = append(want, harness.Deny(v, r, tt.Namespace, ""), harness.Deny(v, r+"/status", tt.Namespace, ""))
		}
		want = append(want, harness.Deny("list", r, "", "")) // the binding is the namespace's only
	}
	want = append(want, harness.Deny("get", "/secrets", tt.Namespace, ""), harness.Deny("list", "/secrets", tt.Namespace, ""))
	tt.CheckAccess(viewer, want)

	// The same through real requests, as the editor and the viewer.
	ed, vw := impersonate(t, editor), impersonate(t, viewer)
	conn := &v1.TemporalConnection{ObjectMeta: metav1.ObjectMeta{Namespace: tt.Namespace, Name: "local"}, Spec: v1.TemporalConnectionSpec{HostPort: env.Info.TemporalAddress}}
	twd := validTWD(tt.Namespace, "worker")
	twor := ownedResource(tt.Namespace, "hpa", admissionHPA)
	objs := []crclient.Object{conn, twd, twor}
	for _, o := range objs {
		if err := ed.Create(ctx, o); err != nil {
			t.Fatalf("the editor may not create %T: %v", o, err)
		}
	}
	statusPatch := crclient.RawPatch(types.MergePatchType, []byte(`{"status":{"observedGeneration":42}}`))
	for _, o := range objs {
		key := crclient.ObjectKeyFromObject(o)
		fresh := o.DeepCopyObject().(crclient.Object)
		if err := vw.Get(ctx, key, fresh); err != nil {
			t.Errorf("the viewer may not get %T %s: %v", o, key, err)
		}
		for who, c := range map[string]crclient.Client{"editor": ed, "viewer": vw} {
			if err := c.Status().Patch(ctx, fresh.DeepCopyObject().(crclient.Object), statusPatch); !apierrors.IsForbidden(err) {
				t.Errorf("the %s patched the status of %T %s: got %v, want Forbidden", who, o, key, err)
			}
		}
		if err := vw.Delete(ctx, fresh); !apierrors.IsForbidden(err) {
			t.Errorf("the viewer deleted %T %s: got %v, want Forbidden", o, key, err)
		}
	}
	lists := []crclient.ObjectList{&v1.TemporalWorkerDeploymentList{}, &v1.TemporalConnectionList{}, &v1.TemporalWorkerOwnedResourceList{}}
	for _, l := range lists {
		if err := vw.List(ctx, l, crclient.InNamespace(tt.Namespace)); err != nil {
			t.Errorf("the viewer may not list %T: %v", l, err)
		}
	}
	if err := vw.Get(ctx, types.NamespacedName{Namespace: tt.Namespace, Name: "any"}, &corev1.Secret{}); !apierrors.IsForbidden(err) {
		t.Errorf("the viewer read a Secret: got %v, want Forbidden", err)
	}
	// The editor deletes what they made (the TWD first: the connection
	// waits for the TWDs that use it).
	for _, o := range []crclient.Object{twor, twd, conn} {
		if err := ed.Delete(ctx, o); err != nil {
			t.Errorf("the editor may not delete %T: %v", o, err)
		}
	}
}
