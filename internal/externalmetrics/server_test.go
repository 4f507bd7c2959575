package externalmetrics

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	external "k8s.io/metrics/pkg/apis/external_metrics/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/rainbow-deploy/rainbow/internal/backlog"
)

type fakeSource struct {
	samples  []backlog.Sample
	versions int
	got      string
}

func (f *fakeSource) Values(_ context.Context, ns string, sel labels.Selector) ([]backlog.Sample, int, error) {
	f.got = ns + " " + sel.String()
	var out []backlog.Sample
	for _, s := range f.samples {
		if sel.Matches(labels.Set(s.Labels)) {
			out = append(out, s)
		}
	}
	return out, f.versions, nil
}

func get(t *testing.T, h http.Handler, path string, query url.Values) (int, []byte) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path+"?"+query.Encode(), nil))
	return rec.Code, rec.Body.Bytes()
}

func TestMetrics(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	src := &fakeSource{versions: 1, samples: []backlog.Sample{
		{Labels: map[string]string{backlog.SampleLabelBuildID: "v1", backlog.SampleLabelTaskQueueType: "Workflow"}, Count: 2, Age: 1500 * time.Millisecond, At: t0},
		{Labels: map[string]string{backlog.SampleLabelBuildID: "v1", backlog.SampleLabelTaskQueueType: "Activity"}, Count: 5, Age: 700 * time.Millisecond, At: t0.Add(-time.Second)},
	}}
	s := NewServer(src, nil)
	value := func(metric, selector string) external.ExternalMetricValueList {
		t.Helper()
		code, body := get(t, s, PathSubtree+"namespaces/shop/"+metric, url.Values{"labelSelector": {selector}})
		var l external.ExternalMetricValueList
		if code != http.StatusOK || json.Unmarshal(body, &l) != nil {
			t.Fatalf("%s %s: %d %s", metric, selector, code, body)
		}
		return l
	}
	l := value(MetricBacklogCount, "temporal.io/build-id=v1")
	if len(l.Items) != 1 || l.Items[0].Value.Value() != 7 || l.Items[0].MetricLabels["temporal.io/build-id"] != "v1" ||
		!l.Items[0].Timestamp.Time.Equal(t0.Add(-time.Second)) || src.got != "shop temporal.io/build-id=v1" {
		t.Errorf("count = %+v (asked %q), want one value 7 labelled with the build ID, timed by the oldest read", l, src.got)
	}
	if l := value(MetricBacklogCount, "temporal.io/build-id=v1,temporal.io/task-queue-type=Activity"); l.Items[0].Value.Value() != 5 {
		t.Errorf("activity count = %+v, want 5", l.Items)
	}
	if l := value(MetricBacklogAge, "temporal.io/build-id=v1"); l.Items[0].Value.MilliValue() != 1500 {
		t.Errorf("age = %+v, want the oldest, 1.5s", l.Items)
	}
	src.versions = 0
	if l := value(MetricBacklogCount, "temporal.io/build-id=v9"); len(l.Items) != 0 {
		t.Errorf("no version matched: %+v, want no items (the HPA reports it)", l.Items)
	}
	if code, _ := get(t, s, PathSubtree+"namespaces/shop/nope", nil); code != http.StatusNotFound {
		t.Errorf("unknown metric: %d, want 404", code)
	}
	if code, _ := get(t, s, PathSubtree+"namespaces/shop/"+MetricBacklogCount, url.Values{"labelSelector": {"a in (("}}); code != http.StatusBadRequest {
		t.Errorf("bad selector: %d, want 400", code)
	}
	var rl metav1.APIResourceList
	if code, body := get(t, s, PathVersion, nil); code != http.StatusOK || json.Unmarshal(body, &rl) != nil ||
		rl.GroupVersion != "external.metrics.k8s.io/v1beta1" || len(rl.APIResources) != 2 {
		t.Errorf("discovery: %d %+v", code, rl)
	}
	var gl metav1.APIGroupList
	if code, body := get(t, s, PathAPIs, nil); code != http.StatusOK || json.Unmarshal(body, &gl) != nil || gl.Groups[0].Name != Group {
		t.Errorf("group list: %d %+v", code, gl)
	}
}

// TestFrontProxyAuth: only the front proxy's certificate, with an allowed
// name, gets through; the user it names must be allowed to list the metric.
func TestFrontProxyAuth(t *testing.T) {
	caPEM, frontProxy := certs(t, "front-proxy-client")
	_, stranger := certs(t, "front-proxy-client")
	_, otherName := certsFrom(t, caPEM, "someone-else")
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: AuthConfigMap.Namespace, Name: AuthConfigMap.Name}, Data: map[string]string{
		"requestheader-client-ca-file":       string(caPEM.cert),
		"requestheader-allowed-names":        `["front-proxy-client"]`,
		"requestheader-username-headers":     `["X-Remote-User"]`,
		"requestheader-group-headers":        `["X-Remote-Group"]`,
		"requestheader-extra-headers-prefix": `["X-Remote-Extra-"]`,
	}}
	var reviewed *authorizationv1.SubjectAccessReview
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(cm).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(_ context.Context, _ client.WithWatch, o client.Object, _ ...client.CreateOption) error {
			reviewed = o.(*authorizationv1.SubjectAccessReview)
			reviewed.Status.Allowed = reviewed.Spec.User == "system:serviceaccount:kube-system:horizontal-pod-autoscaler"
			return nil
		},
	}).Build()
	s := NewServer(&fakeSource{versions: 1}, &FrontProxyAuth{Reader: c, Reviews: c})
	call := func(cert *x509.Certificate, user string) int {
		req := httptest.NewRequest(http.MethodGet, PathSubtree+"namespaces/shop/"+MetricBacklogCount, nil)
		if cert != nil {
			req.TLS = &tls.ConnectionState{PeerCertificates: []*x509.Certificate{cert}}
		}
		req.Header.Set("X-Remote-User", user)
		req.Header.Add("X-Remote-Group", "system:serviceaccounts")
		req.Header.Add("X-Remote-Group", "system:authenticated")
		req.Header.Set("X-Remote-Extra-Authentication.kubernetes.io%2fpod-name", "hpa-0")
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		return rec.Code
	}
	hpa := "system:serviceaccount:kube-system:horizontal-pod-autoscaler"
	if code := call(frontProxy, hpa); code != http.StatusOK {
		t.Errorf("the front proxy for the HPA controller: %d, want 200", code)
	}
	if reviewed == nil || reviewed.Spec.User != hpa || len(reviewed.Spec.Groups) != 2 || reviewed.Spec.ResourceAttributes.Verb != "list" ||
		reviewed.Spec.ResourceAttributes.Resource != MetricBacklogCount || reviewed.Spec.ResourceAttributes.Namespace != "shop" ||
		strings.Join(reviewed.Spec.Extra["authentication.kubernetes.io/pod-name"], ",") != "hpa-0" {
		t.Errorf("SubjectAccessReview = %+v", reviewed)
	}
	for name, code := range map[string]int{
		"a user the review refuses": call(frontProxy, "alice"),
		"no client certificate":     call(nil, hpa),
		"another CA's certificate":  call(stranger, hpa),
		"a name not allowed":        call(otherName, hpa),
		"no user named":             call(frontProxy, ""),
	} {
		if code == http.StatusOK {
			t.Errorf("%s: got through", name)
		}
	}
}

type ca struct {
	cert []byte
	key  *ecdsa.PrivateKey
	x509 *x509.Certificate
}

// certs makes a CA and a client certificate with common name cn.
func certs(t *testing.T, cn string) (ca, *x509.Certificate) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "front-proxy-ca"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	parsed, _ := x509.ParseCertificate(der)
	c := ca{cert: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), key: key, x509: parsed}
	return certsFrom(t, c, cn)
}

func certsFrom(t *testing.T, c ca, cn string) (ca, *x509.Certificate) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: cn}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, KeyUsage: x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.x509, key.Public(), c.key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, _ := x509.ParseCertificate(der)
	return c, leaf
}
