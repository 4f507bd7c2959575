package helm

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// TestTemplateObservability renders the chart with the PrometheusRule and
// the Grafana dashboard on: both appear, labelled as the values say, and
// carry exactly the rules promtool tested and the dashboard
// test/observability checked (files/ is their one source). Off by default.
// Render only: no cluster has the PrometheusRule kind.
func TestTemplateObservability(t *testing.T) {
	off := renderChart(t, "rainbow", "rainbow", "rainbow-system")
	if n := len(off.ofKind("PrometheusRule")); n > 0 || off.get("ConfigMap", "rainbow-system", "rainbow-grafana-dashboard") != nil {
		t.Errorf("defaults: %d PrometheusRules and a dashboard ConfigMap %v, want neither", n, off.get("ConfigMap", "rainbow-system", "rainbow-grafana-dashboard") != nil)
	}

	r := renderChart(t, "rainbow", "rainbow", "rainbow-system",
		"--set", "metrics.prometheusRule.enabled=true", "--set", "metrics.prometheusRule.labels.release=prom",
		"--set", "metrics.grafanaDashboard.enabled=true", "--set", "metrics.grafanaDashboard.namespace=monitoring",
		"--api-versions", "monitoring.coreos.com/v1")

	rule := r.get("PrometheusRule", "rainbow-system", "rainbow")
	if rule == nil {
		t.Fatal("no PrometheusRule rainbow-system/rainbow")
	}
	if rule.GetAPIVersion() != "monitoring.coreos.com/v1" || rule.GetLabels()["release"] != "prom" {
		t.Errorf("PrometheusRule %s with labels %v, want monitoring.coreos.com/v1 and release=prom", rule.GetAPIVersion(), rule.GetLabels())
	}
	var file map[string]any
	readYAML(t, "charts/rainbow/files/prometheus/rules.yaml", &file)
	spec, _, _ := unstructured.NestedMap(rule.Object, "spec")
	if !equalJSON(spec, file) {
		t.Errorf("the PrometheusRule's spec differs from charts/rainbow/files/prometheus/rules.yaml:\n%s\nwant\n%s", mustYAML(t, spec), mustYAML(t, file))
	}

	cm := r.get("ConfigMap", "monitoring", "rainbow-grafana-dashboard")
	if cm == nil {
		t.Fatal("no ConfigMap monitoring/rainbow-grafana-dashboard")
	}
	if cm.GetLabels()["grafana_dashboard"] != "1" {
		t.Errorf("dashboard ConfigMap labels %v, want grafana_dashboard=1 for the sidecar", cm.GetLabels())
	}
	data, _, _ := unstructured.NestedString(cm.Object, "data", "rainbow.json")
	want, err := os.ReadFile(filepath.Join(env.Root, "charts/rainbow/files/grafana/rainbow.json"))
	if err != nil {
		t.Fatal(err)
	}
	var got, wantJSON any
	if err := json.Unmarshal([]byte(data), &got); err != nil {
		t.Fatalf("the ConfigMap's rainbow.json is no JSON: %v", err)
	}
	if err := json.Unmarshal(want, &wantJSON); err != nil {
		t.Fatal(err)
	}
	if !equalJSON(got, wantJSON) {
		t.Error("the ConfigMap's rainbow.json differs from charts/rainbow/files/grafana/rainbow.json")
	}
}

func mustYAML(t *testing.T, v any) string {
	t.Helper()
	b, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
