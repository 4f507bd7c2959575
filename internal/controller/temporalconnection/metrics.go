package temporalconnection

import (
	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
)

// reachable says per connection whether its server answered the last
// probe: the RPC counter has no connection label, and a dial that fails
// makes no RPC to count.
var reachable = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "rainbow_temporal_connection_reachable",
	Help: "1 when the TemporalConnection's server answered the controller's last probe, 0 when it did not; no series while the connection is not probed (bad Secret, address not allowed).",
}, []string{"namespace", "name"})

func init() {
	metrics.Registry.MustRegister(reachable)
}

// observeReachable records what the probe behind ready found. Problems
// found before a probe (Secrets, allowed hosts) say nothing about the
// server, so they drop the series.
func observeReachable(namespace, name string, ready metav1.Condition) {
	switch ready.Reason {
	case v1alpha1.ReasonReachable, v1alpha1.ReasonUnsupportedServerVersion:
		reachable.WithLabelValues(namespace, name).Set(1)
	case v1alpha1.ReasonTemporalClientCreationFailed:
		reachable.WithLabelValues(namespace, name).Set(0)
	default:
		reachable.DeleteLabelValues(namespace, name)
	}
}
