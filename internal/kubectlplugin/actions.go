package kubectlplugin

import (
	"encoding/json"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/internal/workload"
)

// A Change is one patch of a TemporalWorkerDeployment, sent as the user,
// and what it asks of the controller.
type Change struct {
	Type  types.PatchType
	Patch []byte
	// Says what the controller does next, for the user.
	Says string
}

func mergePatch(v any, says string) (Change, error) {
	b, err := json.Marshal(v)
	return Change{Type: types.MergePatchType, Patch: b, Says: says}, err
}

type obj = map[string]any

func strategyOf(twd *v1alpha1.TemporalWorkerDeployment) v1alpha1.RolloutStrategy {
	if s := twd.Spec.Rollout.Strategy; s != "" {
		return s
	}
	return v1alpha1.StrategyAllAtOnce
}

// rolling: the controller observed the spec and the target is not current.
func rolling(twd *v1alpha1.TemporalWorkerDeployment) (*v1alpha1.WorkerVersion, error) {
	if twd.DeletionTimestamp != nil {
		return nil, fmt.Errorf("%s is being deleted", twd.Name)
	}
	if twd.Status.ObservedGeneration != twd.Generation {
		return nil, fmt.Errorf("the controller has not observed the latest spec of %s yet; try again in a moment", twd.Name)
	}
	t := twd.Status.TargetVersion
	if t == nil || t.BuildID == "" {
		return nil, fmt.Errorf("status of %s names no target version yet", twd.Name)
	}
	if t.Status == v1alpha1.VersionCurrent {
		return nil, fmt.Errorf("version %s of %s is current already: no rollout in progress", t.BuildID, twd.Name)
	}
	return t, nil
}

// Pause sets spec.rollout.paused (docs/strategies.md#pausing).
func Pause(twd *v1alpha1.TemporalWorkerDeployment) (Change, error) {
	if twd.Spec.Rollout.Paused {
		return Change{}, fmt.Errorf("%s is paused already; resume with: kubectl rainbow resume %s", twd.Name, twd.Name)
	}
	if strategyOf(twd) == v1alpha1.StrategyManual {
		return Change{}, fmt.Errorf("%s is Manual: the controller routes nothing by itself, so there is nothing to pause", twd.Name)
	}
	return mergePatch(obj{"spec": obj{"rollout": obj{"paused": true}}},
		"the controller makes no further routing change for the rollout until resumed")
}

// Resume clears spec.rollout.paused.
func Resume(twd *v1alpha1.TemporalWorkerDeployment) (Change, error) {
	if !twd.Spec.Rollout.Paused {
		return Change{}, fmt.Errorf("%s is not paused (spec.rollout.paused is not true)", twd.Name)
	}
	return mergePatch(obj{"spec": obj{"rollout": obj{"paused": false}}},
		"the rollout goes on; a ramp step whose pauseDuration ran out meanwhile moves on at once")
}

// Promote ends the current ramp step (as the Argo CD action promote-step),
// or with full makes the target current without the remaining steps (as
// promote-full: strategy AllAtOnce). A Manual rollout is promoted by
// switching it to AllAtOnce too: the controller then makes the target
// current, and routes the next versions itself until the strategy is set
// back.
func Promote(twd *v1alpha1.TemporalWorkerDeployment, full bool) (Change, error) {
	t, err := rolling(twd)
	if err != nil {
		return Change{}, err
	}
	if _, aborted := abortedTarget(twd); aborted {
		return Change{}, fmt.Errorf("the rollout of %s was aborted; retry first: kubectl rainbow retry %s", t.BuildID, twd.Name)
	}
	strategy := strategyOf(twd)
	if full || strategy != v1alpha1.StrategyProgressive {
		if strategy == v1alpha1.StrategyAllAtOnce && !twd.Spec.Rollout.Paused {
			return Change{}, fmt.Errorf("%s is AllAtOnce and not paused: the controller makes version %s current as soon as its workers poll (%s)",
				twd.Name, t.BuildID, readyReason(twd))
		}
		says := fmt.Sprintf("the controller makes version %s current (a gate still has to pass first)", t.BuildID)
		if strategy == v1alpha1.StrategyManual {
			says += "; spec.rollout.strategy is now AllAtOnce, so set it back to Manual before the next version if you want to promote that one yourself"
		}
		rollout := obj{"strategy": v1alpha1.StrategyAllAtOnce}
		if twd.Spec.Rollout.Paused {
			rollout["paused"] = false
		}
		return mergePatch(obj{"spec": obj{"rollout": rollout}}, says)
	}
	if twd.Spec.Rollout.Paused {
		return Change{}, fmt.Errorf("%s is paused: resume it (kubectl rainbow resume %s), or skip the steps with --full", twd.Name, twd.Name)
	}
	if t.Status != v1alpha1.VersionRamping || t.RampPercentage == nil {
		return Change{}, fmt.Errorf("version %s is %s, not ramping, so there is no step to end (%s); --full makes it current once it can be",
			t.BuildID, t.Status, readyReason(twd))
	}
	steps := make([]obj, 0, len(twd.Spec.Rollout.Steps))
	found := false
	for _, s := range twd.Spec.Rollout.Steps {
		pause := s.PauseDuration.Duration.String()
		if s.RampPercentage == *t.RampPercentage {
			pause, found = "0s", true
		}
		steps = append(steps, obj{"rampPercentage": s.RampPercentage, "pauseDuration": pause})
	}
	if !found {
		return Change{}, fmt.Errorf("version %s ramps at %d%%, which is not one of spec.rollout.steps; the controller moves on to the next step by itself",
			t.BuildID, *t.RampPercentage)
	}
	return mergePatch(obj{"spec": obj{"rollout": obj{"steps": steps}}},
		fmt.Sprintf("the %d%% step ends now: the controller moves version %s to the next step, or makes it current after the last", *t.RampPercentage, t.BuildID))
}

func abortedTarget(twd *v1alpha1.TemporalWorkerDeployment) (string, bool) {
	a, ok := twd.Annotations[v1alpha1.AnnotationAbortRollout]
	return a, ok && twd.Status.TargetVersion != nil && a == twd.Status.TargetVersion.BuildID
}

// Abort sets temporal.io/abort-rollout to the target's build ID.
func Abort(twd *v1alpha1.TemporalWorkerDeployment) (Change, error) {
	t, err := rolling(twd)
	if err != nil {
		return Change{}, err
	}
	if _, aborted := abortedTarget(twd); aborted {
		return Change{}, fmt.Errorf("the rollout of %s is aborted already", t.BuildID)
	}
	if strategyOf(twd) == v1alpha1.StrategyManual {
		return Change{}, fmt.Errorf("%s is Manual: the controller writes no routing, so it cannot remove a ramp; change routing in Temporal", twd.Name)
	}
	return mergePatch(obj{"metadata": obj{"annotations": obj{v1alpha1.AnnotationAbortRollout: t.BuildID}}},
		fmt.Sprintf("the controller removes the ramp it set on version %s and promotes nothing; new workflows go to the current version. "+
			"Retry with: kubectl rainbow retry %s; go back for good with: kubectl rainbow undo %s", t.BuildID, twd.Name, twd.Name))
}

// Retry removes temporal.io/abort-rollout.
func Retry(twd *v1alpha1.TemporalWorkerDeployment) (Change, error) {
	if _, ok := twd.Annotations[v1alpha1.AnnotationAbortRollout]; !ok {
		return Change{}, fmt.Errorf("no rollout of %s was aborted (annotation %s)", twd.Name, v1alpha1.AnnotationAbortRollout)
	}
	return mergePatch(obj{"metadata": obj{"annotations": obj{v1alpha1.AnnotationAbortRollout: nil}}},
		"the controller takes the rollout up again under its strategy (a Progressive ramp starts again at its first step)")
}

// UndoTarget picks the version undo goes back to: the one named, else the
// current version while another is the target, else the newest earlier
// version that still has its Deployment.
func UndoTarget(twd *v1alpha1.TemporalWorkerDeployment, buildID string) (v1alpha1.WorkerVersion, error) {
	st := twd.Status
	target := ""
	if st.TargetVersion != nil {
		target = st.TargetVersion.BuildID
	}
	var known []v1alpha1.WorkerVersion
	for _, v := range []*v1alpha1.WorkerVersion{st.CurrentVersion, st.RampingVersion} {
		if v != nil {
			known = append(known, *v)
		}
	}
	for i := len(st.DeprecatedVersions) - 1; i >= 0; i-- {
		known = append(known, st.DeprecatedVersions[i])
	}
	for _, v := range known {
		if v.BuildID == target || v.Deployment == "" || (buildID != "" && v.BuildID != buildID) {
			continue
		}
		return v, nil
	}
	if buildID != "" {
		return v1alpha1.WorkerVersion{}, fmt.Errorf("version %s of %s is not an earlier version with a Deployment (see kubectl rainbow status %s)", buildID, twd.Name, twd.Name)
	}
	return v1alpha1.WorkerVersion{}, fmt.Errorf("%s has no earlier version with a Deployment to go back to", twd.Name)
}

// Undo sets spec.template (and a custom build ID) back to what version v's
// Deployment d was made from: the controller makes it current at once if it
// was current recently (docs/strategies.md#rollback), else rolls it out. The
// patch fails if the object changed since it was read.
func Undo(twd *v1alpha1.TemporalWorkerDeployment, v v1alpha1.WorkerVersion, d *appsv1.Deployment) (Change, error) {
	tpl, err := workload.UserTemplate(d)
	if err != nil {
		return Change{}, err
	}
	ops := []obj{
		{"op": "test", "path": "/metadata/resourceVersion", "value": twd.ResourceVersion},
		{"op": "replace", "path": "/spec/template", "value": tpl},
	}
	if twd.Spec.WorkerOptions.CustomBuildID != "" {
		ops = append(ops, obj{"op": "replace", "path": "/spec/workerOptions/customBuildID", "value": v.BuildID})
	}
	b, err := json.Marshal(ops)
	says := fmt.Sprintf("spec.template is back at version %s: the controller makes it current at once if it was current recently, else rolls it out under spec.rollout.strategy. "+
		"With GitOps, revert the commit too, or the next sync undoes this", v.BuildID)
	return Change{Type: types.JSONPatchType, Patch: b, Says: says}, err
}

func readyReason(twd *v1alpha1.TemporalWorkerDeployment) string {
	for _, c := range twd.Status.Conditions {
		if c.Type == v1alpha1.ConditionReady {
			return c.Reason + ": " + c.Message
		}
	}
	return "no status yet"
}
