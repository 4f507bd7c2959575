package integration

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/internal/controller/temporalconnection"
	"github.com/rainbow-deploy/rainbow/internal/temporal"
	"github.com/rainbow-deploy/rainbow/test/harness"
)

// waitReady waits until the connection's Ready condition, for its current
// generation, has reason and a message holding each of parts.
func waitReady(tt *harness.T, name, reason string, timeout time.Duration, parts ...string) *v1.TemporalConnection {
	tt.Helper()
	conn := &v1.TemporalConnection{}
	tt.Eventually(timeout, fmt.Sprintf("TemporalConnection %s Ready reason %s, message with %q", name, reason, parts), func() (bool, string) {
		if err := tt.Env.Kube.Get(context.Background(), crclient.ObjectKey{Namespace: tt.Namespace, Name: name}, conn); err != nil {
			return false, err.Error()
		}
		c := meta.FindStatusCondition(conn.Status.Conditions, v1.ConditionReady)
		if c == nil {
			return false, "no Ready condition"
		}
		seen := fmt.Sprintf("%s/%s at generation %d of %d: %s", c.Status, c.Reason, c.ObservedGeneration, conn.Generation, c.Message)
		if c.Reason != reason || c.ObservedGeneration != conn.Generation {
			return false, seen
		}
		for _, p := range parts {
			if !strings.Contains(c.Message, p) {
				return false, seen
			}
		}
		return true, seen
	})
	return conn
}

func newConnection(tt *harness.T, name string, spec v1.TemporalConnectionSpec) *v1.TemporalConnection {
	tt.Helper()
	conn := &v1.TemporalConnection{ObjectMeta: metav1.ObjectMeta{Namespace: tt.Namespace, Name: name}, Spec: spec}
	if err := tt.Env.Kube.Create(context.Background(), conn); err != nil {
		tt.Fatal(err)
	}
	return conn
}

// TestConnectionExampleIsReady applies examples/connection/plaintext.yaml
// (pointed at this environment's server): the controller adds its
// finalizer and reports Ready=True after a real health check, with the
// version the server reports, which is one it supports.
func TestConnectionExampleIsReady(t *testing.T) {
	parallel(t)
	tt := env.NewTest(t)
	checks := temporal.RPCCountResult("Check", "ok")
	conn := &v1.TemporalConnection{}
	env.ReadExample(t, "connection/plaintext.yaml", conn)
	conn.Namespace = tt.Namespace
	conn.Spec.HostPort = env.Info.TemporalAddress
	if err := env.Kube.Create(context.Background(), conn); err != nil {
		t.Fatal(err)
	}
	got := waitReady(tt, conn.Name, v1.ReasonReachable, time.Minute, env.Info.TemporalAddress, "plaintext", "no credentials")
	if c := meta.FindStatusCondition(got.Status.Conditions, v1.ConditionReady); c.Status != metav1.ConditionTrue {
		t.Errorf("Ready = %s, want True", c.Status)
	}
	if got.Status.ObservedGeneration != got.Generation {
		t.Errorf("status.observedGeneration = %d, want %d", got.Status.ObservedGeneration, got.Generation)
	}
	if !slices.Contains(got.Finalizers, temporalconnection.Finalizer) {
		t.Errorf("finalizers = %v, want %s", got.Finalizers, temporalconnection.Finalizer)
	}
	if n := temporal.RPCCountResult("Check", "ok"); n <= checks {
		t.Errorf("no successful health check RPC was counted (%v before, %v after)", checks, n)
	}
	v, ok := temporal.ParseServerVersion(got.Status.ServerVersion)
	if !ok || v.Less(temporal.MinServerVersion) {
		t.Errorf("status.serverVersion = %q, want the server's release, at least %s", got.Status.ServerVersion, temporal.MinServerVersion)
	}
	if c := meta.FindStatusCondition(got.Status.Conditions, v1.ConditionReady); !strings.HasSuffix(c.Message, "; server version "+got.Status.ServerVersion) {
		t.Errorf("Ready message %q does not end with the server version", c.Message)
	}
}

// TestConnectionSecretProblems: a missing Secret is AuthSecretInvalid
// naming it; creating and then fixing the Secret is noticed (the Secret
// watch wakes the connection; TestSecretMapsToConnectionsNamingIt checks
// which connections it wakes), and a valid client certificate moves the
// problem on to the server, which here speaks no TLS.
func TestConnectionSecretProblems(t *testing.T) {
	parallel(t)
	tt := env.NewTest(t)
	ctx := context.Background()
	newConnection(tt, "mtls", v1.TemporalConnectionSpec{
		HostPort:           env.Info.TemporalAddress,
		MutualTLSSecretRef: &v1.SecretReference{Name: "client-tls"},
	})
	waitReady(tt, "mtls", v1.ReasonAuthSecretInvalid, time.Minute, "Secret client-tls not found", "spec.mutualTLSSecretRef")

	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: tt.Namespace, Name: "client-tls"},
		Data:       map[string][]byte{"tls.crt": []byte("not a certificate")},
	}
	if err := env.Kube.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	// The watch usually brings the change at once, and the controller's own
	// retry later would too: a generous bound, since the test checks the
	// outcome, not how soon it comes.
	waitReady(tt, "mtls", v1.ReasonAuthSecretInvalid, time.Minute, "Secret client-tls has no key \"tls.key\"")

	crt, key := harness.ClientCertPEM(t, time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
	secret.Data = map[string][]byte{"tls.crt": crt, "tls.key": key}
	if err := env.Kube.Update(ctx, secret); err != nil {
		t.Fatal(err)
	}
	waitReady(tt, "mtls", v1.ReasonTemporalClientCreationFailed, 40*time.Second,
		"over TLS with the client certificate in Secret client-tls", "first record does not look like a TLS handshake",
		"The server speaks plaintext at spec.hostPort")
}

// TestConnectionUnreachable: nothing listens at the address, and the
// message says what to check.
func TestConnectionUnreachable(t *testing.T) {
	parallel(t)
	tt := env.NewTest(t)
	addr := harness.FreeAddr()
	newConnection(tt, "nowhere", v1.TemporalConnectionSpec{HostPort: addr})
	conn := waitReady(tt, "nowhere", v1.ReasonTemporalClientCreationFailed, 40*time.Second,
		"Temporal at "+addr+" did not answer a health check over plaintext", "spec.hostPort", "spec.tlsServerName")
	if c := meta.FindStatusCondition(conn.Status.Conditions, v1.ConditionReady); c.Status != metav1.ConditionFalse {
		t.Errorf("Ready = %s, want False", c.Status)
	}
}

// TestConnectionDeletionWaitsForWorkerDeployments: a connection named by a
// TemporalWorkerDeployment stays while it does, and says which one holds
// it; deleting the TemporalWorkerDeployment lets it go.
func TestConnectionDeletionWaitsForWorkerDeployments(t *testing.T) {
	parallel(t)
	tt := env.NewTest(t)
	ctx := context.Background()
	conn := newConnection(tt, "local", v1.TemporalConnectionSpec{HostPort: env.Info.TemporalAddress})
	waitReady(tt, "local", v1.ReasonReachable, time.Minute)
	twd := validTWD(tt.Namespace, "orders")
	twd.Spec.Replicas = ptr.To[int32](0) // no workers: the test is about the connection
	if err := env.Kube.Create(ctx, twd); err != nil {
		t.Fatal(err)
	}

	if err := env.Kube.Delete(ctx, conn); err != nil {
		t.Fatal(err)
	}
	held := waitReady(tt, "local", v1.ReasonDeletionBlocked, 30*time.Second,
		"still use it: orders.", "spec.workerOptions.connectionRef.name")
	if held.DeletionTimestamp.IsZero() {
		t.Fatal("the connection is not being deleted")
	}

	if err := env.Kube.Delete(ctx, twd); err != nil {
		t.Fatal(err)
	}
	gone := func(obj crclient.Object) func() (bool, string) {
		return func() (bool, string) {
			err := env.Kube.Get(ctx, crclient.ObjectKeyFromObject(obj), obj)
			if apierrors.IsNotFound(err) {
				return true, ""
			}
			if err != nil {
				return false, err.Error()
			}
			return false, fmt.Sprintf("still there, finalizers %v", obj.GetFinalizers())
		}
	}
	tt.Eventually(2*time.Minute, "TemporalWorkerDeployment orders gone", gone(twd))
	tt.Eventually(30*time.Second, "TemporalConnection local gone", gone(conn))
}
