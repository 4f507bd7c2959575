package main

import (
	"fmt"
	"math"
	"os"
	"sort"
	"strings"
	"time"
)

// snapshot is every counter the benchmark reads, at one moment.
type snapshot struct {
	at      time.Time
	manager scrape // the controller's /metrics
	server  scrape // the Temporal dev server's /metrics
	proc    procStat
	// cpu is every process of the environment, the controller's and the
	// benchmark's own, by pid.
	cpu                     map[int]procCPU
	machineBusy, machineAll float64
	own                     map[string]float64 // the benchmark's own Temporal calls
}

func (e *benchEnv) snapshot() (snapshot, error) {
	if err := e.managerAlive(); err != nil {
		return snapshot{}, err
	}
	s := snapshot{at: time.Now(), own: e.own.snapshot()}
	var err error
	if s.manager, err = fetchMetrics(e.metricsURL); err != nil {
		return s, fmt.Errorf("controller metrics: %w", err)
	}
	if s.server, err = fetchMetrics(e.Info.TemporalMetrics); err != nil {
		return s, fmt.Errorf("Temporal server metrics: %w", err)
	}
	s.cpu = processCPU(e.devenv.Pid(), e.manager.Pid(), os.Getpid())
	s.machineBusy, s.machineAll = machineCPU()
	if s.proc, err = readProc(e.manager.Pid()); err != nil {
		return s, fmt.Errorf("controller process: %w", err)
	}
	return s, nil
}

const (
	rpcMetric = "rainbow_temporal_rpcs_total"
	// The adaptive limit of calls in flight (internal/inflight).
	inFlightCutsMetric  = "rainbow_temporal_in_flight_cuts_total"
	inFlightLimitMetric = "rainbow_temporal_in_flight_limit"
	serverMetric        = "service_requests"
	reconcileMetric     = "controller_runtime_reconcile_time_seconds"
	queueMetric         = "workqueue_queue_duration_seconds"
	kubeMetric          = "rest_client_requests_total"
	twdController       = "temporalworkerdeployment"
	reconcileTotal      = "controller_runtime_reconcile_total"
	workerDeployRead    = "worker-deployment read"
)

// rpcKind sorts a Temporal method: reads, writes, and the gRPC health
// check the client pool runs when it dials.
func rpcKind(method string) string {
	switch {
	case method == "Check":
		return "other"
	case method == "DescribeWorkerDeployment" || method == "DescribeWorkerDeploymentVersion":
		return workerDeployRead
	case strings.HasPrefix(method, "Describe"), strings.HasPrefix(method, "List"), strings.HasPrefix(method, "Get"),
		strings.HasPrefix(method, "Count"), strings.HasPrefix(method, "Query"), strings.HasPrefix(method, "Poll"):
		return "read"
	}
	return "write"
}

// byKind adds up calls by method into reads (worker-deployment reads
// included), worker-deployment reads, and writes.
func byKind(calls map[string]float64) (reads, wdReads, writes float64) {
	for m, n := range calls {
		switch rpcKind(m) {
		case workerDeployRead:
			wdReads += n
			reads += n
		case "read":
			reads += n
		case "write":
			writes += n
		}
	}
	return reads, wdReads, writes
}

// controllerMethods are the Temporal methods the controller calls and
// demo workers do not, so the server's counts of them can be compared.
func controllerMethod(m string) bool {
	return strings.Contains(m, "WorkerDeployment") || m == "DescribeTaskQueue" || m == "DescribeWorkflowExecution"
}

// Window is what happened between two snapshots.
type Window struct {
	Name     string  `json:"name"`
	Seconds  float64 `json:"seconds"`
	TWDs     int     `json:"twds"`
	Rollouts int     `json:"rollouts,omitempty"`
	// Temporal RPCs the controller made, from its own counter
	// rainbow_temporal_rpcs_total, by method.
	ControllerRPCs map[string]float64 `json:"controllerRPCs"`
	// InRollouts are the controller's calls between each spec change and
	// Ready, summed over the rollouts (only for one TWD rolled out again
	// and again); the per-minute rates then cover that time only.
	InRollouts map[string]float64 `json:"controllerRPCsInRollouts,omitempty"`
	// ControllerRPCErrors are the calls that failed, by "method result"
	// (the gRPC code; ResourceExhausted is Temporal saying it is busy).
	ControllerRPCErrors map[string]float64 `json:"controllerRPCErrors,omitempty"`
	// ServerRPCs are the Temporal frontend's service_requests for the same
	// methods, minus the benchmark's own calls.
	ServerRPCs map[string]float64 `json:"serverRPCs"`
	// ServerLatency is the Temporal frontend's own latency for those
	// methods (service_latency), mean and p95 in seconds.
	ServerLatency map[string][2]float64 `json:"serverLatencySeconds"`
	// Per TWD per minute, from the controller's counter.
	ReadsPerTWDMin             float64 `json:"readsPerTWDPerMinute"`
	WorkerDeploymentReadsPerTM float64 `json:"workerDeploymentReadsPerTWDPerMinute"`
	WritesPerTWDMin            float64 `json:"writesPerTWDPerMinute"`
	// Namespace-wide worker-deployment reads per second (the rate Temporal
	// limits to 50/s per namespace by default).
	WorkerDeploymentReadsPerSec float64 `json:"workerDeploymentReadsPerSecond"`
	CPUSecondsPerMin            float64 `json:"cpuSecondsPerMinute"`
	// CPUByProcess is CPU seconds per minute of each kind of process of
	// the environment (devenv holds the Temporal server and the node
	// agent; demo-worker is every worker together).
	CPUByProcess map[string]float64 `json:"cpuSecondsPerMinuteByProcess"`
	// PSSByProcess is the memory (proportional set size) of each kind of
	// process at the window's end, added up (demo-worker is every worker
	// together).
	PSSByProcess map[string]float64 `json:"pssMiBByProcess"`
	// Processes counts each kind of process at the window's end.
	Processes map[string]int `json:"processes"`
	// MachineBusy is the share of all CPUs busy, whoever used them.
	MachineBusy float64 `json:"machineBusy"`
	RSSMiB      float64 `json:"rssMiB"`
	// HeapMiB is the controller's live Go heap as of its last garbage
	// collection before the window's end (go_gc_heap_live_bytes): the
	// caches and other live data, without garbage, program text and
	// runtime, which RSS also holds.
	HeapMiB            float64            `json:"heapLiveMiB"`
	PeakRSSMiB         float64            `json:"peakRSSMiB"`
	KubeRequestsPerMin float64            `json:"kubeRequestsPerMinute"`
	KubeRequestsByVerb map[string]float64 `json:"kubeRequestsByVerb"`
	Reconciles         float64            `json:"reconciles"`
	ReconcileP50       float64            `json:"reconcileP50Seconds"`
	ReconcileP95       float64            `json:"reconcileP95Seconds"`
	ReconcileMean      float64            `json:"reconcileMeanSeconds"`
	QueueP50           float64            `json:"queueP50Seconds"`
	QueueP95           float64            `json:"queueP95Seconds"`
	QueueMean          float64            `json:"queueMeanSeconds"`
	// InFlightCuts is how often a slow or refused Temporal answer cut the
	// controller's limit of calls in flight in the window
	// (rainbow_temporal_in_flight_cuts_total); InFlightLimit is that limit
	// at the window's end, the lowest over Temporal namespaces (0: no
	// limit, as with --temporal-slow-call=0 or a controller before it).
	InFlightCuts  float64 `json:"inFlightCuts,omitempty"`
	InFlightLimit float64 `json:"inFlightLimit,omitempty"`
}

func window(name string, a, b snapshot, twds int) Window {
	w := Window{Name: name, Seconds: b.at.Sub(a.at).Seconds(), TWDs: twds,
		ControllerRPCs: map[string]float64{}, ServerRPCs: map[string]float64{}, ServerLatency: map[string][2]float64{}, KubeRequestsByVerb: map[string]float64{}}
	minutes := w.Seconds / 60
	ca, cb := a.manager.by(rpcMetric, "method", nil), b.manager.by(rpcMetric, "method", nil)
	for m, n := range cb {
		if d := n - ca[m]; d != 0 {
			w.ControllerRPCs[m] = d
		}
	}
	reads, wdReads, writes := byKind(w.ControllerRPCs)
	w.ControllerRPCErrors = rpcErrors(a.manager, b.manager)
	frontend := map[string]string{"service_name": "frontend"}
	sa, sb := a.server.by(serverMetric, "operation", frontend), b.server.by(serverMetric, "operation", frontend)
	for m, n := range sb {
		if !controllerMethod(m) {
			continue
		}
		// The benchmark's own calls are taken out.
		if d := n - sa[m] - (b.own[m] - a.own[m]); d != 0 {
			w.ServerRPCs[m] = d
		}
		if n-sa[m] > 0 {
			h := histogramDelta(a.server, b.server, "service_latency", map[string]string{"service_name": "frontend", "operation": m})
			w.ServerLatency[m] = [2]float64{nanToZero(h.mean()), nanToZero(h.quantile(0.95))}
		}
	}
	if twds > 0 && minutes > 0 {
		per := float64(twds) * minutes
		w.ReadsPerTWDMin, w.WorkerDeploymentReadsPerTM, w.WritesPerTWDMin = reads/per, wdReads/per, writes/per
	}
	if w.Seconds > 0 {
		w.WorkerDeploymentReadsPerSec = wdReads / w.Seconds
		w.CPUSecondsPerMin = (b.proc.CPUSeconds - a.proc.CPUSeconds) / minutes
	}
	w.RSSMiB, w.PeakRSSMiB = b.proc.RSSMiB, b.proc.PeakRSSMiB
	w.HeapMiB = b.manager.sum("go_gc_heap_live_bytes", nil) / (1 << 20)
	w.CPUByProcess = map[string]float64{}
	if minutes > 0 {
		for name, sec := range cpuByName(a.cpu, b.cpu) {
			w.CPUByProcess[name] = sec / minutes
		}
	}
	w.PSSByProcess, w.Processes = pssByName(b.cpu), map[string]int{}
	for _, p := range b.cpu {
		w.Processes[p.name]++
	}
	if all := b.machineAll - a.machineAll; all > 0 {
		w.MachineBusy = (b.machineBusy - a.machineBusy) / all
	}
	w.InFlightCuts = b.manager.sum(inFlightCutsMetric, nil) - a.manager.sum(inFlightCutsMetric, nil)
	for _, limit := range b.manager.by(inFlightLimitMetric, "temporal_namespace", nil) {
		if w.InFlightLimit == 0 || limit < w.InFlightLimit {
			w.InFlightLimit = limit
		}
	}
	ka, kb := a.manager.by(kubeMetric, "method", nil), b.manager.by(kubeMetric, "method", nil)
	var kube float64
	for verb, n := range kb {
		if d := n - ka[verb]; d != 0 {
			w.KubeRequestsByVerb[verb] = d
			kube += d
		}
	}
	if minutes > 0 {
		w.KubeRequestsPerMin = kube / minutes
	}
	ctl := map[string]string{"controller": twdController}
	w.Reconciles = b.manager.sum(reconcileTotal, ctl) - a.manager.sum(reconcileTotal, ctl)
	rh := histogramDelta(a.manager, b.manager, reconcileMetric, ctl)
	w.ReconcileP50, w.ReconcileP95, w.ReconcileMean = rh.quantile(0.5), rh.quantile(0.95), rh.mean()
	qh := histogramDelta(a.manager, b.manager, queueMetric, map[string]string{"name": twdController})
	w.QueueP50, w.QueueP95, w.QueueMean = qh.quantile(0.5), qh.quantile(0.95), qh.mean()
	return w
}

// rpcErrors counts the controller's failed Temporal calls between two
// scrapes, by method and gRPC code.
func rpcErrors(a, b scrape) map[string]float64 {
	out := map[string]float64{}
	count := func(sc scrape, sign float64) {
		for _, s := range sc {
			if s.name == rpcMetric && s.labels["result"] != "ok" {
				out[s.labels["method"]+" "+s.labels["result"]] += sign * s.value
			}
		}
	}
	count(b, 1)
	count(a, -1)
	for k, v := range out {
		if v == 0 {
			delete(out, k)
		}
	}
	return out
}

// crossCheck lists, per method, the controller's count next to the
// server's, for the table.
func (w Window) crossCheck() string {
	methods := map[string]bool{}
	for m := range w.ControllerRPCs {
		if controllerMethod(m) {
			methods[m] = true
		}
	}
	for m := range w.ServerRPCs {
		methods[m] = true
	}
	var names []string
	for m := range methods {
		names = append(names, m)
	}
	sort.Strings(names)
	var parts []string
	for _, m := range names {
		parts = append(parts, fmt.Sprintf("%s %g/%g", m, w.ControllerRPCs[m], w.ServerRPCs[m]))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// nanToZero keeps JSON encodable.
func nanToZero(f float64) float64 {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0
	}
	return f
}

func (w *Window) clean() {
	for _, f := range []*float64{&w.ReconcileP50, &w.ReconcileP95, &w.ReconcileMean, &w.QueueP50, &w.QueueP95, &w.QueueMean,
		&w.ReadsPerTWDMin, &w.WorkerDeploymentReadsPerTM, &w.WritesPerTWDMin, &w.CPUSecondsPerMin, &w.KubeRequestsPerMin} {
		*f = nanToZero(*f)
	}
}
