package soak

import (
	"context"
	"fmt"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/rainbow-deploy/rainbow/internal/workload"
)

// deploymentLog watches the versioned Deployments of a namespace and
// records, with the time the watch delivered it, every scale to zero and
// every deletion.
type deploymentLog struct {
	mu       sync.Mutex
	removals []Removal
	created  int
	scales   int
	// deployment maps a TWD name to its Temporal worker deployment name.
	deployment func(twd string) string
}

func watchDeployments(ctx context.Context, namespace string, deployment func(string) string) (*deploymentLog, error) {
	l := &deploymentLog{deployment: deployment}
	f := informers.NewSharedInformerFactoryWithOptions(env.Clients, 0, informers.WithNamespace(namespace))
	inf := f.Apps().V1().Deployments().Informer()
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			l.mu.Lock()
			l.created++
			l.mu.Unlock()
		},
		UpdateFunc: func(oldObj, newObj any) {
			o, n := oldObj.(*appsv1.Deployment), newObj.(*appsv1.Deployment)
			before, after := ptr.Deref(o.Spec.Replicas, 1), ptr.Deref(n.Spec.Replicas, 1)
			if before != after {
				l.mu.Lock()
				l.scales++
				l.mu.Unlock()
				if after == 0 {
					l.record(n, fmt.Sprintf("scaled to 0 (from %d)", before))
				}
			}
			if o.DeletionTimestamp == nil && n.DeletionTimestamp != nil {
				l.record(n, "deletion requested")
			}
		},
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if d, ok := obj.(*appsv1.Deployment); ok {
				l.record(d, "deleted")
			}
		},
	})
	if err != nil {
		return nil, err
	}
	go inf.Run(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return nil, fmt.Errorf("the Deployment watch did not sync")
	}
	return l, nil
}

func (l *deploymentLog) record(d *appsv1.Deployment, what string) {
	build := d.Labels[workload.LabelBuildID]
	if build == "" {
		return
	}
	r := Removal{Version: Version{l.deployment(d.Labels[workload.LabelWorker]), build}, At: time.Now(), What: "Deployment " + d.Name + " " + what}
	l.mu.Lock()
	l.removals = append(l.removals, r)
	l.mu.Unlock()
}

func (l *deploymentLog) snapshot() (removals []Removal, created, scales int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Removal(nil), l.removals...), l.created, l.scales
}

// routingLog reads the routing of worker deployments from Temporal every
// interval, and each version's first activation and last deactivation.
type routingLog struct {
	mu    sync.Mutex
	reads map[string][]Routing
	spans map[Version]Need
	errs  int
}

func watchRouting(ctx context.Context, deployments []string, every time.Duration) *routingLog {
	l := &routingLog{reads: map[string][]Routing{}, spans: map[Version]Need{}}
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
		v := Version{deployment, vs.GetDeploymentVersion().GetBuildId()}
		l.spans[v] = Need{Version: v, From: from.AsTime(), To: to.AsTime(), Why: "Temporal routed it new workflows (its first activation to its last deactivation)"}
	}
	rc := resp.GetWorkerDeploymentInfo().GetRoutingConfig()
	r := Routing{
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

func (l *routingLog) needs() []Need {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []Need
	for d, reads := range l.reads {
		out = append(out, RoutingNeeds(d, reads)...)
	}
	for _, n := range l.spans {
		out = append(out, n)
	}
	return out
}
