package integration

import (
	"io"
	"net/http"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// TestManagerServesProbesAndMetrics: the controller TestMain started
// answers its health probes and exports both controllers' metrics.
func TestManagerServesProbesAndMetrics(t *testing.T) {
	parallel(t)
	get := func(url string) string {
		t.Helper()
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %s: %s", url, resp.Status, body)
		}
		return string(body)
	}
	get("http://" + probeAddr + "/healthz")
	get("http://" + probeAddr + "/readyz")
	metrics := get("http://" + metricsAddr + "/metrics")
	for _, want := range []string{
		`controller_runtime_reconcile_total{controller="temporalconnection"`,
		`controller_runtime_reconcile_total{controller="temporalworkerdeployment"`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// metric is the value of the series of family name whose labels include
// want, read from the in-process controller's /metrics (a counter's or
// gauge's value, a histogram's sample count).
func metric(t testing.TB, name string, want map[string]string) (float64, bool) {
	t.Helper()
	return metricAt(t, metricsAddr, name, want)
}

// metricAt is metric, read from the controller serving metrics at addr.
func metricAt(t testing.TB, addr, name string, want map[string]string) (float64, bool) {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	f, ok := families[name]
	if !ok {
		return 0, false
	}
	for _, m := range f.GetMetric() {
		if !hasLabels(m, want) {
			continue
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount()), true
		}
	}
	return 0, false
}

func hasLabels(m *dto.Metric, want map[string]string) bool {
	found := 0
	for _, l := range m.GetLabel() {
		if v, ok := want[l.GetName()]; ok && v == l.GetValue() {
			found++
		}
	}
	return found == len(want)
}
