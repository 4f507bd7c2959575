// Package backlog reads and keeps the backlog of every running worker
// version from Temporal's task queue statistics, for the Prometheus gauges,
// the external metrics API and the planner's rule for versions someone
// else scaled to zero.
package backlog

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/internal/connection"
	"github.com/rainbow-deploy/rainbow/internal/freshness"
	"github.com/rainbow-deploy/rainbow/internal/temporal"
	"github.com/rainbow-deploy/rainbow/internal/workload"
)

// DefaultInterval is how often the backlog of each running version is
// read from Temporal, and how long a read is reused.
const DefaultInterval = 15 * time.Second

// readTimeout bounds the background reads of one TWD.
const readTimeout = 30 * time.Second

var (
	backlogCount = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "rainbow_version_backlog_count",
		Help: "Tasks waiting in a task queue of a running worker version: Temporal's approximate backlog count, read at most every --backlog-interval (in the background for autoscaled TemporalWorkerDeployments, or all with --backlog-all).",
	}, []string{"namespace", "name", "build_id", "task_queue", "task_queue_type"})
	backlogAge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "rainbow_version_backlog_age_seconds",
		Help: "Age of the oldest task waiting in a task queue of a running worker version, 0 when none waits (Temporal's approximate backlog age).",
	}, []string{"namespace", "name", "build_id", "task_queue", "task_queue_type"})
)

func init() {
	metrics.Registry.MustRegister(backlogCount, backlogAge)
}

// Backlogs reads and keeps the backlog of every running version
// (planner.Running) from Temporal's task queue statistics: for the Prometheus gauges, the
// external metrics API (Values) and the planner's rule for versions someone
// else scaled to zero (planner.BacklogsToRead). A read younger than the
// interval is reused, the reconciler's own describes count as reads, and on
// the leader the running versions of every TWD whose replicas an autoscaler
// owns (or of all, with All) are read once per interval (Start). It is safe
// for concurrent use.
type Backlogs struct {
	Client client.Reader
	Pool   *temporal.Pool
	Clock  clock.PassiveClock
	// Fleet says which versions of a TWD run.
	Fleet Fleet
	// Interval between reads of a version; 0 means DefaultInterval
	// for reuse and no reads in the background.
	Interval time.Duration
	// All reads every TWD's running versions in the background; otherwise
	// only those of TWDs whose replicas an autoscaler owns
	// (planner.ReplicasAutoscaled), where the backlog is what they scale
	// on. The others' backlogs come from the reconciler's describes and
	// the external metrics API's reads.
	All bool

	mu    sync.Mutex
	reads map[types.NamespacedName]map[string]Read
	// events wakes the TWD of a version someone else scaled to zero once
	// tasks wait for it.
	events chan event.GenericEvent
}

// Fleet is what the TWD controller knows of a TWD's versions: which run
// (planner.Running), which of those someone else scaled to zero, and
// whether an autoscaler owns its replicas. opts add to the list's options.
type Fleet interface {
	Running(ctx context.Context, twd *v1alpha1.TemporalWorkerDeployment, opts ...client.ListOption) (running, zeroed []string, err error)
	Autoscaled(ctx context.Context, twd *v1alpha1.TemporalWorkerDeployment) (bool, error)
}

// Read is one version's task queues as last read.
type Read struct {
	At time.Time
	// deployment is the Temporal worker deployment name.
	deployment string
	// Queues is nil when the server reported no statistics.
	Queues []temporal.TaskQueueBacklog
}

// New returns a Backlogs reading with c and pool.
func New(c client.Reader, pool *temporal.Pool, clk clock.PassiveClock, interval time.Duration, fleet Fleet) *Backlogs {
	return &Backlogs{Client: c, Pool: pool, Clock: clk, Interval: interval, Fleet: fleet,
		reads: map[types.NamespacedName]map[string]Read{}, events: make(chan event.GenericEvent, 1024)}
}

// Events wakes the TWD of a version someone else scaled to zero once tasks
// wait for it.
func (b *Backlogs) Events() <-chan event.GenericEvent { return b.events }

func (b *Backlogs) maxAge() time.Duration {
	if b.Interval > 0 {
		return b.Interval
	}
	return DefaultInterval
}

// Record stores a version's describe, which carries its task queues'
// statistics, and updates its gauges.
func (b *Backlogs) Record(key types.NamespacedName, build, deployment string, d temporal.VersionDetail, at time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.reads[key] == nil {
		b.reads[key] = map[string]Read{}
	}
	prev := b.reads[key][build]
	b.reads[key][build] = Read{At: at, deployment: deployment, Queues: d.Backlog}
	for _, q := range prev.Queues {
		if !slices.ContainsFunc(d.Backlog, func(n temporal.TaskQueueBacklog) bool { return n.TaskQueue == q.TaskQueue }) {
			backlogCount.DeleteLabelValues(gaugeLabels(key, build, q.TaskQueue)...)
			backlogAge.DeleteLabelValues(gaugeLabels(key, build, q.TaskQueue)...)
		}
	}
	for _, q := range d.Backlog {
		backlogCount.WithLabelValues(gaugeLabels(key, build, q.TaskQueue)...).Set(float64(q.Count))
		backlogAge.WithLabelValues(gaugeLabels(key, build, q.TaskQueue)...).Set(q.Age.Seconds())
	}
}

func gaugeLabels(key types.NamespacedName, build string, tq temporal.TaskQueue) []string {
	return []string{key.Namespace, key.Name, build, tq.Name, string(tq.Type)}
}

// Fresh is the version's last read if it is younger than the interval.
func (b *Backlogs) Fresh(key types.NamespacedName, build string, now time.Time) (Read, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	r, ok := b.reads[key][build]
	return r, ok && freshness.BacklogStands(r.At, now, b.maxAge())
}

// keep forgets the versions of a TWD that no longer run; none at all when
// builds is empty.
func (b *Backlogs) keep(key types.NamespacedName, builds []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.keepLocked(key, builds)
}

func (b *Backlogs) keepLocked(key types.NamespacedName, builds []string) {
	for build := range b.reads[key] {
		if !slices.Contains(builds, build) {
			delete(b.reads[key], build)
			labels := map[string]string{"namespace": key.Namespace, "name": key.Name, "build_id": build}
			backlogCount.DeletePartialMatch(labels)
			backlogAge.DeletePartialMatch(labels)
		}
	}
	if len(b.reads[key]) == 0 {
		delete(b.reads, key)
	}
}

// staleReads: reads older than this many intervals, which the background
// reads do not refresh, are dropped with their gauges.
const staleReads = 2

// expire drops the TWD's reads made before cutoff, and their gauges.
func (b *Backlogs) expire(key types.NamespacedName, cutoff time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var keep []string
	for build, r := range b.reads[key] {
		if !r.At.Before(cutoff) {
			keep = append(keep, build)
		}
	}
	b.keepLocked(key, keep)
}

// Forget drops a deleted TWD: its reads, gauges and Temporal client.
func (b *Backlogs) Forget(key types.NamespacedName) {
	if b == nil {
		return
	}
	b.keep(key, nil)
	b.Pool.Forget(backlogOwner(key))
}

// backlogOwner names the Backlogs' client in the pool; the pool shares one
// connection among owners with the same parameters.
func backlogOwner(key types.NamespacedName) string {
	return "backlog/" + key.Namespace + "/" + key.Name
}

// Refresh reads the versions in builds whose last read is older than the
// interval, describing each with one DescribeWorkerDeploymentVersion.
func (b *Backlogs) Refresh(ctx context.Context, twd *v1alpha1.TemporalWorkerDeployment, builds []string) error {
	key, now := keyOf(twd), b.Clock.Now()
	var stale []string
	for _, build := range builds {
		if _, ok := b.Fresh(key, build, now); !ok {
			stale = append(stale, build)
		}
	}
	if len(stale) == 0 {
		return nil
	}
	conn, prob, err := connection.Resolve(ctx, b.Client, twd.Namespace, twd.Spec.WorkerOptions.ConnectionRef.Name,
		twd.Spec.WorkerOptions.TemporalNamespace, b.Pool.AllowedHosts(), now)
	if err != nil {
		return err
	}
	if prob != nil {
		return errors.New(prob.Message)
	}
	c, err := b.Pool.Get(ctx, backlogOwner(key), conn.Params)
	if err != nil {
		return fmt.Errorf("connect to Temporal at %s: %w", conn.Params.HostPort, err)
	}
	api := temporal.NewAPI(c, conn.Params.Namespace, b.Pool.Identity())
	name := twd.WorkerDeploymentName()
	var errs []error
	for _, build := range stale {
		d, err := api.DescribeVersionNoPollers(ctx, name, build)
		switch {
		case errors.Is(err, temporal.ErrNotFound):
			// Not registered (yet): nothing can wait for it.
			b.Record(key, build, name, temporal.VersionDetail{Backlog: []temporal.TaskQueueBacklog{}}, now)
		case err != nil:
			errs = append(errs, err)
		default:
			b.Record(key, build, name, d, now)
		}
	}
	return errors.Join(errs...)
}

// NeedLeaderElection: only the leader reads every version in the
// background; every replica answers the external metrics API (Values).
func (b *Backlogs) NeedLeaderElection() bool { return true }

// Start reads the backlog of every running version once per interval
// until ctx ends, and wakes the TWD of a version someone else scaled to
// zero once tasks wait for it. With no interval it does nothing.
func (b *Backlogs) Start(ctx context.Context) error {
	if b.Interval <= 0 {
		return nil
	}
	log := logf.FromContext(ctx).WithName("backlog")
	tick := time.NewTicker(b.Interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		if err := b.ReadAll(ctx); err != nil && ctx.Err() == nil {
			log.Info("reading backlogs", "error", err.Error())
		}
	}
}

// ReadAll reads every running version of every TWD the cache holds. It
// changes none of the objects, so it reads the cache's own, not copies:
// every interval, copies of every TWD and Deployment were most of what an
// idle controller allocated.
func (b *Backlogs) ReadAll(ctx context.Context) error {
	var list v1alpha1.TemporalWorkerDeploymentList
	if err := b.Client.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
		return err
	}
	seen := map[types.NamespacedName]bool{}
	var errs []error
	for i := range list.Items {
		twd := &list.Items[i]
		key := keyOf(twd)
		seen[key] = true
		running, zeroed, err := b.Fleet.Running(ctx, twd, client.UnsafeDisableDeepCopy)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		b.keep(key, running)
		if !b.All {
			auto, err := b.Fleet.Autoscaled(ctx, twd)
			if err != nil {
				errs = append(errs, err)
			}
			if !auto {
				// Nothing refreshes these: a gauge left from a rollout's
				// describe would show an old backlog as today's.
				b.expire(key, b.Clock.Now().Add(-staleReads*b.maxAge()))
				continue
			}
		}
		rctx, cancel := context.WithTimeout(ctx, readTimeout)
		if err := b.Refresh(rctx, twd, running); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", key, err))
		}
		cancel()
		now := b.Clock.Now()
		for _, build := range zeroed {
			if r, ok := b.Fresh(key, build, now); ok && (temporal.VersionDetail{Backlog: r.Queues}).BacklogCount() > 0 {
				select {
				case b.events <- event.GenericEvent{Object: twd}:
				default: // full: the TWD's next requeue reads it anyway
				}
				break
			}
		}
	}
	b.mu.Lock()
	var gone []types.NamespacedName
	for key := range b.reads {
		if !seen[key] {
			gone = append(gone, key)
		}
	}
	b.mu.Unlock()
	for _, key := range gone {
		b.Forget(key)
	}
	return errors.Join(errs...)
}

// Sample is the backlog of one task queue of one version, labelled for the
// external metrics API.
type Sample struct {
	Labels map[string]string
	Count  int64
	Age    time.Duration
	At     time.Time
}

// Labels of a Sample, which an external metric's selector may name.
const (
	SampleLabelWorker        = workload.LabelWorker
	SampleLabelBuildID       = workload.LabelBuildID
	SampleLabelTaskQueue     = "temporal.io/task-queue"
	SampleLabelTaskQueueType = "temporal.io/task-queue-type"
)

// Values returns the backlog of every task queue of every running version
// of the TWDs in namespace whose labels the selector matches, reading the
// versions it may match that were not read within the interval first, and
// how many versions it may match. Versions whose backlog cannot be read
// are left out; an error is returned only when none could be read.
func (b *Backlogs) Values(ctx context.Context, namespace string, selector labels.Selector) ([]Sample, int, error) {
	// Which versions to read is decided by the labels a version has
	// before its task queues are known.
	versionSel := labels.NewSelector()
	reqs, _ := selector.Requirements()
	for _, r := range reqs {
		if r.Key() == SampleLabelWorker || r.Key() == SampleLabelBuildID {
			versionSel = versionSel.Add(r)
		}
	}
	var list v1alpha1.TemporalWorkerDeploymentList
	if err := b.Client.List(ctx, &list, client.InNamespace(namespace)); err != nil {
		return nil, 0, err
	}
	var out []Sample
	var errs []error
	versions, read := 0, 0
	for i := range list.Items {
		twd := &list.Items[i]
		running, _, err := b.Fleet.Running(ctx, twd)
		if err != nil {
			return nil, 0, err
		}
		var wanted []string
		for _, build := range running {
			if versionSel.Matches(labels.Set{SampleLabelWorker: workload.WorkerLabel(twd.Name), SampleLabelBuildID: build}) {
				wanted = append(wanted, build)
			}
		}
		versions += len(wanted)
		if err := b.Refresh(ctx, twd, wanted); err != nil {
			errs = append(errs, err)
		}
		for _, build := range wanted {
			r, ok := b.Fresh(keyOf(twd), build, b.Clock.Now())
			if !ok || r.Queues == nil {
				continue
			}
			read++
			for _, q := range r.Queues {
				s := Sample{Labels: map[string]string{
					SampleLabelWorker: workload.WorkerLabel(twd.Name), SampleLabelBuildID: build,
					SampleLabelTaskQueue: q.Name, SampleLabelTaskQueueType: string(q.Type),
				}, Count: q.Count, Age: q.Age, At: r.At}
				if selector.Matches(labels.Set(s.Labels)) {
					out = append(out, s)
				}
			}
		}
	}
	if versions > 0 && read == 0 {
		return nil, versions, errors.Join(append(errs, errors.New("Temporal reported no task queue statistics"))...)
	}
	return out, versions, nil
}

func keyOf(twd *v1alpha1.TemporalWorkerDeployment) types.NamespacedName {
	return types.NamespacedName{Namespace: twd.Namespace, Name: twd.Name}
}
