package workerdeployment

import (
	"maps"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/rainbow-deploy/rainbow/internal/freshness"
	"github.com/rainbow-deploy/rainbow/internal/planner"
	"github.com/rainbow-deploy/rainbow/internal/temporal"
)

// rolloutDescribes holds the Temporal state each TWD's last pass read,
// which spares the describes a rollout's Kubernetes events would repeat
// (its Deployments rolling out, its own scale-down) before the look its
// plan asked for (freshness.Recent, freshness.TargetOnRecent). A rollout
// used to describe its worker deployment on each of the half dozen status
// changes of a new Deployment.
type rolloutDescribes = byTWD[rolloutEntry]

type rolloutEntry struct {
	freshness.RecentState
	token []byte
}

// rememberRecent keeps the state a pass read afresh while
// freshness.KeepRecent allows, until a little before the plan's own look,
// so that the look always describes.
func rememberRecent(c *rolloutDescribes, o *observation, res planner.Result, out outcome, requeue time.Duration, now time.Time) {
	key := keyOf(o.twd)
	troubled := o.api == nil || o.retryBusy > 0 || len(out.failed) > 0 || out.retrySoon || len(o.drainErrs) > 0
	if !freshness.KeepRecent(o.input, res, troubled, hasGate(o.twd)) {
		c.forget(key)
		return
	}
	look := now.Add(requeue - minRequeue)
	if o.reused {
		c.update(key, func(e rolloutEntry) rolloutEntry {
			e.Until = freshness.RecentUntilAfterReuse(e.Until, res, look)
			return e
		})
		return
	}
	describedAt := now
	if !o.describedAt.IsZero() {
		describedAt = o.describedAt
	}
	c.remember(key, rolloutEntry{
		RecentState: freshness.RecentState{Owner: ownerOf(o), State: copyState(o.input.Temporal), Until: look,
			DescribedAt: describedAt, TargetAvailable: targetAvailable(o)},
		token: o.token,
	})
}

// targetAvailable: the target's Deployment is available, so a pass may
// route to it.
func targetAvailable(o *observation) bool {
	d := o.deployments[o.targetBuildID]
	return d != nil && available(d)
}

// currentQueueDescribes holds the task queues of each TWD's current
// version, which spares describing it before each routing change
// (freshness.QueuesStand); a refusal for a missing queue forgets them (see
// actTemporal).
type currentQueueDescribes = byTWD[queueEntry]

type queueEntry struct {
	detail temporal.VersionDetail
	at     time.Time
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

// pollerDescribes holds when versions waiting for deletion were last seen
// polled, which spares describing them for pollers again
// (freshness.PolledRecently).
type pollerDescribes struct{ byBuild[time.Time] }

func (c *pollerDescribes) note(key types.NamespacedName, build string, now time.Time) {
	// Entries past the recheck are no longer of use.
	c.keep(key, func(_ string, t time.Time) bool { return now.Sub(t) < freshness.PollersRecheck })
	c.put(key, build, now)
}

// temporalSource says where a pass took Temporal's state from, and why,
// for the logs.
func (o *observation) temporalSource() string {
	switch {
	case o.input.Temporal == nil && o.fresh.Use == freshness.Wait:
		return o.fresh.Reason
	case o.input.Temporal == nil:
		return "none"
	}
	return o.fresh.Reason
}
