package workerdeployment

import (
	"context"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/event"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/internal/freshness"
	"github.com/rainbow-deploy/rainbow/internal/temporal"
)

// personWatchInterval is how often the worker deployment list of a Temporal
// namespace (or its runs query) is read while a TWD there waits on a
// person's routing change (or the manager role): the person's change shows
// within about this long, and the namespace pays one read per interval
// however many TWDs wait.
const personWatchInterval = 10 * time.Second

// personWatch wakes TWDs that wait on a person's routing change in Temporal
// (a Manual promotion, undoing someone else's change) when the namespace's
// shared ListWorkerDeployments shows their routing changed, and those that
// wait for the manager role when the namespace's runs query shows their
// worker deployment changed (freshness.ManagerWake), so they need not poll
// Temporal themselves.
type personWatch struct {
	lists   *listReads
	settled *settledDescribes
	events  chan event.GenericEvent

	mu    sync.Mutex
	conns map[string]*connWaiters
}

type connWaiters struct {
	fetch   listFunc
	runs    runsFunc
	waiters map[types.NamespacedName]waiter
}

type waiter struct {
	deployment string
	// manager: it waits for the manager role, described at describedAt;
	// otherwise for a routing change (Watch).
	manager     bool
	describedAt time.Time
	freshness.Watch
}

// runsFunc reads which worker deployments of a connection changed since a
// time (temporal.API.DeploymentsChangedSince).
type runsFunc func(ctx context.Context, since time.Time) (map[string]time.Time, error)

func newPersonWatch(lists *listReads, settled *settledDescribes) *personWatch {
	return &personWatch{lists: lists, settled: settled, events: make(chan event.GenericEvent, 1024), conns: map[string]*connWaiters{}}
}

// wait registers a TWD that waits on a routing change of its worker
// deployment, as summary (from a list read after its describe) shows it.
func (w *personWatch) wait(key types.NamespacedName, connKey string, fetch listFunc, deployment string, summary temporal.DeploymentSummary, seen bool, described temporal.DeploymentSummary) {
	w.mu.Lock()
	defer w.mu.Unlock()
	c := w.connLocked(key, connKey)
	c.fetch = fetch
	c.waiters[key] = waiter{deployment: deployment, Watch: freshness.Watch{Summary: summary, Seen: seen, Described: described}}
}

// waitManager registers a TWD that waits for the manager role of its
// worker deployment, last described at describedAt.
func (w *personWatch) waitManager(key types.NamespacedName, connKey string, runs runsFunc, deployment string, describedAt time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	c := w.connLocked(key, connKey)
	c.runs = runs
	c.waiters[key] = waiter{deployment: deployment, manager: true, describedAt: describedAt}
}

// connLocked is connKey's waiters, key no longer among any.
func (w *personWatch) connLocked(key types.NamespacedName, connKey string) *connWaiters {
	w.forgetLocked(key)
	c, ok := w.conns[connKey]
	if !ok {
		c = &connWaiters{waiters: map[types.NamespacedName]waiter{}}
		w.conns[connKey] = c
	}
	return c
}

// forget stops watching a TWD.
func (w *personWatch) forget(key types.NamespacedName) {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.forgetLocked(key)
}

func (w *personWatch) forgetLocked(key types.NamespacedName) {
	for k, c := range w.conns {
		delete(c.waiters, key)
		if len(c.waiters) == 0 {
			delete(w.conns, k)
		}
	}
}

// Start lists, every interval, each namespace where a TWD waits, and wakes
// those whose routing changed. It runs on the leader only.
func (w *personWatch) Start(ctx context.Context) error {
	t := time.NewTicker(personWatchInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case now := <-t.C:
			w.check(ctx, now)
		}
	}
}

// check reads each watched namespace's list (or runs) once and wakes the
// waiters whose worker deployment changed.
func (w *personWatch) check(ctx context.Context, now time.Time) {
	w.mu.Lock()
	type job struct {
		connKey string
		fetch   listFunc
		runs    runsFunc
		// routing: a TWD waits on a routing change; described: the
		// describes of those waiting for the manager role.
		routing   bool
		described []time.Time
	}
	jobs := make([]job, 0, len(w.conns))
	for k, c := range w.conns {
		j := job{connKey: k, fetch: c.fetch, runs: c.runs}
		for _, wt := range c.waiters {
			if wt.manager {
				j.described = append(j.described, wt.describedAt)
			} else {
				j.routing = true
			}
		}
		jobs = append(jobs, j)
	}
	w.mu.Unlock()
	for _, j := range jobs {
		if len(j.described) > 0 {
			runCtx, cancel := context.WithTimeout(ctx, personWatchInterval)
			runs, err := j.runs(runCtx, freshness.RunsSince(j.described))
			cancel()
			if err != nil {
				logf.FromContext(ctx).V(1).Info("querying worker deployment runs for TWDs waiting for the manager role failed; they describe at the unwatched pace meanwhile", "error", err.Error())
			}
			for _, key := range w.handedBack(j.connKey, runs, err == nil, now) {
				// Forgotten, so that the pass describes.
				w.settled.forget(key)
				w.events <- event.GenericEvent{Object: &v1alpha1.TemporalWorkerDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}}
			}
		}
		if !j.routing {
			continue
		}
		// Fresh enough to see a change within an interval; the settled
		// TWDs of the namespace share it.
		listCtx, cancel := context.WithTimeout(ctx, personWatchInterval)
		summaries, err := w.lists.list(listCtx, j.fetch, j.connKey, now, personWatchInterval)
		cancel()
		if err != nil {
			logf.FromContext(ctx).V(1).Info("listing worker deployments for waiting TWDs failed; they poll on their own meanwhile", "error", err.Error())
			continue
		}
		for _, key := range w.changed(j.connKey, summaries) {
			w.events <- event.GenericEvent{Object: &v1alpha1.TemporalWorkerDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}}
		}
	}
}

// changed removes and returns the waiters of connKey whose worker
// deployment's routing differs from what they saw.
func (w *personWatch) changed(connKey string, summaries map[string]temporal.DeploymentSummary) []types.NamespacedName {
	return w.wake(connKey, func(key types.NamespacedName, wt *waiter) bool {
		if wt.manager {
			return false
		}
		s, listed := summaries[wt.deployment]
		wake, adopt := freshness.Wake(wt.Watch, s, listed)
		if adopt {
			// Visibility caught up with what the describe saw: keep
			// waiting, now on the list's view.
			wt.Summary, wt.Seen = s, true
			w.settled.adoptSummary(key, s)
		}
		return wake
	})
}

// handedBack removes and returns the waiters of connKey for the manager
// role that freshness.ManagerWake wakes, given the runs query's answer.
func (w *personWatch) handedBack(connKey string, runs map[string]time.Time, answered bool, now time.Time) []types.NamespacedName {
	return w.wake(connKey, func(key types.NamespacedName, wt *waiter) bool {
		if !wt.manager {
			return false
		}
		if freshness.ManagerWake(wt.describedAt, runs[wt.deployment], answered, now) {
			return true
		}
		if answered {
			// Nothing changed since the describe: no list needed to
			// reuse it until the next query.
			w.settled.quiet(key, wt.describedAt, now)
		}
		return false
	})
}

// wake removes and returns the waiters of connKey that pick wakes; pick
// may update the waiter it keeps.
func (w *personWatch) wake(connKey string, pick func(types.NamespacedName, *waiter) bool) []types.NamespacedName {
	w.mu.Lock()
	defer w.mu.Unlock()
	c, ok := w.conns[connKey]
	if !ok {
		return nil
	}
	var out []types.NamespacedName
	for key, wt := range c.waiters {
		if pick(key, &wt) {
			out = append(out, key)
			delete(c.waiters, key)
		} else {
			c.waiters[key] = wt
		}
	}
	if len(c.waiters) == 0 {
		delete(w.conns, connKey)
	}
	return out
}
