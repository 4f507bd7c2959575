package manager

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
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
	scheme := kruntime.NewScheme()
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

// TestTrimmedCacheHoldsLessPerTWD measures what a TWD and its Deployment
// (as the API server serves them in the benchmark, testdata/) hold in
// memory once decoded, with and without trimObject, and logs it for
// docs/performance.md; it asserts only that trimming holds less.
func TestTrimmedCacheHoldsLessPerTWD(t *testing.T) {
	raw := map[string][]byte{}
	for _, name := range []string{"twd", "deployment"} {
		data, err := os.ReadFile(filepath.Join("testdata", name+".json"))
		if err != nil {
			t.Fatal(err)
		}
		raw[name] = data
	}
	const n = 500
	perTWD := func(trim bool) float64 {
		held := make([]any, 0, 2*n)
		before := liveHeap()
		for i := 0; i < n; i++ {
			var twd v1alpha1.TemporalWorkerDeployment
			var d appsv1.Deployment
			if err := json.Unmarshal(raw["twd"], &twd); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(raw["deployment"], &d); err != nil {
				t.Fatal(err)
			}
			if trim {
				_, _ = trimObject(&twd)
				_, _ = trimObject(&d)
			}
			held = append(held, &twd, &d)
		}
		after := liveHeap()
		runtime.KeepAlive(held)
		return float64(after-before) / n
	}
	full, trimmed := perTWD(false), perTWD(true)
	t.Logf("a TWD and its Deployment hold %.1f KiB decoded, %.1f KiB trimmed (%.0f%% less)", full/1024, trimmed/1024, 100*(1-trimmed/full))
	if trimmed >= full {
		t.Fatalf("trimmed objects hold %.0f bytes, untrimmed %.0f", trimmed, full)
	}
}

func liveHeap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
