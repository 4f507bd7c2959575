package faultproxy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// KubeFaultKind is one kind of fault the Kubernetes proxy injects.
type KubeFaultKind string

const (
	// Conflict answers a write with 409 Conflict, as a stale
	// resourceVersion would get, without forwarding it.
	Conflict KubeFaultKind = "conflict"
	// ServerError answers 500 or 503 (half each) without forwarding.
	ServerError KubeFaultKind = "5xx"
	// Timeout holds the request until the client gives up, at most
	// KubeFault.Hang, then answers 504 as the API server does after its
	// request timeout; the request is not forwarded.
	Timeout KubeFaultKind = "timeout"
	// LostResponse forwards a write, then throws the answer away and
	// answers 504: the write happened, but the client cannot know.
	LostResponse KubeFaultKind = "lost-response"
)

// KubeFault is what the Kubernetes proxy does. The zero value forwards
// everything.
type KubeFault struct {
	// Rate is the chance in [0, 1] that an eligible request gets a fault.
	Rate float64
	// Kinds are picked from at random for each faulted request; Conflict
	// and LostResponse only apply to writes (a read gets ServerError).
	Kinds []KubeFaultKind
	// Hang bounds a Timeout (default 15s).
	Hang time.Duration
	// Match selects eligible requests; nil selects DefaultEligible.
	Match func(Request) bool
}

// DefaultEligible: every request but watches (a broken watch is a
// different fault: the informers relist) and leader election Leases
// (losing the lease is the failover tests' business).
func DefaultEligible(r Request) bool {
	return r.Verb != "watch" && r.Resource != "leases"
}

// Request is one request through the Kubernetes proxy.
type Request struct {
	Start     time.Time     `json:"start"`
	Duration  time.Duration `json:"duration"`
	Method    string        `json:"method"`
	Path      string        `json:"path"`
	Verb      string        `json:"verb"` // get, list, watch, create, update, patch, delete, deletecollection
	Group     string        `json:"group,omitempty"`
	Resource  string        `json:"resource"`
	Sub       string        `json:"subresource,omitempty"`
	Namespace string        `json:"namespace,omitempty"`
	Name      string        `json:"name,omitempty"`
	Code      int           `json:"code"`
	// Fault is the kind injected, empty if the request was forwarded as is.
	Fault KubeFaultKind `json:"fault,omitempty"`
}

// Write reports whether the request changes an object.
func (r Request) Write() bool {
	switch r.Verb {
	case "create", "update", "patch", "delete", "deletecollection":
		return true
	}
	return false
}

// Kube is an HTTP proxy in front of the kube-apiserver. It listens in
// plain HTTP on the loopback interface and forwards with the credentials
// of the config it was given; a client's impersonation headers pass
// through, so the controller keeps its own permissions.
type Kube struct {
	srv   *http.Server
	addr  string
	proxy *httputil.ReverseProxy
	mu    sync.Mutex
	fault KubeFault
	rng   *rand.Rand
	reqs  []Request
}

// NewKube forwards to the API server of upstream, drawing faults from a
// generator seeded with seed so that a run can be repeated.
func NewKube(upstream *rest.Config, seed uint64) (*Kube, error) {
	target, err := url.Parse(upstream.Host)
	if err != nil {
		return nil, err
	}
	if target.Scheme == "" {
		target.Scheme = "https"
	}
	cfg := rest.CopyConfig(upstream)
	// Each request carries its own impersonation headers, if any.
	cfg.Impersonate = rest.ImpersonationConfig{}
	transport, err := rest.TransportFor(cfg)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	k := &Kube{addr: ln.Addr().String(), rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
	k.proxy = &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			r.Out.Host = target.Host
		},
		Transport:     transport,
		FlushInterval: -1, // watches stream
		ErrorLog:      nil,
	}
	k.srv = &http.Server{Handler: k, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = k.srv.Serve(ln) }()
	return k, nil
}

// URL is the proxy's address as an API server host.
func (k *Kube) URL() string { return "http://" + k.addr }

// Config is a client config for the proxy: no credentials of its own (the
// proxy adds them), impersonation and rate limits kept from base.
func (k *Kube) Config(base *rest.Config) *rest.Config {
	return &rest.Config{
		Host:        k.URL(),
		Impersonate: base.Impersonate,
		QPS:         base.QPS,
		Burst:       base.Burst,
		Timeout:     base.Timeout,
		UserAgent:   base.UserAgent,
	}
}

// WriteKubeconfig writes a kubeconfig for the proxy to path, impersonating
// user if it is not empty, for a controller run as a separate process.
func (k *Kube) WriteKubeconfig(path, user string) error {
	c := clientcmdapi.NewConfig()
	c.Clusters["proxy"] = &clientcmdapi.Cluster{Server: k.URL()}
	c.AuthInfos["proxy"] = &clientcmdapi.AuthInfo{Impersonate: user}
	c.Contexts["proxy"] = &clientcmdapi.Context{Cluster: "proxy", AuthInfo: "proxy"}
	c.CurrentContext = "proxy"
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return clientcmd.WriteToFile(*c, path)
}

// Set switches the fault for requests that start from now on.
func (k *Kube) Set(f KubeFault) {
	k.mu.Lock()
	k.fault = f
	k.mu.Unlock()
}

// Pass forwards everything again.
func (k *Kube) Pass() { k.Set(KubeFault{}) }

// Requests returns a copy of the requests recorded so far, in the order
// they ended.
func (k *Kube) Requests() []Request {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]Request(nil), k.reqs...)
}

// Close stops the proxy; open requests (watches) are cut.
func (k *Kube) Close() { _ = k.srv.Close() }

func (k *Kube) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	req := parseRequest(r)
	req.Start = time.Now()
	if req.Verb == "create" && req.Name == "" {
		req.Name = createdName(r)
	}
	kind, hang := k.pick(req)
	req.Fault = kind
	rec := &statusRecorder{ResponseWriter: w}
	switch kind {
	case Conflict:
		writeStatus(rec, http.StatusConflict, "Conflict", fmt.Sprintf(
			"Operation cannot be fulfilled on %s %q: the object has been modified; please apply your changes to the latest version and try again (injected by faultproxy)", req.Resource, req.Name))
	case ServerError:
		if k.coin() {
			writeStatus(rec, http.StatusInternalServerError, "InternalError", "Internal error occurred: injected by faultproxy")
		} else {
			writeStatus(rec, http.StatusServiceUnavailable, "ServiceUnavailable", "the server is currently unable to handle the request (injected by faultproxy)")
		}
	case Timeout:
		select {
		case <-time.After(hang):
		case <-r.Context().Done():
		}
		writeStatus(rec, http.StatusGatewayTimeout, "Timeout", "the request timed out (injected by faultproxy)")
	case LostResponse:
		lost := &discard{header: http.Header{}}
		k.proxy.ServeHTTP(lost, r)
		writeStatus(rec, http.StatusGatewayTimeout, "Timeout", "the request timed out (injected by faultproxy after the server got it)")
	default:
		k.proxy.ServeHTTP(rec, r)
	}
	req.Code = rec.code
	req.Duration = time.Since(req.Start)
	k.mu.Lock()
	k.reqs = append(k.reqs, req)
	k.mu.Unlock()
}

// pick decides the fault for one request.
func (k *Kube) pick(req Request) (KubeFaultKind, time.Duration) {
	k.mu.Lock()
	defer k.mu.Unlock()
	f := k.fault
	match := f.Match
	if match == nil {
		match = DefaultEligible
	}
	if f.Rate <= 0 || len(f.Kinds) == 0 || !match(req) || k.rng.Float64() >= f.Rate {
		return "", 0
	}
	kind := f.Kinds[k.rng.IntN(len(f.Kinds))]
	if (kind == Conflict || kind == LostResponse) && !req.Write() {
		kind = ServerError
	}
	hang := f.Hang
	if hang <= 0 {
		hang = 15 * time.Second
	}
	return kind, hang
}

func (k *Kube) coin() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.rng.IntN(2) == 0
}

// parseRequest reads the verb and the object from an API path:
// /api/v1/namespaces/NS/RESOURCE/NAME/SUB or /apis/GROUP/VERSION/...
func parseRequest(r *http.Request) Request {
	req := Request{Method: r.Method, Path: r.URL.Path}
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		req.Group = parts[1]
		parts = parts[3:]
	default:
		parts = nil
	}
	if len(parts) >= 2 && parts[0] == "namespaces" && len(parts) != 2 {
		req.Namespace = parts[1]
		parts = parts[2:]
	}
	if len(parts) > 0 {
		req.Resource = parts[0]
	}
	if len(parts) > 1 {
		req.Name = parts[1]
	}
	if len(parts) > 2 {
		req.Sub = strings.Join(parts[2:], "/")
	}
	switch r.Method {
	case http.MethodGet:
		switch {
		case r.URL.Query().Get("watch") == "true" || r.URL.Query().Get("watch") == "1":
			req.Verb = "watch"
		case req.Name == "":
			req.Verb = "list"
		default:
			req.Verb = "get"
		}
	case http.MethodPost:
		req.Verb = "create"
	case http.MethodPut:
		req.Verb = "update"
	case http.MethodPatch:
		req.Verb = "patch"
	case http.MethodDelete:
		req.Verb = "delete"
		if req.Name == "" {
			req.Verb = "deletecollection"
		}
	default:
		req.Verb = strings.ToLower(r.Method)
	}
	return req
}

// createdName reads the name from a create's body, JSON or protobuf (and
// puts the body back), so that records name the object a create made.
func createdName(r *http.Request) string {
	if r.Body == nil {
		return ""
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 4<<20))
	r.Body.Close()
	r.Body = io.NopCloser(bytes.NewReader(body))
	if err != nil {
		return ""
	}
	if obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(body, nil, nil); err == nil {
		if m, err := meta.Accessor(obj); err == nil {
			return m.GetName()
		}
	}
	// Custom resources: JSON the built-in scheme does not know.
	var obj struct {
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
	}
	_ = json.Unmarshal(body, &obj)
	return obj.Metadata.Name
}

// writeStatus answers with a metav1.Status, as the API server does, so
// clients sort the error as they would a real one.
func writeStatus(w http.ResponseWriter, code int, reason, message string) {
	body, _ := json.Marshal(map[string]any{
		"kind": "Status", "apiVersion": "v1", "metadata": map[string]any{},
		"status": "Failure", "message": message, "reason": reason, "code": code,
	})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(body)
}

type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (s *statusRecorder) WriteHeader(code int) {
	if s.code == 0 {
		s.code = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.code == 0 {
		s.code = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

// Flush keeps watches streaming through the recorder.
func (s *statusRecorder) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection (upgrades).
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// discard is a response nobody reads.
type discard struct{ header http.Header }

func (d *discard) Header() http.Header         { return d.header }
func (d *discard) Write(b []byte) (int, error) { return len(b), nil }
func (d *discard) WriteHeader(int)             {}
