package workerdeployment

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/internal/buildid"
	"github.com/rainbow-deploy/rainbow/internal/claim"
	"github.com/rainbow-deploy/rainbow/internal/connection"
	"github.com/rainbow-deploy/rainbow/internal/freshness"
	"github.com/rainbow-deploy/rainbow/internal/planner"
	"github.com/rainbow-deploy/rainbow/internal/temporal"
	"github.com/rainbow-deploy/rainbow/internal/workload"
)

// observation is everything one reconcile knows, gathered before deciding.
type observation struct {
	twd            *v1alpha1.TemporalWorkerDeployment
	deploymentName string
	targetBuildID  string
	deployments    map[string]*appsv1.Deployment
	// conn is nil when the connection could not be resolved.
	conn *connection.Resolved
	// api is nil when no client could be made.
	api *temporal.API
	// token is the worker deployment's conflict token from Describe.
	token []byte
	// details are the versions described in this pass, by build ID.
	details map[string]temporal.VersionDetail
	// gate is the gate run of the target, as status should show it.
	gate  *v1alpha1.GateStatus
	input planner.Input
	// retryBusy: Temporal throttled a read; retry this soon, not in ten seconds.
	retryBusy time.Duration
	// connKey identifies the Temporal connection, for the stores of reads.
	connKey string
	// reused: the Temporal state came from the settled or the rollout store,
	// or (listed) from the namespace's list, which did not show it.
	reused, listed bool
	// describedAt, when set, is when the worker deployment was described:
	// the pass took its state from an earlier describe (rolloutDescribes).
	describedAt time.Time
	// fresh is where the pass took Temporal's state from, and why.
	fresh freshness.Decision
	// owned are the TWD's TemporalWorkerOwnedResources, by name.
	owned map[string]*v1alpha1.TemporalWorkerOwnedResource
	// drainErrs are listings of pinned workflows that failed.
	drainErrs []error
}

// observe reads Kubernetes, then Temporal. A Temporal problem is not an
// error: it becomes input.TemporalError and the planner plays safe. The
// error return is for failures to read from the API server.
func (r *Reconciler) observe(ctx context.Context, twd *v1alpha1.TemporalWorkerDeployment, now time.Time) (*observation, error) {
	o := &observation{
		twd:            twd,
		deploymentName: twd.WorkerDeploymentName(),
		targetBuildID:  buildid.Target(twd),
		details:        map[string]temporal.VersionDetail{},
		// The latest gate run stays in status unless this pass learns
		// more, an outage included.
		gate: twd.Status.Gate.DeepCopy(),
	}
	deps, err := ownedDeployments(ctx, r.Client, twd)
	if err != nil {
		return nil, fmt.Errorf("list Deployments: %w", err)
	}
	o.deployments = deps
	o.input = planner.Input{
		Now:                now,
		Identity:           r.Pool.Identity(),
		DeploymentName:     o.deploymentName,
		Spec:               plannerSpec(twd, o.targetBuildID, r.MaxVersions),
		TargetHadCompleted: targetHadCompleted(twd, o.targetBuildID),
		TargetShownReady:   targetShownReady(twd, o.targetBuildID),
		TargetSince:        targetSince(twd, o.targetBuildID),
		Deletion:           deletion(twd),
		Namespace:          twd.Namespace,
		Name:               twd.Name,
		TemporalNamespace:  twd.Spec.WorkerOptions.TemporalNamespace,
		Drains:             drainRecords(twd.Status),
		Analysis:           planner.AnalysisObserved{Last: analysisRecord(twd.Status.Analysis)},
	}
	if err := r.observeOwned(ctx, o); err != nil {
		return nil, err
	}
	for _, d := range deps {
		o.input.Deployments = append(o.input.Deployments, plannerDeployment(d))
	}
	// An older TWD naming the same worker deployment holds it: this one
	// reads and writes nothing in Temporal.
	holder, self, err := claim.Holder(ctx, r.Client, twd)
	if err != nil {
		return nil, err
	}
	if holder != nil {
		o.input.ClaimedBy = &planner.Claimed{Holder: holder.String(), Address: self.Address, TemporalNamespace: twd.Spec.WorkerOptions.TemporalNamespace}
		return o, nil
	}

	conn, prob, err := connection.Resolve(ctx, connection.ConfirmMissing{Cached: r.Client, Live: r.APIReader}, twd.Namespace, twd.Spec.WorkerOptions.ConnectionRef.Name,
		twd.Spec.WorkerOptions.TemporalNamespace, r.Pool.AllowedHosts(), now)
	if err != nil {
		return nil, err
	}
	if prob != nil {
		o.input.TemporalError = prob
		return o, nil
	}
	o.conn = conn
	c, err := r.Pool.Get(ctx, ownerKey(twd), conn.Params)
	if err != nil {
		// No Server: credentials the server refuses (or that could not
		// be tried) are not given to any pod. Rolling the workers to
		// them would replace pods that poll with pods that cannot.
		fix := temporal.Fix(conn.Object.Spec, err)
		if fix == "" {
			fix = "check its hostPort, TLS settings and that the namespace exists"
		}
		o.input.TemporalError = &planner.Problem{
			Reason: v1alpha1.ReasonTemporalClientCreationFailed,
			Message: fmt.Sprintf("cannot connect to Temporal at %s (namespace %s) with TemporalConnection %s: %v; %s",
				conn.Params.HostPort, conn.Params.Namespace, conn.Object.Name, err, fix),
		}
		return o, nil
	}
	o.input.Server = planner.Server{Address: conn.Workers.Address}
	for i := range o.input.Deployments {
		pd := &o.input.Deployments[i]
		pd.ConnectionStale, pd.SettingsStale = workload.Sync(o.deployments[pd.BuildID].DeepCopy(), twd, identity(o, pd.BuildID), conn.Workers, "")
	}
	o.api = temporal.NewAPI(c, conn.Params.Namespace, r.Pool.Identity())
	o.connKey = conn.Params.Key()
	o.input.Server.NamespaceID = r.Pool.NamespaceID(ownerKey(twd))
	b := r.believe(ctx, o, o.api.ListDeployments, now)
	o.fresh = b.Decision
	switch b.Use {
	case freshness.Settled:
		e := b.settled
		o.input.Temporal, o.token, o.reused = copyState(e.state), e.token, true
		if twd.Status.Gate != nil {
			// Remembered only while the target is current or waits
			// for a person, so its gate is settled (an aborted step
			// gate's failure is the abort's evidence).
			o.gate = twd.Status.Gate.DeepCopy()
			if g := o.gate; g != nil && g.BuildID == o.targetBuildID {
				o.input.Gate = recordedGate(g)
			}
		}
		return o, nil
	case freshness.Recent:
		e := b.rollout
		o.input.Temporal, o.token, o.reused = copyState(e.State), e.token, true
		return o, nil
	case freshness.Unlisted:
		o.input.Temporal, o.reused, o.listed = &planner.TemporalState{}, true, true
		return o, nil
	case freshness.Wait:
		readFailed(o, conn, b.listErr)
		return o, nil
	case freshness.TargetOnRecent:
		e := b.rollout
		if r.observeTargetOn(ctx, o, copyState(e.State), e.token) {
			o.describedAt = e.DescribedAt
			r.observeDrain(ctx, o)
			return o, nil
		}
		o.fresh = freshness.Decision{Use: freshness.Describe, Reason: "described: the target could not be read, or changed, since the last describe"}
	}
	if err := r.observeTemporal(ctx, o); err != nil {
		readFailed(o, conn, err)
		return o, nil
	}
	r.observeDrain(ctx, o)
	return o, nil
}

// readFailed records that Temporal's state could not be read: the planner
// plays safe, and a throttled read is retried after Temporal's backoff.
func readFailed(o *observation, conn *connection.Resolved, err error) {
	if errors.Is(err, temporal.ErrBusy) {
		o.retryBusy = temporal.RetryAfter(err)
	}
	o.input.Temporal = nil
	o.input.TemporalError = &planner.Problem{
		Reason: v1alpha1.ReasonTemporalStateFetchFailed,
		Message: fmt.Sprintf("could not read worker deployment %s from Temporal at %s: %v; the controller keeps every version running and retries; "+
			"if this lasts, check that Temporal answers at %s (spec.hostPort of TemporalConnection %s)",
			o.deploymentName, conn.Params.HostPort, err, conn.Params.HostPort, conn.Object.Name),
	}
}

// observeTemporal describes the worker deployment, then exactly the
// versions the planner asks for (planner.VersionsToDescribe): the others
// stay undescribed, which the planner reads as "may still be polled".
func (r *Reconciler) observeTemporal(ctx context.Context, o *observation) error {
	state, token, err := o.api.Describe(ctx, o.deploymentName)
	if err != nil {
		return err
	}
	o.token, o.input.Temporal = token, state
	// What versions said of their own drainage decides which to describe
	// for pollers: a version the summary keeps draining but that reported
	// itself drained must be, or it is never deleted from Temporal.
	r.drainage.stamp(keyOf(o.twd), state)
	for _, b := range planner.VersionsToDescribe(o.input) {
		i := slices.IndexFunc(state.Versions, func(v planner.TemporalVersion) bool { return v.BuildID == b })
		v := &state.Versions[i]
		if b == o.targetBuildID && o.input.Deletion == nil {
			err := r.describeTarget(ctx, o, v)
			if errors.Is(err, temporal.ErrNotFound) {
				// Listed a moment ago, not yet readable on its own (seen
				// right after registration): the planner waits to read it.
				continue
			}
			if err != nil {
				return err
			}
		} else {
			if freshness.PolledRecently(r.pollers.lookup(keyOf(o.twd), b), o.input.Now) {
				// Its workers polled moments ago; Temporal forgets them
				// only after its poller history TTL. Left undescribed, it
				// counts as polled.
				continue
			}
			d, err := o.api.DescribeVersion(ctx, o.deploymentName, b)
			switch {
			case errors.Is(err, temporal.ErrNotFound):
				// Deleted since the Describe: nothing polls it.
			case err != nil:
				return err
			default:
				o.details[b] = d
				v.HasPollers = d.HasPollers
				if d.HasPollers {
					r.pollers.note(keyOf(o.twd), b, o.input.Now)
				}
			}
		}
		v.Described = true
	}
	if o.input.Deletion != nil {
		_, err := staleGate(ctx, o, true)
		return err
	}
	return observeGate(ctx, r.Client, o)
}

// observeTargetOn completes an earlier describe of the worker deployment
// with a fresh describe of the target: its registration, task queues and
// pollers, all the routing rules read that can have changed without
// changing the conflict token. It reports false, leaving o as it was, if
// the target cannot be read (not registered, or any error) or its status
// changed since (freshness.TargetStands): the caller then observes in full.
func (r *Reconciler) observeTargetOn(ctx context.Context, o *observation, state *planner.TemporalState, token []byte) bool {
	if m := state.ManagerIdentity; !state.Exists || len(token) == 0 || (m != "" && m != o.input.Identity) {
		return false // without a token a write would not be checked
	}
	prev, prevDetails := o.input.Temporal, o.details
	o.input.Temporal, o.details = state, map[string]temporal.VersionDetail{}
	i := slices.IndexFunc(state.Versions, func(v planner.TemporalVersion) bool { return v.BuildID == o.targetBuildID })
	if i < 0 {
		state.Versions = append(state.Versions, planner.TemporalVersion{BuildID: o.targetBuildID})
		i = len(state.Versions) - 1
	}
	v := &state.Versions[i]
	if err := r.describeTarget(ctx, o, v); err != nil {
		o.input.Temporal, o.details = prev, prevDetails
		return false
	}
	d := o.details[o.targetBuildID]
	if !freshness.TargetStands(v.Status, d.Status) {
		o.input.Temporal, o.details = prev, prevDetails
		return false
	}
	v.Status = d.Status
	if v.RegisteredAt.IsZero() {
		v.RegisteredAt = d.CreatedAt
	}
	v.Described = true
	state.Exists = true
	slices.SortFunc(state.Versions, func(x, y planner.TemporalVersion) int { return strings.Compare(x.BuildID, y.BuildID) })
	o.token = token
	return true
}

// describeTarget fills what the planner checks before routing to the
// target: its pollers, and that it polls every task queue of the current
// version (Temporal refuses the routing change otherwise).
func (r *Reconciler) describeTarget(ctx context.Context, o *observation, v *planner.TemporalVersion) error {
	target, err := o.api.DescribeVersion(ctx, o.deploymentName, v.BuildID)
	if err != nil {
		return err
	}
	o.details[v.BuildID] = target
	var current temporal.VersionDetail
	if cur := o.input.Temporal.CurrentBuildID; cur != "" {
		key, now := keyOf(o.twd), o.input.Now
		if e, ok := r.currentQueues.lookup(key); ok && e.detail.BuildID == cur && freshness.QueuesStand(e.at, now) {
			current = e.detail
		} else {
			if current, err = o.api.DescribeVersionNoPollers(ctx, o.deploymentName, cur); err != nil {
				return err
			}
			r.currentQueues.remember(key, queueEntry{detail: current, at: now})
		}
	} else {
		o.input.Temporal.UnversionedPollers = target.UnversionedPollers
	}
	v.HasPollers = target.HasPollers
	v.TaskQueuesReady = temporal.TaskQueuesReady(target, current)
	v.MissingTaskQueues = temporal.MissingTaskQueues(target, current)
	v.WorkflowTaskQueue = ""
	for _, tq := range target.TaskQueues {
		if tq.Type == temporal.TaskQueueWorkflow {
			v.WorkflowTaskQueue = tq.Name
			break
		}
	}
	return nil
}

// plannerSpec is the part of the spec the rollout rules read. Defaults
// match the CRD's, for objects written before a default existed.
func plannerSpec(twd *v1alpha1.TemporalWorkerDeployment, target string, maxVersions int) planner.Spec {
	s := planner.Spec{
		TargetBuildID:    target,
		AbortedBuildID:   twd.Annotations[v1alpha1.AnnotationAbortRollout],
		Replicas:         twd.Spec.Replicas,
		Strategy:         twd.Spec.Rollout.Strategy,
		ScaledownDelay:   time.Hour,
		DeleteDelay:      24 * time.Hour,
		MaxVersions:      maxVersions,
		TemplateHash:     buildid.TemplateHash(&twd.Spec.Template),
		GeneratedBuildID: buildid.Generate(&twd.Spec.Template),
		Drain:            drainSpec(twd),
		Paused:           twd.Spec.Rollout.Paused,
		AdoptionPending:  twd.Annotations[v1alpha1.AnnotationAdoptionPending] != "",
		TakeManagerFrom:  twd.Annotations[v1alpha1.AnnotationTakeManagerFrom],
		Analysis:         analysisSpec(twd.Spec.Rollout.Analysis),
	}
	if s.Strategy == "" {
		s.Strategy = v1alpha1.StrategyAllAtOnce
	}
	for _, st := range twd.Spec.Rollout.Steps {
		step := planner.Step{RampPercentage: st.RampPercentage, Pause: st.PauseDuration.Duration}
		if g := st.Gate; g != nil {
			step.Gate = &planner.StepGate{WorkflowType: g.WorkflowType}
			if g.Timeout != nil {
				step.Gate.Timeout = g.Timeout.Duration
			}
		}
		s.Steps = append(s.Steps, step)
	}
	if g := twd.Spec.Rollout.Gate; g != nil {
		s.GateWorkflowType = g.WorkflowType
		if g.Timeout != nil {
			s.GateTimeout = g.Timeout.Duration
		}
	}
	if d := twd.Spec.Sunset.ScaledownDelay; d != nil {
		s.ScaledownDelay = d.Duration
	}
	if d := twd.Spec.Sunset.DeleteDelay; d != nil {
		s.DeleteDelay = d.Duration
	}
	s.ProgressDeadline, s.ProgressDeadlineAbort = defaultProgressDeadline, twd.Spec.Rollout.ProgressDeadlineAbort
	if d := twd.Spec.Rollout.ProgressDeadline; d != nil {
		s.ProgressDeadline = d.Duration
	}
	return s
}

// defaultProgressDeadline is the CRD's default of spec.rollout.progressDeadline.
const defaultProgressDeadline = 10 * time.Minute

// targetSince is when status says this target started, or its Deployment
// was last updated in place if later; zero when status does not say.
func targetSince(twd *v1alpha1.TemporalWorkerDeployment, target string) time.Time {
	t := twd.Status.TargetVersion
	if t == nil || t.BuildID != target || t.TargetSince == nil {
		return time.Time{}
	}
	since := t.TargetSince.Time
	if u := t.UpdatedInPlaceAt; u != nil && u.After(since) {
		since = u.Time
	}
	return since
}

// ownerKey names the TWD's client in the pool.
func ownerKey(twd *v1alpha1.TemporalWorkerDeployment) string {
	return "twd/" + twd.Namespace + "/" + twd.Name
}

// targetHadCompleted: status records that the rollout of this target
// completed (WorkerVersion.CompletedAt).
func targetHadCompleted(twd *v1alpha1.TemporalWorkerDeployment, target string) bool {
	t := twd.Status.TargetVersion
	return t != nil && t.BuildID == target && t.CompletedAt != nil
}

// targetShownReady: status shows this target current, its rollout
// completed.
func targetShownReady(twd *v1alpha1.TemporalWorkerDeployment, target string) bool {
	c := twd.Status.CurrentVersion
	return targetHadCompleted(twd, target) && c != nil && c.BuildID == target
}
