package nodeagent

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The kubelet API, as far as the API server uses it for `kubectl logs`:
// GET /containerLogs/<namespace>/<pod>/<container>. The API server finds it
// at the node's InternalIP and status.daemonEndpoints.kubeletEndpoint.port
// and checks its certificate against --kubelet-certificate-authority. Like
// kubelet, the agent accepts client certificates of the cluster CA only and
// asks the API server (SubjectAccessReview) whether their user may use
// nodes/proxy. exec, attach and port-forward are not served.

// listenKubelet opens the kubelet API's TLS listener on 127.0.0.1.
func (a *Agent) listenKubelet() (net.Listener, error) {
	cert, err := tls.LoadX509KeyPair(a.cfg.KubeletCertFile, a.cfg.KubeletKeyFile)
	if err != nil {
		return nil, fmt.Errorf("nodeagent: kubelet serving certificate: %w", err)
	}
	caPEM, err := os.ReadFile(a.cfg.ClientCAFile)
	if err != nil {
		return nil, fmt.Errorf("nodeagent: client CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("nodeagent: no certificate in %s", a.cfg.ClientCAFile)
	}
	ln, err := tls.Listen("tcp", net.JoinHostPort(localIP, strconv.Itoa(a.cfg.KubeletPort)), &tls.Config{
		Certificates: []tls.Certificate{cert},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    pool,
		MinVersion:   tls.VersionTLS12,
	})
	if err != nil {
		return nil, fmt.Errorf("nodeagent: kubelet API: %w", err)
	}
	return ln, nil
}

// serveKubelet serves the kubelet API on ln until ctx is done.
func (a *Agent) serveKubelet(ctx context.Context, ln net.Listener) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /containerLogs/{namespace}/{pod}/{container}", a.containerLogs)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	a.serve(ctx, ln, a.authorize(mux), "kubelet API")
}

// serve serves h on ln until ctx is done, then gives requests a second.
func (a *Agent) serve(ctx context.Context, ln net.Listener, h http.Handler, what string) {
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return ctx },
		// Handshakes refused (no client certificate, say) are the clients' business.
		ErrorLog: log.New(io.Discard, "", 0),
	}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		_ = srv.Close()
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		a.log.Error(err, what+" stopped")
	}
}

// authorize lets a request through if the user of its client certificate
// may use nodes/proxy of this node (kubelet's mapping for containerLogs).
func (a *Agent) authorize(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 {
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		subject := r.TLS.VerifiedChains[0][0].Subject
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User:   subject.CommonName,
			Groups: subject.Organization,
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Verb: "get", Resource: "nodes", Subresource: "proxy", Name: a.cfg.NodeName,
			},
		}}
		res, err := a.client.AuthorizationV1().SubjectAccessReviews().Create(r.Context(), sar, metav1.CreateOptions{})
		if err != nil {
			http.Error(w, "authorization failed: "+err.Error(), http.StatusInternalServerError)
			return
		}
		if !res.Status.Allowed {
			http.Error(w, fmt.Sprintf("Forbidden (user=%s, verb=get, resource=nodes, subresource=proxy)", subject.CommonName), http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// containerLogs serves one container's log: the current run, or the
// previous one with previous=true; follow, tailLines and limitBytes work
// as with kubelet. timestamps, sinceSeconds and sinceTime are refused: the
// agent keeps plain output, without the time of each line.
func (a *Agent) containerLogs(w http.ResponseWriter, r *http.Request) {
	ns, podName, name := r.PathValue("namespace"), r.PathValue("pod"), r.PathValue("container")
	q := r.URL.Query()
	for _, unsupported := range []string{"timestamps", "sinceSeconds", "sinceTime"} {
		if v := q.Get(unsupported); v != "" && v != "false" {
			http.Error(w, unsupported+" is not supported by the rainbow node agent: its logs carry no time per line", http.StatusBadRequest)
			return
		}
	}
	opts := logOptions{follow: q.Get("follow") == "true", tailLines: -1, limitBytes: -1}
	for param, dst := range map[string]*int64{"tailLines": &opts.tailLines, "limitBytes": &opts.limitBytes} {
		if v := q.Get(param); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 {
				http.Error(w, fmt.Sprintf("invalid %s %q", param, v), http.StatusBadRequest)
				return
			}
			*dst = n
		}
	}
	previous := q.Get("previous") == "true"

	a.mu.Lock()
	st := a.pods[ns+"/"+podName]
	a.mu.Unlock()
	if st == nil {
		http.Error(w, fmt.Sprintf("pod %s/%s is not running on node %s", ns, podName, a.cfg.NodeName), http.StatusNotFound)
		return
	}
	var logs *containerLog
	names := make([]string, 0, len(st.init)+len(st.main))
	for _, c := range st.all() {
		names = append(names, c.name)
		if c.name == name {
			logs = c.logs
		}
	}
	if logs == nil {
		http.Error(w, fmt.Sprintf("container %s is not valid for pod %s (containers: %s)", name, podName, strings.Join(names, ", ")), http.StatusNotFound)
		return
	}
	run := logs.run(previous)
	if run == nil {
		msg := fmt.Sprintf("container %q in pod %q is waiting to start", name, podName)
		if previous {
			msg = fmt.Sprintf("previous terminated container %q in pod %q not found", name, podName)
		}
		http.Error(w, msg, http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "text/plain")
	w.WriteHeader(http.StatusOK)
	if err := run.serve(r.Context(), w, opts); err != nil {
		a.log.V(1).Info("serving logs failed", "pod", ns+"/"+podName, "container", name, "error", err.Error())
	}
}
