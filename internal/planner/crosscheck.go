package planner

import (
	"time"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
)

// The worker deployment's summary of a version's drainage is a copy that
// Temporal's version workflow sends to the deployment workflow; under load
// the copy was seen to stay DRAINING for good while the version itself
// reported DRAINED (docs/performance.md, docs/reliability.md), which kept
// the version's workers forever. A version the summary has shown draining
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

// episodeDrainage is tv's own report if it was made in the draining episode
// the summary shows now; a version routed and left again starts afresh.
func episodeDrainage(tv TemporalVersion) *OwnDrainage {
	o := tv.OwnDrainage
	if o == nil || tv.DrainingSince == nil || !tv.DrainingSince.Equal(o.DrainingSince) {
		return nil
	}
	return o
}

// DrainageToCrossCheck lists the versions to describe themselves because the
// summary has shown them draining for long: not routed, draining since
// drainageCrossCheckAfter at least, and not cross-checked in the last
// drainageCrossCheckEvery.
func DrainageToCrossCheck(in Input) []string {
	t := in.Temporal
	if t == nil {
		return nil
	}
	var out []string
	for _, tv := range t.Versions {
		if due, ok := drainageCrossCheckAt(tv, t); ok && !in.Now.Before(due) {
			out = append(out, tv.BuildID)
		}
	}
	return out
}

// drainageCrossCheckAt is when tv's summary is next cross-checked, if it is
// a draining version that is not routed.
func drainageCrossCheckAt(tv TemporalVersion, t *TemporalState) (time.Time, bool) {
	b := tv.BuildID
	if b == t.CurrentBuildID || b == t.RampingBuildID || tv.Status != v1alpha1.VersionDraining || tv.DrainingSince == nil {
		return time.Time{}, false
	}
	due := tv.DrainingSince.Add(drainageCrossCheckAfter)
	if o := episodeDrainage(tv); o != nil && o.CheckedAt.Add(drainageCrossCheckEvery).After(due) {
		due = o.CheckedAt.Add(drainageCrossCheckEvery)
	}
	return due, true
}

// withOwnDrainage takes a version's own report of drained over the
// summary's draining, in the same draining episode. Only that direction: a
// version the summary calls drained, or that is routed, stays as the
// summary and routing say.
func withOwnDrainage(tv TemporalVersion, t *TemporalState) TemporalVersion {
	o := episodeDrainage(tv)
	if o == nil || !o.Drained || tv.Status != v1alpha1.VersionDraining || tv.BuildID == t.CurrentBuildID || tv.BuildID == t.RampingBuildID {
		return tv
	}
	tv.Status = v1alpha1.VersionDrained
	since := o.ChangedAt
	tv.DrainedSince = &since
	return tv
}
