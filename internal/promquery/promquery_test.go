package promquery

import (
	"context"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestRender(t *testing.T) {
	got, err := Render(`sum(x{b="{{ .BuildID }}"}[{{ .Window }}]) / sum(x{b="{{ .CurrentBuildID }}",d="{{ .DeploymentName }}",o="{{ .Namespace }}/{{ .Name }}"})`,
		Fields{BuildID: "v2", CurrentBuildID: "v1", DeploymentName: "ns/orders", Namespace: "ns", Name: "orders", Window: "95s"})
	if want := `sum(x{b="v2"}[95s]) / sum(x{b="v1",d="ns/orders",o="ns/orders"})`; err != nil || got != want {
		t.Fatalf("Render = %q, %v; want %q", got, err, want)
	}
	for _, bad := range []string{`{{ .Nope }}`, `{{ .BuildID `, `{{ range 1000000 }}{{ end }}`, `{{ printf "%999999999d" 1 }}`,
		`{{ if .BuildID }}{{ .Nope }}{{ end }}`, `{{ .BuildID.X }}`, `{{ $x := .BuildID }}`, `{{ .BuildID | len }}`, `{{ define "x" }}{{ end }}`} {
		if err := Check(bad); err == nil {
			t.Errorf("Check(%q) = nil, want an error", bad)
		}
	}
}

func TestWindowOf(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for d, want := range map[time.Duration]string{0: "1s", -time.Second: "1s", 94200 * time.Millisecond: "95s", time.Hour: "3600s"} {
		if got := WindowOf(t0, t0.Add(d)); got != want {
			t.Errorf("WindowOf(%s) = %s, want %s", d, got, want)
		}
	}
}

// TestQuery runs the client against a server answering as Prometheus'
// HTTP API does.
func TestQuery(t *testing.T) {
	answers := map[string]string{
		"scalar": `{"status":"success","data":{"resultType":"scalar","result":[1700000000,"0.25"]}}`,
		"one":    `{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1700000000,"3"]}]}}`,
		"two":    `{"status":"success","data":{"resultType":"vector","result":[{"metric":{"a":"1"},"value":[1700000000,"3"]},{"metric":{"a":"2"},"value":[1700000000,"4"]}]}}`,
		"none":   `{"status":"success","data":{"resultType":"vector","result":[]}}`,
		"nan":    `{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1700000000,"NaN"]}]}}`,
	}
	var auth string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth = r.Header.Get("Authorization")
		q := r.FormValue("query")
		if r.URL.Path != "/api/v1/query" {
			http.NotFound(w, r)
			return
		}
		a, ok := answers[q]
		if !ok {
			w.WriteHeader(http.StatusBadRequest)
			w.Write([]byte(`{"status":"error","errorType":"bad_data","error":"parse error: unexpected end of input"}`))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(a))
	}))
	defer srv.Close()
	token := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(token, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := New(Config{URL: srv.URL, BearerTokenFile: token})
	if err != nil {
		t.Fatal(err)
	}
	ctx, now := context.Background(), time.Now()
	for q, want := range map[string]Result{"scalar": {1, 0.25}, "one": {1, 3}, "two": {Series: 2}, "none": {}} {
		if got, err := c.Query(ctx, q, now); err != nil || got != want {
			t.Errorf("Query(%s) = %+v, %v; want %+v", q, got, err, want)
		}
	}
	if got, err := c.Query(ctx, "nan", now); err != nil || got.Series != 1 || !math.IsNaN(got.Value) {
		t.Errorf("Query(nan) = %+v, %v; want one NaN", got, err)
	}
	if auth != "Bearer s3cret" {
		t.Errorf("Authorization %q, want the token file's", auth)
	}
	if _, err := c.Query(ctx, "sum(", now); err == nil || !strings.Contains(err.Error(), "parse error") {
		t.Errorf("a refused query: %v, want Prometheus' error", err)
	}
	if c, err := New(Config{}); c != nil || err != nil {
		t.Errorf("New without a URL = %v, %v; want nil, nil", c, err)
	}
	if _, err := New(Config{URL: "prometheus:9090"}); err == nil {
		t.Error("a URL without a scheme was accepted")
	}
}
