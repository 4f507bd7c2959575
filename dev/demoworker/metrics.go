package demoworker

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/uber-go/tally/v4"
	tallyprom "github.com/uber-go/tally/v4/prometheus"
	"go.temporal.io/sdk/client"
	sdktally "go.temporal.io/sdk/contrib/tally"
)

// BuildIDLabel is the label every metric of ServeMetrics carries: the
// worker's build ID, so that a query can select one version.
const BuildIDLabel = "worker_build_id"

// metricsSanitize is the SDK's Prometheus naming, but label values keep
// '-' and '.': build IDs such as v2-0c3e5b9a stay as they are.
var metricsSanitize = tally.SanitizeOptions{
	NameCharacters:       tally.ValidCharacters{Ranges: tally.AlphanumericRange, Characters: []rune{'_'}},
	KeyCharacters:        tally.ValidCharacters{Ranges: tally.AlphanumericRange, Characters: []rune{'_'}},
	ValueCharacters:      tally.ValidCharacters{Ranges: tally.AlphanumericRange, Characters: []rune{'_', '-', '.'}},
	ReplacementCharacter: tally.DefaultReplacementCharacter,
}

// ServeMetrics serves the Temporal SDK's metrics at http://addr/metrics
// for Prometheus (MetricsHandler). Set the handler it returns as
// client.Options.MetricsHandler.
func ServeMetrics(addr, buildID string) (client.MetricsHandler, error) {
	h, serve := MetricsHandler(buildID)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("DEMO_METRICS_ADDR=%q: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", serve)
	go func() {
		if err := http.Serve(ln, mux); err != nil && !errors.Is(err, http.ErrServerClosed) {
			slog.Error("metrics server stopped", "err", err)
		}
	}()
	return h, nil
}

// MetricsHandler is the SDK's tally handler with tally's Prometheus
// reporter (counters end in _total, timers are summaries in seconds,
// reported every second), each metric labelled worker_build_id=buildID,
// and the handler of the Prometheus exposition of them.
func MetricsHandler(buildID string) (client.MetricsHandler, http.Handler) {
	reg := prometheus.NewRegistry()
	reporter := tallyprom.NewReporter(tallyprom.Options{Registerer: reg, OnRegisterError: func(err error) {
		slog.Warn("metrics: register", "err", err)
	}})
	scope, _ := tally.NewRootScope(tally.ScopeOptions{
		Tags:            map[string]string{BuildIDLabel: buildID},
		CachedReporter:  reporter,
		Separator:       tallyprom.DefaultSeparator,
		SanitizeOptions: &metricsSanitize,
	}, time.Second)
	return sdktally.NewMetricsHandler(sdktally.NewPrometheusNamingScope(scope)), promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
}
