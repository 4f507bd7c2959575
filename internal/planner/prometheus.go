package planner

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
)

// PromCheck is a Prometheus check's query and bounds: the value fails
// the check above Max or below Min (nil: no such bound).
type PromCheck struct {
	Query    string
	Max, Min *float64
}

// PromReading is what observe got from Prometheus for one check.
type PromReading struct {
	// Query is the query as rendered and sent.
	Query string
	// Unconfigured: the manager was given no Prometheus URL.
	Unconfigured bool
	// Series is how many samples the answer held (1 for a scalar), and
	// Value the sample's value when it held one.
	Series int
	Value  float64
}

// maxEvidenceQuery bounds the query quoted in status.
const maxEvidenceQuery = 300

// judgePrometheus is Judge for a Prometheus check: only one value, not
// NaN, within the bounds passes; no data, several series, an error or no
// Prometheus at all hold the step.
func judgePrometheus(c Check, r Reading, since time.Time) (v1alpha1.AnalysisResult, string) {
	p := r.Prometheus
	if p.Unconfigured {
		return v1alpha1.AnalysisInconclusive, fmt.Sprintf("%s: the controller has no Prometheus to query: set the manager's flag "+
			"--analysis-prometheus-url (Helm value analysis.prometheus.url); holding the step", c.Name)
	}
	// One line in status, however the query was written.
	q := strings.Join(strings.Fields(p.Query), " ")
	if len(q) > maxEvidenceQuery {
		q = q[:maxEvidenceQuery] + "…"
	}
	if r.Err != "" {
		return v1alpha1.AnalysisInconclusive, fmt.Sprintf("%s: could not query Prometheus (%s); holding the step", c.Name, r.Err)
	}
	if since.IsZero() {
		return v1alpha1.AnalysisInconclusive, fmt.Sprintf("%s: Temporal did not report when the target started ramping, so there is no window to query", c.Name)
	}
	if c.Prometheus == nil {
		return v1alpha1.AnalysisInconclusive, fmt.Sprintf("%s: a Prometheus check without a query", c.Name)
	}
	got := fmt.Sprintf("%s: query %s", c.Name, q)
	window := " since " + since.UTC().Format(time.RFC3339)
	switch {
	case p.Series == 0:
		return v1alpha1.AnalysisInconclusive, got + " returned no data" + window + "; holding the step until it does"
	case p.Series > 1:
		return v1alpha1.AnalysisInconclusive, fmt.Sprintf("%s returned %d series; it must aggregate to one value (sum, max, avg, ...); holding the step", got, p.Series)
	case math.IsNaN(p.Value):
		return v1alpha1.AnalysisInconclusive, got + " returned NaN (no data, such as 0/0)" + window + "; holding the step"
	}
	got += fmt.Sprintf(" = %.6g%s", p.Value, window)
	bounds := ""
	if m := c.Prometheus.Min; m != nil {
		if p.Value < *m {
			return v1alpha1.AnalysisFailed, fmt.Sprintf("%s; below min %g", got, *m)
		}
		bounds = fmt.Sprintf("min %g", *m)
	}
	if m := c.Prometheus.Max; m != nil {
		if p.Value > *m {
			return v1alpha1.AnalysisFailed, fmt.Sprintf("%s; above max %g", got, *m)
		}
		if bounds != "" {
			bounds += " and "
		}
		bounds += fmt.Sprintf("max %g", *m)
	}
	if bounds == "" {
		return v1alpha1.AnalysisInconclusive, got + "; the check has neither max nor min"
	}
	return v1alpha1.AnalysisPassed, got + "; within " + bounds
}
