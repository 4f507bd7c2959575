package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/internal/workload"
	"github.com/rainbow-deploy/rainbow/test/harness"
)

// The confused deputy of issue 24 (hole 5): the controller reads the
// Secrets a TemporalConnection names and sends them to its address with its
// own rights, so a connection must not let its author use Secrets they may
// not read, nor reach addresses outside --allowed-temporal-hosts.

// TestConnectionAuthorMustReadItsSecrets: a user who may write
// TemporalConnections but not read a Secret cannot create a connection
// naming it, nor point one at it later; once allowed to read it, they can.
func TestConnectionAuthorMustReadItsSecrets(t *testing.T) {
	parallel(t)
	tt := env.NewTest(t)
	ctx := context.Background()
	key := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: tt.Namespace, Name: "team-api-key"},
		Data:       map[string][]byte{"apiKey": []byte("not-for-bob")},
	}
	if err := env.Kube.Create(ctx, key); err != nil {
		t.Fatal(err)
	}
	user := "bob-" + tt.Suffix
	grant(t, tt, user, "connections", rbacv1.PolicyRule{
		APIGroups: []string{v1.GroupVersion.Group}, Resources: []string{"temporalconnections"}, Verbs: []string{"*"}})
	bob := impersonate(t, user)
	withKey := func(name string) *v1.TemporalConnection {
		return &v1.TemporalConnection{
			ObjectMeta: metav1.ObjectMeta{Namespace: tt.Namespace, Name: name},
			Spec: v1.TemporalConnectionSpec{HostPort: env.Info.TemporalAddress,
				APIKeySecretRef: &v1.SecretKeyReference{Name: key.Name, Key: "apiKey"}},
		}
	}
	wantRefused := func(err error, field string) {
		t.Helper()
		want := fmt.Sprintf(`%s: user %q may not get secrets %q in namespace %q`, field, user, key.Name, tt.Namespace)
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "name a Secret you may read") {
			t.Fatalf("got %v, want Forbidden with %q", err, want)
		}
	}

	wantRefused(bob.Create(ctx, withKey("stolen")), "spec.apiKeySecretRef.name")
	mtls := &v1.TemporalConnection{
		ObjectMeta: metav1.ObjectMeta{Namespace: tt.Namespace, Name: "stolen-tls"},
		Spec:       v1.TemporalConnectionSpec{HostPort: env.Info.TemporalAddress, MutualTLSSecretRef: &v1.SecretReference{Name: key.Name}},
	}
	wantRefused(bob.Create(ctx, mtls), "spec.mutualTLSSecretRef.name")

	// A connection without Secrets is his to make; naming the Secret
	// later is refused the same way.
	plain := &v1.TemporalConnection{
		ObjectMeta: metav1.ObjectMeta{Namespace: tt.Namespace, Name: "plain"},
		Spec:       v1.TemporalConnectionSpec{HostPort: env.Info.TemporalAddress},
	}
	if err := bob.Create(ctx, plain); err != nil {
		t.Fatalf("a connection naming no Secret was refused: %v", err)
	}
	wantRefused(updateConnection(bob, plain, func() {
		plain.Spec.APIKeySecretRef = &v1.SecretKeyReference{Name: key.Name, Key: "apiKey"}
	}), "spec.apiKeySecretRef.name")

	// Nor may he send an administrator's connection, and its Secret,
	// elsewhere.
	admins := withKey("admins")
	if err := env.Kube.Create(ctx, admins); err != nil {
		t.Fatalf("the administrator's connection was refused: %v", err)
	}
	wantRefused(updateConnection(bob, admins, func() { admins.Spec.HostPort = "localhost:7233" }), "spec.apiKeySecretRef.name")

	grant(t, tt, user, "secrets", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}})
	tt.Eventually(30*time.Second, "the connection admitted once the user may read the Secret", func() (bool, string) {
		err := bob.Create(ctx, withKey("allowed"))
		return err == nil, errString(err)
	})
}

// updateConnection applies change to a fresh copy of conn and updates it
// as c, again on a conflict (the controller adds its finalizer).
func updateConnection(c crclient.Client, conn *v1.TemporalConnection, change func()) error {
	for {
		if err := c.Get(context.Background(), crclient.ObjectKeyFromObject(conn), conn); err != nil {
			return err
		}
		change()
		if err := c.Update(context.Background(), conn); !apierrors.IsConflict(err) {
			return err
		}
	}
}

// bypassLabel marks objects the TemporalConnection webhook skips while
// storeWithoutWebhook runs.
const bypassLabel = "rainbow-test.temporal.io/skip-webhook"

// storeWithoutWebhook creates conn as if no webhook were installed (or it
// was installed after conn was made): for the moment it takes, the
// TemporalConnection webhook skips objects carrying bypassLabel, which
// conn gets; other tests' objects are checked as before.
func storeWithoutWebhook(tt *harness.T, conn *v1.TemporalConnection) {
	tt.Helper()
	ctx := context.Background()
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := env.Kube.Get(ctx, crclient.ObjectKey{Name: webhookName}, vwc); err != nil {
		tt.Fatal(err)
	}
	i := -1
	for j, w := range vwc.Webhooks {
		if w.Name == "temporalconnections.validate.temporal.io" {
			i = j
		}
	}
	if i < 0 {
		tt.Fatalf("ValidatingWebhookConfiguration %s has no TemporalConnection webhook", webhookName)
	}
	selector := func(s *metav1.LabelSelector) {
		tt.Helper()
		webhookConfigMu.Lock()
		defer webhookConfigMu.Unlock()
		patch, _ := json.Marshal([]map[string]any{{"op": "add", "path": fmt.Sprintf("/webhooks/%d/objectSelector", i), "value": s}})
		if err := env.Kube.Patch(ctx, vwc, crclient.RawPatch(types.JSONPatchType, patch)); err != nil {
			tt.Fatal(err)
		}
	}
	selector(&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: bypassLabel, Operator: metav1.LabelSelectorOpDoesNotExist}}})
	defer selector(&metav1.LabelSelector{})
	if conn.Labels == nil {
		conn.Labels = map[string]string{}
	}
	conn.Labels[bypassLabel] = "true"
	// The API server sees the changed configuration a moment later.
	tt.Eventually(30*time.Second, "the connection stored past the webhook", func() (bool, string) {
		err := env.Kube.Create(ctx, conn.DeepCopy())
		return err == nil, errString(err)
	})
}

// TestConnectionAddressNotAllowed: an address outside
// --allowed-temporal-hosts is refused at admission. One stored while the
// webhook was absent is reported AddressNotAllowed, by the connection and
// by a TemporalWorkerDeployment using it, and nothing connects to it: not
// the connection controller's probe, not the TemporalWorkerDeployment
// controller's client, and no worker is made to.
func TestConnectionAddressNotAllowed(t *testing.T) {
	parallel(t)
	tt := env.NewTest(t)
	ctx := context.Background()
	// A server of the attacker's choosing, on this machine: any connection
	// it accepts is a failure.
	l, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var accepted atomic.Int32
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()
	addr := l.Addr().String()
	// Deferred, so that it is said even when a wait below fails.
	defer func() {
		if n := accepted.Load(); n != 0 {
			t.Errorf("%d connections were opened to %s, which is not allowed", n, addr)
		}
	}()
	key := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: tt.Namespace, Name: "api-key"},
		Data:       map[string][]byte{"apiKey": []byte("secret")},
	}
	if err := env.Kube.Create(ctx, key); err != nil {
		t.Fatal(err)
	}
	conn := &v1.TemporalConnection{
		ObjectMeta: metav1.ObjectMeta{Namespace: tt.Namespace, Name: "temporal"},
		Spec:       v1.TemporalConnectionSpec{HostPort: addr, APIKeySecretRef: &v1.SecretKeyReference{Name: key.Name, Key: "apiKey"}},
	}

	for _, hp := range []string{addr, "attacker.test:7233", "temporal.example.com:7234"} {
		c := conn.DeepCopy()
		c.Spec.HostPort = hp
		err := env.Kube.Create(ctx, c, crclient.DryRunAll)
		for _, want := range []string{"spec.hostPort", hp + " is not one of the addresses this controller may connect to",
			"--allowed-temporal-hosts=" + testAllowedHosts, "use an allowed address"} {
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), want) {
				t.Errorf("creating a connection to %s: got %v, want Invalid with %q", hp, err, want)
			}
		}
	}

	storeWithoutWebhook(tt, conn)
	got := waitReady(tt, conn.Name, v1.ReasonAddressNotAllowed, time.Minute,
		"spec.hostPort: address not allowed: "+addr+" is not one of", "--allowed-temporal-hosts=", "change spec.hostPort to an allowed address")
	if c := meta.FindStatusCondition(got.Status.Conditions, v1.ConditionReady); c.Status != metav1.ConditionFalse {
		t.Errorf("Ready = %s, want False", c.Status)
	}

	r := &rollout{&harness.Rollout{T: tt, Name: "orders", TaskQueue: tt.TaskQueue("orders")}}
	r.Create(r.Spec("v1"))
	twd := r.waitCondition(time.Minute, v1.ConditionReady, metav1.ConditionFalse, v1.ReasonAddressNotAllowed)
	if c := findCondition(twd, v1.ConditionReady); !strings.Contains(c.Message, addr+" is not one of") {
		t.Errorf("TemporalWorkerDeployment Ready message %q does not name the address", c.Message)
	}

	// Both controllers retry on their own (the connection's first retry
	// is 10s later): a generous wait after the conditions appeared.
	time.Sleep(30 * time.Second)
	var deps appsv1.DeploymentList
	if err := env.Kube.List(ctx, &deps, crclient.InNamespace(tt.Namespace), crclient.HasLabels{workload.LabelWorker}); err != nil {
		t.Fatal(err)
	}
	if len(deps.Items) != 0 {
		t.Errorf("%d worker Deployments were made for a connection not allowed", len(deps.Items))
	}
}
