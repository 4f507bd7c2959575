package faultproxy

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// apiserver stands in for the kube-apiserver: it serves one ConfigMap,
// counts the writes it got, and streams a watch event.
func apiserver(t *testing.T) (*rest.Config, *atomic.Int32) {
	t.Helper()
	var writes atomic.Int32
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if got := r.Header.Get("Impersonate-User"); got != "controller" {
			http.Error(w, "impersonation lost: "+got, http.StatusForbidden)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		cm := `{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"c","namespace":"ns","resourceVersion":"1"}}`
		switch {
		case r.URL.Query().Get("watch") == "true":
			w.WriteHeader(http.StatusOK)
			fmt.Fprintf(w, `{"type":"ADDED","object":%s}`+"\n", cm)
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		case r.Method != http.MethodGet:
			writes.Add(1)
			fmt.Fprint(w, cm)
		default:
			fmt.Fprint(w, cm)
		}
	}))
	t.Cleanup(srv.Close)
	return &rest.Config{Host: srv.URL, TLSClientConfig: rest.TLSClientConfig{Insecure: true}}, &writes
}

func kubeProxied(t *testing.T, seed uint64) (*Kube, kubernetes.Interface, *atomic.Int32) {
	t.Helper()
	up, writes := apiserver(t)
	k, err := NewKube(up, seed)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.Close)
	cfg := k.Config(&rest.Config{Impersonate: rest.ImpersonationConfig{UserName: "controller"}, QPS: 1000, Burst: 1000})
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return k, cs, writes
}

func update(cs kubernetes.Interface) error {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns"}}
	_, err := cs.CoreV1().ConfigMaps("ns").Update(context.Background(), cm, metav1.UpdateOptions{})
	return err
}

func TestKubeProxyForwardsAndRecords(t *testing.T) {
	k, cs, writes := kubeProxied(t, 1)
	if _, err := cs.CoreV1().ConfigMaps("ns").Get(context.Background(), "c", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := update(cs); err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns"}}
	if _, err := cs.CoreV1().ConfigMaps("ns").Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if writes.Load() != 2 {
		t.Fatalf("the server got %d writes, want 2", writes.Load())
	}
	reqs := k.Requests()
	want := []Request{
		{Verb: "get", Resource: "configmaps", Namespace: "ns", Name: "c", Code: 200},
		{Verb: "update", Resource: "configmaps", Namespace: "ns", Name: "c", Code: 200},
		{Verb: "create", Resource: "configmaps", Namespace: "ns", Name: "c", Code: 200},
	}
	if len(reqs) != len(want) {
		t.Fatalf("recorded %+v", reqs)
	}
	for i, w := range want {
		r := reqs[i]
		if r.Verb != w.Verb || r.Resource != w.Resource || r.Namespace != w.Namespace || r.Name != w.Name || r.Code != w.Code || r.Fault != "" {
			t.Errorf("request %d = %+v, want %+v", i, r, w)
		}
	}
}

func TestKubeProxyWatchStreams(t *testing.T) {
	_, cs, _ := kubeProxied(t, 1)
	// Faults everywhere: watches are not eligible by default.
	w, err := cs.CoreV1().ConfigMaps("ns").Watch(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	select {
	case ev := <-w.ResultChan():
		if cm, ok := ev.Object.(*corev1.ConfigMap); !ok || cm.Name != "c" {
			t.Fatalf("watch event %+v", ev)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the watch event was not streamed through the proxy")
	}
}

func TestKubeProxyFaultKinds(t *testing.T) {
	for _, tc := range []struct {
		kind       KubeFaultKind
		check      func(error) bool
		forwarded  int32
		recordCode int
	}{
		{Conflict, apierrors.IsConflict, 0, 409},
		{Timeout, apierrors.IsTimeout, 0, 504},
		{LostResponse, apierrors.IsTimeout, 1, 504},
		{ServerError, func(err error) bool { return apierrors.IsInternalError(err) || apierrors.IsServiceUnavailable(err) }, 0, 0},
	} {
		t.Run(string(tc.kind), func(t *testing.T) {
			k, cs, writes := kubeProxied(t, 1)
			k.Set(KubeFault{Rate: 1, Kinds: []KubeFaultKind{tc.kind}, Hang: 100 * time.Millisecond})
			err := update(cs)
			if !tc.check(err) {
				t.Fatalf("err = %v, not a %s", err, tc.kind)
			}
			if writes.Load() != tc.forwarded {
				t.Fatalf("the server got %d writes, want %d", writes.Load(), tc.forwarded)
			}
			reqs := k.Requests()
			if len(reqs) != 1 || reqs[0].Fault != tc.kind || (tc.recordCode != 0 && reqs[0].Code != tc.recordCode) {
				t.Fatalf("recorded %+v", reqs)
			}
		})
	}
}

func TestKubeProxyConflictOnlyOnWrites(t *testing.T) {
	k, cs, _ := kubeProxied(t, 1)
	k.Set(KubeFault{Rate: 1, Kinds: []KubeFaultKind{Conflict}})
	_, err := cs.CoreV1().ConfigMaps("ns").Get(context.Background(), "c", metav1.GetOptions{})
	if apierrors.IsConflict(err) || err == nil {
		t.Fatalf("a read got %v, want a 5xx instead of a conflict", err)
	}
}

// The same seed injects the same faults into the same requests.
func TestKubeProxySeeded(t *testing.T) {
	pattern := func(seed uint64) string {
		k, cs, _ := kubeProxied(t, seed)
		k.Set(KubeFault{Rate: 0.5, Kinds: []KubeFaultKind{Conflict, ServerError}})
		var b strings.Builder
		for i := 0; i < 40; i++ {
			_ = update(cs)
		}
		for _, r := range k.Requests() {
			fmt.Fprintf(&b, "%s,", r.Fault)
		}
		return b.String()
	}
	a, b, c := pattern(7), pattern(7), pattern(8)
	if a != b {
		t.Fatalf("seed 7 gave two patterns:\n%s\n%s", a, b)
	}
	if a == c {
		t.Fatalf("seeds 7 and 8 gave the same pattern %s", a)
	}
	if n := strings.Count(a, "conflict") + strings.Count(a, "5xx"); n < 5 || n > 35 {
		t.Fatalf("%d of 40 requests faulted at rate 0.5: %s", n, a)
	}
}

func TestKubeProxyKubeconfig(t *testing.T) {
	k, _, _ := kubeProxied(t, 1)
	path := t.TempDir() + "/kubeconfig"
	if err := k.WriteKubeconfig(path, "controller"); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if f := string(data); !strings.Contains(f, k.URL()) || !strings.Contains(f, "as: controller") {
		t.Fatalf("kubeconfig:\n%s", f)
	}
}
