package nodeagent

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Probes run as kubelet runs them: httpGet, tcpSocket and grpc against the
// pod's IP (or httpGet.host), exec in containers run under runc, after initialDelaySeconds, every
// periodSeconds with timeoutSeconds, and the success and failure
// thresholds. A container with a startup probe is not started (and its
// other probes wait) until that succeeds; one with a readiness probe is not
// ready before its first success; a liveness or startup probe that fails
// failureThreshold times in a row kills the container (SIGTERM, SIGKILL
// after the grace period), which then restarts per restartPolicy. Failures
// are Warning events "Unhealthy", like kubelet's. exec probes of containers run as
// processes cannot run without the container's image: they count as
// succeeding, with one Warning event saying so.

// probeResults is what the probes of one container run found so far.
type probeResults struct {
	mu           sync.Mutex
	started      bool // the startup probe succeeded, or there is none
	hasReadiness bool
	ready        bool
}

func (r *probeResults) get() (started, ready bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.started, r.ready || (!r.hasReadiness && r.started)
}

type probeKind string

const (
	startupProbe   probeKind = "Startup"
	readinessProbe probeKind = "Readiness"
	livenessProbe  probeKind = "Liveness"
)

// startProbes starts a goroutine per probe of the container's run p; they
// end with the run.
func (a *Agent) startProbes(pod *corev1.Pod, st *podState, spec *corev1.Container, p *process) {
	if spec.StartupProbe == nil && spec.ReadinessProbe == nil && spec.LivenessProbe == nil {
		return
	}
	res := &probeResults{started: spec.StartupProbe == nil, hasReadiness: spec.ReadinessProbe != nil}
	p.probes = res
	run := &probeRun{a: a, key: st.key, pod: pod.DeepCopy(), podIP: st.podIP, spec: spec.DeepCopy(), p: p, res: res}
	for kind, probe := range map[probeKind]*corev1.Probe{startupProbe: spec.StartupProbe, readinessProbe: spec.ReadinessProbe, livenessProbe: spec.LivenessProbe} {
		if probe != nil {
			a.procWG.Go(func() { run.loop(kind, probe) })
		}
	}
}

type probeRun struct {
	a     *Agent
	key   string
	pod   *corev1.Pod
	podIP string
	spec  *corev1.Container
	p     *process
	res   *probeResults
}

func seconds(v, def int32) time.Duration {
	if v <= 0 {
		v = def
	}
	return time.Duration(v) * time.Second
}

func (r *probeRun) loop(kind probeKind, probe *corev1.Probe) {
	period := seconds(probe.PeriodSeconds, 10)
	success, failure := max(probe.SuccessThreshold, 1), probe.FailureThreshold
	if failure <= 0 {
		failure = 3
	}
	if kind != readinessProbe {
		success = 1 // the API requires 1 for liveness and startup
	}
	if probe.Exec != nil && r.p.exec == nil {
		r.a.event(r.pod, r.spec.Name, corev1.EventTypeWarning, "ProbeNotSupported",
			fmt.Sprintf("%s probe: exec probes do not run on the rainbow node agent; counted as succeeding", kind))
	}
	wait := time.Duration(probe.InitialDelaySeconds) * time.Second
	var okRun, failRun int32
	for {
		select {
		case <-r.p.done:
			return
		case <-time.After(wait):
		}
		wait = period
		started, _ := r.res.get()
		if kind != startupProbe && !started {
			continue
		}
		err := r.once(probe)
		if err == nil {
			okRun, failRun = okRun+1, 0
		} else {
			okRun, failRun = 0, failRun+1
			if !r.exited() {
				r.a.event(r.pod, r.spec.Name, corev1.EventTypeWarning, "Unhealthy", fmt.Sprintf("%s probe failed: %v", kind, err))
			}
		}
		switch kind {
		case startupProbe:
			if okRun >= success {
				r.set(func(res *probeResults) { res.started = true })
				return
			}
			if failRun >= failure {
				r.kill(probe, fmt.Sprintf("Container %s failed startup probe, will be restarted", r.spec.Name))
				return
			}
		case readinessProbe:
			if okRun >= success {
				r.set(func(res *probeResults) { res.ready = true })
			} else if failRun >= failure {
				r.set(func(res *probeResults) { res.ready = false })
			}
		case livenessProbe:
			if failRun >= failure {
				r.kill(probe, fmt.Sprintf("Container %s failed liveness probe, will be restarted", r.spec.Name))
				return
			}
		}
	}
}

func (r *probeRun) exited() bool { return r.p.exited() }

// set changes the results and has the pod's status written if they changed.
func (r *probeRun) set(f func(*probeResults)) {
	r.res.mu.Lock()
	started, ready := r.res.started, r.res.ready
	f(r.res)
	changed := started != r.res.started || ready != r.res.ready
	r.res.mu.Unlock()
	if changed {
		r.a.queue.Add(r.key)
	}
}

// kill stops the container's process group like kubelet after a failed
// liveness or startup probe; its exit then restarts it.
func (r *probeRun) kill(probe *corev1.Probe, msg string) {
	if r.exited() {
		return
	}
	r.a.log.Info("probe failed, killing container", "pod", r.key, "container", r.spec.Name)
	r.a.event(r.pod, r.spec.Name, corev1.EventTypeNormal, "Killing", msg)
	grace := terminationGrace(r.pod)
	if probe.TerminationGracePeriodSeconds != nil {
		grace = time.Duration(*probe.TerminationGracePeriodSeconds) * time.Second
	}
	r.p.signal(syscall.SIGTERM)
	select {
	case <-r.p.done:
	case <-time.After(grace):
		r.p.signal(syscall.SIGKILL)
	}
}

// once runs the probe one time; nil means success.
func (r *probeRun) once(probe *corev1.Probe) error {
	timeout := seconds(probe.TimeoutSeconds, 1)
	switch h := probe.ProbeHandler; {
	case h.HTTPGet != nil:
		return r.httpGet(h.HTTPGet, timeout)
	case h.TCPSocket != nil:
		port, err := r.port(h.TCPSocket.Port)
		if err != nil {
			return err
		}
		host := h.TCPSocket.Host
		if host == "" {
			host = r.podIP
		}
		conn, err := net.DialTimeout("tcp", net.JoinHostPort(host, strconv.Itoa(port)), timeout)
		if err != nil {
			return fmt.Errorf("dial tcp %s:%d: %w", host, port, err)
		}
		return conn.Close()
	case h.GRPC != nil:
		return r.grpc(h.GRPC, timeout)
	case h.Exec != nil && r.p.exec != nil:
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		return r.p.exec(ctx, h.Exec.Command)
	default:
		return nil // exec: see the ProbeNotSupported event
	}
}

func (r *probeRun) httpGet(h *corev1.HTTPGetAction, timeout time.Duration) error {
	port, err := r.port(h.Port)
	if err != nil {
		return err
	}
	host := h.Host
	if host == "" {
		host = r.podIP
	}
	scheme := "http"
	if h.Scheme == corev1.URISchemeHTTPS {
		scheme = "https"
	}
	u := &url.URL{Scheme: scheme, Host: net.JoinHostPort(host, strconv.Itoa(port)), Path: h.Path}
	if p, err := url.Parse(h.Path); err == nil {
		u.Path, u.RawQuery = p.Path, p.RawQuery
	}
	req, err := http.NewRequest(http.MethodGet, u.String(), nil)
	if err != nil {
		return err
	}
	req.Header.Set("User-Agent", r.a.probeUserAgent)
	req.Header.Set("Accept", "*/*")
	for _, hdr := range h.HTTPHeaders {
		if hdr.Name == "Host" {
			req.Host = hdr.Value
			continue
		}
		req.Header.Set(hdr.Name, hdr.Value)
	}
	client := &http.Client{
		Timeout: timeout,
		Transport: &http.Transport{
			// kubelet does not verify the certificates of probed containers.
			TLSClientConfig:   &tls.Config{InsecureSkipVerify: true}, //nolint:gosec
			DisableKeepAlives: true,
			Proxy:             nil,
		},
		// A redirect's answer counts as it is (3xx succeeds), as with kubelet for most redirects.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode < http.StatusOK || resp.StatusCode >= http.StatusBadRequest {
		return fmt.Errorf("HTTP probe failed with statuscode: %d", resp.StatusCode)
	}
	return nil
}

func (r *probeRun) grpc(h *corev1.GRPCAction, timeout time.Duration) error {
	conn, err := grpc.NewClient(net.JoinHostPort(r.podIP, strconv.Itoa(int(h.Port))),
		grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithUserAgent(r.a.probeUserAgent))
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	service := ""
	if h.Service != nil {
		service = *h.Service
	}
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: service})
	if err != nil {
		return fmt.Errorf("gRPC health check: %w", err)
	}
	if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		return fmt.Errorf("service unhealthy (responded with %q)", resp.GetStatus())
	}
	return nil
}

// port resolves a probe's port, by number or by the container's port name.
func (r *probeRun) port(p intstr.IntOrString) (int, error) {
	if p.Type == intstr.Int {
		return p.IntValue(), nil
	}
	for _, cp := range r.spec.Ports {
		if cp.Name == p.StrVal {
			return int(cp.ContainerPort), nil
		}
	}
	if n, err := strconv.Atoi(p.StrVal); err == nil {
		return n, nil
	}
	return 0, fmt.Errorf("port %q not found in the container's ports", p.StrVal)
}

// probeUserAgent is kubelet's probe User-Agent for a cluster version:
// kube-probe/<major>.<minor>.
func probeUserAgent(version string) string {
	v := strings.TrimPrefix(version, "v")
	if parts := strings.SplitN(v, ".", 3); len(parts) >= 2 {
		return "kube-probe/" + parts[0] + "." + parts[1]
	}
	return "kube-probe"
}
