package workerdeployment

import (
	"context"
	"errors"
	"slices"

	"k8s.io/apimachinery/pkg/types"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/internal/freshness"
	"github.com/rainbow-deploy/rainbow/internal/planner"
	"github.com/rainbow-deploy/rainbow/internal/temporal"
)

// drainageDescribes holds what versions said of their own drainage when
// the worker deployment's summary kept them draining
// (planner.DrainageToCrossCheck), which spares describing them again. A
// report stands only for the draining episode it was made in
// (freshness.OwnDrainageStands); the store drops the others so that it
// does not grow.
type drainageDescribes struct{ byBuild[planner.OwnDrainage] }

// stamp sets OwnDrainage on the versions of s that the store knows for
// their current draining episode, and drops the entries of the others.
func (c *drainageDescribes) stamp(key types.NamespacedName, s *planner.TemporalState) {
	c.keep(key, func(b string, own planner.OwnDrainage) bool {
		i := slices.IndexFunc(s.Versions, func(v planner.TemporalVersion) bool { return v.BuildID == b })
		if i < 0 || !freshness.OwnDrainageStands(s.Versions[i], own) {
			return false
		}
		s.Versions[i].OwnDrainage = &own
		return true
	})
}

// crossCheckDrainage completes the observed summary with what the cache
// knows, then describes the versions the planner asks about. A failed
// describe only leaves the summary's word standing: it is logged, and the
// next pass asks again.
func (r *Reconciler) crossCheckDrainage(ctx context.Context, o *observation) {
	s := o.input.Temporal
	if s == nil || o.api == nil {
		return
	}
	key := keyOf(o.twd)
	r.drainage.stamp(key, s)
	for _, b := range planner.DrainageToCrossCheck(o.input) {
		d, err := o.api.DescribeVersionNoPollers(ctx, o.deploymentName, b)
		if err != nil {
			if !errors.Is(err, temporal.ErrNotFound) {
				logf.FromContext(ctx).Info("cross-checking a draining version failed; the worker deployment's summary stands", "buildID", b, "error", err.Error())
			}
			continue
		}
		i := slices.IndexFunc(s.Versions, func(v planner.TemporalVersion) bool { return v.BuildID == b })
		v := &s.Versions[i]
		own := planner.OwnDrainage{CheckedAt: o.input.Now, DrainingSince: *v.DrainingSince}
		if dr := d.Drainage; dr != nil {
			own.Drained, own.ChangedAt = dr.Status == v1alpha1.VersionDrained && d.Status == v1alpha1.VersionDrained, dr.ChangedAt
		}
		r.drainage.put(key, b, own)
		v.OwnDrainage = &own
		if own.Drained {
			logf.FromContext(ctx).Info("Temporal's worker deployment summary shows a version draining that reports itself drained; taking the version's word",
				"buildID", b, "drainingSince", v.DrainingSince, "drainedSince", own.ChangedAt)
		}
	}
}
