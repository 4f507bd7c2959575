// Package workerdeployment reconciles TemporalWorkerDeployments: it
// observes the versioned Deployments and the Temporal worker deployment,
// asks the planner what to do, and applies the plan.
package workerdeployment

import (
	"cmp"
	"context"
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/internal/backlog"
	"github.com/rainbow-deploy/rainbow/internal/claim"
	"github.com/rainbow-deploy/rainbow/internal/connection"
	"github.com/rainbow-deploy/rainbow/internal/freshness"
	"github.com/rainbow-deploy/rainbow/internal/notify"
	"github.com/rainbow-deploy/rainbow/internal/planner"
	"github.com/rainbow-deploy/rainbow/internal/temporal"
)

const (
	// retryConflict: a write lost a race; the next observation is fresh.
	retryConflict = time.Second
	// retryFailed: an action failed; try again without hammering.
	retryFailed = 5 * time.Second
	// reconcileTimeout bounds one pass, Temporal calls included.
	reconcileTimeout = 30 * time.Second
	defaultWorkers   = 8
	// minRequeue: a deadline already passed is looked at right away.
	minRequeue = 10 * time.Millisecond
)

// Reconciler reconciles TemporalWorkerDeployments.
type Reconciler struct {
	Client client.Client
	// APIReader reads around the cache, to confirm an object the cache
	// does not have yet; nil trusts the cache.
	APIReader client.Reader
	Pool      *temporal.Pool
	Recorder  events.EventRecorder
	Clock     clock.PassiveClock
	// MaxVersions is Temporal's limit of versions per worker deployment
	// (the server's matching.maxVersionsInDeployment); 0 = no limit.
	MaxVersions int
	// Workers is how many TWDs are reconciled at once (default 8), so a
	// slow Temporal call for one never delays another's rollout step.
	Workers int

	// settled and lists spare describes of settled TWDs.
	settled   settledDescribes
	lists     listReads
	throttled throttles
	// unreadable: since when reads of each TWD's worker deployment have
	// failed other than by throttling (the planner's outage bound).
	unreadable throttles
	// unanswered: since when Temporal has not answered each TWD's writes.
	unanswered throttles
	// rollout, currentQueues, pollers and drainage spare Temporal reads
	// during a rollout.
	rollout       rolloutDescribes
	currentQueues currentQueueDescribes
	pollers       pollerDescribes
	drainage      drainageDescribes
	// watch wakes TWDs waiting on a person's routing change.
	watch *personWatch
	// Backlogs reads the versions' backlogs; nil reads none, and the
	// planner then takes a version someone else scaled to zero as having
	// work waiting whenever Temporal may hand it work.
	Backlogs *backlog.Backlogs
	// BannedKinds are the kinds no copy of an owned resource may be, in
	// any group; nil means ownedresource.DefaultBannedKinds. RBAC kinds are always banned.
	BannedKinds []string
	// ControllerVersion is the controller's version, written into each
	// version's metadata in Temporal; empty means "devel".
	ControllerVersion string
	// Notifier sends rollout notifications (internal/notify); nil sends none.
	Notifier *notify.Notifier
	// metadataWritten spares rewriting a target's metadata that a describe
	// made before the write does not show.
	metadataWritten byTWD[writtenMetadata]
	// analysis is the analysis' read budget per Temporal namespace.
	analysis analysisBudget
	// AnalysisRPS is that budget in visibility counts a second per
	// namespace (--analysis-visibility-rps); 0 means DefaultAnalysisRPS.
	AnalysisRPS float64
	// Prometheus runs Prometheus checks; nil: none configured.
	Prometheus *PrometheusReader
}

// +kubebuilder:rbac:groups=temporal.io,resources=temporalworkerdeployments,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=temporal.io,resources=temporalworkerdeployments/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=temporal.io,resources=temporalworkerdeployments/finalizers,verbs=update
// +kubebuilder:rbac:groups=temporal.io,resources=temporalconnections,verbs=get;list;watch
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch
// ConfigMaps are read one by one, never listed nor cached (a gate's input).
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// SetupWithManager registers the reconciler and its watches: its TWDs,
// their Deployments, and the connections and Secrets they use. The
// indexes of connection.RegisterIndexes and claim.RegisterIndex must be
// registered first.
func (r *Reconciler) SetupWithManager(mgr manager.Manager) error {
	r.watch = newPersonWatch(&r.lists, &r.settled)
	r.analysis.rps = r.AnalysisRPS
	if err := mgr.Add(r.watch); err != nil {
		return err
	}
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &v1alpha1.TemporalWorkerOwnedResource{}, ownedByWorker, indexOwnedByWorker); err != nil {
		return err
	}
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &appsv1.Deployment{}, deploymentsByWorker, indexDeploymentsByWorker); err != nil {
		return err
	}
	b := builder.ControllerManagedBy(mgr)
	if r.Backlogs != nil {
		if err := mgr.Add(r.Backlogs); err != nil {
			return err
		}
		b = b.WatchesRawSource(source.Channel(r.Backlogs.Events(), &handler.EnqueueRequestForObject{}))
	}
	return b.
		For(&v1alpha1.TemporalWorkerDeployment{}, builder.WithPredicates(notOnlyStatus)).
		Watches(&appsv1.Deployment{}, rankAvailable{handler.EnqueueRequestForOwner(mgr.GetScheme(), mgr.GetRESTMapper(),
			&v1alpha1.TemporalWorkerDeployment{}, handler.OnlyControllerOwner())}).
		// A TWD that yields its worker deployment to an older one waits
		// for that one to go or to name another.
		Watches(&v1alpha1.TemporalWorkerDeployment{}, handler.EnqueueRequestsFromMapFunc(r.rivalsOf), builder.WithPredicates(claimMayChange)).
		Watches(&v1alpha1.TemporalConnection{}, handler.EnqueueRequestsFromMapFunc(r.usersOfConnection)).
		// Metadata is enough to wake the users of a Secret; its data is
		// read on demand (internal/manager/trim.go).
		WatchesMetadata(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.usersOfSecret)).
		Watches(&v1alpha1.TemporalWorkerOwnedResource{}, handler.EnqueueRequestsFromMapFunc(workerOfOwned), builder.WithPredicates(ownedChanged)).
		WatchesRawSource(source.Channel(r.watch.events, &handler.EnqueueRequestForObject{})).
		Named("temporalworkerdeployment").
		WithOptions(controller.Options{MaxConcurrentReconciles: cmp.Or(r.Workers, defaultWorkers)}).
		Complete(r)
}

func (r *Reconciler) usersOfConnection(ctx context.Context, o client.Object) []reconcile.Request {
	var list v1alpha1.TemporalWorkerDeploymentList
	if err := r.Client.List(ctx, &list, client.InNamespace(o.GetNamespace()), client.MatchingFields{connection.WorkerDeploymentsByConnection: o.GetName()}); err != nil {
		logf.FromContext(ctx).Error(err, "list TemporalWorkerDeployments of a connection", "connection", o.GetName())
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for _, t := range list.Items {
		// A new address may give the worker deployment to another TWD.
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&t)})
		reqs = append(reqs, r.rivalsOf(ctx, &t)...)
	}
	return reqs
}

// rivalsOf maps a TWD to the others naming the same worker deployment.
func (r *Reconciler) rivalsOf(ctx context.Context, o client.Object) []reconcile.Request {
	twd, ok := o.(*v1alpha1.TemporalWorkerDeployment)
	if !ok {
		return nil
	}
	var list v1alpha1.TemporalWorkerDeploymentList
	if err := r.Client.List(ctx, &list, client.MatchingFields{claim.Index: claim.Key(twd)}); err != nil {
		logf.FromContext(ctx).Error(err, "list TemporalWorkerDeployments naming the same worker deployment", "twd", client.ObjectKeyFromObject(o))
		return nil
	}
	var reqs []reconcile.Request
	for _, t := range list.Items {
		if t.UID != twd.UID {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&t)})
		}
	}
	return reqs
}

// claimMayChange: creations, deletions, and spec changes (the name, the
// namespace or the connection a TWD names), not status writes.
var claimMayChange = predicate.Or(predicate.GenerationChangedPredicate{}, predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		return !e.ObjectNew.GetDeletionTimestamp().Equal(e.ObjectOld.GetDeletionTimestamp())
	},
})

// usersOfSecret maps a Secret to the TWDs whose connection names it.
func (r *Reconciler) usersOfSecret(ctx context.Context, o client.Object) []reconcile.Request {
	var conns v1alpha1.TemporalConnectionList
	if err := r.Client.List(ctx, &conns, client.InNamespace(o.GetNamespace()),
		client.MatchingFields{connection.ConnectionsBySecret: o.GetName()}); err != nil {
		return nil
	}
	var reqs []reconcile.Request
	for i := range conns.Items {
		reqs = append(reqs, r.usersOfConnection(ctx, &conns.Items[i])...)
	}
	return reqs
}

// Reconcile runs one observe, plan, act pass and writes status once.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	ctx, cancel := context.WithTimeout(ctx, reconcileTimeout)
	defer cancel()
	var twd v1alpha1.TemporalWorkerDeployment
	if err := r.Client.Get(ctx, req.NamespacedName, &twd); err != nil {
		if apierrors.IsNotFound(err) {
			forgetMetrics(req.Namespace, req.Name)
			r.settled.forget(req.NamespacedName)
			r.rollout.forget(req.NamespacedName)
			r.currentQueues.forget(req.NamespacedName)
			r.pollers.forget(req.NamespacedName)
			r.drainage.forget(req.NamespacedName)
			r.metadataWritten.forget(req.NamespacedName)
			r.throttled.clear(req.NamespacedName)
			r.unreadable.clear(req.NamespacedName)
			r.unanswered.clear(req.NamespacedName)
			r.watch.forget(req.NamespacedName)
			r.analysis.release(req.NamespacedName, r.Clock.Now())
			r.Backlogs.Forget(req.NamespacedName)
			r.Pool.Forget(ownerKey(&v1alpha1.TemporalWorkerDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: req.Namespace, Name: req.Name}}))
			return reconcile.Result{}, r.orphanedOwned(ctx, req.NamespacedName)
		}
		return reconcile.Result{}, err
	}
	deleting := !twd.DeletionTimestamp.IsZero()
	switch {
	case deleting && !controllerutil.ContainsFinalizer(&twd, Finalizer):
		r.watch.forget(req.NamespacedName)
		return reconcile.Result{}, nil
	case !deleting && !controllerutil.ContainsFinalizer(&twd, Finalizer):
		// The finalizer comes before anything it cleans up. This pass
		// writes only it, so each pass makes one write of the TWD. The
		// watch event of this write starts the next pass once the cache
		// has it: a requeue of its own raced the cache, and patched again
		// from the stale object (conflicts, measured in make bench).
		patched := twd.DeepCopy()
		controllerutil.AddFinalizer(patched, Finalizer)
		if err := r.Client.Patch(ctx, patched, client.MergeFromWithOptions(&twd, client.MergeFromWithOptimisticLock{})); err != nil {
			return reconcile.Result{}, err
		}
		return reconcile.Result{Priority: ptr.To(0)}, nil
	}

	now := r.Clock.Now()
	o, err := r.observe(ctx, &twd, now)
	if err != nil {
		return reconcile.Result{}, err
	}
	r.crossCheckDrainage(ctx, o)
	r.fillBacklogs(ctx, o)
	r.observeAnalysis(ctx, o)
	if o.retryBusy > 0 {
		// Temporal answered, if only to refuse: no outage runs.
		r.unreadable.clear(req.NamespacedName)
		th := r.throttled.note(req.NamespacedName, now)
		next := throttleBackoff(o.retryBusy, th.attempts, randomJitter())
		if twd.Status.ObservedGeneration == twd.Generation && !deleting {
			// A throttled read is no outage: the status of this spec
			// stands, and says since when Temporal throttles.
			if err := r.writeStatus(ctx, &twd, throttledStatus(twd.Status, th, now)); err != nil {
				return reconcile.Result{}, err
			}
			return reconcile.Result{RequeueAfter: next}, nil
		}
		// A spec not acted on yet: plan without Temporal's state (nothing
		// is routed, scaled down or deleted) so status describes it, as
		// waiting: a throttle is no failure.
		e := o.input.TemporalError
		e.Message = throttleSince(th) + ": " + e.Message
		e.Since, e.Throttled = th.since, true
		o.retryBusy = next
	} else {
		r.throttled.clear(req.NamespacedName)
		if e := o.input.TemporalError; e != nil && e.Reason == v1alpha1.ReasonTemporalStateFetchFailed {
			e.Since = r.unreadable.note(req.NamespacedName, now).since
		} else {
			r.unreadable.clear(req.NamespacedName)
		}
	}
	res := planner.Plan(o.input)
	observed := r.Clock.Since(now)
	out := r.act(ctx, o, res, now)
	acted := r.Clock.Since(now)
	ownedFailed := r.actOwned(ctx, o, res, now)
	if unanswered(out.failed) {
		out.momentary = now.Sub(r.unanswered.note(req.NamespacedName, now).since) < planner.TemporalOutageBound
	} else {
		r.unanswered.clear(req.NamespacedName)
	}
	r.recordEvents(o, res, out)
	countEvaluations(&twd, res)

	if res.RemoveFinalizer && len(out.failed) == 0 && !out.retrySoon {
		return reconcile.Result{}, r.removeFinalizer(ctx, &twd)
	}
	switch {
	case deleting || len(out.failed) > 0 || out.retrySoon:
		r.settled.forget(keyOf(&twd))
	case !o.reused:
		r.rememberSettled(ctx, o, res, now)
	case !freshness.Settles(res):
		r.settled.forget(keyOf(&twd))
	}
	r.watchRouting(o, res)

	before := twd.Status.Conditions
	prevStatus := versionStatuses(twd.Status)
	status, shown := buildStatus(twd.Status, twd.Generation, res, out, taskQueues(o), now)
	requeue := shown.RequeueAfter
	if o.retryBusy > 0 {
		requeue = o.retryBusy
	}
	if out.retrySoon {
		requeue = min(requeue, retryConflict)
	}
	if ownedFailed {
		requeue = min(requeue, retryOwned)
	}
	if len(out.failed) > 0 {
		msg := joinErrors(out.failed)
		logf.FromContext(ctx).Error(fmt.Errorf("%s", msg), "applying the plan failed")
		r.event(&twd, corev1.EventTypeWarning, v1alpha1.ReasonPlanExecutionFailed, "%s", msg)
		requeue = min(requeue, retryFailed)
		if deleting {
			requeue = min(requeue, retryDeleting)
		}
	}
	rememberRecent(&r.rollout, o, res, out, requeue, now)
	if err := r.writeStatus(ctx, &twd, status); err != nil {
		return reconcile.Result{}, err
	}
	if a := res.AbortRollout; a != nil {
		// After the status with the evidence: the pass the annotation
		// wakes must read both, or it shows an abort without evidence.
		if err := recordAbort(ctx, r.Client, &twd, a); err != nil {
			return reconcile.Result{}, err
		}
	}
	// Where a pass spends its time, for profiling (--zap-log-level=1).
	logf.FromContext(ctx).V(1).Info("pass", "temporal", o.temporalSource(), "observed", observed, "acted", acted-observed,
		"statusWritten", r.Clock.Since(now)-acted, "routed", out.routed != nil, "ready", shown.Ready.Reason, "requeueAfter", requeue)
	observeRollout(&twd, before, prevStatus, shown, o.input.Temporal, now)
	return reconcile.Result{RequeueAfter: sinceStart(requeue, r.Clock.Since(now)), Priority: nextPassPriority(shown, out)}, nil
}

// watchRouting has the personWatch wake a TWD that waits on a person's
// routing change when the namespace's list shows one, or for the manager
// role when its worker deployment changed since its describe.
func (r *Reconciler) watchRouting(o *observation, res planner.Result) {
	if r.watch == nil {
		return
	}
	key := keyOf(o.twd)
	e, ok := r.settled.lookup(key)
	switch {
	case !ok || o.api == nil || (res.WaitsFor != planner.WaitRouting && res.WaitsFor != planner.WaitManager):
		r.watch.forget(key)
		return
	case res.WaitsFor == planner.WaitManager:
		r.watch.waitManager(key, o.connKey, o.api.DeploymentsChangedSince, o.deploymentName, e.DescribedAt)
		return
	}
	t := e.state
	described := temporal.DeploymentSummary{CurrentBuildID: t.CurrentBuildID, RampingBuildID: t.RampingBuildID, RampPercentage: t.RampPercentage}
	r.watch.wait(key, o.connKey, o.api.ListDeployments, o.deploymentName, e.Summary, e.HasSummary, described)
}

// sinceStart turns a delay the plan counted from the start of the pass
// into one counted from now: a Describe right after a routing change can
// take a second, and a step's pause must not grow by it.
func sinceStart(requeue, elapsed time.Duration) time.Duration {
	return max(requeue-elapsed, minRequeue)
}

// writeStatus patches status if it changed.
func (r *Reconciler) writeStatus(ctx context.Context, twd *v1alpha1.TemporalWorkerDeployment, st v1alpha1.TemporalWorkerDeploymentStatus) error {
	if equality.Semantic.DeepEqual(twd.Status, st) {
		return nil
	}
	patched := twd.DeepCopy()
	patched.Status = st
	if err := r.Client.Status().Patch(ctx, patched, client.MergeFrom(twd)); err != nil {
		return fmt.Errorf("write status: %w", err)
	}
	*twd = *patched
	return nil
}

// recordEvents emits the plan's events, and the notifications of those
// notify.Reasons names. Warnings describe a blocked state that lasts many
// reconciles, so they are only emitted when the Ready condition changes;
// actions are emitted each time they happen. A rollout that turns paused
// or blocked is notified once, when the Ready reason changes to it.
func (r *Reconciler) recordEvents(o *observation, res planner.Result, out outcome) {
	old := meta.FindStatusCondition(o.twd.Status.Conditions, v1alpha1.ConditionReady)
	changed := old == nil || old.Reason != res.Ready.Reason || old.Message != res.Ready.Message
	reasonChanged := old == nil || old.Reason != res.Ready.Reason
	if changed && res.State == planner.StateBlocked && !hasWarning(res, res.Progressing.Reason) {
		// A problem the plan only reports (a missing connection, Temporal
		// unreachable) gets a Warning too, once, when it starts or changes.
		r.emit(o, planner.Event{Type: corev1.EventTypeWarning, Reason: res.Progressing.Reason, Message: res.Progressing.Message}, reasonChanged, out)
	}
	if reasonChanged && res.Ready.Reason == v1alpha1.ReasonPaused {
		r.emit(o, planner.Event{Type: corev1.EventTypeNormal, Reason: v1alpha1.ReasonPaused, Message: res.Ready.Message}, true, out)
	}
	for _, e := range res.Events {
		if e.Type == planner.EventWarning && !changed {
			continue
		}
		if e.Reason == planner.EventUpdateInPlace && out.updatedInPlace == nil {
			continue // the patch failed or lost a race; PlanExecutionFailed or the next pass says so
		}
		r.emit(o, e, true, out)
	}
}

// emit records e as an Event on the TWD and, if notifies, sends its
// notification: one place decides both.
func (r *Reconciler) emit(o *observation, e planner.Event, notifies bool, out outcome) {
	r.event(o.twd, e.Type, e.Reason, "%s", e.Message)
	if !notifies || r.Notifier == nil {
		return
	}
	if n, ok := notification(o, e, out, r.Clock.Now()); ok {
		r.Notifier.Notify(n)
	}
}

func hasWarning(res planner.Result, reason string) bool {
	for _, e := range res.Events {
		if e.Type == planner.EventWarning && e.Reason == reason {
			return true
		}
	}
	return false
}

func (r *Reconciler) event(obj runtime.Object, typ, reason, format string, args ...any) {
	if r.Recorder != nil {
		r.Recorder.Eventf(obj, nil, typ, reason, reason, format, args...)
	}
}

// taskQueues are the task queue names of the versions described this pass.
func taskQueues(o *observation) map[string][]string {
	out := make(map[string][]string, len(o.details))
	for b, d := range o.details {
		out[b] = d.TaskQueueNames()
	}
	return out
}

func joinErrors(errs []error) string {
	msgs := make([]string, len(errs))
	for i, e := range errs {
		msgs[i] = e.Error()
	}
	return strings.Join(msgs, "; ")
}
