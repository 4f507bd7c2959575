package dashboard

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
)

// maxPoints bounds the ramp history kept per TemporalWorkerDeployment.
const maxPoints = 500

// A RampPoint is the share of new workflows the target version got from
// some moment on, as the TWD's status said.
type RampPoint struct {
	At      time.Time
	Target  string
	Percent int32
}

// History is the ramp of each TWD over time as the dashboard's watch saw
// it since the dashboard started: the API server keeps no history, and
// nothing older than the dashboard's start is known.
type History struct {
	mu     sync.Mutex
	points map[string][]RampPoint
}

func NewHistory() *History { return &History{points: map[string][]RampPoint{}} }

// targetShare is the percentage of new workflows status says the target
// gets: all once current, its ramp while ramping, none otherwise.
func targetShare(twd *v1alpha1.TemporalWorkerDeployment) (string, int32, bool) {
	t := twd.Status.TargetVersion
	if t == nil || t.BuildID == "" {
		return "", 0, false
	}
	switch {
	case t.Status == v1alpha1.VersionCurrent:
		return t.BuildID, 100, true
	case t.Status == v1alpha1.VersionRamping && t.RampPercentage != nil:
		return t.BuildID, *t.RampPercentage, true
	}
	return t.BuildID, 0, true
}

// Observe records twd's ramp at now if it differs from the last one seen.
func (h *History) Observe(twd *v1alpha1.TemporalWorkerDeployment, now time.Time) {
	target, pct, ok := targetShare(twd)
	if !ok {
		return
	}
	key := twd.Namespace + "/" + twd.Name
	h.mu.Lock()
	defer h.mu.Unlock()
	ps := h.points[key]
	if n := len(ps); n > 0 && ps[n-1].Target == target && ps[n-1].Percent == pct {
		return
	}
	ps = append(ps, RampPoint{At: now, Target: target, Percent: pct})
	if len(ps) > maxPoints {
		ps = ps[len(ps)-maxPoints:]
	}
	h.points[key] = ps
}

// Forget drops the history of a deleted TWD.
func (h *History) Forget(namespace, name string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.points, namespace+"/"+name)
}

// Points is a copy of the history of namespace/name, oldest first.
func (h *History) Points(namespace, name string) []RampPoint {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]RampPoint(nil), h.points[namespace+"/"+name]...)
}

// Chart is a ramp history drawn as an SVG step line.
type Chart struct {
	Width, Height int
	Line          string // the polyline's points attribute
	From          time.Time
	Points        []RampPoint
}

// chartSpan is the shortest time a chart spans, so that the first minutes
// do not stretch every step across the whole width.
const chartSpan = 5 * time.Minute

// NewChart draws points from the first one to now.
func NewChart(points []RampPoint, now time.Time) Chart {
	c := Chart{Width: 600, Height: 120, Points: points}
	if len(points) == 0 {
		return c
	}
	c.From = points[0].At
	span := now.Sub(c.From)
	if span < chartSpan {
		span = chartSpan
	}
	x := func(t time.Time) float64 { return float64(t.Sub(c.From)) / float64(span) * float64(c.Width) }
	y := func(p int32) float64 { return float64(c.Height) * (1 - float64(p)/100) }
	var b strings.Builder
	for i, p := range points {
		if i > 0 {
			fmt.Fprintf(&b, "%.1f,%.1f ", x(p.At), y(points[i-1].Percent))
		}
		fmt.Fprintf(&b, "%.1f,%.1f ", x(p.At), y(p.Percent))
	}
	fmt.Fprintf(&b, "%.1f,%.1f", x(now), y(points[len(points)-1].Percent))
	c.Line = b.String()
	return c
}
