package temporal

import (
	"context"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.temporal.io/api/serviceerror"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/rainbow-deploy/rainbow/internal/inflight"
)

// rpcs counts every RPC the controller's clients make, so the cost of
// polling Temporal is visible (Worker Deployment reads are rate limited per
// namespace).
var rpcs = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "rainbow_temporal_rpcs_total",
	Help: "Temporal RPCs made by the controller, by method and result (ok or the gRPC code).",
}, []string{"method", "result"})

// inFlightLimit and inFlightCuts show the adaptive limit of calls in
// flight (package inflight) per Temporal namespace.
var (
	inFlightLimit = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "rainbow_temporal_in_flight_limit",
		Help: "How many worker-deployment calls the controller lets be in flight to a Temporal namespace at once; it falls when Temporal answers slowly or refuses for load, and grows back while it answers fast.",
	}, []string{"temporal_namespace"})
	inFlightCuts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rainbow_temporal_in_flight_cuts_total",
		Help: "Times the limit of calls in flight to a Temporal namespace was cut because Temporal answered slowly or refused for load.",
	}, []string{"temporal_namespace"})
)

func init() {
	metrics.Registry.MustRegister(rpcs, inFlightLimit, inFlightCuts)
}

// limitInFlight is the interceptor that keeps a client's worker-deployment
// calls (and the task-queue describes of the same rollouts) within an
// adaptive limit; other calls (visibility, which has its own budget, gate
// workflows, health checks) go as they come.
func limitInFlight(cfg inflight.Config, namespace string) grpc.UnaryClientInterceptor {
	l := inflight.NewLimiter(cfg, func(limit float64, cut bool) {
		inFlightLimit.WithLabelValues(namespace).Set(limit)
		if cut {
			inFlightCuts.WithLabelValues(namespace).Inc()
		}
	})
	inFlightLimit.WithLabelValues(namespace).Set(cfg.Initial)
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		limited, class := limitedCall(shortMethod(method))
		if !limited {
			return invoker(ctx, method, req, reply, cc, opts...)
		}
		done, err := l.Acquire(ctx, class)
		if err != nil {
			return status.FromContextError(err).Err()
		}
		err = invoker(ctx, method, req, reply, cc, opts...)
		// A deadline that ran out counts by the time Temporal took, not
		// as a refusal: the caller's deadline may have been spent waiting
		// here.
		done(err != nil && Overloaded(serviceerror.FromStatus(status.Convert(err))))
		return err
	}
}

// limitedCall: method is one the in-flight limit holds, and its class:
// routing writes (and the manager role they need) first, then the reads
// that decide them, then the retirement's deletes and version metadata.
func limitedCall(method string) (limited bool, class inflight.Class) {
	switch {
	case method == "DescribeTaskQueue":
		return true, inflight.Normal
	case !strings.Contains(method, "WorkerDeployment"):
		return false, 0
	case strings.HasPrefix(method, "Set"):
		return true, inflight.Urgent
	case strings.HasPrefix(method, "Delete"), strings.HasPrefix(method, "Update"), strings.HasPrefix(method, "Create"):
		return true, inflight.Background
	}
	return true, inflight.Normal
}

// countRPCs is the unary interceptor every pooled client gets.
func countRPCs(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	err := invoker(ctx, method, req, reply, cc, opts...)
	result := "ok"
	if err != nil {
		result = status.Code(err).String()
	}
	rpcs.WithLabelValues(shortMethod(method), result).Inc()
	return err
}

// shortMethod turns "/temporal.api.workflowservice.v1.WorkflowService/X" into "X".
func shortMethod(full string) string {
	return full[strings.LastIndexByte(full, '/')+1:]
}

// RPCCount is how many calls of method (a short name such as
// "DescribeWorkerDeployment") were made, whatever their result. It reads
// the counter directly: prometheus' testutil would add a dependency.
func RPCCount(method string) float64 { return rpcCount(method, "") }

// RPCCountResult counts calls of method with one result ("ok",
// "NotFound", ...).
func RPCCountResult(method, result string) float64 { return rpcCount(method, result) }

func rpcCount(method, result string) float64 {
	ch := make(chan prometheus.Metric)
	go func() {
		rpcs.Collect(ch)
		close(ch)
	}()
	var total float64
	for m := range ch {
		var d dto.Metric
		if err := m.Write(&d); err != nil {
			continue
		}
		match := true
		for _, l := range d.GetLabel() {
			switch l.GetName() {
			case "method":
				match = match && l.GetValue() == method
			case "result":
				match = match && (result == "" || l.GetValue() == result)
			}
		}
		if match {
			total += d.GetCounter().GetValue()
		}
	}
	return total
}
