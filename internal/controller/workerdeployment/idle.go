package workerdeployment

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/internal/planner"
	"github.com/rainbow-deploy/rainbow/internal/temporal"
)

// Temporal's worker-deployment reads are rate limited per namespace and
// shared with autoscalers. When a rollout is complete and nothing changes,
// one ListWorkerDeployments per Temporal namespace stands in for a
// DescribeWorkerDeployment per TWD: the list shows routing changes and new
// versions, which is all that can move an idle worker deployment.
const (
	// listMaxAge: one list serves every idle TWD of a namespace this long.
	listMaxAge = 30 * time.Second
	// describeMaxAge: an idle TWD is still described this often, for what
	// the list does not show (manager identity, a version's own status).
	describeMaxAge = 10 * time.Minute
	// managerMaxAge: a TWD waiting for the manager role to be handed back
	// is described this often, since only a describe shows that.
	managerMaxAge = time.Minute
	// listRetry: after a failed list the idle TWDs describe instead for
	// this long, rather than every reconcile listing again.
	listRetry = 10 * time.Second
	// absentListMaxAge: a TWD waiting for the first poll of its worker
	// deployment learns of it from a list this fresh at most (see
	// notYetInTemporal), or, while a newer one is fetched, absentListStaleAge.
	absentListMaxAge   = 2 * time.Second
	absentListStaleAge = 10 * time.Second
	// listTimeout bounds a list fetched in the background.
	listTimeout = 30 * time.Second
)

// idleCache remembers the last Temporal state of TWDs whose rollout was
// complete, and the latest worker deployment list per connection.
type idleCache struct {
	mu    sync.Mutex
	twds  map[types.NamespacedName]idleEntry
	lists map[string]listEntry
	// listing shares one list call among the reconciles that find the
	// list stale at once; Temporal rate limits lists (visibility) tightly.
	listing singleflight.Group
	// refreshing: connections whose list listSoon is fetching in the
	// background.
	refreshing map[string]bool
}

type idleEntry struct {
	uid         types.UID
	generation  int64
	deployments string
	state       *planner.TemporalState
	token       []byte
	describedAt time.Time
	maxAge      time.Duration
	summary     temporal.DeploymentSummary
	hasSummary  bool
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

// reuse returns the remembered state of an idle TWD if neither Kubernetes
// nor Temporal shows a change since it was described.
func (c *idleCache) reuse(ctx context.Context, o *observation, connKey string, now time.Time) (*planner.TemporalState, []byte, bool) {
	c.mu.Lock()
	e, ok := c.twds[keyOf(o.twd)]
	c.mu.Unlock()
	if !ok || e.uid != o.twd.UID || e.generation != o.twd.Generation || e.deployments != deploymentsKey(o.deployments) ||
		now.Sub(e.describedAt) > e.maxAge || !e.hasSummary {
		return nil, nil, false
	}
	summaries, err := c.list(ctx, o.api.ListDeployments, connKey, now, listMaxAge)
	if err != nil {
		return nil, nil, false
	}
	s, ok := summaries[o.deploymentName]
	if !ok || !sameRouting(s, e.summary) {
		return nil, nil, false
	}
	return copyState(e.state), e.token, true
}

// notYetInTemporal answers a pass of a TWD whose worker deployment no
// worker has polled yet from the namespace's shared list rather than a
// describe of its own: thousands of TWDs created at once would otherwise
// describe, find nothing and describe again until Temporal throttled them
// all (measured: 69,384 describes refused in 8 minutes while 4,700 new TWDs
// waited, docs/performance.md). Only for a TWD whose sole Deployment is its
// target's and whose status never showed the worker deployment: the list
// lags writes by a moment and may miss a worker deployment around its
// workflow's continue-as-new, and one taken for absent must never make
// another version look unregistered (which would scale it down) nor
// status forget routing and drains it showed. Its first poll then shows in
// a list soon after. A throttled list is returned as the error (the
// caller waits rather than describing); any other failure means describe.
func (c *idleCache) notYetInTemporal(ctx context.Context, o *observation, fetch listFunc, now time.Time) (bool, error) {
	if len(o.deployments) > 1 || (len(o.deployments) == 1 && o.deployments[o.targetBuildID] == nil) ||
		statusShowsVersions(o.twd.Status) || len(o.input.Drains) > 0 {
		return false, nil
	}
	summaries, err := c.listSoon(ctx, fetch, o.connKey, now, absentListMaxAge, absentListStaleAge)
	if errors.Is(err, temporal.ErrBusy) {
		return false, err
	}
	if err != nil {
		return false, nil
	}
	_, listed := summaries[o.deploymentName]
	return !listed, nil
}

// listFunc lists a connection's worker deployments (temporal.API.ListDeployments).
type listFunc func(context.Context) (map[string]temporal.DeploymentSummary, error)

// list returns the connection's worker deployments, listing again only
// when the last list is older than maxAge.
func (c *idleCache) list(ctx context.Context, fetch listFunc, connKey string, now time.Time, maxAge time.Duration) (map[string]temporal.DeploymentSummary, error) {
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
func (c *idleCache) fetchList(ctx context.Context, fetch listFunc, connKey string, now time.Time, maxAge time.Duration) listEntry {
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
func (c *idleCache) listSoon(ctx context.Context, fetch listFunc, connKey string, now time.Time, maxAge, staleAge time.Duration) (map[string]temporal.DeploymentSummary, error) {
	c.mu.Lock()
	l, ok := c.lists[connKey]
	refresh := ok && l.summaries != nil && now.Sub(l.at) < staleAge && !c.refreshing[connKey] &&
		((l.err == nil && now.Sub(l.at) >= maxAge) || (l.err != nil && !now.Before(l.retryAt)))
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
func (c *idleCache) freshList(connKey string, now time.Time, maxAge time.Duration) (listEntry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	l, ok := c.lists[connKey]
	switch {
	case !ok:
		return l, false
	case l.err != nil:
		return l, now.Before(l.retryAt)
	default:
		return l, now.Sub(l.at) < maxAge
	}
}

// remember stores a freshly described state if the plan left nothing to do
// and waits on nothing that only a describe shows; otherwise it forgets the
// TWD, so the next reconcile describes it again. It returns the entry.
func (c *idleCache) remember(ctx context.Context, o *observation, connKey string, res planner.Result, now time.Time) (idleEntry, bool) {
	if o.api == nil || o.input.Temporal == nil || !idle(res) {
		c.forget(keyOf(o.twd))
		return idleEntry{}, false
	}
	maxAge := describeMaxAge
	if res.WaitsFor == planner.WaitManager {
		maxAge = managerMaxAge
	}
	e := idleEntry{
		uid:         o.twd.UID,
		generation:  o.twd.Generation,
		deployments: deploymentsKey(o.deployments),
		state:       copyState(o.input.Temporal),
		token:       o.token,
		describedAt: now,
		maxAge:      maxAge,
	}
	// The summary to compare with later is read after the describe, so a
	// change between the two is seen as a change, never missed.
	if summaries, err := c.list(ctx, o.api.ListDeployments, connKey, now, listMaxAge); err == nil {
		e.summary, e.hasSummary = summaries[o.deploymentName]
	}
	c.mu.Lock()
	if c.twds == nil {
		c.twds = map[types.NamespacedName]idleEntry{}
	}
	c.twds[keyOf(o.twd)] = e
	c.mu.Unlock()
	return e, true
}

// adoptSummary gives a remembered TWD the list's view of its worker
// deployment, once the list shows it as the describe did, so that its next
// reconciles are served from the list.
func (c *idleCache) adoptSummary(key types.NamespacedName, s temporal.DeploymentSummary) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.twds[key]; ok && !e.hasSummary {
		e.summary, e.hasSummary = s, true
		c.twds[key] = e
	}
}

// entry is the remembered state of a TWD, if any.
func (c *idleCache) entry(key types.NamespacedName) (idleEntry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.twds[key]
	return e, ok
}

// forget makes the next reconcile of the TWD describe it.
func (c *idleCache) forget(key types.NamespacedName) {
	c.mu.Lock()
	delete(c.twds, key)
	c.mu.Unlock()
}

func keyOf(twd *v1alpha1.TemporalWorkerDeployment) types.NamespacedName {
	return types.NamespacedName{Namespace: twd.Namespace, Name: twd.Name}
}

// idle: the plan acts on nothing and waits on nothing but a person's
// change in Temporal (or the rollout is complete), no version drains and
// none waits to be deleted from Temporal (drainage and pollers show only in
// a describe).
func idle(res planner.Result) bool {
	if res.Acts() || res.RoutingPropagating || (res.State != planner.StateComplete && res.WaitsFor == "") {
		return false
	}
	for _, v := range res.Versions {
		switch {
		case v.Status == v1alpha1.VersionDraining || v.Status == "":
			return false
		case v.Deployment == "" && v.Status != v1alpha1.VersionCurrent:
			// Its deletion from Temporal waits for its pollers to be
			// forgotten, which only a describe shows.
			return false
		}
	}
	return true
}

func sameRouting(a, b temporal.DeploymentSummary) bool {
	return a.CurrentBuildID == b.CurrentBuildID && a.RampingBuildID == b.RampingBuildID &&
		a.RampPercentage == b.RampPercentage && a.RoutingChangedAt.Equal(b.RoutingChangedAt) &&
		a.LatestBuildID == b.LatestBuildID && a.LatestCreatedAt.Equal(b.LatestCreatedAt)
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
