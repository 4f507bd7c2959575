// Package observability checks the Grafana dashboard and the Prometheus
// alerts the chart ships (charts/rainbow/files): every dashboard query
// names only metrics the controller exports, and every alert passes
// promtool's checks and unit tests, firing and not firing, with a runbook.
package observability

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/VictoriaMetrics/metricsql"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	// Everything the manager registers, as cmd/manager links it.
	_ "github.com/rainbow-deploy/rainbow/internal/admission"
	_ "github.com/rainbow-deploy/rainbow/internal/manager"
	_ "sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

const dashboardFile = "../../charts/rainbow/files/grafana/rainbow.json"

// exported is every metric family the manager's registry serves, by
// name, with its type where a series shows it ("" otherwise: a vector
// without series gathers nothing, but describes itself).
func exported(t *testing.T) map[string]dto.MetricType {
	t.Helper()
	reg, ok := metrics.Registry.(prometheus.Collector)
	if !ok {
		t.Fatalf("controller-runtime's metrics.Registry (%T) cannot describe itself", metrics.Registry)
	}
	descs := make(chan *prometheus.Desc)
	go func() {
		reg.Describe(descs)
		close(descs)
	}()
	// Desc keeps its name private; its String() starts with it quoted.
	fqName := regexp.MustCompile(`^Desc\{fqName: ("(?:[^"\\]|\\.)*")`)
	out := map[string]dto.MetricType{}
	for d := range descs {
		m := fqName.FindStringSubmatch(d.String())
		if m == nil {
			t.Fatalf("cannot read a metric name from %s", d)
		}
		name, err := strconv.Unquote(m[1])
		if err != nil {
			t.Fatal(err)
		}
		out[name] = -1
	}
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		out[f.GetName()] = f.GetType()
	}
	return out
}

// unknownMetrics are the metric names expr selects that names lacks. A
// histogram's or summary's _bucket, _sum and _count series count as its
// own (when the type is not known, as any metric's).
func unknownMetrics(expr string, names map[string]dto.MetricType) ([]string, error) {
	// Grafana fills these in before Prometheus sees the query.
	for _, v := range []string{"$__rate_interval", "$__interval", "$__range"} {
		expr = strings.ReplaceAll(expr, v, "5m")
	}
	if m := regexp.MustCompile(`^\s*label_values\((.+),\s*\w+\)\s*$`).FindStringSubmatch(expr); m != nil {
		expr = m[1]
	}
	e, err := metricsql.Parse(expr)
	if err != nil {
		return nil, fmt.Errorf("%q: %w", expr, err)
	}
	var unknown []string
	metricsql.VisitAll(e, func(e metricsql.Expr) {
		me, ok := e.(*metricsql.MetricExpr)
		if !ok {
			return
		}
		for _, filters := range me.LabelFilterss {
			for _, f := range filters {
				if f.Label != "__name__" {
					continue
				}
				if f.IsRegexp || f.IsNegative {
					unknown = append(unknown, "{__name__ regexp "+f.Value+"}")
					continue
				}
				if !known(f.Value, names) {
					unknown = append(unknown, f.Value)
				}
			}
		}
	})
	return unknown, nil
}

func known(name string, names map[string]dto.MetricType) bool {
	if _, ok := names[name]; ok {
		return true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		base, ok := strings.CutSuffix(name, suffix)
		if !ok {
			continue
		}
		switch typ, ok := names[base]; {
		case !ok:
		case typ == -1, typ == dto.MetricType_HISTOGRAM, typ == dto.MetricType_SUMMARY:
			return true
		}
	}
	return false
}

// TestUnknownMetrics: the check finds a misspelt metric, a histogram
// suffix on a counter and a name matched by regexp; and passes real
// names, functions, label names and Grafana's variables.
func TestUnknownMetrics(t *testing.T) {
	names := exported(t)
	for _, tc := range []struct {
		expr string
		want []string
	}{
		{`sum by (outcome) (increase(rainbow_rollouts_total{outcome=~"blocked:.*"}[$__rate_interval]))`, nil},
		{`histogram_quantile(0.9, sum by (le) (rate(rainbow_rollout_duration_seconds_bucket[1d])))`, nil},
		{`histogram_quantile(0.9, sum by (le, name) (rate(workqueue_queue_duration_seconds_bucket[5m])))`, nil},
		{`time() - rainbow_version_draining_since_timestamp_seconds{namespace=~"$namespace"}`, nil},
		{`label_values(rainbow_versions, namespace)`, nil},
		{`sum(rate(rainbow_rollout_totals[5m]))`, []string{"rainbow_rollout_totals"}},
		{`rainbow_versions / on (namespace) rainbow_version`, []string{"rainbow_version"}},
		{`rate(rainbow_rollouts_started_total_bucket[5m])`, []string{"rainbow_rollouts_started_total_bucket"}},
		{`{__name__=~"rainbow_.*"}`, []string{"{__name__ regexp rainbow_.*}"}},
		{`label_values(rainbow_ramp, name)`, []string{"rainbow_ramp"}},
	} {
		got, err := unknownMetrics(tc.expr, names)
		if err != nil {
			t.Errorf("%s: %v", tc.expr, err)
			continue
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: unknown %q, want %q", tc.expr, got, tc.want)
		}
	}
}

// TestDashboardQueries loads the dashboard and checks every query of
// every panel (rows' nested panels too) and of the template variables
// against the names the manager's registry exports; it also checks the
// dashboard is templated on the data source and the namespace.
func TestDashboardQueries(t *testing.T) {
	data, err := os.ReadFile(filepath.FromSlash(dashboardFile))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels     []panel `json:"panels"`
		Templating struct {
			List []struct {
				Name  string          `json:"name"`
				Type  string          `json:"type"`
				Query json.RawMessage `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	names := exported(t)
	exprs := map[string]string{} // where -> query
	var walk func(ps []panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			for _, tg := range p.Targets {
				exprs[fmt.Sprintf("panel %q target %s", p.Title, tg.RefID)] = tg.Expr
			}
			if p.Type != "row" && p.Type != "text" {
				if len(p.Targets) == 0 {
					t.Errorf("panel %q has no query", p.Title)
				}
				if p.Datasource.UID != "${datasource}" {
					t.Errorf("panel %q reads data source %q, want ${datasource}", p.Title, p.Datasource.UID)
				}
			}
			walk(p.Panels)
		}
	}
	walk(dash.Panels)
	vars := map[string]string{}
	for _, v := range dash.Templating.List {
		vars[v.Name] = v.Type
		if v.Type != "query" {
			continue
		}
		var q struct {
			Query string `json:"query"`
		}
		if err := json.Unmarshal(v.Query, &q); err != nil {
			if err := json.Unmarshal(v.Query, &q.Query); err != nil {
				t.Fatalf("variable %s: query %s", v.Name, v.Query)
			}
		}
		exprs["variable "+v.Name] = q.Query
	}
	if vars["datasource"] != "datasource" || vars["namespace"] != "query" {
		t.Errorf("template variables %v, want datasource (a data source) and namespace (a query)", vars)
	}
	if len(exprs) < 20 {
		t.Fatalf("only %d queries found in %s", len(exprs), dashboardFile)
	}
	for where, expr := range exprs {
		if strings.TrimSpace(expr) == "" {
			t.Errorf("%s: empty query", where)
			continue
		}
		unknown, err := unknownMetrics(expr, names)
		if err != nil {
			t.Errorf("%s: %v", where, err)
		}
		if len(unknown) > 0 {
			t.Errorf("%s: %q names metrics the controller does not export: %q", where, expr, unknown)
		}
	}
}

type panel struct {
	Title      string `json:"title"`
	Type       string `json:"type"`
	Datasource struct {
		UID string `json:"uid"`
	} `json:"datasource"`
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
	Panels []panel `json:"panels"`
}
