package planner

import (
	"slices"
	"time"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
)

// AfterRouting is the worker deployment as Temporal reports it right after
// accepting a routing write planned on s: routed anew, and still applying
// the change to the task queues (RoutingPropagating), which the next
// describe says the end of. The caller writes status from it at once. What
// only Temporal knows stays unknown: when the version that lost its
// traffic started draining (so no drain rule acts on it), and the exact
// times of the change, taken as at (the ramp's change time, which the next
// step's pause is counted from, is replaced by Temporal's at the next
// describe).
func AfterRouting(s *TemporalState, r Routing, identity string, at time.Time) *TemporalState {
	c := *s
	c.Versions = slices.Clone(s.Versions)
	c.LastModifierIdentity = identity
	// Temporal applies the change to the task queues after accepting it;
	// the next describe says when it has.
	c.RoutingPropagating, c.RoutingChangedAt = true, at
	prevCurrent, prevRamping := s.CurrentBuildID, s.RampingBuildID
	switch r.Op {
	case SetCurrent:
		c.CurrentBuildID = r.BuildID
		if c.RampingBuildID == r.BuildID {
			c.RampingBuildID, c.RampPercentage, c.RampChangedAt = "", 0, time.Time{}
		}
	case SetRamp:
		c.RampingBuildID, c.RampPercentage, c.RampChangedAt = r.BuildID, r.RampPercentage, at
	case RemoveRamp:
		c.RampingBuildID, c.RampPercentage, c.RampChangedAt = "", 0, time.Time{}
	}
	t := at
	for i := range c.Versions {
		v := &c.Versions[i]
		switch v.BuildID {
		case c.CurrentBuildID:
			v.Status = v1alpha1.VersionCurrent
			if v.BuildID != prevCurrent {
				v.CurrentSince, v.LastCurrentAt, v.RampingSince, v.DrainingSince, v.DrainedSince = &t, &t, nil, nil, nil
			}
		case c.RampingBuildID:
			v.Status = v1alpha1.VersionRamping
			if v.BuildID != prevRamping {
				v.RampingSince, v.DrainingSince, v.DrainedSince = &t, nil, nil
			}
		case prevCurrent, prevRamping:
			// Temporal drains a version as soon as it loses its traffic.
			v.Status = v1alpha1.VersionDraining
			v.CurrentSince, v.RampingSince, v.DrainingSince = nil, nil, nil
		}
	}
	return &c
}

// AfterDeletions is s once Temporal deleted the versions builds.
func AfterDeletions(s *TemporalState, builds []string) *TemporalState {
	c := *s
	c.Versions = slices.DeleteFunc(slices.Clone(s.Versions), func(v TemporalVersion) bool { return slices.Contains(builds, v.BuildID) })
	return &c
}
