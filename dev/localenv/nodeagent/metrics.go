package nodeagent

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
)

// The resource metrics API (metrics.k8s.io/v1beta1), as metrics-server
// serves it: the CPU and memory of each pod's processes, and the node's,
// for `kubectl top` and HorizontalPodAutoscalers on CPU or memory. The agent
// knows each container's process (its containerID is process://<pid>) and
// samples its process group from /proc every metricsResolution: CPU is the
// rate of utime+stime between the last two samples, memory the resident
// set size (what the kernel keeps in RAM for the processes, close to the
// cgroup working set a kubelet reports). The API server's aggregation layer
// reaches it through an APIService, the Service Config.MetricsService in
// kube-system and an EndpointSlice naming the agent's own address on the
// pod network (EndpointSlices refuse loopback addresses); it authenticates
// as the front proxy, and each resource request is authorized with a
// SubjectAccessReview for the user the front proxy names.

const (
	// metricsResolution is how often processes are sampled; a rate
	// needs two samples, so a new container shows after this long.
	metricsResolution = 5 * time.Second
	// clockTicks is the kernel's USER_HZ, the unit of /proc/<pid>/stat
	// times on every Linux architecture Go supports.
	clockTicks = 100
	// DefaultMetricsService is the Service of the metrics API.
	DefaultMetricsService = "rainbow-node-metrics"
	metricsAPIService     = "v1beta1.metrics.k8s.io"
	metricsGroupVersion   = "metrics.k8s.io/v1beta1"
	fieldManager          = "rainbow-node-agent"
)

// usage is one container's (or the node's) resource use at a time.
type usage struct {
	at      time.Time
	pid     int
	cpuTick uint64
	memory  int64
}

// rate is a usage over the window between two samples.
type rate struct {
	at     time.Time
	window time.Duration
	cores  float64
	memory int64
}

func rateOf(prev, cur usage) (rate, bool) {
	w := cur.at.Sub(prev.at)
	if prev.at.IsZero() || w <= 0 || cur.cpuTick < prev.cpuTick || cur.pid != prev.pid {
		return rate{}, false
	}
	return rate{at: cur.at, window: w, cores: float64(cur.cpuTick-prev.cpuTick) / clockTicks / w.Seconds(), memory: cur.memory}, true
}

// metricsStore holds the last two samples of every running container.
type metricsStore struct {
	mu         sync.Mutex
	containers map[string][2]usage // "<pod UID>/<container>" -> previous, latest
	node       [2]usage
	// runcPid is the first process of a runc container (it leads its own
	// process group: runc starts it in a session of its own); nil: none.
	runcPid func(id string) (int, bool)
}

// pid is the process (group) of a container ID.
func (s *metricsStore) pid(containerID string) (int, bool) {
	if id, ok := strings.CutPrefix(containerID, ContainerIDPrefix); ok && s.runcPid != nil {
		return s.runcPid(id)
	}
	pid, err := strconv.Atoi(strings.TrimPrefix(containerID, "process://"))
	return pid, err == nil && strings.HasPrefix(containerID, "process://")
}

func (s *metricsStore) container(uid types.UID, name string) (rate, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	u := s.containers[string(uid)+"/"+name]
	return rateOf(u[0], u[1])
}

func (s *metricsStore) nodeRate() (rate, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return rateOf(s.node[0], s.node[1])
}

// sample reads /proc once for the containers of pods and the node.
func (s *metricsStore) sample(proc string, pods []*corev1.Pod, now time.Time) {
	groups := readProcessGroups(proc)
	next := map[string][2]usage{}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range pods {
		for _, cs := range slices.Concat(p.Status.InitContainerStatuses, p.Status.ContainerStatuses) {
			if cs.State.Running == nil {
				continue
			}
			pid, ok := s.pid(cs.ContainerID)
			if !ok {
				continue
			}
			g, ok := groups[pid]
			if !ok {
				continue
			}
			key := string(p.UID) + "/" + cs.Name
			cur := usage{at: now, pid: pid, cpuTick: g.cpuTick, memory: g.memory}
			next[key] = [2]usage{s.containers[key][1], cur}
		}
	}
	s.containers = next
	if n, err := readNodeUsage(proc, now); err == nil {
		s.node = [2]usage{s.node[1], n}
	}
}

// readProcessGroups sums CPU time and resident memory over each process
// group (a container's process leads its own group, like a cgroup holds a
// container's processes), keyed by the group's id.
func readProcessGroups(proc string) map[int]usage {
	out := map[int]usage{}
	entries, _ := os.ReadDir(proc)
	page := int64(os.Getpagesize())
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		data, err := os.ReadFile(filepath.Join(proc, e.Name(), "stat"))
		if err != nil {
			continue // gone meanwhile
		}
		pgrp, ticks, rss, ok := parseStat(data)
		if !ok {
			continue
		}
		u := out[pgrp]
		u.cpuTick += ticks
		u.memory += rss * page
		out[pgrp] = u
	}
	for pgid, u := range out {
		u.pid = pgid
		out[pgid] = u
	}
	return out
}

// parseStat reads the process group, utime+stime (clock ticks) and rss
// (pages) of a /proc/<pid>/stat line; the command name in parentheses may
// hold spaces and parentheses.
func parseStat(data []byte) (pgrp int, ticks uint64, rss int64, ok bool) {
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0, 0, 0, false
	}
	f := strings.Fields(string(data[i+1:]))
	// f[0] is field 3 (state): pgrp is field 5, utime 14, stime 15, rss 24.
	if len(f) < 22 {
		return 0, 0, 0, false
	}
	pgrp, err1 := strconv.Atoi(f[2])
	utime, err2 := strconv.ParseUint(f[11], 10, 64)
	stime, err3 := strconv.ParseUint(f[12], 10, 64)
	rss, err4 := strconv.ParseInt(f[21], 10, 64)
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		return 0, 0, 0, false
	}
	return pgrp, utime + stime, rss, true
}

// readNodeUsage is the machine's busy CPU time (/proc/stat) and memory in
// use (MemTotal - MemAvailable of /proc/meminfo).
func readNodeUsage(proc string, now time.Time) (usage, error) {
	stat, err := os.ReadFile(filepath.Join(proc, "stat"))
	if err != nil {
		return usage{}, err
	}
	line, _, _ := strings.Cut(string(stat), "\n")
	f := strings.Fields(line)
	if len(f) < 5 || f[0] != "cpu" {
		return usage{}, fmt.Errorf("unexpected %s/stat", proc)
	}
	var busy uint64
	for i, v := range f[1:] {
		n, _ := strconv.ParseUint(v, 10, 64)
		if i != 3 && i != 4 && i < 8 { // not idle, iowait; not guest (counted in user)
			busy += n
		}
	}
	mem, err := os.Open(filepath.Join(proc, "meminfo"))
	if err != nil {
		return usage{}, err
	}
	defer mem.Close()
	kb := map[string]int64{}
	sc := bufio.NewScanner(mem)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			kb[k] = n
		}
	}
	return usage{at: now, cpuTick: busy, memory: (kb["MemTotal"] - kb["MemAvailable"]) * 1024}, nil
}

// metricsServer serves metrics.k8s.io/v1beta1 from the store.
type metricsServer struct {
	a     *Agent
	store *metricsStore
	roots *x509.CertPool
}

// serveMetrics samples processes and serves the API on ln until ctx ends.
func (a *Agent) serveMetrics(ctx context.Context, ln net.Listener, roots *x509.CertPool) {
	m := &metricsServer{a: a, store: &metricsStore{runcPid: a.runcPid}, roots: roots}
	go func() {
		tick := time.NewTicker(metricsResolution)
		defer tick.Stop()
		for {
			pods, _ := a.podLister.List(labels.Everything())
			m.store.sample("/proc", pods, time.Now())
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	mux := http.NewServeMux()
	discovery := map[string]any{
		"/apis":                metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"}, Groups: []metav1.APIGroup{metricsGroup()}},
		"/apis/metrics.k8s.io": metricsGroup(),
		"/apis/" + metricsGroupVersion: metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
			GroupVersion: metricsGroupVersion, APIResources: []metav1.APIResource{
				{Name: "nodes", Kind: "NodeMetrics", Verbs: []string{"get", "list"}},
				{Name: "pods", Namespaced: true, Kind: "PodMetrics", Verbs: []string{"get", "list"}},
			}},
	}
	for path, body := range discovery {
		mux.HandleFunc("GET "+path, func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, http.StatusOK, body) })
	}
	mux.HandleFunc("GET /apis/"+metricsGroupVersion+"/nodes", m.nodes)
	mux.HandleFunc("GET /apis/"+metricsGroupVersion+"/nodes/{name}", m.nodes)
	mux.HandleFunc("GET /apis/"+metricsGroupVersion+"/pods", m.pods)
	mux.HandleFunc("GET /apis/"+metricsGroupVersion+"/namespaces/{namespace}/pods", m.pods)
	mux.HandleFunc("GET /apis/"+metricsGroupVersion+"/namespaces/{namespace}/pods/{name}", m.pods)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	a.serve(ctx, ln, m.authenticate(mux), "metrics API")
}

func metricsGroup() metav1.APIGroup {
	gv := metav1.GroupVersionForDiscovery{GroupVersion: metricsGroupVersion, Version: "v1beta1"}
	return metav1.APIGroup{TypeMeta: metav1.TypeMeta{Kind: "APIGroup", APIVersion: "v1"}, Name: "metrics.k8s.io",
		Versions: []metav1.GroupVersionForDiscovery{gv}, PreferredVersion: gv}
}

// frontProxyUser is the request's user, when its client certificate is the
// front proxy's (checked against roots, with the allowed name).
type frontProxyUser struct {
	name   string
	groups []string
}

type userKey struct{}

// authenticate accepts requests of the API server's front proxy only.
func (m *metricsServer) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
			writeStatus(w, http.StatusUnauthorized, "no client certificate: only the API server's aggregation layer may call this API")
			return
		}
		c := r.TLS.PeerCertificates[0]
		_, err := c.Verify(x509.VerifyOptions{Roots: m.roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
		if err != nil || c.Subject.CommonName != m.a.cfg.FrontProxyName {
			writeStatus(w, http.StatusUnauthorized, fmt.Sprintf("client certificate %q is not the front proxy's %q", c.Subject.CommonName, m.a.cfg.FrontProxyName))
			return
		}
		u := frontProxyUser{name: r.Header.Get("X-Remote-User"), groups: r.Header.Values("X-Remote-Group")}
		if u.name == "" {
			writeStatus(w, http.StatusUnauthorized, "the front proxy named no user")
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), userKey{}, u)))
	})
}

// allowed asks the API server whether the request's user may get or list
// the resource, as the API server would have.
func (m *metricsServer) allowed(w http.ResponseWriter, r *http.Request, resource, namespace, name string) bool {
	u, _ := r.Context().Value(userKey{}).(frontProxyUser)
	verb := "list"
	if name != "" {
		verb = "get"
	}
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: u.name, Groups: u.groups,
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Verb: verb, Group: "metrics.k8s.io", Version: "v1beta1", Resource: resource, Namespace: namespace, Name: name,
		},
	}}
	res, err := m.a.client.AuthorizationV1().SubjectAccessReviews().Create(r.Context(), sar, metav1.CreateOptions{})
	switch {
	case err != nil:
		writeStatus(w, http.StatusInternalServerError, "authorization failed: "+err.Error())
		return false
	case !res.Status.Allowed:
		writeStatus(w, http.StatusForbidden, fmt.Sprintf("user %q may not %s %s.metrics.k8s.io in namespace %q", u.name, verb, resource, namespace))
		return false
	}
	return true
}

func selectorOf(w http.ResponseWriter, r *http.Request) (labels.Selector, bool) {
	sel, err := labels.Parse(r.URL.Query().Get("labelSelector"))
	if err != nil {
		writeStatus(w, http.StatusBadRequest, "labelSelector: "+err.Error())
		return nil, false
	}
	return sel, true
}

func (m *metricsServer) nodes(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	sel, ok := selectorOf(w, r)
	if !ok || !m.allowed(w, r, "nodes", "", name) {
		return
	}
	list := metricsv1beta1.NodeMetricsList{TypeMeta: metav1.TypeMeta{Kind: "NodeMetricsList", APIVersion: metricsGroupVersion},
		Items: []metricsv1beta1.NodeMetrics{}}
	node, err := m.a.client.CoreV1().Nodes().Get(r.Context(), m.a.cfg.NodeName, metav1.GetOptions{})
	rt, sampled := m.store.nodeRate()
	if err == nil && sampled && (name == "" || name == node.Name) && sel.Matches(labels.Set(node.Labels)) {
		list.Items = append(list.Items, metricsv1beta1.NodeMetrics{
			TypeMeta:   metav1.TypeMeta{Kind: "NodeMetrics", APIVersion: metricsGroupVersion},
			ObjectMeta: metav1.ObjectMeta{Name: node.Name, Labels: node.Labels, CreationTimestamp: metav1.NewTime(rt.at)},
			Timestamp:  metav1.NewTime(rt.at), Window: metav1.Duration{Duration: rt.window}, Usage: rt.resources(),
		})
	}
	if name == "" {
		writeJSON(w, http.StatusOK, list)
	} else if len(list.Items) == 1 {
		writeJSON(w, http.StatusOK, list.Items[0])
	} else {
		writeStatus(w, http.StatusNotFound, fmt.Sprintf("nodemetrics.metrics.k8s.io %q not found", name))
	}
}

func (m *metricsServer) pods(w http.ResponseWriter, r *http.Request) {
	ns, name := r.PathValue("namespace"), r.PathValue("name")
	sel, ok := selectorOf(w, r)
	if !ok || !m.allowed(w, r, "pods", ns, name) {
		return
	}
	pods, _ := m.a.podLister.List(sel)
	list := metricsv1beta1.PodMetricsList{TypeMeta: metav1.TypeMeta{Kind: "PodMetricsList", APIVersion: metricsGroupVersion},
		Items: []metricsv1beta1.PodMetrics{}}
	for _, p := range pods {
		if (ns != "" && p.Namespace != ns) || (name != "" && p.Name != name) {
			continue
		}
		if pm, ok := m.podMetrics(p); ok {
			list.Items = append(list.Items, pm)
		}
	}
	slices.SortFunc(list.Items, func(x, y metricsv1beta1.PodMetrics) int {
		return strings.Compare(x.Namespace+"/"+x.Name, y.Namespace+"/"+y.Name)
	})
	switch {
	case name == "":
		writeJSON(w, http.StatusOK, list)
	case len(list.Items) == 1:
		writeJSON(w, http.StatusOK, list.Items[0])
	default:
		writeStatus(w, http.StatusNotFound, fmt.Sprintf("podmetrics.metrics.k8s.io %q not found", name))
	}
}

// podMetrics are a pod's containers' rates; a pod any of whose running
// containers has no rate yet is left out, as metrics-server does.
func (m *metricsServer) podMetrics(p *corev1.Pod) (metricsv1beta1.PodMetrics, bool) {
	pm := metricsv1beta1.PodMetrics{
		TypeMeta:   metav1.TypeMeta{Kind: "PodMetrics", APIVersion: metricsGroupVersion},
		ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, Labels: p.Labels},
	}
	for _, cs := range slices.Concat(p.Status.InitContainerStatuses, p.Status.ContainerStatuses) {
		if cs.State.Running == nil {
			continue
		}
		rt, ok := m.store.container(p.UID, cs.Name)
		if !ok {
			return pm, false
		}
		pm.Timestamp, pm.Window = metav1.NewTime(rt.at), metav1.Duration{Duration: rt.window}
		pm.Containers = append(pm.Containers, metricsv1beta1.ContainerMetrics{Name: cs.Name, Usage: rt.resources()})
	}
	pm.CreationTimestamp = pm.Timestamp
	return pm, len(pm.Containers) > 0
}

func (r rate) resources() corev1.ResourceList {
	return corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewScaledQuantity(int64(r.cores*1e9), resource.Nano),
		corev1.ResourceMemory: *resource.NewQuantity(r.memory, resource.BinarySI),
	}
}

func writeJSON(w http.ResponseWriter, code int, body any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(body)
}

func writeStatus(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure,
		Message: msg, Code: int32(code)})
}

// listenMetrics opens the metrics API's TLS listener on the agent's own
// pod-network address, which an EndpointSlice may name; it asks for
// client certificates, checked per request.
func (a *Agent) listenMetrics() (net.Listener, *x509.CertPool, error) {
	gw, ok := a.ips.gateway()
	if !ok {
		return nil, nil, errors.New("no pod network: EndpointSlices refuse 127.0.0.1, so the API server could not reach the metrics API")
	}
	cert, err := tls.LoadX509KeyPair(a.cfg.MetricsCertFile, a.cfg.MetricsKeyFile)
	if err != nil {
		return nil, nil, fmt.Errorf("metrics serving certificate: %w", err)
	}
	caPEM, err := os.ReadFile(a.cfg.FrontProxyCAFile)
	if err != nil {
		return nil, nil, fmt.Errorf("front proxy CA: %w", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		return nil, nil, fmt.Errorf("no certificate in %s", a.cfg.FrontProxyCAFile)
	}
	ln, err := tls.Listen("tcp", net.JoinHostPort(gw.String(), "0"), &tls.Config{
		Certificates: []tls.Certificate{cert},
		ClientAuth:   tls.RequestClientCert,
		MinVersion:   tls.VersionTLS12,
	})
	if err != nil {
		return nil, nil, err
	}
	return ln, roots, nil
}

// registerMetrics points the APIService v1beta1.metrics.k8s.io at the
// listener: a Service without selector in kube-system, its EndpointSlice
// with the agent's address and port, and the APIService with the CA of the
// serving certificate. Applied server-side, so a restarted agent updates
// the port.
func (a *Agent) registerMetrics(ctx context.Context, addr *net.TCPAddr) error {
	caPEM, err := os.ReadFile(a.cfg.MetricsCAFile)
	if err != nil {
		return err
	}
	svc := a.cfg.MetricsService
	objects := []struct {
		path string
		body map[string]any
	}{
		{"/api/v1/namespaces/kube-system/services/" + svc, map[string]any{
			"apiVersion": "v1", "kind": "Service", "metadata": map[string]any{"name": svc, "namespace": "kube-system"},
			"spec": map[string]any{"ports": []any{map[string]any{"name": "https", "port": 443, "targetPort": addr.Port}}},
		}},
		{"/apis/discovery.k8s.io/v1/namespaces/kube-system/endpointslices/" + svc, map[string]any{
			"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
			"metadata": map[string]any{"name": svc, "namespace": "kube-system", "labels": map[string]any{
				"kubernetes.io/service-name": svc, "endpointslice.kubernetes.io/managed-by": fieldManager}},
			"addressType": "IPv4",
			"endpoints":   []any{map[string]any{"addresses": []any{addr.IP.String()}, "conditions": map[string]any{"ready": true}, "nodeName": a.cfg.NodeName}},
			"ports":       []any{map[string]any{"name": "https", "port": addr.Port, "protocol": "TCP"}},
		}},
		{"/apis/apiregistration.k8s.io/v1/apiservices/" + metricsAPIService, map[string]any{
			"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService", "metadata": map[string]any{"name": metricsAPIService},
			"spec": map[string]any{
				"group": "metrics.k8s.io", "version": "v1beta1", "caBundle": caPEM,
				"service":              map[string]any{"name": svc, "namespace": "kube-system", "port": 443},
				"groupPriorityMinimum": 100, "versionPriority": 100,
			},
		}},
	}
	for _, o := range objects {
		data, err := json.Marshal(o.body)
		if err != nil {
			return err
		}
		if err := a.client.Discovery().RESTClient().Patch(types.ApplyPatchType).AbsPath(o.path).
			Param("fieldManager", fieldManager).Param("force", "true").Body(data).Do(ctx).Error(); err != nil {
			return fmt.Errorf("apply %s: %w", o.path, err)
		}
	}
	return nil
}
