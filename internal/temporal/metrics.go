package temporal

import (
	"context"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// rpcs counts every RPC the controller's clients make, so the cost of
// polling Temporal is visible (Worker Deployment reads are rate limited per
// namespace).
var rpcs = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "rainbow_temporal_rpcs_total",
	Help: "Temporal RPCs made by the controller, by method and result (ok or the gRPC code).",
}, []string{"method", "result"})

func init() {
	metrics.Registry.MustRegister(rpcs)
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
