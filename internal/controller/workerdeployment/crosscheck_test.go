package workerdeployment

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/internal/planner"
)

// A remembered cross-check stands only for the draining episode it was
// made in.
func TestDrainageCacheStamp(t *testing.T) {
	key := types.NamespacedName{Namespace: "ns", Name: "w"}
	t0 := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	since := t0.Add(-time.Hour)
	own := planner.OwnDrainage{Drained: true, ChangedAt: t0.Add(-30 * time.Minute), CheckedAt: t0}
	state := func(status v1alpha1.VersionStatus, drainingSince time.Time) *planner.TemporalState {
		return &planner.TemporalState{Versions: []planner.TemporalVersion{{BuildID: "v1", Status: status, DrainingSince: &drainingSince}}}
	}

	var c drainageCache
	c.put(key, "v1", since, own)
	s := state(v1alpha1.VersionDraining, since)
	c.stamp(key, s)
	if got := s.Versions[0].OwnDrainage; got == nil || *got != own {
		t.Fatalf("same episode: OwnDrainage = %+v, want %+v", got, own)
	}

	s = state(v1alpha1.VersionDraining, t0.Add(-time.Minute)) // current again, then left again
	c.stamp(key, s)
	if got := s.Versions[0].OwnDrainage; got != nil {
		t.Fatalf("a later episode took the earlier one's report: %+v", got)
	}
	s = state(v1alpha1.VersionDraining, since)
	c.stamp(key, s)
	if got := s.Versions[0].OwnDrainage; got != nil {
		t.Fatalf("an entry dropped for a later episode came back: %+v", got)
	}

	c.put(key, "v1", since, own)
	s = state(v1alpha1.VersionDrained, since) // the summary caught up
	c.stamp(key, s)
	if s.Versions[0].OwnDrainage != nil || len(c.twds[key]) != 0 {
		t.Fatalf("summary drained: OwnDrainage %+v, entries %v; want neither", s.Versions[0].OwnDrainage, c.twds[key])
	}
}
