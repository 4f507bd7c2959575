package connection

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/internal/temporal"
)

// TestResolveRefusesAServerTooOld: a TemporalWorkerDeployment gets a
// Problem, and so acts on nothing, when the connection controller found
// the server older than the controller supports; an unknown or supported
// version is no problem. ResolveObject, which the connection controller
// probes with, does not look at the recorded version.
func TestResolveRefusesAServerTooOld(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	for version, tooOld := range map[string]bool{"": false, "1.28.3": true, "1.29.0": false, "1.32.1": false, "custom": false} {
		conn := &v1alpha1.TemporalConnection{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "prod"},
			Spec:       v1alpha1.TemporalConnectionSpec{HostPort: "temporal:7233"},
			Status:     v1alpha1.TemporalConnectionStatus{ServerVersion: version},
		}
		c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(conn).Build()
		resolved, prob, err := Resolve(context.Background(), c, "ns", "prod", "default", temporal.AllowedHosts{}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if !tooOld {
			if prob != nil || resolved == nil {
				t.Errorf("version %q: problem %+v, want the connection", version, prob)
			}
			continue
		}
		if resolved != nil || prob == nil || prob.Reason != v1alpha1.ReasonUnsupportedServerVersion ||
			!strings.HasPrefix(prob.Message, "TemporalConnection prod: Temporal at temporal:7233 runs server version "+version) {
			t.Errorf("version %q: resolved %v, problem %+v; want UnsupportedServerVersion naming the connection and version", version, resolved, prob)
		}
		if r, prob, _ := ResolveObject(context.Background(), c, conn, "", temporal.AllowedHosts{}, time.Now()); r == nil || prob != nil {
			t.Errorf("version %q: ResolveObject refused: %+v", version, prob)
		}
	}
}

// TestResolveRefusesAnAddressNotAllowed: a connection outside the allowed
// hosts is a Problem naming the field and the list, found before any of
// its Secrets is read; an allowed one resolves.
func TestResolveRefusesAnAddressNotAllowed(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	allowed, err := temporal.ParseAllowedHosts("*.tmprl.cloud:7233")
	if err != nil {
		t.Fatal(err)
	}
	conn := &v1alpha1.TemporalConnection{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "prod"},
		Spec: v1alpha1.TemporalConnectionSpec{HostPort: "attacker.test:7233",
			APIKeySecretRef: &v1alpha1.SecretKeyReference{Name: "key", Key: "apiKey"}},
	}
	key := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "key"}, Data: map[string][]byte{"apiKey": []byte("k")}}
	secretReads := 0
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(conn, key).WithInterceptorFuncs(interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, k client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, ok := obj.(*corev1.Secret); ok {
				secretReads++
			}
			return c.Get(ctx, k, obj, opts...)
		},
	}).Build()
	resolved, prob, err := Resolve(context.Background(), c, "ns", "prod", "default", allowed, time.Now())
	if err != nil || resolved != nil || prob == nil || prob.Reason != v1alpha1.ReasonAddressNotAllowed {
		t.Fatalf("resolved %v, problem %+v, err %v; want AddressNotAllowed", resolved, prob, err)
	}
	for _, want := range []string{"TemporalConnection prod: spec.hostPort:", "attacker.test:7233 is not one of", "--allowed-temporal-hosts=*.tmprl.cloud:7233", "change spec.hostPort"} {
		if !strings.Contains(prob.Message, want) {
			t.Errorf("message %q lacks %q", prob.Message, want)
		}
	}
	if secretReads != 0 {
		t.Errorf("%d Secret reads for a connection not allowed", secretReads)
	}
	conn.Spec.HostPort = "ns.acct.tmprl.cloud:7233"
	if resolved, prob, err := ResolveObject(context.Background(), c, conn, "default", allowed, time.Now()); resolved == nil || prob != nil || err != nil {
		t.Errorf("an allowed address: resolved %v, problem %+v, err %v", resolved, prob, err)
	}
}
