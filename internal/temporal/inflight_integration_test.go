package temporal

import (
	"context"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/rainbow-deploy/rainbow/internal/inflight"
)

// TestInFlightLimitAgainstTemporal: a pool's clients send their
// worker-deployment calls through the adaptive limit, against the real
// server. With every answer taken as slow (SlowAfter of a nanosecond), the
// calls cut the limit to its floor, one cut per call sent after the last,
// and calls made many at once all still go and come back.
// A call the limit does not hold (the namespace's description) goes as it
// comes.
func TestInFlightLimitAgainstTemporal(t *testing.T) {
	ht := needEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	pool := NewPool("rainbow-test-"+ht.Suffix, nil).WithInFlight(inflight.Config{Initial: 4, Min: 1, Max: 8, SlowAfter: time.Nanosecond, Cut: 0.5})
	defer pool.Close()
	c, err := pool.Get(ctx, t.Name(), envParams())
	if err != nil {
		t.Fatal(err)
	}
	ns := env.Info.TemporalNamespace
	cutsBefore := metricValue(t, inFlightCuts.WithLabelValues(ns))
	describe := func() error {
		_, err := c.WorkflowService().DescribeWorkerDeployment(ctx, &workflowservice.DescribeWorkerDeploymentRequest{
			Namespace: ns, DeploymentName: "no-such-deployment-" + ht.Suffix})
		return err
	}
	for range 3 {
		if err := describe(); err == nil {
			t.Fatal("a worker deployment nobody made was described")
		}
	}
	if got := metricValue(t, inFlightLimit.WithLabelValues(ns)); got != 1 {
		t.Fatalf("limit after three slow answers in a row: %v, want the floor 1 (4, 2, 1)", got)
	}
	if cuts := metricValue(t, inFlightCuts.WithLabelValues(ns)) - cutsBefore; cuts != 2 {
		t.Fatalf("%v cuts, want 2 (the third call found the limit at its floor)", cuts)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() { errs <- describe() })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err == nil || ctx.Err() != nil {
			t.Fatalf("a call held by the limit: %v (context: %v)", err, ctx.Err())
		}
	}
	if _, err := c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: ns}); err != nil {
		t.Fatal(err)
	}
}

// metricValue reads a gauge's or counter's value.
func metricValue(t *testing.T, m interface{ Write(*dto.Metric) error }) float64 {
	t.Helper()
	var d dto.Metric
	if err := m.Write(&d); err != nil {
		t.Fatal(err)
	}
	if g := d.GetGauge(); g != nil {
		return g.GetValue()
	}
	return d.GetCounter().GetValue()
}
