package helm

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rainbow-deploy/rainbow/internal/notify"
)

// TestChartNotificationSinks: each sink of notifications.sinks becomes a
// --notify flag the manager accepts; a URL from a Secret is mounted and
// named by url-file, never put in the arguments; and a sink without a URL
// is refused by the values' schema.
func TestChartNotificationSinks(t *testing.T) {
	values := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(values, []byte(`notifications:
  sinks:
    - name: team-slack
      format: slack
      urlSecret: {name: rainbow-slack-url, key: url}
    - name: events
      format: cloudevents
      url: http://broker.example/default
      attempts: 8
      timeout: 5s
`), 0o644); err != nil {
		t.Fatal(err)
	}
	r := renderChart(t, "rainbow", "rainbow", "rainbow-system", "-f", values)
	pod := r.deployment(t).Spec.Template.Spec
	var sinks []notify.SinkConfig
	for _, a := range pod.Containers[0].Args {
		if v, ok := strings.CutPrefix(a, "--notify="); ok {
			c, err := notify.ParseSink(v)
			if err != nil {
				t.Fatalf("the manager refuses %s: %v", a, err)
			}
			sinks = append(sinks, c)
		}
	}
	if len(sinks) != 2 || sinks[0].Name != "team-slack" || sinks[0].Format != notify.FormatSlack || sinks[0].URL != "" ||
		sinks[1].URL != "http://broker.example/default" || sinks[1].Format != notify.FormatCloudEvents || sinks[1].Attempts != 8 {
		t.Fatalf("sinks %+v, want team-slack from a file and events with its URL", sinks)
	}
	mounted := false
	for _, m := range pod.Containers[0].VolumeMounts {
		for _, v := range pod.Volumes {
			if v.Name == m.Name && v.Secret != nil && v.Secret.SecretName == "rainbow-slack-url" &&
				filepath.Join(m.MountPath, v.Secret.Items[0].Path) == sinks[0].URLFile {
				mounted = true
			}
		}
	}
	if !mounted {
		t.Errorf("url-file %s is not the mounted key of Secret rainbow-slack-url: mounts %+v, volumes %+v", sinks[0].URLFile, pod.Containers[0].VolumeMounts, pod.Volumes)
	}

	if out, err := helm(t, "template", "rainbow", "charts/rainbow", "--set", "notifications.sinks[0].name=nowhere"); err == nil ||
		!strings.Contains(string(out)+err.Error(), "urlSecret") {
		t.Errorf("a sink without url or urlSecret rendered: %v %s", err, out)
	}
}
