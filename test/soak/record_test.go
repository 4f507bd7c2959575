package soak

import (
	"context"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/rainbow-deploy/rainbow/test/invariants"
)

// routingLog reads the routing of worker deployments from Temporal every
// interval, and each version's first activation and last deactivation.
type routingLog struct {
	mu    sync.Mutex
	reads map[string][]invariants.Routing
	spans map[invariants.Version]invariants.Need
	errs  int
}

func watchRouting(ctx context.Context, deployments []string, every time.Duration) *routingLog {
	l := &routingLog{reads: map[string][]invariants.Routing{}, spans: map[invariants.Version]invariants.Need{}}
	for _, d := range deployments {
		go func() {
			for {
				wait := every
				if !l.read(ctx, d) {
					wait *= 4 // throttled or not there yet: no need to add to it
				}
				select {
				case <-ctx.Done():
					return
				case <-time.After(wait):
				}
			}
		}()
	}
	return l
}

func (l *routingLog) read(ctx context.Context, deployment string) bool {
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := env.Temporal.WorkflowService().DescribeWorkerDeployment(rctx, &workflowservice.DescribeWorkerDeploymentRequest{
		Namespace: env.Info.TemporalNamespace, DeploymentName: deployment,
	})
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		if ctx.Err() == nil {
			l.errs++ // not found before the first version, or throttled
		}
		return false
	}
	// Each version's activation span, as Temporal keeps it: it covers a
	// routing state too short for the reads to see.
	for _, vs := range resp.GetWorkerDeploymentInfo().GetVersionSummaries() {
		from, to := vs.GetFirstActivationTime(), vs.GetLastDeactivationTime()
		switch vs.GetStatus() {
		case enumspb.WORKER_DEPLOYMENT_VERSION_STATUS_CURRENT, enumspb.WORKER_DEPLOYMENT_VERSION_STATUS_RAMPING:
			continue // routed now: the routing reads cover it
		}
		if from == nil || to == nil || to.AsTime().Before(from.AsTime()) {
			continue
		}
		v := invariants.Version{Deployment: deployment, BuildID: vs.GetDeploymentVersion().GetBuildId()}
		l.spans[v] = invariants.Need{Version: v, From: from.AsTime(), To: to.AsTime(), Why: "Temporal routed it new workflows (its first activation to its last deactivation)"}
	}
	rc := resp.GetWorkerDeploymentInfo().GetRoutingConfig()
	r := invariants.Routing{
		At:         time.Now(),
		Current:    rc.GetCurrentDeploymentVersion().GetBuildId(),
		Ramping:    rc.GetRampingDeploymentVersion().GetBuildId(),
		Percentage: rc.GetRampingVersionPercentage(),
	}
	if ts := rc.GetCurrentVersionChangedTime(); ts != nil {
		r.CurrentSince = ts.AsTime()
	}
	if ts := rc.GetRampingVersionChangedTime(); ts != nil {
		r.RampingSince = ts.AsTime()
	}
	l.reads[deployment] = append(l.reads[deployment], r)
	return true
}

func (l *routingLog) needs() []invariants.Need {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []invariants.Need
	for d, reads := range l.reads {
		out = append(out, invariants.EndAtDeactivation(invariants.RoutingNeeds(d, reads), l.spans)...)
	}
	for _, n := range l.spans {
		out = append(out, n)
	}
	return out
}
