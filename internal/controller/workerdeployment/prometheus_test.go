package workerdeployment

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/internal/planner"
	"github.com/rainbow-deploy/rainbow/internal/promquery"
)

// TestReadPrometheus: the query is rendered for the target and window and
// sent as an instant query; the answer, an error, no configured server and
// a spent budget each become the reading the planner judges.
func TestReadPrometheus(t *testing.T) {
	var sent []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sent = append(sent, r.FormValue("query"))
		if strings.HasPrefix(r.FormValue("query"), "bad") {
			w.WriteHeader(http.StatusBadRequest)
			w.Write([]byte(`{"status":"error","errorType":"bad_data","error":"parse error"}`))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1700000000,"0.25"]}]}}`))
	}))
	defer srv.Close()
	c, err := promquery.New(promquery.Config{URL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 12, 1, 22, 0, 0, 0, time.UTC)
	o := &observation{twd: &v1alpha1.TemporalWorkerDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "orders"}}, deploymentName: "shop/orders"}
	o.input.Now = now
	rd := planner.AnalysisRead{BuildID: "v2", CurrentBuildID: "v1", Since: now.Add(-95 * time.Second)}
	check := func(q string) planner.Check {
		return planner.Check{Name: "p", Kind: v1alpha1.CheckPrometheus, Prometheus: promCheck(&v1alpha1.PrometheusCheck{Query: q, Max: ptr.To("0.5")})}
	}
	r := &Reconciler{Prometheus: NewPrometheusReader(c)}
	got := r.readPrometheus(context.Background(), o, rd, check(`x{b="{{ .BuildID }}",c="{{ .CurrentBuildID }}",d="{{ .DeploymentName }}",n="{{ .Namespace }}/{{ .Name }}"}[{{ .Window }}]`))
	want := `x{b="v2",c="v1",d="shop/orders",n="shop/orders"}[95s]`
	if got.Err != "" || got.Prometheus.Query != want || got.Prometheus.Series != 1 || got.Prometheus.Value != 0.25 || len(sent) != 1 || sent[0] != want {
		t.Fatalf("reading %+v, sent %q; want %s answered 0.25", got, sent, want)
	}
	if max := check("q").Prometheus.Max; max == nil || *max != 0.5 {
		t.Fatalf("max %v, want 0.5", max)
	}
	if got := r.readPrometheus(context.Background(), o, rd, check("bad(")); !strings.Contains(got.Err, "parse error") {
		t.Fatalf("a refused query: %+v", got)
	}
	if got := (&Reconciler{}).readPrometheus(context.Background(), o, rd, check("q")); !got.Prometheus.Unconfigured {
		t.Fatalf("without a server: %+v, want Unconfigured", got)
	}
	for range prometheusBurst {
		r.readPrometheus(context.Background(), o, rd, check("q"))
	}
	if got := r.readPrometheus(context.Background(), o, rd, check("q")); !strings.Contains(got.Err, "query budget") {
		t.Fatalf("past the burst: %+v, want the budget spent", got)
	}
}
