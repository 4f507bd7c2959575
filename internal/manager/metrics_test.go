package manager

import "testing"

// TestMetricsOptions: --metrics-secure turns on HTTPS and the
// authentication and authorization filter together; without it neither.
func TestMetricsOptions(t *testing.T) {
	for _, secure := range []bool{false, true} {
		o := metricsOptions(Options{MetricsAddr: ":8080", MetricsSecure: secure})
		if o.BindAddress != ":8080" || o.SecureServing != secure || (o.FilterProvider != nil) != secure {
			t.Errorf("secure=%v: bind %q, SecureServing %v, filter %v", secure, o.BindAddress, o.SecureServing, o.FilterProvider != nil)
		}
	}
}
