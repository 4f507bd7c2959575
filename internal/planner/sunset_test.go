package planner

import (
	"testing"
	"time"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
)

// TestDrainingIsWatchedClosely: a version that just lost its traffic is
// described every few seconds, backing off to once a minute.
func TestDrainingIsWatchedClosely(t *testing.T) {
	promotedAgo := func(d time.Duration) func(*Input) {
		return func(in *Input) {
			in.Temporal.CurrentBuildID = "v2"
			v2 := version("v2", current)
			v2.CurrentSince = at(-d)
			setVersion(in, v2)
			setVersion(in, version("v1", draining))
		}
	}
	for _, tc := range []struct {
		ago, want time.Duration
	}{
		{2 * time.Second, 5 * time.Second},
		{40 * time.Second, 10 * time.Second},
		{10 * time.Minute, time.Minute},
	} {
		got := Plan(with(base(), promotedAgo(tc.ago)))
		if got.RequeueAfter != tc.want {
			t.Errorf("promoted %s ago: requeue %s, want %s", tc.ago, got.RequeueAfter, tc.want)
		}
		if got.Ready.Reason != v1alpha1.ReasonRolloutComplete || len(got.Scale) > 0 {
			t.Errorf("promoted %s ago: %+v", tc.ago, got)
		}
	}
}
