package planner

import (
	"fmt"
	"time"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
)

// promote moves traffic to the target, whose workers poll and whose routing
// we may write. Order: a version that recently had traffic is rolled back to
// at once (unless someone else took its traffic away), then the gate, then
// the strategy. Manual skips the first step: people route by design there.
func promote(v *view, p *plan) progress {
	if msg := invalidRollout(v.in.Spec); msg != "" {
		return blockedBecause(v1alpha1.ReasonPlanGenerationFailed, msg)
	}
	manual := v.in.Spec.Strategy == v1alpha1.StrategyManual
	if !manual && (recentlyActive(v, v.target) || v.in.TargetHadCompleted) {
		if who := externalModifier(v); who != "" {
			msg := fmt.Sprintf("version %s lost its traffic and the last routing change of worker deployment %s was made by %q; "+
				"the controller does not undo changes made by others. Make version %s current yourself, or change spec.template to roll out a new version",
				v.target, v.deploymentName(), who, v.target)
			p.event(EventWarning, v1alpha1.ReasonRoutingChangedExternally, msg)
			p.waitFor(WaitRouting)
			p.res.TargetCompleted = true // and stays so: not undone
			return blockedBecause(v1alpha1.ReasonRoutingChangedExternally, msg)
		}
		if wasCurrent(v, v.target) {
			return makeCurrent(v, p, EventRolledBack, fmt.Sprintf(
				"rolling back to version %s, which was current recently; skipping the gate and ramp steps", v.target))
		}
	}
	if prog, hold := gate(v, p); hold {
		return prog
	}
	// Judged before the pause: a paused rollout still aborts.
	prog, stop, hold := judgeRamp(v, p)
	if stop {
		return prog
	}
	prog, stop, gateHold := stepGate(v, p)
	if stop {
		return prog
	}
	hold = joinHolds(hold, gateHold)
	if v.in.Spec.Paused {
		return paused(v)
	}
	switch v.in.Spec.Strategy {
	case v1alpha1.StrategyAllAtOnce:
		return makeCurrent(v, p, EventPromote, fmt.Sprintf("making version %s current (AllAtOnce)", v.target))
	case v1alpha1.StrategyProgressive:
		return progressive(v, p, hold)
	default: // Manual
		p.waitFor(WaitRouting)
		return movingBecause(v1alpha1.ReasonWaitingForPromotion, manualMessage(v))
	}
}

// paused holds routing as it is: no ramp step, no promotion, and no timer
// to wake up for: only a spec change (which reconciles) resumes it. A ramp's
// step is timed from Temporal's ramp change time, so after resuming a step
// whose pauseDuration passed meanwhile moves on at once.
func paused(v *view) progress {
	at := "with no traffic"
	t := v.temporal()
	switch {
	case t.CurrentBuildID == v.target:
		at = "current"
	case t.RampingBuildID == v.target:
		at = fmt.Sprintf("ramping %d%%", t.RampPercentage)
	}
	return movingBecause(v1alpha1.ReasonPaused, fmt.Sprintf(
		"spec.rollout.paused holds version %s %s; resume with: kubectl rainbow resume %s (or set spec.rollout.paused to false)",
		v.target, at, v.in.Name))
}

// manualMessage says how to promote the target by hand. While this
// controller still holds the manager role from an earlier strategy,
// Temporal refuses a person's routing change, so the message says to take
// the role first (found by the soak: the plain command was refused).
func manualMessage(v *view) string {
	promote := fmt.Sprintf("temporal worker deployment set-current-version --deployment-name %s --build-id %s", v.deploymentName(), v.target)
	if v.temporal().ManagerIdentity != v.in.Identity {
		return fmt.Sprintf("spec.rollout.strategy is Manual: make version %s current with: %s", v.target, promote)
	}
	return fmt.Sprintf("spec.rollout.strategy is Manual, and this controller (%q) still holds the manager role of worker deployment %s from an earlier strategy, "+
		"so Temporal refuses routing changes from other identities: take the role with: temporal worker deployment manager-identity set --deployment-name %s --self; "+
		"make version %s current with: %s; then release the role with: temporal worker deployment manager-identity unset --deployment-name %s",
		v.in.Identity, v.deploymentName(), v.deploymentName(), v.target, promote, v.deploymentName())
}

// invalidRollout catches specs the CRD validation should have refused.
func invalidRollout(s Spec) string {
	switch s.Strategy {
	case v1alpha1.StrategyManual, v1alpha1.StrategyAllAtOnce:
		return ""
	case v1alpha1.StrategyProgressive:
	default:
		return fmt.Sprintf("spec.rollout.strategy %q is not Manual, AllAtOnce or Progressive", s.Strategy)
	}
	if len(s.Steps) == 0 {
		return "spec.rollout.steps is empty; Progressive needs at least one step"
	}
	prev := int32(0)
	for i, st := range s.Steps {
		if st.RampPercentage <= prev || st.RampPercentage >= 100 || st.Pause < 0 {
			return fmt.Sprintf("spec.rollout.steps[%d] is invalid: ramp percentages must strictly increase between 1 and 99, pauses must not be negative", i)
		}
		prev = st.RampPercentage
	}
	return ""
}

// recentlyActive: the version had traffic and may still be warm: it is
// draining, or drained within spec.sunset.scaledownDelay and still running.
func recentlyActive(v *view, build string) bool {
	if v.temporal().ReportsActivation && v.tvs[build].FirstActivatedAt == nil {
		// Never routed: Temporal reports a version draining, then drained,
		// for workflows pinned to it by an override too, such as its gate
		// (found by the soak). It lost no traffic.
		return false
	}
	switch v.status(build) {
	case v1alpha1.VersionDraining:
		return true
	case v1alpha1.VersionDrained:
		tv := v.tvs[build]
		d, ok := v.deps[build]
		return ok && d.Replicas > 0 && tv.DrainedSince != nil &&
			v.now().Before(tv.DrainedSince.Add(v.in.Spec.ScaledownDelay))
	}
	return false
}

// wasCurrent: Temporal says the version was current at some time, not only
// ramping; only such a version is trusted for a rollback without steps.
func wasCurrent(v *view, build string) bool {
	return v.tvs[build].LastCurrentAt != nil
}

// externalModifier is the identity of the last routing change if it is not
// ours. Rule: when the target lost its traffic recently and the last change
// was someone else's, that person decided; we do not fight them.
func externalModifier(v *view) string {
	m := v.temporal().LastModifierIdentity
	if m == "" || v.ours(m) {
		return ""
	}
	return m
}

// makeCurrent makes the target current. A ramp on another version is removed
// first, so traffic only passes through known states (Temporal keeps a ramp
// on another version when the current one changes).
func makeCurrent(v *view, p *plan, reason, msg string) progress {
	if r := v.temporal().RampingBuildID; r != "" && r != v.target {
		m := fmt.Sprintf("removing the ramp of version %s before making version %s current", r, v.target)
		p.route(Routing{Op: RemoveRamp}, EventRemoveRamp, m)
		return movingBecause(v1alpha1.ReasonWaitingForPromotion, m)
	}
	p.route(Routing{Op: SetCurrent, BuildID: v.target}, reason, msg)
	return movingBecause(v1alpha1.ReasonWaitingForPromotion, fmt.Sprintf("making version %s current", v.target))
}

// progressive walks the steps. The first version of a deployment (nothing
// current, no unversioned workers) has nobody to share traffic with, so it
// becomes current directly. Each pause is measured from Temporal's ramp
// change time, so a restarted controller keeps the schedule, and a step
// ends only once Temporal reports its ramp applied.
// hold, from the analysis, says why the target's step may not end yet.
func progressive(v *view, p *plan, hold string) progress {
	t := v.temporal()
	steps := v.in.Spec.Steps
	if t.RampingBuildID != v.target {
		if t.CurrentBuildID == "" && !t.UnversionedPollers {
			return makeCurrent(v, p, EventPromote, fmt.Sprintf("making version %s current: it is the first version and no unversioned workers poll", v.target))
		}
		return ramp(v, p, steps[0].RampPercentage)
	}
	i := stepIndex(steps, t.RampPercentage)
	if hold != "" && (i < 0 || stepOver(v, steps[i])) {
		return movingBecause(v1alpha1.ReasonRamping, fmt.Sprintf("holding the %d%% ramp of version %s: %s",
			t.RampPercentage, v.target, hold))
	}
	if i < 0 {
		// The steps changed mid-ramp: go on from the first step above.
		if next := firstStepAbove(steps, t.RampPercentage); next >= 0 {
			return ramp(v, p, steps[next].RampPercentage)
		}
		return makeCurrent(v, p, EventPromote, fmt.Sprintf("making version %s current: its ramp of %d%% is above every step", v.target, t.RampPercentage))
	}
	start, ok := rampStart(v)
	if !ok {
		return movingBecause(v1alpha1.ReasonRamping, fmt.Sprintf(
			"ramping %d%% to %s; Temporal did not report when the ramp changed, so the pause cannot be timed", t.RampPercentage, v.target))
	}
	deadline := start.Add(steps[i].Pause)
	if v.now().Before(deadline) {
		p.afterDeadline(v.now(), deadline)
		next := "becomes current"
		if i+1 < len(steps) {
			next = fmt.Sprintf("next step (%d%%)", steps[i+1].RampPercentage)
		}
		return movingBecause(v1alpha1.ReasonRamping, fmt.Sprintf("ramping %d%% to %s, %s at %s",
			t.RampPercentage, v.target, next, deadline.UTC().Format(time.RFC3339)))
	}
	if v.propagating() {
		// Its pause is over but Temporal still applies its ramp: a step
		// that no partition may route by yet has given nobody the traffic
		// it names. awaitPropagation says so and looks again.
		return movingBecause(v1alpha1.ReasonRamping, fmt.Sprintf("holding the %d%% ramp of version %s: its pause is over, Temporal still applies it",
			t.RampPercentage, v.target))
	}
	if i+1 < len(steps) {
		return ramp(v, p, steps[i+1].RampPercentage)
	}
	return makeCurrent(v, p, EventPromote, fmt.Sprintf("making version %s current after the last ramp step", v.target))
}

func ramp(v *view, p *plan, pct int32) progress {
	p.route(Routing{Op: SetRamp, BuildID: v.target, RampPercentage: pct}, EventRamp,
		fmt.Sprintf("ramping %d%% of new workflows to version %s", pct, v.target))
	return movingBecause(v1alpha1.ReasonRamping, fmt.Sprintf("setting the ramp of version %s to %d%%", v.target, pct))
}

// stepOver: the step's pause has passed (or cannot be timed).
func stepOver(v *view, s Step) bool {
	start, ok := rampStart(v)
	return !ok || !v.now().Before(start.Add(s.Pause))
}

// rampStart is when the current ramp step began: the routing config's ramp
// change time, else when the version started ramping.
func rampStart(v *view) (time.Time, bool) {
	if t := v.temporal().RampChangedAt; !t.IsZero() {
		return t, true
	}
	if s := v.tvs[v.target].RampingSince; s != nil {
		return *s, true
	}
	return time.Time{}, false
}

func stepIndex(steps []Step, pct int32) int {
	for i, s := range steps {
		if s.RampPercentage == pct {
			return i
		}
	}
	return -1
}

func firstStepAbove(steps []Step, pct int32) int {
	for i, s := range steps {
		if s.RampPercentage > pct {
			return i
		}
	}
	return -1
}

// Step is one ramp of a Progressive rollout.
type Step struct {
	RampPercentage int32
	Pause          time.Duration
	// Gate is the step's gate (spec.rollout.steps[].gate); nil if none.
	Gate *StepGate
}
