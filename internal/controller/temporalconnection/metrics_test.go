package temporalconnection

import (
	"context"
	"errors"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// reachableOf is the gauge of ns/name, and whether it has a series.
func reachableOf(t *testing.T, name string) (float64, bool) {
	t.Helper()
	ch := make(chan prometheus.Metric)
	go func() {
		reachable.Collect(ch)
		close(ch)
	}()
	value, found := 0.0, false
	for m := range ch {
		var d dto.Metric
		if err := m.Write(&d); err != nil {
			t.Fatal(err)
		}
		labels := map[string]string{}
		for _, l := range d.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if labels["namespace"] == "ns" && labels["name"] == name {
			value, found = d.GetGauge().GetValue(), true
		}
	}
	return value, found
}

// TestReachableGauge: the gauge follows the probe (1 answered, also by a
// server too old; 0 not answered) and its series goes with the connection.
func TestReachableGauge(t *testing.T) {
	f, probe := probedFixture(t, "temporal:7233", "1.32.1")
	want := func(step string, v float64, exists bool) {
		t.Helper()
		got, ok := reachableOf(t, "prod")
		if ok != exists || got != v {
			t.Errorf("%s: gauge %v (series %v), want %v (series %v)", step, got, ok, v, exists)
		}
	}
	f.reconcile(t, "prod")
	want("answered", 1, true)

	probe.version, probe.err = "", errors.New("connection refused")
	f.reconcile(t, "prod")
	want("refused", 0, true)

	probe.version, probe.err = "1.28.1", nil
	f.reconcile(t, "prod")
	want("too old but answering", 1, true)

	if err := f.r.Client.Delete(context.Background(), f.get(t, "prod")); err != nil {
		t.Fatal(err)
	}
	f.reconcile(t, "prod") // no users: the finalizer goes, and the object
	want("deleted", 0, false)
}
