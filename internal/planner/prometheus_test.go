package planner

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/internal/fuzzsrc"
)

func promCheckOf(min, max *float64) Check {
	return Check{Name: "errors", Kind: v1alpha1.CheckPrometheus, MinSamples: 20, Prometheus: &PromCheck{Query: "q", Min: min, Max: max}}
}

func promRead(series int, value float64) Reading {
	return Reading{Check: "errors", Prometheus: PromReading{Query: `sum(rate(x{b="v2"}[600s]))`, Series: series, Value: value}}
}

func TestJudgePrometheus(t *testing.T) {
	upTo := promCheckOf(nil, ptr(0.1))
	between := promCheckOf(ptr(0.5), ptr(2.0))
	for name, tc := range map[string]struct {
		check Check
		read  Reading
		since time.Time
		want  v1alpha1.AnalysisResult
		says  string
	}{
		"below max":                 {upTo, promRead(1, 0.05), window, v1alpha1.AnalysisPassed, "= 0.05 since 2026-03-01T11:50:00Z; within max 0.1"},
		"equal to max passes":       {upTo, promRead(1, 0.1), window, v1alpha1.AnalysisPassed, "within max 0.1"},
		"above max":                 {upTo, promRead(1, 0.4), window, v1alpha1.AnalysisFailed, `query sum(rate(x{b="v2"}[600s])) = 0.4 since 2026-03-01T11:50:00Z; above max 0.1`},
		"+Inf is above max":         {upTo, promRead(1, math.Inf(1)), window, v1alpha1.AnalysisFailed, "above max"},
		"below min":                 {between, promRead(1, 0.2), window, v1alpha1.AnalysisFailed, "below min 0.5"},
		"within both":               {between, promRead(1, 1), window, v1alpha1.AnalysisPassed, "within min 0.5 and max 2"},
		"no data":                   {upTo, promRead(0, 0), window, v1alpha1.AnalysisInconclusive, "returned no data"},
		"NaN is no data":            {upTo, promRead(1, math.NaN()), window, v1alpha1.AnalysisInconclusive, "NaN"},
		"NaN is not within bounds":  {between, promRead(1, math.NaN()), window, v1alpha1.AnalysisInconclusive, "NaN"},
		"several series":            {upTo, promRead(3, 0), window, v1alpha1.AnalysisInconclusive, "returned 3 series; it must aggregate to one value"},
		"Prometheus unreachable":    {upTo, Reading{Check: "errors", Err: "connection refused"}, window, v1alpha1.AnalysisInconclusive, "could not query Prometheus (connection refused)"},
		"no Prometheus configured":  {upTo, Reading{Check: "errors", Prometheus: PromReading{Unconfigured: true}}, window, v1alpha1.AnalysisInconclusive, "--analysis-prometheus-url"},
		"window unknown":            {upTo, promRead(1, 0), time.Time{}, v1alpha1.AnalysisInconclusive, "no window"},
		"minSamples does not apply": {upTo, promRead(1, 0), window, v1alpha1.AnalysisPassed, "within"},
		"the query on one line":     {upTo, Reading{Check: "errors", Prometheus: PromReading{Query: "sum(a)\n  /\n  sum(b)", Series: 1}}, window, v1alpha1.AnalysisPassed, "query sum(a) / sum(b) = 0"},
		"a long query is cut":       {upTo, Reading{Check: "errors", Prometheus: PromReading{Query: strings.Repeat("x", 1000), Series: 1}}, window, v1alpha1.AnalysisPassed, strings.Repeat("x", maxEvidenceQuery) + "… ="},
	} {
		got, msg := Judge(tc.check, tc.read, tc.since)
		if got != tc.want || !strings.Contains(msg, tc.says) {
			t.Errorf("%s: Judge = %s (%s), want %s saying %q", name, got, msg, tc.want, tc.says)
		}
	}
}

// prometheusAnalysed: v2 ramps 10% under one Prometheus check (max 0.1).
func prometheusAnalysed(in *Input) {
	analysed(in)
	in.Spec.Analysis.Checks = []Check{promCheckOf(nil, ptr(0.1))}
}

func TestPrometheusCheckDecides(t *testing.T) {
	readProm := func(r Reading) func(*Input) { return func(in *Input) { in.Analysis.Readings = []Reading{r} } }
	for name, tc := range map[string]struct {
		in     Input
		reason string
		abort  bool
		says   string
	}{
		"a value within bounds ends the step": {with(base(), prometheusAnalysed, readProm(promRead(1, 0.01))), v1alpha1.ReasonRamping, false, "setting the ramp of version v2 to 50%"},
		"a value beyond aborts":               {with(base(), prometheusAnalysed, readProm(promRead(1, 0.5))), v1alpha1.ReasonRolloutAborted, true, "check errors failed 1 time(s) in a row, more than its failureLimit: errors: query"},
		"no Prometheus holds the step":        {with(base(), prometheusAnalysed, readProm(Reading{Check: "errors", Prometheus: PromReading{Unconfigured: true}})), v1alpha1.ReasonRamping, false, "holding the 10% ramp of version v2: check errors is Inconclusive"},
		"no data holds the step":              {with(base(), prometheusAnalysed, readProm(promRead(0, 0))), v1alpha1.ReasonRamping, false, "returned no data"},
	} {
		got := Plan(tc.in)
		if got.Ready.Reason != tc.reason || !strings.Contains(got.Ready.Message, tc.says) {
			t.Errorf("%s: Ready = %s (%s), want %s saying %q", name, got.Ready.Reason, got.Ready.Message, tc.reason, tc.says)
		}
		if (got.AbortRollout != nil) != tc.abort {
			t.Errorf("%s: AbortRollout = %+v, want set: %v", name, got.AbortRollout, tc.abort)
		}
		if !tc.abort && tc.reason == v1alpha1.ReasonRamping && strings.Contains(tc.says, "holding") && got.Routing != nil {
			t.Errorf("%s: routes %+v while the check holds the step", name, got.Routing)
		}
	}
}

// TestJudgePrometheusPassesOnlyAValueWithinBounds: whatever the reading,
// a Prometheus check passes only on exactly one value that is a number
// within every bound it has, read without error from a configured
// Prometheus.
func TestJudgePrometheusPassesOnlyAValueWithinBounds(t *testing.T) {
	fuzzsrc.EachRandom(t, 2828, 20000, 16, func(data []byte) []error {
		s := fuzzsrc.New(data)
		c, r := fuzzPromCheck(s), fuzzPromReading(s)
		r.Err = fuzzsrc.Pick(s, "", "", "refused")
		res, msg := Judge(c, r, fuzzsrc.Pick(s, window, time.Time{}))
		p, v := c.Prometheus, r.Prometheus.Value
		ok := r.Err == "" && !r.Prometheus.Unconfigured && r.Prometheus.Series == 1 && !math.IsNaN(v) &&
			(p.Max == nil || v <= *p.Max) && (p.Min == nil || v >= *p.Min) && (p.Max != nil || p.Min != nil)
		if res == v1alpha1.AnalysisPassed && !ok {
			return []error{fmt.Errorf("passed %+v on %+v: %s", c.Prometheus, r, msg)}
		}
		return nil
	})
}

func fuzzPromCheck(s *fuzzsrc.Source) Check {
	bound := func() *float64 { return fuzzsrc.Pick[*float64](s, nil, ptr(0.0), ptr(0.1), ptr(-1.0), ptr(100.0)) }
	return Check{Name: "errors", Kind: v1alpha1.CheckPrometheus, Prometheus: &PromCheck{Query: "q", Max: bound(), Min: bound()}}
}

func fuzzPromReading(s *fuzzsrc.Source) Reading {
	return Reading{Check: "errors", Prometheus: PromReading{Query: "q", Unconfigured: s.Intn(6) == 0, Series: fuzzsrc.Pick(s, 0, 1, 1, 1, 2),
		Value: fuzzsrc.Pick(s, 0, 0.05, 0.1, 0.5, -2, 1000, math.NaN(), math.Inf(1), math.Inf(-1))}}
}
