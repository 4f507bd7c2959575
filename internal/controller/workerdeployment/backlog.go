package workerdeployment

import (
	"context"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/internal/backlog"
	"github.com/rainbow-deploy/rainbow/internal/planner"
	"github.com/rainbow-deploy/rainbow/internal/temporal"
)

// fillBacklogs gives the planner the backlogs it asks for
// (planner.BacklogsToRead), reading those not read recently, and records
// the describes this pass made, which carry their backlogs too. A failed
// read leaves a backlog unknown, which the planner takes as waiting.
func (r *Reconciler) fillBacklogs(ctx context.Context, o *observation) {
	b := r.Backlogs
	if b == nil || o.input.Temporal == nil {
		return
	}
	key, now := keyOf(o.twd), b.Clock.Now()
	running, _ := runningBuilds(o.deployments)
	for build, d := range o.details {
		if slices.Contains(running, build) && d.Backlog != nil {
			b.Record(key, build, o.deploymentName, d, now)
		}
	}
	want := planner.BacklogsToRead(o.input)
	if err := b.Refresh(ctx, o.twd, want); err != nil {
		logf.FromContext(ctx).Info("could not read the backlog of versions scaled to zero by someone else; taking it as waiting", "versions", want, "error", err.Error())
	}
	vs := o.input.Temporal.Versions
	for i := range vs {
		vs[i].Backlog = nil
		if rd, ok := b.Fresh(key, vs[i].BuildID, now); ok && rd.Queues != nil && slices.Contains(want, vs[i].BuildID) {
			n := (temporal.VersionDetail{Backlog: rd.Queues}).BacklogCount()
			vs[i].Backlog = &n
		}
	}
}

// runningBuilds are the versions with running workers (planner.Running);
// zeroed are those someone else scaled to zero.
func runningBuilds(deps map[string]*appsv1.Deployment) (running, zeroed []string) {
	for build, d := range deps {
		pd := plannerDeployment(d)
		if !planner.Running(pd) {
			continue
		}
		running = append(running, build)
		if pd.Replicas == 0 {
			zeroed = append(zeroed, build)
		}
	}
	slices.Sort(running)
	slices.Sort(zeroed)
	return running, zeroed
}

// Fleet tells backlog.Backlogs what the controller knows of a TWD's
// versions.
type Fleet struct{ Client client.Reader }

var _ backlog.Fleet = Fleet{}

// Running lists the TWD's Deployments: the versions running, and those
// someone else scaled to zero.
func (f Fleet) Running(ctx context.Context, twd *v1alpha1.TemporalWorkerDeployment, opts ...client.ListOption) (running, zeroed []string, err error) {
	deps, err := ownedDeployments(ctx, f.Client, twd, opts...)
	if err != nil {
		return nil, nil, err
	}
	running, zeroed = runningBuilds(deps)
	return running, zeroed, nil
}

// Autoscaled: an autoscaler owns the TWD's replicas.
func (f Fleet) Autoscaled(ctx context.Context, twd *v1alpha1.TemporalWorkerDeployment) (bool, error) {
	in := planner.Input{Spec: planner.Spec{Replicas: twd.Spec.Replicas}}
	if in.Spec.Replicas == nil {
		return true, nil
	}
	var list v1alpha1.TemporalWorkerOwnedResourceList
	if err := f.Client.List(ctx, &list, client.InNamespace(twd.Namespace), client.MatchingFields{ownedByWorker: twd.Name}); err != nil {
		return false, err
	}
	for i := range list.Items {
		in.OwnedResources = append(in.OwnedResources, plannerOwned(&list.Items[i], twd))
	}
	return planner.ReplicasAutoscaled(in), nil
}
