// Package inflight decides how many calls the controller keeps in flight
// to one Temporal namespace, and holds the calls above that.
//
// The limit moves as TCP's congestion window does (AIMD): it grows by one
// for every limit's worth of calls answered in Temporal's fast range while
// the limit was reached, and is cut by a factor when a call comes back
// slow or refused for load (ResourceExhausted). A cut
// counts only calls sent after the last cut: the calls in flight then were
// sent under the old limit and say nothing about the new one, so one slow
// spell cuts once, not once per call it slowed.
//
// Window.After is the rule, pure and tested with tables and fuzzing;
// Limiter applies it to real calls.
package inflight

import (
	"math"
	"time"
)

// Config bounds and paces the window.
type Config struct {
	// Initial is the limit before any call came back.
	Initial float64
	// Min and Max bound the limit. Min is at least 1, so calls always go.
	Min, Max float64
	// SlowAfter: a call answered later than this says Temporal is out of
	// its fast range.
	SlowAfter time.Duration
	// Cut is the factor a slow or refused call multiplies the limit by, in
	// (0, 1).
	Cut float64
}

// Defaults are the limit's when turned on (the manager's
// --temporal-slow-call sets SlowAfter): a limit above the reconcile
// workers, so that it binds only after Temporal slowed down. Slow is 10 s,
// a third of a pass's deadline: a routing write takes about a second even
// on a quiet dev server (it waits for the change to reach the task
// queues), and with a 1 s bound ten TWDs rolling out cut the limit to 2
// and took 11 s instead of 4 (docs/performance.md#adaptive-calls-in-flight).
var Defaults = Config{Initial: 16, Min: 2, Max: 64, SlowAfter: 10 * time.Second, Cut: 0.5}

// Valid: the bounds hold together and a call can always go.
func (c Config) Valid() bool {
	return c.Min >= 1 && c.Max >= c.Min && c.Initial >= c.Min && c.Initial <= c.Max &&
		c.SlowAfter > 0 && c.Cut > 0 && c.Cut < 1
}

// Window is the limit and when it was last cut.
type Window struct {
	Limit float64
	// CutAt is when the limit was last cut; zero if never.
	CutAt time.Time
}

// Start is the window before any call.
func Start(c Config) Window { return Window{Limit: c.Initial} }

// Outcome is one call as it came back.
type Outcome struct {
	// Sent is when the call went to Temporal, after any wait for the
	// window; Latency is how long Temporal took to answer it.
	Sent    time.Time
	Latency time.Duration
	// Overloaded: Temporal refused the call for load (ResourceExhausted).
	Overloaded bool
	// Full: the window was full when the call was let go (it took the
	// last place, or waited for one): only then does a fast answer show
	// that a larger limit would be used.
	Full bool
}

// Slow: the outcome says Temporal is out of its fast range.
func (o Outcome) Slow(c Config) bool { return o.Overloaded || o.Latency > c.SlowAfter }

// After is the window once o came back at now.
func (w Window) After(c Config, o Outcome) Window {
	switch {
	case o.Slow(c):
		if !w.CutAt.IsZero() && !o.Sent.After(w.CutAt) {
			return w // sent before the last cut
		}
		w.Limit *= c.Cut
		w.CutAt = o.Sent.Add(o.Latency)
	case o.Full:
		w.Limit += 1 / w.Limit
	}
	w.Limit = math.Min(c.Max, math.Max(c.Min, w.Limit))
	return w
}

// Slots is how many calls the window lets be in flight at once.
func (w Window) Slots() int { return max(1, int(math.Floor(w.Limit))) }
