package helm

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/rainbow-deploy/rainbow/internal/controller/workerdeployment"
)

// TestChartAnalysisPrometheus: analysis.prometheus.url becomes the
// manager's --analysis-prometheus-url, its token and CA Secrets are mounted
// where the flags point, and without a url no flag is rendered (Prometheus
// checks are then inconclusive).
func TestChartAnalysisPrometheus(t *testing.T) {
	if _, ok := renderChart(t, "rainbow", "rainbow", "rainbow-system").args(t)["--analysis-prometheus-url"]; ok {
		t.Fatal("--analysis-prometheus-url rendered without analysis.prometheus.url")
	}
	r := renderChart(t, "rainbow", "rainbow", "rainbow-system",
		"--set", "analysis.prometheus.url=https://prometheus.monitoring:9090",
		"--set", "analysis.prometheus.bearerTokenSecret.name=prom-token", "--set", "analysis.prometheus.bearerTokenSecret.key=token",
		"--set", "analysis.prometheus.caSecret.name=prom-ca", "--set", "analysis.prometheus.caSecret.key=ca.crt")
	args := r.args(t)
	if u := args["--analysis-prometheus-url"]; u != "https://prometheus.monitoring:9090" {
		t.Fatalf("--analysis-prometheus-url=%q", u)
	}
	pod := r.deployment(t).Spec.Template.Spec
	for flag, secret := range map[string]string{"--analysis-prometheus-bearer-token-file": "prom-token", "--analysis-prometheus-ca-file": "prom-ca"} {
		file, mounted := args[flag], false
		for _, m := range pod.Containers[0].VolumeMounts {
			for _, v := range pod.Volumes {
				if v.Name == m.Name && v.Secret != nil && v.Secret.SecretName == secret && filepath.Join(m.MountPath, v.Secret.Items[0].Path) == file {
					mounted = true
				}
			}
		}
		if file == "" || !mounted {
			t.Errorf("%s=%q is not the mounted key of Secret %s: mounts %+v, volumes %+v", flag, file, secret, pod.Containers[0].VolumeMounts, pod.Volumes)
		}
	}
	if out, err := helm(t, "template", "rainbow", "charts/rainbow", "--set", "analysis.prometheus.url=prometheus:9090"); err == nil {
		t.Errorf("a url without a scheme rendered: %s", out)
	}
}

// TestChartAnalysisVisibilityRPS: analysis.visibilityRPS becomes the
// manager's --analysis-visibility-rps, the default included; the schema
// refuses a budget of 0, with which no evaluation would ever be served.
func TestChartAnalysisVisibilityRPS(t *testing.T) {
	if got, want := renderChart(t, "rainbow", "rainbow", "rainbow-system").args(t)["--analysis-visibility-rps"], fmt.Sprint(workerdeployment.DefaultAnalysisRPS); got != want {
		t.Fatalf("default --analysis-visibility-rps=%q, want the manager's default %s", got, want)
	}
	if got := renderChart(t, "rainbow", "rainbow", "rainbow-system", "--set", "analysis.visibilityRPS=2.5").args(t)["--analysis-visibility-rps"]; got != "2.5" {
		t.Fatalf("--analysis-visibility-rps=%q, want 2.5", got)
	}
	if out, err := helm(t, "template", "rainbow", "charts/rainbow", "--set", "analysis.visibilityRPS=0"); err == nil {
		t.Errorf("analysis.visibilityRPS=0 rendered: %s", out)
	}
}
