package workerdeployment

import (
	"errors"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/internal/planner"
	"github.com/rainbow-deploy/rainbow/internal/temporal"
)

// buildStatus is the whole status after a pass, and the report it shows,
// from the previous status, the plan and the outcome of acting on it. It
// is the one place status is computed:
//   - the report is the plan's projection once Temporal accepted every
//     write it assumes (status shows a routing change or a version
//     deletion at once), else the plan's own;
//   - a failed step makes both conditions PlanExecutionFailed, and the
//     report Blocked; a write Temporal did not answer for a moment leaves
//     them, saying it is retried;
//   - a started or cancelled gate, an in-place update, a revival, drain
//     work done and the completion of the target's rollout are recorded;
//   - what the plan cannot know (a version's status while Temporal is
//     unreachable, when a version was first healthy) is carried over.
//
// taskQueues holds the task queues of versions described this pass.
func buildStatus(old v1alpha1.TemporalWorkerDeploymentStatus, generation int64, res planner.Result, out outcome, taskQueues map[string][]string, now time.Time) (v1alpha1.TemporalWorkerDeploymentStatus, planner.Report) {
	rep := withOutcome(shownReport(res, out), out)
	versions := withDrainDone(rep.Versions, out.drained, now)
	previous := map[string]v1alpha1.WorkerVersion{}
	for _, v := range append([]*v1alpha1.WorkerVersion{old.TargetVersion, old.CurrentVersion, old.RampingVersion}, ptrs(old.DeprecatedVersions)...) {
		if v != nil {
			previous[v.BuildID] = *v
		}
	}
	st := v1alpha1.TemporalWorkerDeploymentStatus{
		ObservedGeneration: generation,
		Gate:               out.gate,
		Analysis:           analysisStatus(res.Analysis),
		Conditions:         append([]metav1.Condition(nil), old.Conditions...),
	}
	shown := previous
	if rep.RoutingPropagating && !res.RoutingPropagating {
		// This pass's write is being applied, and the routing it read
		// was applied: that routing is what new workflows get meanwhile,
		// whatever status showed before (a step's ramp, say, applied
		// since the last pass and replaced by the next step in this one).
		shown = map[string]v1alpha1.WorkerVersion{}
		for _, pv := range res.Versions {
			shown[pv.BuildID] = workerVersion(pv, previous[pv.BuildID], now)
		}
	}
	for _, pv := range versions {
		wv := workerVersion(pv, previous[pv.BuildID], now)
		if rep.RoutingPropagating {
			wv = routedAsBefore(wv, shown[pv.BuildID])
		}
		if tq, ok := taskQueues[pv.BuildID]; ok {
			wv.TaskQueues = tq
		}
		switch {
		case pv.Target:
			wv.CompletedAt = completedAt(old.TargetVersion, pv.BuildID, rep.TargetCompleted, now)
			wv.TargetSince = targetSinceStatus(old.TargetVersion, pv.BuildID, now)
			st.TargetVersion = &wv
		case wv.Status == v1alpha1.VersionCurrent:
			st.CurrentVersion = &wv
		case wv.Status == v1alpha1.VersionRamping:
			st.RampingVersion = &wv
		default:
			st.DeprecatedVersions = append(st.DeprecatedVersions, wv)
		}
		if pv.Target && wv.Status == v1alpha1.VersionCurrent {
			cur := wv
			st.CurrentVersion = &cur
		}
	}
	setCondition(&st.Conditions, v1alpha1.ConditionReady, rep.Ready, generation)
	setCondition(&st.Conditions, v1alpha1.ConditionProgressing, rep.Progressing, generation)
	reconciling, stalled := kstatusConditions(rep)
	setCondition(&st.Conditions, v1alpha1.ConditionReconciling, reconciling, generation)
	setCondition(&st.Conditions, v1alpha1.ConditionStalled, stalled, generation)
	markUpdatedInPlace(&st, out.updatedInPlace, now)
	markRevived(&st, out.revived)
	return st, rep
}

// shownReport is the plan's projection when Temporal accepted every write
// it assumes and nothing failed; otherwise the plan's report of the state
// it read. A pass in which Temporal took only some of them (a version it
// kept in use) shows the state read, and looks again at once.
func shownReport(res planner.Result, out outcome) planner.Report {
	if res.Projected == nil || len(out.failed) > 0 {
		return res.Report()
	}
	routed := res.Routing == nil || out.routed != nil
	deleted := len(out.deleted) == len(res.DeleteTemporalVersions)
	switch {
	case routed && deleted:
		return *res.Projected
	case out.routed != nil || len(out.deleted) > 0:
		rep := res.Report()
		rep.RequeueAfter = minRequeue
		return rep
	}
	return res.Report()
}

// completedAt is the target's CompletedAt: kept from the previous status
// while the build stays the target, set when its rollout completes.
func completedAt(prev *v1alpha1.WorkerVersion, build string, completed bool, now time.Time) *metav1.Time {
	if prev != nil && prev.BuildID == build && prev.CompletedAt != nil {
		return prev.CompletedAt
	}
	if completed {
		t := metav1.NewTime(now)
		return &t
	}
	return nil
}

// targetSinceStatus is the target's TargetSince: kept while the build
// stays the target, now when it becomes the target.
func targetSinceStatus(prev *v1alpha1.WorkerVersion, build string, now time.Time) *metav1.Time {
	if prev != nil && prev.BuildID == build && prev.TargetSince != nil {
		return prev.TargetSince
	}
	t := metav1.NewTime(now)
	return &t
}

// kstatusConditions are Reconciling and Stalled, kstatus' conventions,
// from the same state as Progressing: moving is Reconciling, blocked (or a
// failed step) is Stalled, a complete rollout is neither.
func kstatusConditions(rep planner.Report) (reconciling, stalled planner.Condition) {
	p := rep.Progressing
	no := planner.Condition{Status: metav1.ConditionFalse, Reason: p.Reason, Message: p.Message}
	yes := planner.Condition{Status: metav1.ConditionTrue, Reason: p.Reason, Message: p.Message}
	switch rep.State {
	case planner.StateBlocked:
		return no, yes
	case planner.StateComplete:
		return no, no
	}
	return yes, no
}

// unanswered: every error is Temporal not answering a call.
func unanswered(errs []error) bool {
	for _, err := range errs {
		var call *temporal.Error
		if !errors.As(err, &call) || !temporal.Unanswered(err) {
			return false
		}
	}
	return len(errs) > 0
}

// withOutcome reports a failed step on both conditions, and the rollout
// as blocked, instead of what the plan expected to happen.
func withOutcome(rep planner.Report, out outcome) planner.Report {
	if len(out.failed) == 0 {
		return rep
	}
	if out.momentary {
		// Temporal did not answer a write for a moment: the plan's
		// conditions stand, and say it is retried.
		note := "; retrying what Temporal did not answer: " + joinErrors(out.failed)
		rep.Progressing.Message += note
		if rep.Ready.Status != metav1.ConditionTrue {
			rep.Ready.Message += note
		}
		return rep
	}
	failed := planner.Condition{Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonPlanExecutionFailed,
		Message: joinErrors(out.failed) + "; the controller retries, and the Deployment and Temporal stay as they were for the failed steps"}
	rep.Ready, rep.Progressing, rep.State = failed, failed, planner.StateBlocked
	return rep
}

// routedAsBefore keeps a version's routing as status showed it while
// Temporal still applies a routing change: status promises what new
// workflows get, and until every task queue partition has the change they
// may get the old routing.
func routedAsBefore(wv, prev v1alpha1.WorkerVersion) v1alpha1.WorkerVersion {
	routed := func(s v1alpha1.VersionStatus) bool {
		return s == v1alpha1.VersionCurrent || s == v1alpha1.VersionRamping
	}
	switch {
	case prev.BuildID == "" && routed(wv.Status):
		// Not shown before: registered, and no new workflow yet.
		wv.Status, wv.RampPercentage, wv.RampingSince = v1alpha1.VersionInactive, nil, nil
	case prev.BuildID != "" && (routed(wv.Status) || routed(prev.Status)):
		wv.Status, wv.RampPercentage, wv.RampingSince = prev.Status, prev.RampPercentage, prev.RampingSince
	}
	return wv
}

func workerVersion(pv planner.Version, prev v1alpha1.WorkerVersion, now time.Time) v1alpha1.WorkerVersion {
	wv := v1alpha1.WorkerVersion{
		BuildID:              pv.BuildID,
		Status:               pv.Status,
		Deployment:           pv.Deployment,
		TaskQueues:           prev.TaskQueues,
		HealthySince:         prev.HealthySince,
		UpdatedInPlaceAt:     prev.UpdatedInPlaceAt,
		UpdatedInPlaceReason: prev.UpdatedInPlaceReason,
		RampPercentage:       pv.RampPercentage,
		RampingSince:         metaTime(pv.RampingSince),
		DrainedSince:         metaTime(pv.DrainedSince),
		Drain:                versionDrain(pv.Drain),
		Revival:              prev.Revival,
	}
	if wv.Status == "" {
		// Temporal is unreachable: report what was last known.
		wv.Status = prev.Status
		if wv.Status == "" {
			wv.Status = v1alpha1.VersionNotRegistered
		}
		wv.RampPercentage, wv.RampingSince, wv.DrainedSince = prev.RampPercentage, prev.RampingSince, prev.DrainedSince
	}
	if wv.HealthySince == nil && wv.Status != v1alpha1.VersionNotRegistered {
		t := metav1.NewTime(now)
		wv.HealthySince = &t
	}
	return wv
}

func setCondition(conds *[]metav1.Condition, typ string, c planner.Condition, generation int64) {
	v1alpha1.SetCondition(conds, metav1.Condition{
		Type:               typ,
		Status:             c.Status,
		Reason:             c.Reason,
		Message:            c.Message,
		ObservedGeneration: generation,
	})
}

func metaTime(t *time.Time) *metav1.Time {
	if t == nil {
		return nil
	}
	m := metav1.NewTime(*t)
	return &m
}

func ptrs(vs []v1alpha1.WorkerVersion) []*v1alpha1.WorkerVersion {
	out := make([]*v1alpha1.WorkerVersion, len(vs))
	for i := range vs {
		out[i] = &vs[i]
	}
	return out
}

// markUpdatedInPlace records that a Deployment was just rolled in place, and why.
func markUpdatedInPlace(st *v1alpha1.TemporalWorkerDeploymentStatus, u *planner.UpdateDeployment, now time.Time) {
	if u == nil {
		return
	}
	t := metav1.NewTime(now)
	for _, v := range append([]*v1alpha1.WorkerVersion{st.TargetVersion, st.CurrentVersion, st.RampingVersion}, ptrs(st.DeprecatedVersions)...) {
		if v != nil && v.BuildID == u.BuildID {
			v.UpdatedInPlaceAt, v.UpdatedInPlaceReason = &t, u.Message
		}
	}
}

// markRevived records the revivals written this pass on their versions,
// counting them on from the previous record.
func markRevived(st *v1alpha1.TemporalWorkerDeploymentStatus, revived []planner.Scale) {
	for _, s := range revived {
		r := s.Revival
		if r == nil {
			continue
		}
		for _, v := range append([]*v1alpha1.WorkerVersion{st.TargetVersion, st.CurrentVersion, st.RampingVersion}, ptrs(st.DeprecatedVersions)...) {
			if v == nil || v.BuildID != s.BuildID {
				continue
			}
			var count int32 = 1
			if v.Revival != nil {
				count = v.Revival.Count + 1
			}
			v.Revival = &v1alpha1.VersionRevival{At: metav1.NewTime(r.At), FromReplicas: r.FromReplicas, Replicas: r.Replicas,
				VersionStatus: r.Status, Backlog: r.Backlog, Count: count, Message: r.Message}
		}
	}
}
