package manager

import (
	"context"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

func TestTrimObjectDropsWhatIsNeverRead(t *testing.T) {
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{
		Name:          "w",
		Annotations:   map[string]string{lastApplied: "{...}", "keep": "yes"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}},
	}}
	if _, err := trimObject(d); err != nil {
		t.Fatal(err)
	}
	if d.ManagedFields != nil || d.Annotations[lastApplied] != "" || d.Annotations["keep"] != "yes" {
		t.Fatalf("trimmed to %+v", d.ObjectMeta)
	}
}

// countingReader counts Gets and answers them from a fake client.
type countingReader struct {
	client.Reader
	gets int
}

func (c *countingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	c.gets++
	return c.Reader.Get(ctx, key, obj, opts...)
}

func TestSecretsAreReadOncePerResourceVersion(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	key := types.NamespacedName{Namespace: "ns", Name: "tls"}
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}, Data: map[string][]byte{"k": []byte("v1")}}
	// One fake stands for both the API server and the metadata cache.
	server := fake.NewClientBuilder().WithScheme(scheme).WithObjects(s).Build()
	api := &countingReader{Reader: server}
	c := &onDemandClient{Client: server, api: api, meta: server, secrets: map[types.NamespacedName]*corev1.Secret{}}
	ctx := context.Background()
	read := func() string {
		t.Helper()
		var got corev1.Secret
		if err := c.Get(ctx, key, &got); err != nil {
			t.Fatal(err)
		}
		return string(got.Data["k"])
	}
	if read() != "v1" || read() != "v1" || api.gets != 1 {
		t.Fatalf("want one read from the API server for an unchanged Secret, got %d", api.gets)
	}
	s.Data["k"] = []byte("v2")
	if err := server.Update(ctx, s); err != nil {
		t.Fatal(err)
	}
	if got := read(); got != "v2" || api.gets != 2 {
		t.Fatalf("after an update: %q with %d reads", got, api.gets)
	}
	if err := server.Delete(ctx, s); err != nil {
		t.Fatal(err)
	}
	var gone corev1.Secret
	if err := c.Get(ctx, key, &gone); !apierrors.IsNotFound(err) {
		t.Fatalf("a deleted Secret: %v", err)
	}
	if len(c.secrets) != 0 {
		t.Fatal("a deleted Secret is still held")
	}
}
