package workerdeployment

import (
	"context"
	"errors"
	"time"

	"github.com/rainbow-deploy/rainbow/internal/freshness"
	"github.com/rainbow-deploy/rainbow/internal/temporal"
)

// belief is where a pass takes Temporal's state from, with the entries
// Decide judged.
type belief struct {
	freshness.Decision
	settled settledEntry
	rollout rolloutEntry
	// listErr is the list's error Temporal throttled (freshness.Wait).
	listErr error
}

// believe asks freshness.Decide where this pass takes Temporal's state
// from, giving it what the stores remember and the lists it asks for.
func (r *Reconciler) believe(ctx context.Context, o *observation, fetch listFunc, now time.Time) belief {
	key := keyOf(o.twd)
	p := freshness.Pass{
		Owner:               ownerOf(o),
		Input:               o.input,
		GateRunning:         gateOpen(o.twd.Status.Gate),
		TargetAvailable:     targetAvailable(o),
		OnlyTarget:          len(o.deployments) == 0 || (len(o.deployments) == 1 && o.deployments[o.targetBuildID] != nil),
		StatusShowsVersions: statusShowsVersions(o.twd.Status),
	}
	var b belief
	var m freshness.Remembered
	if e, ok := r.settled.lookup(key); ok {
		b.settled, m.Settled = e, &e.SettledState
	}
	if e, ok := r.rollout.lookup(key); ok {
		b.rollout, m.Recent = e, &e.RecentState
	}
	var listErr error
	for {
		b.Decision = freshness.Decide(m, p, now)
		switch b.Use {
		case freshness.ListForSettled:
			summaries, err := r.lists.list(ctx, fetch, o.connKey, now, freshness.ListMaxAge)
			m.SettledList = listing(summaries, o.deploymentName, err)
		case freshness.ListForAbsence:
			summaries, err := r.lists.listSoon(ctx, fetch, o.connKey, now, freshness.AbsentListMaxAge, freshness.AbsentListStaleAge)
			m.AbsenceList, listErr = listing(summaries, o.deploymentName, err), err
		default:
			if b.Use == freshness.Wait {
				b.listErr = listErr
			}
			return b
		}
	}
}

func listing(summaries map[string]temporal.DeploymentSummary, name string, err error) *freshness.Listing {
	if err != nil {
		return &freshness.Listing{Failed: true, Busy: errors.Is(err, temporal.ErrBusy)}
	}
	s, ok := summaries[name]
	return &freshness.Listing{Summary: s, Listed: ok}
}
