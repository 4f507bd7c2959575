package workerdeployment

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/internal/planner"
	"github.com/rainbow-deploy/rainbow/internal/temporal"
	"github.com/rainbow-deploy/rainbow/internal/workload"
)

// outcome is how applying a plan went.
type outcome struct {
	// failed are errors the user should see (PlanExecutionFailed).
	failed []error
	// momentary: every failure is Temporal not answering, for less than
	// planner.TemporalOutageBound; the rollout is not reported failed.
	momentary bool
	// retrySoon: a write lost a race (conflict) and is retried shortly;
	// the plan's conditions still describe the state.
	retrySoon bool
	// kubeInDoubt: a Kubernetes write failed in a way that puts the
	// pass's observation in doubt (see inDoubt); Temporal is not written.
	kubeInDoubt bool
	gate        *v1alpha1.GateStatus
	// updatedInPlace is the update whose Deployment got a new template.
	updatedInPlace *planner.UpdateDeployment
	// drained are the runs of each DrainWork acted on.
	drained []drainDone
	// revived are the revivals whose scale was written.
	revived []planner.Scale
	// routed is the plan's routing write, once Temporal accepted it.
	routed *planner.Routing
	// deleted are the versions Temporal deleted.
	deleted []string
	// created: the target's Deployment was created.
	created bool
	// deletedDeployments are the build IDs whose Deployment this pass deleted.
	deletedDeployments []string
}

func (o *outcome) fail(err error) { o.failed = append(o.failed, err) }

// act applies a plan. Kubernetes steps come first; Temporal steps only run
// when a client exists. Each step is idempotent, so a failed reconcile is
// simply repeated.
func (r *Reconciler) act(ctx context.Context, o *observation, res planner.Result, now time.Time) outcome {
	out := outcome{gate: o.gate}
	if o.conn == nil && (res.CreateDeployment != nil || res.UpdateDeployment != nil || len(res.SyncDeployments) > 0) {
		// The planner writes no Deployment without a connection (Input.Server).
		out.fail(errors.New("internal error: the plan writes a Deployment without a resolved TemporalConnection"))
		return out
	}

	if c := res.CreateDeployment; c != nil {
		err := r.createDeployment(ctx, o, c)
		out.kubeInDoubt = out.kubeInDoubt || inDoubt(err)
		if err != nil {
			out.fail(err)
		}
		out.created = err == nil
	}
	if u := res.UpdateDeployment; u != nil {
		if d := o.deployments[u.BuildID]; d != nil {
			err := r.updateTemplate(ctx, o, d, u.HashOnly)
			r.kubeErr(&out, err)
			if err == nil && !u.HashOnly {
				out.updatedInPlace = u
			}
		}
	}
	for _, s := range res.Scale {
		if d := o.deployments[s.BuildID]; d != nil {
			err := scaleDeployment(ctx, r.Client, d, s, now)
			r.kubeErr(&out, err)
			if err == nil && s.Reason == planner.ScaleRevive {
				workersRevived.WithLabelValues(o.twd.Namespace, o.twd.Name).Inc()
				out.revived = append(out.revived, s)
			}
		}
	}
	for _, del := range res.DeleteDeployments {
		if d := o.deployments[del.BuildID]; d != nil {
			first := d.DeletionTimestamp.IsZero()
			err := deleteDeployment(ctx, r.Client, d, del)
			r.kubeErr(&out, err)
			if err == nil && first {
				out.deletedDeployments = append(out.deletedDeployments, del.BuildID)
			}
		}
	}
	for _, sy := range res.SyncDeployments {
		if d := o.deployments[sy.BuildID]; d != nil {
			r.kubeErr(&out, r.syncDeployment(ctx, o, d, sy))
		}
	}

	if out.kubeInDoubt {
		// No routing, gate or deletion in Temporal from a plan whose
		// Kubernetes reads a failed write has put in doubt: the next pass
		// observes again, shortly.
		out.retrySoon = true
		return out
	}
	if o.api != nil && o.input.Temporal != nil {
		r.actTemporal(ctx, o, res, &out)
	}
	return out
}

// inDoubt reports whether a failed Kubernetes write puts what the pass
// observed in doubt: a conflict or a vanished object shows the cache was
// behind, and a write that got no clear answer (a timeout, a 5xx, a broken
// connection) may have happened or not. A clear refusal (forbidden,
// invalid, a name taken) leaves the observation as it was.
func inDoubt(err error) bool {
	if err == nil {
		return false
	}
	var st apierrors.APIStatus
	if errors.As(err, &st) {
		code := st.Status().Code
		return code == http.StatusConflict || code == http.StatusNotFound || code == http.StatusTooManyRequests || code >= 500
	}
	var nerr net.Error
	return errors.As(err, &nerr) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF)
}

// kubeErr sorts a Kubernetes write error: a conflict means our observation
// was stale, which the next reconcile fixes.
func (r *Reconciler) kubeErr(out *outcome, err error) {
	out.kubeInDoubt = out.kubeInDoubt || inDoubt(err)
	switch {
	case err == nil:
	case apierrors.IsConflict(err) || apierrors.IsNotFound(err):
		out.retrySoon = true
	default:
		out.fail(err)
	}
}

func (r *Reconciler) createDeployment(ctx context.Context, o *observation, c *planner.CreateDeployment) error {
	d := workload.NewDeployment(o.twd, identity(o, c.BuildID), o.conn.Workers, ptr.To(c.Replicas))
	if id := o.input.Server.NamespaceID; id != "" {
		metav1.SetMetaDataAnnotation(&d.ObjectMeta, workload.AnnotationNamespaceID, id)
	}
	err := r.Client.Create(ctx, d)
	if apierrors.IsAlreadyExists(err) {
		return nameTaken(ctx, r.Client, o.twd, d.Name, c.BuildID)
	}
	if err != nil {
		return fmt.Errorf("create Deployment %s: %w", d.Name, err)
	}
	return nil
}

// nameTaken explains a create that failed because the name is taken.
// ownedDeployments did not list that Deployment for this build ID, so the
// controller does not adopt it: it may hold someone else's pods.
func nameTaken(ctx context.Context, c client.Reader, twd *v1alpha1.TemporalWorkerDeployment, name, build string) error {
	var existing appsv1.Deployment
	err := c.Get(ctx, client.ObjectKey{Namespace: twd.Namespace, Name: name}, &existing)
	ref := metav1.GetControllerOf(&existing)
	if err == nil && ref != nil && ref.UID == twd.UID {
		if existing.Labels[workload.LabelBuildID] == build {
			return nil // our own create, not yet in the cache we observed
		}
		// Only an older controller, whose names could collide, made this.
		return fmt.Errorf("cannot create the Deployment of version %s: Deployment %s already exists for version %s of this TemporalWorkerDeployment "+
			"(controllers before this release gave both build IDs the same Deployment name); version %s can be created once version %s is retired, "+
			"or use a build ID that differs from %s in more than case, \".\" and \"_\"",
			build, name, existing.Labels[workload.LabelBuildID], build, existing.Labels[workload.LabelBuildID], existing.Labels[workload.LabelBuildID])
	}
	owner := "it has no controlling owner"
	switch {
	case err != nil:
		// The cache holds only Deployments with the worker label.
		owner = fmt.Sprintf("it does not carry the label %s=%s", workload.LabelWorker, workload.WorkerLabel(twd.Name))
	case ref != nil:
		owner = fmt.Sprintf("it is controlled by %s %s", ref.Kind, ref.Name)
	}
	return fmt.Errorf("cannot create the Deployment of version %s: a Deployment named %s already exists in namespace %s that this TemporalWorkerDeployment does not own (%s); "+
		"the controller never takes over another object's Deployment: delete or rename that Deployment, or rename this TemporalWorkerDeployment",
		build, name, twd.Namespace, owner)
}

// updateTemplate brings a version's Deployment to the spec's template in
// place, or with hashOnly only records which template it runs.
func (r *Reconciler) updateTemplate(ctx context.Context, o *observation, d *appsv1.Deployment, hashOnly bool) error {
	patched := d.DeepCopy()
	if hashOnly {
		if patched.Annotations == nil {
			patched.Annotations = map[string]string{}
		}
		patched.Annotations[workload.AnnotationTemplateHash] = o.input.Spec.TemplateHash
	} else {
		workload.SetTemplate(patched, o.twd, identity(o, d.Labels[workload.LabelBuildID]), o.conn.Workers)
		workload.MarkTemplateChange(d, patched)
	}
	if err := r.Client.Patch(ctx, patched, client.MergeFromWithOptions(d, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("update the pod template of Deployment %s: %w", d.Name, err)
	}
	return nil
}

// syncDeployment applies the plan's SyncDeployment: the connection, the
// Deployment settings and the namespace ID annotation.
func (r *Reconciler) syncDeployment(ctx context.Context, o *observation, d *appsv1.Deployment, sy planner.SyncDeployment) error {
	patched := d.DeepCopy()
	workload.Sync(patched, o.twd, identity(o, sy.BuildID), o.conn.Workers, o.input.Server.NamespaceID)
	workload.MarkTemplateChange(d, patched)
	if err := r.Client.Patch(ctx, patched, client.MergeFromWithOptions(d, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("update the connection settings of Deployment %s: %w", d.Name, err)
	}
	return nil
}

func identity(o *observation, build string) workload.Identity {
	return workload.Identity{
		TemporalNamespace: o.twd.Spec.WorkerOptions.TemporalNamespace,
		DeploymentName:    o.deploymentName,
		BuildID:           build,
	}
}

// actTemporal writes routing (after taking the manager role if needed),
// starts or ends gates and deletes retired versions.
func (r *Reconciler) actTemporal(ctx context.Context, o *observation, res planner.Result, out *outcome) {
	token := o.token
	routable := true
	if res.BecomeManager {
		t, err := o.api.BecomeManager(ctx, o.deploymentName, token)
		if err != nil {
			routable = false
			temporalErr(out, err)
		} else {
			token = t
		}
	}
	if res.Routing != nil && routable {
		_, err := o.api.Route(ctx, o.deploymentName, *res.Routing, token)
		temporalErr(out, err)
		switch {
		case err == nil:
			out.routed = res.Routing
			if d, ok := o.details[res.Routing.BuildID]; ok && res.Routing.Op == planner.SetCurrent {
				// The task queues it registered, described before this
				// write: the next rollout's check needs no describe of it.
				r.currentQueues.remember(keyOf(o.twd), queueEntry{detail: d, at: o.input.Now})
			}
		case errors.Is(err, temporal.ErrMissingTaskQueues):
			// The current version registered a task queue since it was
			// described: describe it again.
			r.currentQueues.forget(keyOf(o.twd))
		}
	}
	r.writeVersionMetadata(ctx, o)
	r.endGate(ctx, o, res, out)
	if g := res.StartGate; g != nil {
		if err := r.startGate(ctx, o, g, out); err != nil {
			out.fail(err)
		}
	}
	for _, b := range res.DeleteTemporalVersions {
		del := o.api.DeleteVersion
		if res.SkipDrainage {
			del = o.api.DeleteVersionSkipDrainage
		}
		err := del(ctx, o.deploymentName, b)
		if errors.Is(err, temporal.ErrVersionInUse) || errors.Is(err, temporal.ErrNotFound) {
			// Temporal's own check is the last word: a poller or workflow
			// appeared since we looked. Nothing to do.
			logf.FromContext(ctx).Info("Temporal kept a version", "buildID", b, "why", err.Error())
			continue
		}
		temporalErr(out, err)
		if err == nil {
			out.deleted = append(out.deleted, b)
		}
	}
	if res.DeleteWorkerDeployment {
		if err := o.api.DeleteDeployment(ctx, o.deploymentName); err != nil && !errors.Is(err, temporal.ErrNotFound) {
			temporalErr(out, err)
		}
	}
	r.actDrain(ctx, o, res, out)
}

// temporalErr sorts a Temporal write error. Lost races and refusals that
// the next observation explains (someone took the manager role, a task
// queue is missing) are retried without raising an error condition.
func temporalErr(out *outcome, err error) {
	switch {
	case err == nil:
	case errors.Is(err, temporal.ErrConflict), errors.Is(err, temporal.ErrManagedByOther),
		errors.Is(err, temporal.ErrMissingTaskQueues), errors.Is(err, temporal.ErrBusy):
		out.retrySoon = true
	default:
		out.fail(err)
	}
}

// startGate starts the gate workflow pinned to the target, as planned.
func (r *Reconciler) startGate(ctx context.Context, o *observation, g *planner.StartGate, out *outcome) error {
	id, run, err := o.api.StartGate(ctx, o.deploymentName, g.BuildID, g.Step, g.TaskQueue, g.WorkflowType, g.Input, g.Timeout)
	if err != nil {
		return err
	}
	out.gate = &v1alpha1.GateStatus{BuildID: g.BuildID, Step: g.Step, WorkflowID: id, RunID: run, Result: string(planner.GateRunning)}
	return nil
}
