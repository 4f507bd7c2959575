package workerdeployment

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/internal/planner"
	"github.com/rainbow-deploy/rainbow/internal/temporal"
)

// The drain deadline and the continue-as-new signal: the observer lists
// the pinned workflows of the versions the planner names, the executor
// cancels, terminates or signals the runs the plan picks, and status
// records what succeeded.

var (
	drainActions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rainbow_drain_workflows_total",
		Help: "Pinned workflow runs of draining versions the controller acted on, by action: cancel (requested), terminate or signal (continue-as-new).",
	}, []string{"namespace", "name", "action"})
	drainOverdue = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "rainbow_drain_overdue_workflows",
		Help: "Pinned workflows open past spec.sunset.maxDrainDuration on the TemporalWorkerDeployment's draining versions, at their last listing (what DryRun reports).",
	}, []string{"namespace", "name"})
)

func init() {
	metrics.Registry.MustRegister(drainActions, drainOverdue)
}

var drainActionLabel = map[planner.DrainOp]string{
	planner.DrainOpCancel:    "cancel",
	planner.DrainOpTerminate: "terminate",
	planner.DrainOpSignal:    "signal",
}

// drainSpec is spec.sunset's drain deadline and signal for the planner.
// DrainAction defaults to DryRun once maxDrainDuration is set.
func drainSpec(twd *v1alpha1.TemporalWorkerDeployment) planner.DrainSpec {
	var d planner.DrainSpec
	s := twd.Spec.Sunset
	if s.MaxDrainDuration != nil {
		d.MaxDuration, d.Action = s.MaxDrainDuration.Duration, s.DrainAction
		if d.Action == "" {
			d.Action = v1alpha1.DrainDryRun
		}
	}
	if s.ContinueAsNewSignal != nil {
		d.Signal = s.ContinueAsNewSignal.Name
	}
	return d
}

// drainRecords are the drain records status shows, one per build ID.
func drainRecords(st v1alpha1.TemporalWorkerDeploymentStatus) []planner.DrainRecord {
	var out []planner.DrainRecord
	seen := map[string]bool{}
	for _, v := range append([]*v1alpha1.WorkerVersion{st.TargetVersion, st.CurrentVersion, st.RampingVersion}, ptrs(st.DeprecatedVersions)...) {
		if v == nil || v.Drain == nil || seen[v.BuildID] {
			continue
		}
		seen[v.BuildID] = true
		d := v.Drain
		out = append(out, planner.DrainRecord{
			BuildID:         v.BuildID,
			DrainingSince:   timeOf(d.DrainingSince),
			SeenAt:          timeOf(d.SeenAt),
			Deadline:        timeOf(d.Deadline),
			ListedAt:        timeOf(d.ListedAt),
			PinnedWorkflows: int(d.PinnedWorkflows),
			Overdue:         int(d.Overdue),
			CancelRequested: int(d.CancelRequested),
			Terminated:      int(d.Terminated),
			Signalled:       int(d.Signalled),
			Pending:         int(d.Pending),
			LastActionAt:    timeOf(d.LastActionAt),
			StoppedRuns:     d.StoppedRuns,
			SignalledRuns:   d.SignalledRuns,
		})
	}
	return out
}

// versionDrain is a drain record as status shows it.
func versionDrain(r *planner.DrainRecord) *v1alpha1.VersionDrain {
	if r == nil {
		return nil
	}
	return &v1alpha1.VersionDrain{
		DrainingSince:   metaTime(r.DrainingSince),
		SeenAt:          metaTime(r.SeenAt),
		Deadline:        metaTime(r.Deadline),
		ListedAt:        metaTime(r.ListedAt),
		PinnedWorkflows: count32(r.PinnedWorkflows),
		Overdue:         count32(r.Overdue),
		CancelRequested: count32(r.CancelRequested),
		Terminated:      count32(r.Terminated),
		Signalled:       count32(r.Signalled),
		Pending:         count32(r.Pending),
		LastActionAt:    metaTime(r.LastActionAt),
		StoppedRuns:     r.StoppedRuns,
		SignalledRuns:   r.SignalledRuns,
	}
}

func count32(n int) int32 { return int32(min(n, math.MaxInt32)) }

func timeOf(t *metav1.Time) *time.Time {
	if t == nil {
		return nil
	}
	v := t.Time
	return &v
}

// observeDrain lists the open pinned workflows of the versions the planner
// names: one visibility list each (and a count when there are more than a
// page). A throttled list is left for a later pass; another failure is
// reported when acting.
func (r *Reconciler) observeDrain(ctx context.Context, o *observation) {
	for _, b := range planner.DrainVersionsToList(o.input) {
		l, err := o.api.ListPinned(ctx, o.deploymentName, b, planner.PinnedPageSize)
		switch {
		case errors.Is(err, temporal.ErrBusy):
			logf.FromContext(ctx).Info("Temporal throttled a listing of pinned workflows; a later pass lists them", "buildID", b)
		case err != nil:
			o.drainErrs = append(o.drainErrs, err)
		default:
			o.input.Pinned = append(o.input.Pinned, l)
		}
	}
}

// drainDone is what the executor did for one DrainWork: the runs it
// succeeded on.
type drainDone struct {
	work planner.DrainWork
	runs []planner.WorkflowRun
}

// actDrain cancels, terminates or signals the runs of the plan's DrainWork,
// one call each. A run that has closed meanwhile is skipped; a throttled
// call stops the rest for a later pass; another failure is reported and
// stops the rest too (the same call would fail for them).
func (r *Reconciler) actDrain(ctx context.Context, o *observation, res planner.Result, out *outcome) {
	for _, err := range o.drainErrs {
		temporalErr(out, err)
	}
	var input []byte
	if s := o.twd.Spec.Sunset.ContinueAsNewSignal; s != nil && s.Input != nil {
		input = s.Input.Raw
	}
	for _, w := range res.DrainWork {
		done := drainDone{work: w}
		var failed error
		for _, run := range w.Runs {
			var err error
			switch w.Op {
			case planner.DrainOpCancel:
				err = o.api.CancelRun(ctx, run, w.Reason)
			case planner.DrainOpTerminate:
				err = o.api.TerminateRun(ctx, run, w.Reason)
			case planner.DrainOpSignal:
				err = o.api.SignalRun(ctx, run, w.Signal, input)
			}
			if errors.Is(err, temporal.ErrNotFound) {
				continue // closed since it was listed
			}
			if err != nil {
				failed = err
				break
			}
			done.runs = append(done.runs, run)
		}
		out.drained = append(out.drained, done)
		drainActions.WithLabelValues(o.twd.Namespace, o.twd.Name, drainActionLabel[w.Op]).Add(float64(len(done.runs)))
		if failed != nil {
			temporalErr(out, fmt.Errorf("%s pinned workflows of version %s: %d of %d done: %w", strings.ToLower(string(w.Op)), w.BuildID, len(done.runs), len(w.Runs), failed))
			return
		}
	}
}

// withDrainDone adds what the executor did to the versions' drain records.
func withDrainDone(vs []planner.Version, done []drainDone, now time.Time) []planner.Version {
	if len(done) == 0 {
		return vs
	}
	vs = append([]planner.Version(nil), vs...)
	for _, d := range done {
		for i := range vs {
			if vs[i].BuildID == d.work.BuildID && vs[i].Drain != nil {
				rec := vs[i].Drain.Done(d.work.Op, d.runs, now)
				vs[i].Drain = &rec
			}
		}
	}
	return vs
}

// setDrainGauge sets the overdue workflows of the TWD's draining versions,
// with no series when none is overdue. While Temporal is unknown the last
// value stays.
func setDrainGauge(twd *v1alpha1.TemporalWorkerDeployment, res planner.Report) {
	var overdue int
	for _, v := range res.Versions {
		if v.Status == "" {
			return
		}
		if v.Drain != nil && v.Status == v1alpha1.VersionDraining {
			overdue += v.Drain.Overdue
		}
	}
	if overdue == 0 {
		drainOverdue.DeleteLabelValues(twd.Namespace, twd.Name) // no series per idle TWD
		return
	}
	drainOverdue.WithLabelValues(twd.Namespace, twd.Name).Set(float64(overdue))
}

// forgetDrainMetrics drops the drain series of a deleted TWD.
func forgetDrainMetrics(namespace, name string) {
	drainOverdue.DeleteLabelValues(namespace, name)
	for _, a := range drainActionLabel {
		drainActions.DeleteLabelValues(namespace, name, a)
	}
}
