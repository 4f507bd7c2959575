// Package invariants holds the safety checks test/chaos and test/soak
// share: no version loses its workers while Temporal routes it work or a
// pinned workflow is open on it, and no version runs its gate twice.
package invariants

import (
	"fmt"
	"slices"
	"sort"
	"time"
)

// Version names a worker version: its Temporal worker deployment and build.
type Version struct {
	Deployment string `json:"deployment"`
	BuildID    string `json:"buildID"`
}

func (v Version) String() string { return v.Deployment + "@" + v.BuildID }

// Need is a span of time during which a version had to keep its workers:
// Temporal routed it new workflows, or a pinned workflow was open on it.
type Need struct {
	Version Version
	From    time.Time
	// To is when the need ended; zero means it was still open at the end.
	To  time.Time
	Why string
}

// Removal is a version's Deployment losing its workers: scaled to zero or
// deleted, as a watch saw it.
type Removal struct {
	Version Version   `json:"version"`
	At      time.Time `json:"at"`
	What    string    `json:"what"`
}

// Violations lists every removal that happened while the version was
// needed. A watch sees a write a little after it happened, so a removal
// seen at t was made at or before t: the check can only miss a violation
// by that lag, never invent one.
func Violations(removals []Removal, needs []Need) []string {
	byVersion := map[Version][]Need{}
	for _, n := range needs {
		byVersion[n.Version] = append(byVersion[n.Version], n)
	}
	var out []string
	for _, r := range removals {
		for _, n := range byVersion[r.Version] {
			if r.At.Before(n.From) || (!n.To.IsZero() && !r.At.Before(n.To)) {
				continue
			}
			end := "still open at the end"
			if !n.To.IsZero() {
				end = "until " + n.To.Format(time.RFC3339Nano)
			}
			out = append(out, fmt.Sprintf("%s %s at %s while %s (from %s, %s)",
				r.Version, r.What, r.At.Format(time.RFC3339Nano), n.Why, n.From.Format(time.RFC3339Nano), end))
		}
	}
	return out
}

// Routing is one read of a worker deployment's routing from Temporal, with
// the times Temporal recorded for its last changes.
type Routing struct {
	At           time.Time
	Current      string
	CurrentSince time.Time
	Ramping      string
	RampingSince time.Time
	Percentage   float32
}

// RoutingNeeds turns reads of a worker deployment's routing into the spans
// during which each version was current or ramping. Spans start and end at
// the change times Temporal recorded, not at the reads; a state that lasted
// less than the time between two reads can be missed.
func RoutingNeeds(deployment string, reads []Routing) []Need {
	reads = slices.Clone(reads)
	sort.SliceStable(reads, func(i, j int) bool { return reads[i].At.Before(reads[j].At) })
	var out []Need
	track := func(role string, build func(Routing) string, since func(Routing) time.Time) {
		var open *Need
		for _, r := range reads {
			b := build(r)
			if open != nil && open.Version.BuildID == b {
				continue
			}
			if open != nil {
				open.To = since(r)
				if open.To.IsZero() || open.To.Before(open.From) {
					open.To = r.At // no change time: the read is the latest bound
				}
				out = append(out, *open)
				open = nil
			}
			if b != "" {
				from := since(r)
				if from.IsZero() || from.After(r.At) {
					from = r.At
				}
				open = &Need{Version: Version{deployment, b}, From: from, Why: "Temporal routed it new workflows (" + role + ")"}
			}
		}
		if open != nil {
			out = append(out, *open)
		}
	}
	track("current", func(r Routing) string { return r.Current }, func(r Routing) time.Time { return r.CurrentSince })
	track("ramping", func(r Routing) string { return r.Ramping }, func(r Routing) time.Time { return r.RampingSince })
	return out
}

// EndAtDeactivation ends each routing need at its version's last
// deactivation as Temporal recorded it (activations, by version), when
// that comes first. A routing state between two reads is missed, and the
// span before it then runs to the next change the reads saw: a version
// current until v2 took over, unseen, would seem current until v3 did.
// The last deactivation is no earlier than the end of any of the
// version's spans before it, so this never hides a real need.
func EndAtDeactivation(needs []Need, activations map[Version]Need) []Need {
	out := slices.Clone(needs)
	for i, n := range out {
		a, ok := activations[n.Version]
		if !ok || a.To.IsZero() || a.To.Before(n.From) || (!n.To.IsZero() && !a.To.Before(n.To)) {
			continue
		}
		out[i].To = a.To
	}
	return out
}
