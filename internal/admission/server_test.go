package admission

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// TestServerWaitsForTheCertificate: with rotation the server is not ready
// and does not start serving until the rotator says the certificate is in
// place; it stops waiting when the manager stops.
func TestServerWaitsForTheCertificate(t *testing.T) {
	s := NewServer(Options{Port: 1, CertDir: t.TempDir(), Rotation: &Rotation{Secret: types.NamespacedName{Namespace: "ns", Name: "cert"}}})
	if err := s.ReadyChecker()(nil); err == nil || !strings.Contains(err.Error(), "Secret ns/cert") {
		t.Errorf("ready check before the certificate: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Start(ctx) }()
	select {
	case err := <-done:
		t.Fatalf("Start returned before the certificate: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Start after the manager stopped: %v", err)
	}
	if s.NeedLeaderElection() {
		t.Error("every replica must serve the webhook")
	}
}

// TestCertWriter copies the Secret's key and certificate into the
// directory, and again when they change.
func TestCertWriter(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cert"},
		Data: map[string][]byte{corev1.TLSCertKey: []byte("crt1"), corev1.TLSPrivateKeyKey: []byte("key1")}}
	c := fake.NewClientBuilder().WithObjects(secret).Build()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = (&certWriter{reader: c, secret: client.ObjectKeyFromObject(secret), dir: dir}).Start(ctx) }()
	waitFile := func(name, want string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			got, _ := os.ReadFile(filepath.Join(dir, name))
			if string(got) == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s holds %q, want %q", name, got, want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitFile("tls.crt", "crt1")
	waitFile("tls.key", "key1")
	secret.Data[corev1.TLSCertKey] = []byte("crt2")
	if err := c.Update(ctx, secret); err != nil {
		t.Fatal(err)
	}
	waitFile("tls.crt", "crt2")
}

// TestSelfIdentity asks the API server once who the manager is.
func TestSelfIdentity(t *testing.T) {
	calls := 0
	c := fake.NewClientBuilder().WithInterceptorFuncs(interceptor.Funcs{
		Create: func(_ context.Context, _ client.WithWatch, obj client.Object, _ ...client.CreateOption) error {
			calls++
			if calls == 1 {
				return errors.New("unavailable")
			}
			obj.(*authenticationv1.SelfSubjectReview).Status.UserInfo = authenticationv1.UserInfo{Username: "me", Groups: []string{"g"}}
			return nil
		},
	}).Build()
	id := SelfIdentity(c)
	if _, err := id(context.Background()); err == nil {
		t.Fatal("no error when the review fails")
	}
	for range 2 {
		got, err := id(context.Background())
		if err != nil || got.Username != "me" || len(got.Groups) != 1 {
			t.Errorf("identity %+v, %v", got, err)
		}
	}
	if calls != 2 {
		t.Errorf("%d reviews, want 2: one failed, then one remembered", calls)
	}
}
