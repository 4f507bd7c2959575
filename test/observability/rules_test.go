package observability

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

const (
	rulesFile     = "../../charts/rainbow/files/prometheus/rules.yaml"
	rulesTestFile = "testdata/rules_test.yaml"
	runbooks      = "../../docs/observability.md"
)

// promtool is Debian's promtool; missing, the test fails, not skips: the
// alerts would ship unchecked.
func promtool(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatal("promtool is not installed: run `make promtool` (it installs Debian's prometheus package without starting Prometheus)")
	}
	return path
}

// TestAlertRules runs `promtool check rules` and `promtool test rules`
// on the chart's rules.
func TestAlertRules(t *testing.T) {
	bin := promtool(t)
	for _, args := range [][]string{{"check", "rules", rulesFile}, {"test", "rules", rulesTestFile}} {
		out, err := exec.Command(bin, args...).CombinedOutput()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

type ruleFile struct {
	Groups []struct {
		Rules []struct {
			Alert       string            `json:"alert"`
			Annotations map[string]string `json:"annotations"`
		} `json:"rules"`
	} `json:"groups"`
}

// TestEveryAlertTestedAndDocumented: each alert has a promtool test where
// it fires and one where it must not, and a runbook_url whose anchor is a
// heading of docs/observability.md.
func TestEveryAlertTestedAndDocumented(t *testing.T) {
	var rules ruleFile
	readYAML(t, rulesFile, &rules)
	var tests struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string           `json:"alertname"`
				ExpAlerts []map[string]any `json:"exp_alerts"`
			} `json:"alert_rule_test"`
		} `json:"tests"`
	}
	readYAML(t, rulesTestFile, &tests)
	fires, silent := map[string]bool{}, map[string]bool{}
	for _, tc := range tests.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			} else {
				silent[a.Alertname] = true
			}
		}
	}
	doc, err := os.ReadFile(filepath.FromSlash(runbooks))
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]bool{}
	for _, h := range regexp.MustCompile(`(?m)^#{2,4} +(.+)$`).FindAllStringSubmatch(string(doc), -1) {
		anchors[githubAnchor(h[1])] = true
	}
	n := 0
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			n++
			if !fires[r.Alert] || !silent[r.Alert] {
				t.Errorf("%s: tested firing %v, not firing %v; %s needs both", r.Alert, fires[r.Alert], silent[r.Alert], rulesTestFile)
			}
			url := r.Annotations["runbook_url"]
			_, anchor, _ := strings.Cut(url, "docs/observability.md#")
			if anchor == "" || !anchors[anchor] {
				t.Errorf("%s: runbook_url %q is no heading of docs/observability.md", r.Alert, url)
			}
		}
	}
	if n < 6 {
		t.Errorf("%d alerts in %s, want at least the six of issue 29", n, rulesFile)
	}
}

// githubAnchor is the fragment GitHub gives a Markdown heading.
func githubAnchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
			b.WriteRune(r)
		}
	}
	return b.String()
}

func readYAML(t *testing.T, path string, into any) {
	t.Helper()
	data, err := os.ReadFile(filepath.FromSlash(path))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, into); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
