package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
)

const (
	defaultNodeName = "rainbow-local"
	localIP         = "127.0.0.1"

	heartbeatInterval = 30 * time.Second
	shutdownGrace     = 5 * time.Second
	vanishedGrace     = 2 * time.Second
	// retryDelay paces retries of conditions only the user can fix (missing
	// program, missing Secret key), so polling stays cheap.
	retryDelay = 3 * time.Second
	readyAfter = time.Second

	podWorkers  = 4
	bindWorkers = 2
)

// Config configures an Agent.
type Config struct {
	// NodeName is the Node to register and run pods for; default "rainbow-local".
	NodeName string
	// RootDir holds per-pod directories: <RootDir>/pods/<namespace>_<name>_<uid>/.
	RootDir string
	// Programs maps an image to an executable. Keys are either a full image
	// reference or its short name: the last path element without tag or digest
	// ("demo-worker" for "registry.example/rainbow/demo-worker:v2"). A value
	// without a slash is looked up in the agent's PATH.
	Programs map[string]string
	// Images maps an image to an OCI image layout directory, such as the
	// output of `make image`: containers with that image run from it under
	// runc (see runc.go) instead of as local programs. Keys are a full
	// image reference, its repository (without tag or digest) or its
	// short name; Images wins over Programs.
	Images map[string]string
	// Runc is the OCI runtime's binary; default runc on PATH, or /usr/sbin/runc.
	Runc string
	// SearchPath is searched for an executable named like the image's short
	// name when Programs has no entry.
	SearchPath []string
	// Log receives the agent's logs; the zero value discards them.
	Log logr.Logger
	// APIServer is the API server's URL as pods should reach it; containers
	// get it as KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT (and
	// the other variables of the `kubernetes` Service). Empty: none.
	APIServer string
	// KubeletCertFile and KubeletKeyFile are the serving certificate of the
	// kubelet API (container logs for `kubectl logs`), ClientCAFile the CA
	// of the client certificates it accepts: the API server's, given by
	// --kubelet-client-certificate. Empty: no kubelet API.
	KubeletCertFile, KubeletKeyFile, ClientCAFile string
	// KubeletPort is the kubelet API's port on 127.0.0.1; 0 picks a free one.
	KubeletPort int
	// MetricsCertFile and MetricsKeyFile are the serving certificate of the
	// resource metrics API (metrics.k8s.io, see metrics.go), made for the
	// name <MetricsService>.kube-system.svc; MetricsCAFile is the CA that
	// signed it (the APIService's caBundle). FrontProxyCAFile is the CA of
	// the API server's front proxy client certificate, whose name is
	// FrontProxyName. Empty MetricsCertFile: no metrics API.
	MetricsCertFile, MetricsKeyFile, MetricsCAFile string
	FrontProxyCAFile, FrontProxyName               string
	// MetricsService names the Service in kube-system that the APIService
	// names; default DefaultMetricsService.
	MetricsService string
}

// Agent is the node agent. Create it with New and start it with Run, once.
type Agent struct {
	client kubernetes.Interface
	cfg    Config
	log    logr.Logger

	queue     workqueue.TypedRateLimitingInterface[string]
	bindQueue workqueue.TypedRateLimitingInterface[string]

	podLister       corelisters.PodLister
	unschLister     corelisters.PodLister
	secretLister    corelisters.SecretLister
	configMapLister corelisters.ConfigMapLister

	// Set in Run before any pod runs, read-only afterwards.
	mountNS        bool    // containers get mount namespaces with their volumes
	ips            *podIPs // pod addresses
	kubeletPort    int     // 0: no kubelet API
	probeUserAgent string  // kube-probe/<major>.<minor>
	recorder       record.EventRecorder

	mu      sync.Mutex
	pods    map[string]*podState // by namespace/name
	started bool

	procWG sync.WaitGroup // one per process wait goroutine

	version string // apiserver gitVersion, reported as kubeletVersion; set by the registering goroutine only

	ready chan struct{} // closed once the node is registered and the metrics API served
}

// New validates cfg and returns an Agent that has not started yet.
func New(client kubernetes.Interface, cfg Config) (*Agent, error) {
	if client == nil {
		return nil, errors.New("nodeagent: nil client")
	}
	if cfg.NodeName == "" {
		cfg.NodeName = defaultNodeName
	}
	if cfg.RootDir == "" {
		return nil, errors.New("nodeagent: Config.RootDir is required")
	}
	root, err := filepath.Abs(cfg.RootDir)
	if err != nil {
		return nil, fmt.Errorf("nodeagent: RootDir: %w", err)
	}
	cfg.RootDir = root
	// Paths must be absolute: processes run with the pod directory as cwd.
	programs := make(map[string]string, len(cfg.Programs))
	for image, p := range cfg.Programs {
		if image == "" || p == "" {
			return nil, fmt.Errorf("nodeagent: invalid program mapping %q=%q", image, p)
		}
		if !strings.Contains(p, "/") {
			if lp, err := exec.LookPath(p); err == nil {
				p = lp
			}
		}
		if abs, err := filepath.Abs(p); err == nil {
			p = abs
		}
		programs[image] = p
	}
	cfg.Programs = programs
	images := make(map[string]string, len(cfg.Images))
	for image, dir := range cfg.Images {
		if image == "" || dir == "" {
			return nil, fmt.Errorf("nodeagent: invalid image mapping %q=%q", image, dir)
		}
		if abs, err := filepath.Abs(dir); err == nil {
			dir = abs
		}
		images[image] = dir
	}
	cfg.Images = images
	search := make([]string, 0, len(cfg.SearchPath))
	for _, d := range cfg.SearchPath {
		if d == "" {
			continue
		}
		if abs, err := filepath.Abs(d); err == nil {
			d = abs
		}
		search = append(search, d)
	}
	cfg.SearchPath = search
	log := cfg.Log
	if log.GetSink() == nil {
		log = logr.Discard()
	}
	limiter := func() workqueue.TypedRateLimiter[string] {
		return workqueue.NewTypedItemExponentialFailureRateLimiter[string](100*time.Millisecond, 10*time.Second)
	}
	return &Agent{
		client:    client,
		cfg:       cfg,
		log:       log,
		queue:     workqueue.NewTypedRateLimitingQueue(limiter()),
		bindQueue: workqueue.NewTypedRateLimitingQueue(limiter()),
		pods:      map[string]*podState{},
		ready:     make(chan struct{}),
	}, nil
}

// Run registers the Node, schedules and runs pods until ctx is done, then
// stops every process (SIGTERM, SIGKILL after 5s) and returns. It returns nil
// after a normal shutdown and an error only if the agent could not start.
func (a *Agent) Run(ctx context.Context) error {
	a.mu.Lock()
	if a.started {
		a.mu.Unlock()
		return errors.New("nodeagent: Run called twice")
	}
	a.started = true
	a.mu.Unlock()

	if err := os.MkdirAll(filepath.Join(a.cfg.RootDir, "pods"), 0o755); err != nil {
		return fmt.Errorf("nodeagent: %w", err)
	}
	if err := mountNamespaces(); err != nil {
		a.log.Info("containers run without mount namespaces: volumes are not at their mountPath, paths into them are rewritten, and in-cluster clients find no service account token", "reason", err.Error())
	} else {
		a.mountNS = true
	}
	if len(a.cfg.Images) > 0 {
		a.removeStaleContainers()
	}
	ips, err := setupPodNetwork()
	if err != nil {
		a.log.Info("pods share the node's address 127.0.0.1", "reason", err.Error())
	} else {
		a.log.Info("pod addresses", "block", ips.block.String())
	}
	a.ips = ips
	defer func() {
		if err := ips.close(); err != nil {
			a.log.Error(err, "removing the pod addresses from lo", "block", ips.block.String())
		}
	}()
	if a.cfg.KubeletCertFile != "" {
		ln, err := a.listenKubelet()
		if err != nil {
			return err
		}
		a.kubeletPort = ln.Addr().(*net.TCPAddr).Port
		kctx, stopKubelet := context.WithCancel(ctx)
		var served sync.WaitGroup
		served.Go(func() { a.serveKubelet(kctx, ln) })
		defer served.Wait()
		defer stopKubelet()
	}
	if err := a.registerNode(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	a.probeUserAgent = probeUserAgent(a.version)
	a.log.Info("node registered", "node", a.cfg.NodeName, "kubeletPort", a.kubeletPort)
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: a.client.CoreV1().Events("")})
	defer broadcaster.Shutdown()
	a.recorder = broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "kubelet", Host: a.cfg.NodeName})

	onNode := informers.NewSharedInformerFactoryWithOptions(a.client, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", a.cfg.NodeName).String()
		}))
	unscheduled := informers.NewSharedInformerFactoryWithOptions(a.client, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", "").String()
		}))
	// Secrets and ConfigMaps for env and volumes; a change reaches the
	// volumes of the pods in its namespace at once.
	objects := informers.NewSharedInformerFactory(a.client, 0)
	podInf := onNode.Core().V1().Pods()
	unschInf := unscheduled.Core().V1().Pods()
	a.podLister = podInf.Lister()
	a.unschLister = unschInf.Lister()
	a.secretLister = objects.Core().V1().Secrets().Lister()
	a.configMapLister = objects.Core().V1().ConfigMaps().Lister()
	if _, err := podInf.Informer().AddEventHandler(enqueueHandler(a.queue)); err != nil {
		return fmt.Errorf("nodeagent: %w", err)
	}
	if _, err := unschInf.Informer().AddEventHandler(enqueueHandler(a.bindQueue)); err != nil {
		return fmt.Errorf("nodeagent: %w", err)
	}
	for _, inf := range []cache.SharedIndexInformer{objects.Core().V1().Secrets().Informer(), objects.Core().V1().ConfigMaps().Informer()} {
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    a.objectChanged,
			UpdateFunc: func(_, obj any) { a.objectChanged(obj) },
		}); err != nil {
			return fmt.Errorf("nodeagent: %w", err)
		}
	}
	onNode.Start(ctx.Done())
	unscheduled.Start(ctx.Done())
	objects.Start(ctx.Done())
	defer onNode.Shutdown()
	defer unscheduled.Shutdown()
	defer objects.Shutdown()
	onNode.WaitForCacheSync(ctx.Done())
	unscheduled.WaitForCacheSync(ctx.Done())
	objects.WaitForCacheSync(ctx.Done())

	var workers sync.WaitGroup
	if ctx.Err() == nil && a.cfg.MetricsCertFile != "" {
		if a.cfg.MetricsService == "" {
			a.cfg.MetricsService = DefaultMetricsService
		}
		ln, roots, err := a.listenMetrics()
		if err != nil {
			a.log.Info("no resource metrics API (kubectl top, HPAs on CPU or memory)", "reason", err.Error())
		} else {
			workers.Go(func() { a.serveMetrics(ctx, ln, roots) })
			if err := a.registerMetrics(ctx, ln.Addr().(*net.TCPAddr)); err != nil {
				a.log.Error(err, "registering the resource metrics API")
			} else {
				a.log.Info("resource metrics API", "address", ln.Addr().String(), "apiService", metricsAPIService)
			}
		}
	}
	close(a.ready)
	if ctx.Err() == nil {
		for range podWorkers {
			workers.Go(func() { a.runWorker(ctx, a.queue, a.reconcile) })
		}
		for range bindWorkers {
			workers.Go(func() {
				a.runWorker(ctx, a.bindQueue, func(ctx context.Context, key string) (time.Duration, error) {
					return 0, a.bind(ctx, key)
				})
			})
		}
		workers.Go(func() { a.heartbeat(ctx) })
	}

	<-ctx.Done()
	a.queue.ShutDown()
	a.bindQueue.ShutDown()
	workers.Wait()
	// Workers are gone, so nothing starts a process any more.
	a.stopAll(shutdownGrace)
	a.markNotReady()
	a.log.Info("node agent stopped")
	return nil
}

// Ready is closed once the agent registered its node and, if configured,
// the resource metrics API.
func (a *Agent) Ready() <-chan struct{} { return a.ready }

// HostIP is the agent's own address on the pod network, local to this
// machine and accepted in EndpointSlices: a Service without a selector can
// point at any process listening on it. Empty without a pod network; set
// once Ready is closed.
func (a *Agent) HostIP() string {
	if gw, ok := a.ips.gateway(); ok {
		return gw.String()
	}
	return ""
}

// objectChanged has every running pod of the object's namespace synced,
// which refreshes its volumes (cheap: they are rendered from the caches and
// only written when different).
func (a *Agent) objectChanged(obj any) {
	m, ok := obj.(metav1.Object)
	if !ok {
		return
	}
	prefix := m.GetNamespace() + "/"
	a.mu.Lock()
	defer a.mu.Unlock()
	for key := range a.pods {
		if strings.HasPrefix(key, prefix) {
			a.queue.Add(key)
		}
	}
}

// event records an Event about a pod's container, as kubelet does.
func (a *Agent) event(pod *corev1.Pod, container, eventType, reason, msg string) {
	if a.recorder == nil {
		return
	}
	ref := &corev1.ObjectReference{
		Kind: "Pod", APIVersion: "v1", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID,
		ResourceVersion: pod.ResourceVersion, FieldPath: "spec.containers{" + container + "}",
	}
	a.recorder.Event(ref, eventType, reason, msg)
}

func enqueueHandler(q workqueue.TypedRateLimitingInterface[string]) cache.ResourceEventHandler {
	add := func(obj any) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			q.Add(key)
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    add,
		UpdateFunc: func(_, obj any) { add(obj) },
		DeleteFunc: add,
	}
}

func (a *Agent) runWorker(ctx context.Context, q workqueue.TypedRateLimitingInterface[string],
	sync func(context.Context, string) (time.Duration, error)) {
	for {
		key, quit := q.Get()
		if quit {
			return
		}
		after, err := sync(ctx, key)
		switch {
		case err != nil:
			if ctx.Err() == nil {
				a.log.Error(err, "sync failed, will retry", "pod", key)
			}
			q.AddRateLimited(key)
		default:
			q.Forget(key)
			if after > 0 {
				q.AddAfter(key, after)
			}
		}
		q.Done(key)
	}
}

// bind is the scheduler: every pending pod for the default scheduler goes to
// our node.
func (a *Agent) bind(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	pod, err := a.unschLister.Pods(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if pod.Spec.NodeName != "" || pod.DeletionTimestamp != nil || len(pod.Spec.SchedulingGates) > 0 ||
		(pod.Spec.SchedulerName != "" && pod.Spec.SchedulerName != corev1.DefaultSchedulerName) ||
		pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return nil
	}
	err = a.client.CoreV1().Pods(ns).Bind(ctx, &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: pod.UID},
		Target:     corev1.ObjectReference{Kind: "Node", Name: a.cfg.NodeName},
	}, metav1.CreateOptions{})
	switch {
	case err == nil:
		a.log.V(1).Info("bound pod", "pod", key, "node", a.cfg.NodeName)
		return nil
	case apierrors.IsNotFound(err), apierrors.IsConflict(err):
		// Gone, or bound by someone else meanwhile.
		return nil
	default:
		return fmt.Errorf("binding pod %s: %w", key, err)
	}
}

// stopAll terminates every process: SIGTERM, then SIGKILL after grace.
func (a *Agent) stopAll(grace time.Duration) {
	a.mu.Lock()
	var procs []*process
	for _, st := range a.pods {
		if st.killTimer != nil {
			st.killTimer.Stop()
		}
		procs = append(procs, st.runningProcs()...)
	}
	a.mu.Unlock()
	for _, p := range procs {
		p.signal(syscall.SIGTERM)
	}
	deadline := time.NewTimer(grace)
	defer deadline.Stop()
wait:
	for _, p := range procs {
		select {
		case <-p.done:
		case <-deadline.C:
			break wait
		}
	}
	for _, p := range procs {
		if !p.exited() {
			a.log.Info("process ignored SIGTERM, killing", "pid", p.pid)
			p.signal(syscall.SIGKILL)
		}
	}
	a.procWG.Wait()
}
