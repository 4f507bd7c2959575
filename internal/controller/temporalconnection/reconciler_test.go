package temporalconnection

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/internal/connection"
	"github.com/rainbow-deploy/rainbow/internal/temporal"
)

type fixture struct {
	r            *Reconciler
	events       *events.FakeRecorder
	clock        *clocktesting.FakeClock
	statusWrites int
}

func newFixture(t *testing.T, objs ...client.Object) *fixture {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	f := &fixture{events: events.NewFakeRecorder(20), clock: clocktesting.NewFakeClock(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC))}
	c := fake.NewClientBuilder().WithScheme(scheme).
		WithObjects(objs...).
		WithStatusSubresource(&v1alpha1.TemporalConnection{}).
		WithIndex(&v1alpha1.TemporalWorkerDeployment{}, connection.WorkerDeploymentsByConnection, connection.ConnectionRefOf).
		WithIndex(&v1alpha1.TemporalConnection{}, connection.ConnectionsBySecret, connection.SecretRefsOf).
		WithInterceptorFuncs(interceptor.Funcs{SubResourcePatch: func(ctx context.Context, c client.Client, sub string, o client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
			f.statusWrites++
			return c.SubResource(sub).Patch(ctx, o, p, opts...)
		}}).
		Build()
	pool := temporal.NewPool("test", nil)
	t.Cleanup(pool.Close)
	f.r = &Reconciler{Client: c, Pool: pool, Recorder: f.events, Clock: f.clock}
	return f
}

func (f *fixture) reconcile(t *testing.T, name string) reconcile.Result {
	t.Helper()
	res, err := f.r.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKey{Namespace: "ns", Name: name}})
	if err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
	return res
}

func (f *fixture) get(t *testing.T, name string) *v1alpha1.TemporalConnection {
	t.Helper()
	var c v1alpha1.TemporalConnection
	if err := f.r.Client.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: name}, &c); err != nil {
		t.Fatal(err)
	}
	return &c
}

// drainEvents returns the events recorded since the last call.
func (f *fixture) drainEvents() []string {
	var out []string
	for {
		select {
		case e := <-f.events.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func mtlsConnection(name, secret string) *v1alpha1.TemporalConnection {
	return &v1alpha1.TemporalConnection{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Generation: 3},
		Spec:       v1alpha1.TemporalConnectionSpec{HostPort: "temporal:7233", MutualTLSSecretRef: &v1alpha1.SecretReference{Name: secret}},
	}
}

func twd(name, conn string) *v1alpha1.TemporalWorkerDeployment {
	return &v1alpha1.TemporalWorkerDeployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
		Spec:       v1alpha1.TemporalWorkerDeploymentSpec{WorkerOptions: v1alpha1.WorkerOptions{ConnectionRef: v1alpha1.ConnectionReference{Name: conn}, TemporalNamespace: "default"}},
	}
}

// TestMissingSecret: a connection naming a missing Secret gets the
// finalizer and Ready=False AuthSecretInvalid naming the Secret, once: a
// second pass with nothing new writes nothing and records no Event.
func TestMissingSecret(t *testing.T) {
	f := newFixture(t, mtlsConnection("prod", "prod-tls"))
	res := f.reconcile(t, "prod")
	got := f.get(t, "prod")
	if !slices.Contains(got.Finalizers, Finalizer) {
		t.Errorf("finalizers = %v, want %s", got.Finalizers, Finalizer)
	}
	ready := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionReady)
	if ready == nil || ready.Status != metav1.ConditionFalse || ready.Reason != v1alpha1.ReasonAuthSecretInvalid ||
		!strings.Contains(ready.Message, "Secret prod-tls not found") || ready.ObservedGeneration != 3 {
		t.Fatalf("Ready = %+v, want False/AuthSecretInvalid naming Secret prod-tls at generation 3", ready)
	}
	if got.Status.ObservedGeneration != 3 {
		t.Errorf("observedGeneration = %d, want 3", got.Status.ObservedGeneration)
	}
	if st := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionStalled); st == nil || st.Status != metav1.ConditionTrue || st.Reason != ready.Reason {
		t.Errorf("Stalled = %+v, want True with Ready's reason (kstatus: Failed)", st)
	}
	if res.RequeueAfter != firstRetry {
		t.Errorf("RequeueAfter = %s, want %s", res.RequeueAfter, firstRetry)
	}
	if evs := f.drainEvents(); len(evs) != 1 || !strings.HasPrefix(evs[0], "Warning AuthSecretInvalid") {
		t.Errorf("events = %q, want one Warning AuthSecretInvalid", evs)
	}

	f.clock.Step(40 * time.Second)
	res = f.reconcile(t, "prod")
	if f.statusWrites != 1 {
		t.Errorf("status writes = %d, want 1 (nothing changed on the second pass)", f.statusWrites)
	}
	if evs := f.drainEvents(); len(evs) != 0 {
		t.Errorf("second pass recorded events %q", evs)
	}
	if res.RequeueAfter != 40*time.Second {
		t.Errorf("RequeueAfter after 40s of failure = %s, want 40s", res.RequeueAfter)
	}
}

// stubProber answers probes with a fixed server version or error.
type stubProber struct {
	version string
	err     error
	probes  int
}

// probedFixture has one plaintext connection "prod" at generation 2,
// probed by a stubProber answering version.
func probedFixture(t *testing.T, hostPort, version string) (*fixture, *stubProber) {
	f := newFixture(t, &v1alpha1.TemporalConnection{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "prod", Generation: 2},
		Spec:       v1alpha1.TemporalConnectionSpec{HostPort: hostPort},
	})
	probe := &stubProber{version: version}
	f.r.Pool = probe
	return f, probe
}

func (s *stubProber) Probe(context.Context, temporal.ConnectionParams) (string, error) {
	s.probes++
	return s.version, s.err
}

// TestAddressNotAllowed: a connection outside the allowed hosts (stored
// while the webhook was absent, or before the list changed) is not Ready,
// saying why and what to change, and is never probed; once it names an
// allowed address it is.
func TestAddressNotAllowed(t *testing.T) {
	f, probe := probedFixture(t, "10.0.0.1:22", "1.32.1")
	var err error
	if f.r.AllowedHosts, err = temporal.ParseAllowedHosts("temporal.example.com:7233"); err != nil {
		t.Fatal(err)
	}
	f.reconcile(t, "prod")
	got := f.get(t, "prod")
	c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionReady)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != v1alpha1.ReasonAddressNotAllowed {
		t.Fatalf("Ready = %+v, want False/AddressNotAllowed", c)
	}
	for _, want := range []string{"spec.hostPort", "10.0.0.1:22 is not one of", "--allowed-temporal-hosts=temporal.example.com:7233", "change spec.hostPort"} {
		if !strings.Contains(c.Message, want) {
			t.Errorf("message %q lacks %q", c.Message, want)
		}
	}
	if probe.probes != 0 {
		t.Errorf("%d probes of an address not allowed", probe.probes)
	}
	if evs := f.drainEvents(); len(evs) != 1 || !strings.HasPrefix(evs[0], "Warning AddressNotAllowed") {
		t.Errorf("events = %q, want one Warning AddressNotAllowed", evs)
	}

	got.Spec.HostPort = "temporal.example.com:7233"
	got.Generation++
	if err := f.r.Client.Update(context.Background(), got); err != nil {
		t.Fatal(err)
	}
	f.reconcile(t, "prod")
	if c := meta.FindStatusCondition(f.get(t, "prod").Status.Conditions, v1alpha1.ConditionReady); c.Reason != v1alpha1.ReasonReachable || probe.probes != 1 {
		t.Errorf("an allowed address: Ready %+v after %d probes, want Reachable after one", c, probe.probes)
	}
}

// TestServerVersion: the version the server reports is recorded; one older
// than the controller supports makes the connection not Ready, saying which
// version was found, which is needed and what to do; one that cannot be
// read is said but not refused; a failed probe keeps the last version.
func TestServerVersion(t *testing.T) {
	f, probe := probedFixture(t, "temporal:7233", "1.28.1")
	ready := func() (*v1alpha1.TemporalConnection, *metav1.Condition) {
		got := f.get(t, "prod")
		return got, meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionReady)
	}

	f.reconcile(t, "prod")
	got, c := ready()
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != v1alpha1.ReasonUnsupportedServerVersion {
		t.Fatalf("Ready = %+v, want False/UnsupportedServerVersion", c)
	}
	for _, want := range []string{"Temporal at temporal:7233 runs server version 1.28.1", "needs " + temporal.MinServerVersion.String() + " or newer", "Upgrade the Temporal server"} {
		if !strings.Contains(c.Message, want) {
			t.Errorf("message %q lacks %q", c.Message, want)
		}
	}
	if got.Status.ServerVersion != "1.28.1" {
		t.Errorf("serverVersion = %q, want 1.28.1", got.Status.ServerVersion)
	}
	if evs := f.drainEvents(); len(evs) != 1 || !strings.HasPrefix(evs[0], "Warning UnsupportedServerVersion") {
		t.Errorf("events = %q, want one Warning UnsupportedServerVersion", evs)
	}

	probe.version = "1.32.1"
	f.reconcile(t, "prod")
	got, c = ready()
	if c.Status != metav1.ConditionTrue || c.Reason != v1alpha1.ReasonReachable || !strings.HasSuffix(c.Message, "; server version 1.32.1") {
		t.Errorf("after the upgrade Ready = %+v, want True/Reachable naming 1.32.1", c)
	}
	if st := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionStalled); st == nil || st.Status != metav1.ConditionFalse {
		t.Errorf("after the upgrade Stalled = %+v, want False", st)
	}
	if got.Status.ServerVersion != "1.32.1" {
		t.Errorf("serverVersion = %q, want 1.32.1", got.Status.ServerVersion)
	}

	probe.version, probe.err = "", errors.New("connection refused")
	f.reconcile(t, "prod")
	got, c = ready()
	if c.Reason != v1alpha1.ReasonTemporalClientCreationFailed || got.Status.ServerVersion != "1.32.1" {
		t.Errorf("unreachable: Ready %s, serverVersion %q; want TemporalClientCreationFailed and 1.32.1 kept", c.Reason, got.Status.ServerVersion)
	}

	probe.version, probe.err = "cloud-2026.07", nil
	f.reconcile(t, "prod")
	got, c = ready()
	if c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, `server version "cloud-2026.07" is not one the controller can compare`) ||
		got.Status.ServerVersion != "cloud-2026.07" {
		t.Errorf("unreadable version: Ready %+v, serverVersion %q", c, got.Status.ServerVersion)
	}
}

// TestDeletionWaitsForUsers: the finalizer stays while a
// TemporalWorkerDeployment names the connection, and the condition says
// which; it goes once the last user is gone.
func TestDeletionWaitsForUsers(t *testing.T) {
	conn := mtlsConnection("prod", "prod-tls")
	conn.Finalizers = []string{Finalizer, "example.com/other"}
	f := newFixture(t, conn, twd("orders", "prod"), twd("billing", "prod"), twd("elsewhere", "staging"))
	ctx := context.Background()
	if err := f.r.Client.Delete(ctx, conn); err != nil {
		t.Fatal(err)
	}
	f.reconcile(t, "prod")
	got := f.get(t, "prod")
	ready := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionReady)
	if ready == nil || ready.Reason != v1alpha1.ReasonDeletionBlocked || !strings.Contains(ready.Message, "still use it: billing, orders.") {
		t.Fatalf("Ready = %+v, want DeletionBlocked naming billing and orders only", ready)
	}
	if !slices.Contains(got.Finalizers, Finalizer) {
		t.Fatalf("finalizer removed while users remain: %v", got.Finalizers)
	}
	if evs := f.drainEvents(); len(evs) != 1 || !strings.HasPrefix(evs[0], "Warning DeletionBlocked") {
		t.Errorf("events = %q, want one Warning DeletionBlocked", evs)
	}

	for _, name := range []string{"orders", "billing"} {
		if err := f.r.Client.Delete(ctx, twd(name, "prod")); err != nil {
			t.Fatal(err)
		}
	}
	f.reconcile(t, "prod")
	got = f.get(t, "prod")
	if want := []string{"example.com/other"}; !slices.Equal(got.Finalizers, want) {
		t.Errorf("finalizers = %v, want %v (ours removed, the other kept)", got.Finalizers, want)
	}

	// Once the last finalizer goes, the object is gone and a late
	// reconcile is a no-op.
	got.Finalizers = nil
	if err := f.r.Client.Update(ctx, got); err != nil {
		t.Fatal(err)
	}
	f.reconcile(t, "prod")
	if err := f.r.Client.Get(ctx, client.ObjectKeyFromObject(conn), got); !apierrors.IsNotFound(err) {
		t.Errorf("connection still there: %v", err)
	}
}

// TestSecretMapsToConnectionsNamingIt: the Secret watch finds the
// connections of its namespace that name it, by either reference.
func TestSecretMapsToConnectionsNamingIt(t *testing.T) {
	apiKey := &v1alpha1.TemporalConnection{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cloud"},
		Spec:       v1alpha1.TemporalConnectionSpec{HostPort: "t:7233", APIKeySecretRef: &v1alpha1.SecretKeyReference{Name: "shared", Key: "k"}},
	}
	other := mtlsConnection("other", "shared")
	other.Namespace = "elsewhere"
	f := newFixture(t, mtlsConnection("prod", "shared"), mtlsConnection("dev", "dev-tls"), apiKey, other)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "shared"}}
	var names []string
	for _, r := range f.r.connectionsNaming(context.Background(), secret) {
		names = append(names, r.String())
	}
	if want := []string{"ns/cloud", "ns/prod"}; !slices.Equal(names, want) {
		t.Errorf("requests = %v, want %v", names, want)
	}
}

// TestWorkerDeploymentMapsOnlyToDeletingConnection: TWD events only wake
// a connection that waits for its users to go.
func TestWorkerDeploymentMapsOnlyToDeletingConnection(t *testing.T) {
	conn := mtlsConnection("prod", "prod-tls")
	conn.Finalizers = []string{Finalizer}
	f := newFixture(t, conn)
	user := twd("orders", "prod")
	if reqs := f.r.deletingConnectionOf(context.Background(), user); len(reqs) != 0 {
		t.Errorf("live connection enqueued: %v", reqs)
	}
	if err := f.r.Client.Delete(context.Background(), conn); err != nil {
		t.Fatal(err)
	}
	if reqs := f.r.deletingConnectionOf(context.Background(), user); len(reqs) != 1 || reqs[0].Name != "prod" {
		t.Errorf("requests = %v, want ns/prod", reqs)
	}
	if reqs := f.r.deletingConnectionOf(context.Background(), twd("x", "missing")); len(reqs) != 0 {
		t.Errorf("missing connection enqueued: %v", reqs)
	}
}

// TestUpdatesThatProbeAgain: only spec and lifecycle changes reconcile a
// connection, not the controller's own status and finalizer writes.
func TestUpdatesThatProbeAgain(t *testing.T) {
	base := mtlsConnection("prod", "tls")
	base.Finalizers = []string{Finalizer}
	cases := map[string]struct {
		old, new func(*v1alpha1.TemporalConnection)
		want     bool
	}{
		"status written": {new: func(c *v1alpha1.TemporalConnection) {
			c.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionReady}}
		}, want: false},
		"finalizer added": {old: func(c *v1alpha1.TemporalConnection) { c.Finalizers = nil }, want: false},
		"spec changed":    {new: func(c *v1alpha1.TemporalConnection) { c.Generation++ }, want: true},
		"deleted": {new: func(c *v1alpha1.TemporalConnection) {
			c.DeletionTimestamp = &metav1.Time{Time: time.Now()}
		}, want: true},
		"finalizer removed by someone": {new: func(c *v1alpha1.TemporalConnection) { c.Finalizers = nil }, want: true},
	}
	for name, tc := range cases {
		o, n := base.DeepCopy(), base.DeepCopy()
		if tc.old != nil {
			tc.old(o)
		}
		if tc.new != nil {
			tc.new(n)
		}
		if got := specOrLifecycleChanged.Update(event.UpdateEvent{ObjectOld: o, ObjectNew: n}); got != tc.want {
			t.Errorf("%s: reconcile = %t, want %t", name, got, tc.want)
		}
	}
}
