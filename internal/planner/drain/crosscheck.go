package drain

import (
	"time"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
)

// The worker deployment's summary of a version's drainage is a copy that
// Temporal's version workflow sends to the deployment workflow; under load
// it can stay DRAINING for good while the version itself reports DRAINED
// (docs/reliability.md), which would keep the version's workers forever.
// A version the summary has shown draining
// for drainageCrossCheckAfter is therefore described itself, at most once
// per drainageCrossCheckEvery.
const (
	// Longer than a version takes to drain by Temporal's defaults (a
	// 3-minute visibility grace period, then a check every 3 minutes), so
	// that a summary that keeps up costs no extra read for most versions.
	drainageCrossCheckAfter = 5 * time.Minute
	drainageCrossCheckEvery = 5 * time.Minute
)

// OwnDrainage is the version's own drainage, from a describe of the version
// rather than the worker deployment's summary.
type OwnDrainage struct {
	Drained bool
	// ChangedAt is when the version's drainage status last changed.
	ChangedAt time.Time
	// CheckedAt is when the controller described the version.
	CheckedAt time.Time
	// DrainingSince is the summary's DrainingSince when the check was
	// made: the report stands for that draining episode only.
	DrainingSince time.Time
}

// Summary is a version as the worker deployment's summary reports it,
// with the version's own report where one was made.
type Summary struct {
	BuildID string
	// Status is the summary's.
	Status v1alpha1.VersionStatus
	// Routed: the routing config makes it current or ramping.
	Routed        bool
	DrainingSince *time.Time
	Own           *OwnDrainage
}

// episodeDrainage is s's own report if it was made in the draining episode
// the summary shows now; a version routed and left again starts afresh.
func episodeDrainage(s Summary) *OwnDrainage {
	o := s.Own
	if o == nil || s.DrainingSince == nil || !s.DrainingSince.Equal(o.DrainingSince) {
		return nil
	}
	return o
}

// ToCrossCheck lists the versions to describe themselves because the
// summary has shown them draining for long: not routed, draining since
// drainageCrossCheckAfter at least, and not cross-checked in the last
// drainageCrossCheckEvery.
func ToCrossCheck(now time.Time, summaries []Summary) []string {
	var out []string
	for _, s := range summaries {
		if due, ok := CrossCheckAt(s); ok && !now.Before(due) {
			out = append(out, s.BuildID)
		}
	}
	return out
}

// CrossCheckAt is when s is next cross-checked, if it is a draining
// version that is not routed.
func CrossCheckAt(s Summary) (time.Time, bool) {
	if s.Routed || s.Status != v1alpha1.VersionDraining || s.DrainingSince == nil {
		return time.Time{}, false
	}
	due := s.DrainingSince.Add(drainageCrossCheckAfter)
	if o := episodeDrainage(s); o != nil && o.CheckedAt.Add(drainageCrossCheckEvery).After(due) {
		due = o.CheckedAt.Add(drainageCrossCheckEvery)
	}
	return due, true
}

// OwnDrained says since when the version's own report of drained wins
// over the summary's draining: in the same draining episode only. Only
// that direction: a version the summary calls drained, or that is routed,
// stays as the summary and routing say.
func OwnDrained(s Summary) (time.Time, bool) {
	o := episodeDrainage(s)
	if o == nil || !o.Drained || s.Status != v1alpha1.VersionDraining || s.Routed {
		return time.Time{}, false
	}
	return o.ChangedAt, true
}
