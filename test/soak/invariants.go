// Package soak runs the controller for a long time under live traffic:
// rollouts of every strategy, custom build ID changes, controller restarts
// and a steady stream of pinned and auto-upgrade workflows, then checks
// that nothing was lost (with test/invariants). This file holds the checks
// of its own that need no running parts: memory and convergence times.
package soak

import (
	"math"
	"slices"
	"sort"
	"time"
)

// RSSSample is the resident memory of the controller's process at a time.
type RSSSample struct {
	At    time.Time `json:"at"`
	PID   int       `json:"pid"`
	Bytes int64     `json:"bytes"`
}

// Flatness says whether the memory of the controller's last process stayed
// flat after its warm-up. The samples after the warm-up are split in
// thirds; memory is flat when the median of the last third exceeds the
// median of the first third by no more than Tolerance: 10% of the first
// third's median, at least 8 MiB (a heap that grows with what it caches
// grows without bound; a Go heap between garbage collections wobbles by a
// few MiB).
type Flatness struct {
	PID         int       `json:"pid"`
	WindowStart time.Time `json:"windowStart"`
	WindowEnd   time.Time `json:"windowEnd"`
	Samples     int       `json:"samples"`
	// Evaluated is false when the window was shorter than the minimum
	// asked for: too short to tell growth from noise.
	Evaluated      bool    `json:"evaluated"`
	FirstMedianMiB float64 `json:"firstThirdMedianMiB"`
	LastMedianMiB  float64 `json:"lastThirdMedianMiB"`
	GrowthMiB      float64 `json:"growthMiB"`
	ToleranceMiB   float64 `json:"toleranceMiB"`
	PeakMiB        float64 `json:"peakMiB"`
	// SlopeMiBPerHour is the least-squares slope over the window.
	SlopeMiBPerHour float64 `json:"slopeMiBPerHour"`
	Flat            bool    `json:"flat"`
}

const mib = 1 << 20

// CheckFlat evaluates the samples of the last process (the last PID seen)
// taken at least warmup after its first sample.
func CheckFlat(samples []RSSSample, warmup, minWindow time.Duration) Flatness {
	var f Flatness
	if len(samples) == 0 {
		return f
	}
	f.PID = samples[len(samples)-1].PID
	var first time.Time
	var window []RSSSample
	for _, s := range samples {
		if s.PID != f.PID {
			continue
		}
		if first.IsZero() {
			first = s.At
		}
		if s.At.Sub(first) >= warmup {
			window = append(window, s)
		}
	}
	f.Samples = len(window)
	if len(window) < 3 {
		return f
	}
	f.WindowStart, f.WindowEnd = window[0].At, window[len(window)-1].At
	third := len(window) / 3
	firstMed := median(window[:third])
	lastMed := median(window[len(window)-third:])
	f.FirstMedianMiB, f.LastMedianMiB = firstMed/mib, lastMed/mib
	f.GrowthMiB = (lastMed - firstMed) / mib
	f.ToleranceMiB = math.Max(0.10*firstMed, 8*mib) / mib
	for _, s := range window {
		f.PeakMiB = math.Max(f.PeakMiB, float64(s.Bytes)/mib)
	}
	f.SlopeMiBPerHour = slope(window) * float64(time.Hour) / mib
	f.Evaluated = f.WindowEnd.Sub(f.WindowStart) >= minWindow
	f.Flat = f.GrowthMiB <= f.ToleranceMiB
	return f
}

func median(s []RSSSample) float64 {
	v := make([]float64, len(s))
	for i := range s {
		v[i] = float64(s[i].Bytes)
	}
	sort.Float64s(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

// slope is the least-squares slope of bytes over nanoseconds.
func slope(s []RSSSample) float64 {
	var sx, sy, sxx, sxy float64
	t0 := s[0].At
	for _, p := range s {
		x, y := float64(p.At.Sub(t0)), float64(p.Bytes)
		sx, sy, sxx, sxy = sx+x, sy+y, sxx+x*x, sxy+x*y
	}
	n := float64(len(s))
	d := n*sxx - sx*sx
	if d == 0 {
		return 0
	}
	return (n*sxy - sx*sy) / d
}

// Percentiles are the 50th and 90th percentiles and the maximum of a set of
// durations, in seconds.
type Percentiles struct {
	N   int     `json:"n"`
	P50 float64 `json:"p50Seconds"`
	P90 float64 `json:"p90Seconds"`
	Max float64 `json:"maxSeconds"`
}

// Summarize computes Percentiles (nearest rank).
func Summarize(d []time.Duration) Percentiles {
	if len(d) == 0 {
		return Percentiles{}
	}
	s := slices.Clone(d)
	slices.Sort(s)
	at := func(q float64) float64 {
		i := int(math.Ceil(q*float64(len(s)))) - 1
		return s[max(i, 0)].Seconds()
	}
	return Percentiles{N: len(s), P50: at(0.5), P90: at(0.9), Max: s[len(s)-1].Seconds()}
}
