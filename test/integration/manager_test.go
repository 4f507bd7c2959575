package integration

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestManagerServesProbesAndMetrics: the controller TestMain started
// answers its health probes and exports both controllers' metrics.
func TestManagerServesProbesAndMetrics(t *testing.T) {
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
