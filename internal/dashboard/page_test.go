package dashboard

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/internal/kubectlplugin"
)

// The templates fail only when executed: run each on a rollout with every
// section filled.
func TestTemplatesRender(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	twd := twdAt("v2", v1alpha1.VersionRamping, ptr.To[int32](25))
	twd.Spec.Rollout = v1alpha1.RolloutSpec{Strategy: v1alpha1.StrategyProgressive, Steps: []v1alpha1.RolloutStep{{RampPercentage: 25}}}
	twd.Status.CurrentVersion = &v1alpha1.WorkerVersion{BuildID: "v1", Status: v1alpha1.VersionCurrent, Deployment: "orders-v1"}
	twd.Status.DeprecatedVersions = []v1alpha1.WorkerVersion{{BuildID: "v0", Status: v1alpha1.VersionDraining, Drain: &v1alpha1.VersionDrain{PinnedWorkflows: 3, Deadline: &metav1.Time{Time: now}}}}
	twd.Status.Gate = &v1alpha1.GateStatus{BuildID: "v2", WorkflowID: "gate-1", Result: "Running"}
	view := kubectlplugin.NewView(kubectlplugin.Snapshot{TWD: twd})
	view.Owned = []kubectlplugin.OwnedView{{Name: "hpa", Kind: "HorizontalPodAutoscaler", Ready: "True", Applied: []string{"v1", "v2"}}}
	view.Events = []kubectlplugin.EventView{{Time: now.Add(-time.Minute), Type: "Normal", Reason: "Ramping", Message: "v2 <b>25%</b>"}}
	points := []RampPoint{{now.Add(-time.Minute), "v2", 0}, {now, "v2", 25}}
	d := twdData{Namespace: "ns", Name: "orders", Found: true, View: view, Buttons: buttons(twd), Chart: NewChart(points, now)}
	for name, data := range map[string]any{
		"twd":     d,
		"index":   indexData{AllNamespaces: true, Rows: []kubectlplugin.ListRow{kubectlplugin.NewListRow(twd)}},
		"layout":  layout{Token: "tok", Stream: "/events", Body: "index"},
		"missing": twdData{Namespace: "ns", Name: "gone"},
	} {
		tmpl := name
		if name == "missing" {
			tmpl = "twd"
		}
		var b strings.Builder
		if err := pages.ExecuteTemplate(&b, tmpl, data); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		out := b.String()
		switch name {
		case "twd":
			for _, want := range []string{`data-build="v2" data-role="target" data-status="Ramping" data-ramp="25%"`, `data-build="v1" data-role="current"`,
				"3 pinned workflows open", "gate-1", "HorizontalPodAutoscaler", `data-verb="promote" data-url="/act/ns/orders/promote">`,
				`data-verb="resume" data-url="/act/ns/orders/resume" disabled title=`, `data-percent="25"`, "v2 &lt;b&gt;25%&lt;/b&gt;"} {
				if !strings.Contains(out, want) {
					t.Errorf("twd page lacks %s:\n%s", want, out)
				}
			}
		case "layout":
			if !strings.Contains(out, `<meta name="rainbow-token" content="tok">`) {
				t.Errorf("layout lacks the token:\n%s", out)
			}
		case "missing":
			if !strings.Contains(out, "Not found") {
				t.Errorf("missing TWD:\n%s", out)
			}
		}
	}
}
