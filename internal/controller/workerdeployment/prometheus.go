package workerdeployment

import (
	"context"
	"fmt"
	"strconv"

	"golang.org/x/time/rate"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/internal/planner"
	"github.com/rainbow-deploy/rainbow/internal/promquery"
)

// Prometheus checks share one server, so they share one rate limit, apart
// from Temporal's read budget.
const (
	prometheusRPS   = 5
	prometheusBurst = 20
)

// PrometheusReader runs the queries of the analysis' Prometheus checks.
type PrometheusReader struct {
	client  *promquery.Client
	limiter *rate.Limiter
}

// NewPrometheusReader reads from c; nil when c is (no URL configured).
func NewPrometheusReader(c *promquery.Client) *PrometheusReader {
	if c == nil {
		return nil
	}
	return &PrometheusReader{client: c, limiter: rate.NewLimiter(prometheusRPS, prometheusBurst)}
}

// readPrometheus renders a Prometheus check's query for this target and
// window and runs it as an instant query; the planner judges the answer.
func (r *Reconciler) readPrometheus(ctx context.Context, o *observation, rd planner.AnalysisRead, c planner.Check) planner.Reading {
	rg := planner.Reading{Check: c.Name}
	if r.Prometheus == nil {
		rg.Prometheus.Unconfigured = true
		return rg
	}
	if c.Prometheus == nil || rd.Since.IsZero() {
		return rg // nothing to send: the planner says why
	}
	now := o.input.Now
	q, err := promquery.Render(c.Prometheus.Query, promquery.Fields{
		BuildID: rd.BuildID, CurrentBuildID: rd.CurrentBuildID, DeploymentName: o.deploymentName,
		Namespace: o.twd.Namespace, Name: o.twd.Name, Window: promquery.WindowOf(rd.Since, now),
	})
	if err != nil {
		rg.Err = fmt.Sprintf("spec.rollout.analysis.checks[%s].prometheus.query: %v", c.Name, err)
		return rg
	}
	rg.Prometheus.Query = q
	if !r.Prometheus.limiter.AllowN(now, 1) {
		rg.Err = fmt.Sprintf("the controller's Prometheus query budget (%d queries a second) is spent; evaluated again in spec.rollout.analysis.interval", prometheusRPS)
		return rg
	}
	res, err := r.Prometheus.client.Query(ctx, q, now)
	if err != nil {
		rg.Err = err.Error()
		return rg
	}
	rg.Prometheus.Series, rg.Prometheus.Value = res.Series, res.Value
	return rg
}

// promCheck is a Prometheus check for the planner. The CRD's pattern
// makes the bounds decimal numbers.
func promCheck(p *v1alpha1.PrometheusCheck) *planner.PromCheck {
	if p == nil {
		return nil
	}
	bound := func(s *string) *float64 {
		if s == nil {
			return nil
		}
		f, err := strconv.ParseFloat(*s, 64)
		if err != nil {
			return nil
		}
		return &f
	}
	return &planner.PromCheck{Query: p.Query, Max: bound(p.Max), Min: bound(p.Min)}
}
