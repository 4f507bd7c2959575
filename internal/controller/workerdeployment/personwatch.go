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
// namespace is read while a TWD there waits on a person's routing change:
// the person's change shows within about this long, and the namespace pays
// one list per interval however many TWDs wait.
const personWatchInterval = 10 * time.Second

// personWatch wakes TWDs that wait on a person's routing change in Temporal
// (a Manual promotion, undoing someone else's change) when the namespace's
// shared ListWorkerDeployments shows their routing changed, so they need
// not poll Temporal themselves.
type personWatch struct {
	lists   *listReads
	settled *settledDescribes
	events  chan event.GenericEvent

	mu    sync.Mutex
	conns map[string]*connWaiters
}

type connWaiters struct {
	fetch   listFunc
	waiters map[types.NamespacedName]waiter
}

type waiter struct {
	deployment string
	freshness.Watch
}

func newPersonWatch(lists *listReads, settled *settledDescribes) *personWatch {
	return &personWatch{lists: lists, settled: settled, events: make(chan event.GenericEvent, 1024), conns: map[string]*connWaiters{}}
}

// wait registers a TWD that waits on a routing change of its worker
// deployment, as summary (from a list read after its describe) shows it.
func (w *personWatch) wait(key types.NamespacedName, connKey string, fetch listFunc, deployment string, summary temporal.DeploymentSummary, seen bool, described temporal.DeploymentSummary) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.forgetLocked(key)
	c, ok := w.conns[connKey]
	if !ok {
		c = &connWaiters{waiters: map[types.NamespacedName]waiter{}}
		w.conns[connKey] = c
	}
	c.fetch = fetch
	c.waiters[key] = waiter{deployment: deployment, Watch: freshness.Watch{Summary: summary, Seen: seen, Described: described}}
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

// check reads each watched namespace's list once and wakes the waiters
// whose worker deployment changed.
func (w *personWatch) check(ctx context.Context, now time.Time) {
	w.mu.Lock()
	type job struct {
		connKey string
		fetch   listFunc
	}
	jobs := make([]job, 0, len(w.conns))
	for k, c := range w.conns {
		jobs = append(jobs, job{k, c.fetch})
	}
	w.mu.Unlock()
	for _, j := range jobs {
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
	w.mu.Lock()
	defer w.mu.Unlock()
	c, ok := w.conns[connKey]
	if !ok {
		return nil
	}
	var out []types.NamespacedName
	for key, wt := range c.waiters {
		s, listed := summaries[wt.deployment]
		wake, adopt := freshness.Wake(wt.Watch, s, listed)
		if adopt {
			// Visibility caught up with what the describe saw: keep
			// waiting, now on the list's view.
			wt.Summary, wt.Seen = s, true
			c.waiters[key] = wt
			w.settled.adoptSummary(key, s)
		}
		if !wake {
			continue
		}
		out = append(out, key)
		delete(c.waiters, key)
	}
	if len(c.waiters) == 0 {
		delete(w.conns, connKey)
	}
	return out
}
