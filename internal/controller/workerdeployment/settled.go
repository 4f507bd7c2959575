package workerdeployment

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/internal/freshness"
	"github.com/rainbow-deploy/rainbow/internal/planner"
	"github.com/rainbow-deploy/rainbow/internal/temporal"
)

// Temporal's worker-deployment reads are rate limited per namespace and
// shared with autoscalers. When a rollout is complete and nothing changes,
// one ListWorkerDeployments per Temporal namespace stands in for a
// DescribeWorkerDeployment per TWD (freshness.Settled).
const (
	// listRetry: after a failed list the settled TWDs describe instead for
	// this long, rather than every reconcile listing again.
	listRetry = 10 * time.Second
	// listTimeout bounds a list fetched in the background.
	listTimeout = 30 * time.Second
)

// settledDescribes holds the last describe of each settled TWD, which
// spares describing it again while the namespace's list vouches for it.
type settledDescribes struct{ byTWD[settledEntry] }

type settledEntry struct {
	freshness.SettledState
	state *planner.TemporalState
	token []byte
}

// adoptSummary gives a remembered TWD the list's view of its worker
// deployment, once the list shows it as the describe did, so that its next
// reconciles are served from the list.
func (c *settledDescribes) adoptSummary(key types.NamespacedName, s temporal.DeploymentSummary) {
	c.update(key, func(e settledEntry) settledEntry {
		if !e.HasSummary {
			e.Summary, e.HasSummary = s, true
		}
		return e
	})
}

// quiet records that the runs query, at, showed no change of the TWD's
// worker deployment since its describe at describedAt (the entry's, not a
// later one's).
func (c *settledDescribes) quiet(key types.NamespacedName, describedAt, at time.Time) {
	c.update(key, func(e settledEntry) settledEntry {
		if e.DescribedAt.Equal(describedAt) {
			e.QuietAt = at
		}
		return e
	})
}

// rememberSettled stores a freshly described state if the plan settles
// (freshness.Settles); otherwise it forgets the TWD, so the next reconcile
// describes it again.
func (r *Reconciler) rememberSettled(ctx context.Context, o *observation, res planner.Result, now time.Time) {
	key := keyOf(o.twd)
	if o.api == nil || o.input.Temporal == nil || !freshness.Settles(res) {
		r.settled.forget(key)
		return
	}
	e := settledEntry{
		SettledState: freshness.SettledState{Owner: ownerOf(o), DescribedAt: now, MaxAge: freshness.SettledFor(res, r.watch != nil)},
		state:        copyState(o.input.Temporal),
		token:        o.token,
	}
	// The summary to compare with later is read after the describe, so a
	// change between the two is seen as a change, never missed.
	if summaries, err := r.lists.list(ctx, o.api.ListDeployments, o.connKey, now, freshness.ListMaxAge); err == nil {
		e.Summary, e.HasSummary = summaries[o.deploymentName]
	}
	r.settled.remember(key, e)
}

// listReads holds the latest worker deployment list per connection, which
// spares a list per TWD: one list serves every TWD of a namespace.
type listReads struct {
	mu    sync.Mutex
	lists map[string]listEntry
	// listing shares one list call among the reconciles that find the
	// list stale at once; Temporal rate limits lists (visibility) tightly.
	listing singleflight.Group
	// refreshing: connections whose list listSoon is fetching in the
	// background.
	refreshing map[string]bool
}

type listEntry struct {
	at        time.Time
	summaries map[string]temporal.DeploymentSummary
	// err, until retryAt, is the last list's failure: callers describe
	// instead, and nobody lists again before then. at and summaries are
	// then the last good list's, for listSoon.
	err     error
	retryAt time.Time
}

// listFunc lists a connection's worker deployments (temporal.API.ListDeployments).
type listFunc func(context.Context) (map[string]temporal.DeploymentSummary, error)

// list returns the connection's worker deployments, listing again only
// when the last list is older than maxAge.
func (c *listReads) list(ctx context.Context, fetch listFunc, connKey string, now time.Time, maxAge time.Duration) (map[string]temporal.DeploymentSummary, error) {
	if l, ok := c.freshList(connKey, now, maxAge); ok {
		return l.summaries, l.err
	}
	v, err, _ := c.listing.Do(connKey, func() (any, error) { return c.fetchList(ctx, fetch, connKey, now, maxAge), nil })
	if err != nil {
		return nil, err
	}
	l := v.(listEntry)
	return l.summaries, l.err
}

// fetchList lists and stores the result, unless a list younger than
// maxAge was stored meanwhile (by the call that just finished).
func (c *listReads) fetchList(ctx context.Context, fetch listFunc, connKey string, now time.Time, maxAge time.Duration) listEntry {
	if l, ok := c.freshList(connKey, now, maxAge); ok {
		return l
	}
	summaries, err := fetch(ctx)
	l := listEntry{at: now, summaries: summaries}
	c.mu.Lock()
	if err != nil {
		// The last good list stays for listSoon, which serves it while
		// it is young enough; list reports the failure.
		prev := c.lists[connKey]
		l = listEntry{at: prev.at, summaries: prev.summaries, err: err, retryAt: now.Add(max(temporal.RetryAfter(err), listRetry))}
	}
	if c.lists == nil {
		c.lists = map[string]listEntry{}
	}
	c.lists[connKey] = l
	c.mu.Unlock()
	return l
}

// listSoon is list that does not wait: a list older than maxAge but
// younger than staleAge is returned at once while a newer one is fetched in
// the background. At a few thousand worker deployments a list took over a
// second, and passes waiting on it backed up the work queue (docs/performance.md).
func (c *listReads) listSoon(ctx context.Context, fetch listFunc, connKey string, now time.Time, maxAge, staleAge time.Duration) (map[string]temporal.DeploymentSummary, error) {
	c.mu.Lock()
	l, ok := c.lists[connKey]
	refresh := ok && l.summaries != nil && now.Sub(l.at) < staleAge && !c.refreshing[connKey] &&
		!freshness.ListStands(l.at, l.err != nil, l.retryAt, now, maxAge)
	if refresh {
		if c.refreshing == nil {
			c.refreshing = map[string]bool{}
		}
		c.refreshing[connKey] = true
	}
	c.mu.Unlock()
	switch {
	case !ok || l.summaries == nil || now.Sub(l.at) >= staleAge:
		return c.list(ctx, fetch, connKey, now, maxAge)
	case refresh:
		go func() {
			bg, cancel := context.WithTimeout(context.WithoutCancel(ctx), listTimeout)
			defer cancel()
			_, _, _ = c.listing.Do(connKey, func() (any, error) { return c.fetchList(bg, fetch, connKey, now, maxAge), nil })
			c.mu.Lock()
			delete(c.refreshing, connKey)
			c.mu.Unlock()
		}()
	}
	return l.summaries, nil
}

// freshList is the connection's list if it may still be used: younger
// than maxAge, or a failure not yet due for a retry.
func (c *listReads) freshList(connKey string, now time.Time, maxAge time.Duration) (listEntry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	l, ok := c.lists[connKey]
	return l, ok && freshness.ListStands(l.at, l.err != nil, l.retryAt, now, maxAge)
}

func keyOf(twd *v1alpha1.TemporalWorkerDeployment) types.NamespacedName {
	return types.NamespacedName{Namespace: twd.Namespace, Name: twd.Name}
}

// ownerOf is what a remembered state must have been read for to stand.
func ownerOf(o *observation) freshness.Owner {
	return freshness.Owner{UID: string(o.twd.UID), Generation: o.twd.Generation, Abort: o.twd.Annotations[v1alpha1.AnnotationAbortRollout],
		ConnKey: o.connKey, Deployments: deploymentsKey(o.deployments)}
}

// deploymentsKey changes whenever any versioned Deployment changes.
func deploymentsKey(deps map[string]*appsv1.Deployment) string {
	keys := make([]string, 0, len(deps))
	for b, d := range deps {
		keys = append(keys, b+"="+d.ResourceVersion)
	}
	slices.Sort(keys)
	return strings.Join(keys, ",")
}

func copyState(s *planner.TemporalState) *planner.TemporalState {
	c := *s
	c.Versions = slices.Clone(s.Versions)
	return &c
}
