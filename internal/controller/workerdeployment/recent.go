package workerdeployment

import (
	"maps"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/internal/planner"
	"github.com/rainbow-deploy/rainbow/internal/temporal"
)

// recentCache remembers the Temporal state each TWD's last pass read, until
// the time its plan asked to look again. A pass that a Kubernetes event
// starts before then (its Deployments rolling out, its own scale-down)
// reuses it: nothing it waits on shows in Temporal, so a describe would
// only repeat the last one. A rollout used to describe its worker
// deployment on each of the half dozen status changes of a new Deployment.
//
// The state is never reused as it is by the pass that may route: while
// the target's Deployment is available and the target is not current, the
// target is described afresh (its registration, task queues and pollers),
// and the first such pass after the Deployment became available takes the
// rest from the last describe, younger than routingMaxAge, rather than
// describing the worker deployment again (which can take a second right
// after a version registers). Writes made on a remembered state carry its
// conflict token, which Temporal refuses once the routing or the manager
// changed since; a version registering does not change it.
type recentCache struct {
	mu   sync.Mutex
	twds map[types.NamespacedName]recentEntry
}

type recentEntry struct {
	uid        types.UID
	generation int64
	abort      string
	connKey    string
	state      *planner.TemporalState
	token      []byte
	until      time.Time
	// describedAt is when the worker deployment was described.
	describedAt time.Time
	// targetAvailable: the target's Deployment was available then.
	targetAvailable bool
}

// routingMaxAge bounds the age of the describe a routing pass builds on.
const routingMaxAge = 30 * time.Second

// remember keeps the state a pass read afresh, if it planned no write to
// Temporal, no action failed and it waits on nobody.
func (c *recentCache) remember(o *observation, res planner.Result, out outcome, requeue time.Duration, now time.Time) {
	key := keyOf(o.twd)
	describedAt := now
	if !o.describedAt.IsZero() {
		describedAt = o.describedAt
	}
	if o.api == nil || o.input.Temporal == nil || o.input.Deletion != nil || o.retryBusy > 0 ||
		len(out.failed) > 0 || out.retrySoon || len(o.drainErrs) > 0 || writesTemporal(res) || res.WaitsFor != "" || res.RoutingPropagating ||
		o.twd.Spec.Rollout.Gate != nil {
		c.forget(key)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if o.reused {
		// The remembered state stands until its time, or, if this pass
		// deleted a retired version's Deployment, until its own look if
		// that is sooner: that starts a wait only Temporal shows the end
		// of (its workers' polls forgotten). Other passes' looks are for
		// Kubernetes or deadlines the state already covers.
		if e, ok := c.twds[key]; ok && len(res.DeleteDeployments) > 0 {
			e.until = minTime(e.until, now.Add(requeue-minRequeue))
			c.twds[key] = e
		}
		return
	}
	if c.twds == nil {
		c.twds = map[types.NamespacedName]recentEntry{}
	}
	c.twds[key] = recentEntry{
		uid: o.twd.UID, generation: o.twd.Generation, abort: o.twd.Annotations[v1alpha1.AnnotationAbortRollout],
		// A little before the plan's own look, so that it always describes.
		connKey: o.connKey, state: copyState(o.input.Temporal), token: o.token, until: now.Add(requeue - minRequeue),
		describedAt: describedAt, targetAvailable: targetAvailable(o),
	}
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// reuse returns the remembered state if it may stand for this pass.
func (c *recentCache) reuse(o *observation, now time.Time) (*planner.TemporalState, []byte, bool) {
	c.mu.Lock()
	e, ok := c.twds[keyOf(o.twd)]
	c.mu.Unlock()
	if !ok || !c.matches(e, o) || !now.Before(e.until) {
		return nil, nil, false
	}
	if targetAvailable(o) && e.state.CurrentBuildID != o.targetBuildID {
		return nil, nil, false // this pass may route: read Temporal
	}
	// Drain rules list pinned workflows on a schedule of their own.
	in := o.input
	in.Temporal = copyState(e.state)
	if len(planner.DrainVersionsToList(in)) > 0 {
		return nil, nil, false
	}
	return in.Temporal, e.token, true
}

// forRouting returns the remembered state for the first pass since the
// target's Deployment became available, which describes the target itself.
func (c *recentCache) forRouting(o *observation, now time.Time) (*planner.TemporalState, []byte, time.Time, bool) {
	c.mu.Lock()
	e, ok := c.twds[keyOf(o.twd)]
	c.mu.Unlock()
	if !ok || !c.matches(e, o) || now.Sub(e.describedAt) > routingMaxAge || e.targetAvailable || !targetAvailable(o) ||
		e.state.CurrentBuildID == o.targetBuildID {
		return nil, nil, time.Time{}, false
	}
	return copyState(e.state), e.token, e.describedAt, true
}

func (c *recentCache) matches(e recentEntry, o *observation) bool {
	return e.uid == o.twd.UID && e.generation == o.twd.Generation && e.abort == o.twd.Annotations[v1alpha1.AnnotationAbortRollout] &&
		e.connKey == o.connKey && o.input.Deletion == nil
}

// targetAvailable: the target's Deployment is available, so a pass may
// route to it.
func targetAvailable(o *observation) bool {
	d := o.deployments[o.targetBuildID]
	return d != nil && available(d)
}

func (c *recentCache) forget(key types.NamespacedName) {
	c.mu.Lock()
	delete(c.twds, key)
	c.mu.Unlock()
}

// writesTemporal: the plan changes something in Temporal, which the next
// pass must read back.
func writesTemporal(res planner.Result) bool {
	return res.BecomeManager || res.Routing != nil || len(res.DeleteTemporalVersions) > 0 || res.StartGate != nil ||
		res.CancelGate != nil || res.TerminateGate != nil || res.DeleteWorkerDeployment || len(res.DrainWork) > 0
}

// queueCache remembers the task queues of each TWD's current version. They
// only grow while it is current, and Temporal itself refuses a routing
// change to a version that lacks one of them; that refusal makes the next
// pass describe the current version again (see actTemporal).
type queueCache struct {
	mu   sync.Mutex
	twds map[types.NamespacedName]queueEntry
}

type queueEntry struct {
	buildID string
	detail  temporal.VersionDetail
	at      time.Time
}

// queuesMaxAge bounds how long a current version's task queues are
// trusted without a refusal to say otherwise.
const queuesMaxAge = 10 * time.Minute

func (c *queueCache) get(key types.NamespacedName, buildID string, now time.Time) (temporal.VersionDetail, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.twds[key]
	if !ok || e.buildID != buildID || now.Sub(e.at) > queuesMaxAge {
		return temporal.VersionDetail{}, false
	}
	return e.detail, true
}

func (c *queueCache) put(key types.NamespacedName, d temporal.VersionDetail, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.twds == nil {
		c.twds = map[types.NamespacedName]queueEntry{}
	}
	c.twds[key] = queueEntry{buildID: d.BuildID, detail: d, at: now}
}

func (c *queueCache) forget(key types.NamespacedName) {
	c.mu.Lock()
	delete(c.twds, key)
	c.mu.Unlock()
}

// notOnlyStatus drops the update events of a TWD whose spec and metadata
// did not change: each pass writes status, and its own write started
// another pass, which described the worker deployment again.
var notOnlyStatus = predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
	o, n := e.ObjectOld, e.ObjectNew
	if o == nil || n == nil {
		return true
	}
	return o.GetGeneration() != n.GetGeneration() || !maps.Equal(o.GetAnnotations(), n.GetAnnotations()) ||
		!maps.Equal(o.GetLabels(), n.GetLabels()) || !slices.Equal(o.GetFinalizers(), n.GetFinalizers()) ||
		!o.GetDeletionTimestamp().Equal(n.GetDeletionTimestamp())
}}

// pollersRecheck: a version waiting to be deleted that Temporal reported
// polled is not described again before this long. Temporal forgets a
// stopped worker's polls only after its poller history TTL (5 minutes by
// default, 10 s in the local environment), and every pass of a rollout
// used to describe each such version and its task queues again.
const pollersRecheck = 10 * time.Second

// polledCache remembers when versions waiting for deletion were last seen
// polled.
type polledCache struct {
	mu   sync.Mutex
	seen map[types.NamespacedName]map[string]time.Time
}

func (c *polledCache) recently(key types.NamespacedName, build string, now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.seen[key][build]
	return ok && now.Sub(t) < pollersRecheck && !now.Before(t)
}

func (c *polledCache) note(key types.NamespacedName, build string, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seen == nil {
		c.seen = map[types.NamespacedName]map[string]time.Time{}
	}
	if c.seen[key] == nil {
		c.seen[key] = map[string]time.Time{}
	}
	for b, t := range c.seen[key] {
		if now.Sub(t) >= pollersRecheck {
			delete(c.seen[key], b)
		}
	}
	c.seen[key][build] = now
}

func (c *polledCache) forget(key types.NamespacedName) {
	c.mu.Lock()
	delete(c.seen, key)
	c.mu.Unlock()
}

// temporalSource says where a pass took Temporal's state from, for the logs.
func (o *observation) temporalSource() string {
	switch {
	case o.input.Temporal == nil:
		return "none"
	case !o.describedAt.IsZero():
		return "target described on the last describe"
	case o.listed:
		return "not in the namespace's list"
	case o.reused:
		return "remembered"
	}
	return "described"
}
