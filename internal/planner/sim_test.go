package planner

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
)

// The simulation applies each Result to a fake Kubernetes and Temporal,
// advances the clock by RequeueAfter (or to the next Deployment change, which
// a watch would deliver) and plans again, checking the safety rules at every
// step.
const (
	simStartup  = 20 * time.Second // a Deployment becomes available, its workers poll
	simDrain    = 15 * time.Minute // open pinned workflows of a deactivated version finish
	simGateRun  = 40 * time.Second
	simPollerGC = 2 * time.Minute // Temporal forgets pollers this long after they stop
)

type simWorld struct {
	t        *testing.T
	now      time.Time
	spec     Spec
	deps     map[string]*Deployment
	readyAt  map[string]time.Time
	temporal TemporalState // Versions kept in versions
	versions map[string]*TemporalVersion
	drainAt  map[string]time.Time
	pollsTil map[string]time.Time // pollers are reported until then after a scale to zero
	gate     *GateRun
	gateDone time.Time
	// human acts like a person with the Temporal CLI, before each plan.
	human func(w *simWorld, last Result)

	routing    []string    // routing writes, "12:00:05 SetRamp v2 10"
	rampWrites []time.Time // SetRamp and SetCurrent writes
	scaledDown map[string]time.Time
	deleted    map[string]time.Time
	reconciles int
}

func newSim(t *testing.T, spec Spec) *simWorld {
	return &simWorld{
		t: t, now: t0, spec: spec,
		deps: map[string]*Deployment{}, readyAt: map[string]time.Time{},
		versions: map[string]*TemporalVersion{}, drainAt: map[string]time.Time{}, pollsTil: map[string]time.Time{},
		scaledDown: map[string]time.Time{}, deleted: map[string]time.Time{},
	}
}

// settle applies what happens by itself up to now.
func (w *simWorld) settle() {
	for b, d := range w.deps {
		if !d.Available && !w.now.Before(w.readyAt[b]) {
			d.Available = true
		}
		if d.Available && d.Replicas > 0 {
			v, ok := w.versions[b]
			if !ok {
				v = &TemporalVersion{BuildID: b, Status: inactive, RegisteredAt: w.now, TaskQueuesReady: true, WorkflowTaskQueue: "orders"}
				w.versions[b] = v
				w.temporal.Exists = true
			}
			v.HasPollers = true
		}
	}
	for b, v := range w.versions {
		if d, ok := w.deps[b]; (!ok || d.Replicas == 0) && !w.now.Before(w.pollsTil[b]) {
			v.HasPollers = false
		}
		if v.Status == draining && !w.now.Before(w.drainAt[b]) {
			v.Status = drained
			v.DrainedSince = ptr(w.drainAt[b])
		}
	}
	if w.gate != nil && w.gate.Phase == GateRunning && !w.now.Before(w.gateDone) {
		w.gate.Phase = GateSucceeded
	}
}

func (w *simWorld) input() Input {
	in := Input{Now: w.now, Identity: me, DeploymentName: "default/worker", Spec: w.spec, Server: here}
	for _, b := range slices.Sorted(maps.Keys(w.deps)) {
		d := *w.deps[b]
		in.Deployments = append(in.Deployments, d)
	}
	ts := w.temporal
	for _, b := range slices.Sorted(maps.Keys(w.versions)) {
		ts.Versions = append(ts.Versions, *w.versions[b])
	}
	in.Temporal = &ts
	// Like the controller, describe only what the planner asks for; the
	// rest reads as unknown.
	described := map[string]bool{}
	for _, b := range VersionsToDescribe(in) {
		described[b] = true
	}
	for i := range ts.Versions {
		v := &ts.Versions[i]
		if v.Described = described[v.BuildID]; !v.Described {
			v.HasPollers, v.TaskQueuesReady = false, false
		}
	}
	if w.gate != nil {
		g := *w.gate
		in.Gate = &g
	}
	return in
}

func (w *simWorld) deactivate(b string) {
	v := w.versions[b]
	v.Status, v.CurrentSince, v.RampingSince = draining, nil, nil
	w.drainAt[b] = w.now.Add(simDrain)
}

// setCurrent and setRamp behave like Temporal, including its refusals.
func (w *simWorld) setCurrent(b, identity string) {
	v, ok := w.versions[b]
	if !ok || !v.HasPollers {
		w.t.Fatalf("%s: Temporal refuses to make %s current: no pollers", w.clock(), b)
	}
	if prev := w.temporal.CurrentBuildID; prev != "" && prev != b {
		w.deactivate(prev)
	}
	if w.temporal.RampingBuildID == b {
		w.temporal.RampingBuildID, w.temporal.RampPercentage, w.temporal.RampChangedAt = "", 0, w.now
	}
	w.temporal.CurrentBuildID, w.temporal.LastModifierIdentity = b, identity
	v.Status, v.CurrentSince, v.LastCurrentAt, v.RampingSince = current, ptr(w.now), ptr(w.now), nil
}

func (w *simWorld) apply(r Result) {
	if r.BecomeManager {
		w.temporal.ManagerIdentity, w.temporal.LastModifierIdentity = me, me
	}
	if c := r.CreateDeployment; c != nil {
		w.deps[c.BuildID] = &Deployment{BuildID: c.BuildID, Name: "worker-" + c.BuildID, Replicas: c.Replicas, Server: here}
		w.readyAt[c.BuildID] = w.now.Add(simStartup)
	}
	for _, s := range r.Scale {
		d := w.deps[s.BuildID]
		if s.Replicas == 0 {
			if s.BuildID != w.spec.TargetBuildID {
				w.checkScaleDown(s.BuildID)
			}
			d.ScaledDownAt = ptr(w.now)
			w.pollsTil[s.BuildID] = w.now.Add(simPollerGC)
			w.scaledDown[s.BuildID] = w.now
		} else if d.Replicas == 0 {
			d.Available = false
			w.readyAt[s.BuildID] = w.now.Add(simStartup)
		}
		d.Replicas = s.Replicas
	}
	for _, del := range r.DeleteDeployments {
		w.pollsTil[del.BuildID] = w.now.Add(simPollerGC)
		delete(w.deps, del.BuildID)
		w.deleted[del.BuildID] = w.now
	}
	if rt := r.Routing; rt != nil {
		if m := w.temporal.ManagerIdentity; m != "" && m != me {
			w.t.Fatalf("%s: Temporal refuses routing from %s: manager is %s", w.clock(), me, m)
		}
		w.routing = append(w.routing, fmt.Sprintf("%s %s %s %d", w.clock(), rt.Op, rt.BuildID, rt.RampPercentage))
		switch rt.Op {
		case SetCurrent:
			w.setCurrent(rt.BuildID, me)
			w.rampWrites = append(w.rampWrites, w.now) // the end of the last step
		case SetRamp:
			v, ok := w.versions[rt.BuildID]
			if !ok || !v.HasPollers || w.temporal.CurrentBuildID == rt.BuildID {
				w.t.Fatalf("%s: Temporal refuses to ramp %s", w.clock(), rt.BuildID)
			}
			if old := w.temporal.RampingBuildID; old != "" && old != rt.BuildID {
				w.deactivate(old)
			}
			w.temporal.RampingBuildID, w.temporal.RampPercentage, w.temporal.RampChangedAt = rt.BuildID, rt.RampPercentage, w.now
			w.temporal.LastModifierIdentity = me
			if v.Status != ramping {
				v.Status, v.RampingSince = ramping, ptr(w.now)
			}
			w.rampWrites = append(w.rampWrites, w.now)
		case RemoveRamp:
			if old := w.temporal.RampingBuildID; old != "" {
				w.deactivate(old)
			}
			w.temporal.RampingBuildID, w.temporal.RampPercentage, w.temporal.RampChangedAt = "", 0, w.now
			w.temporal.LastModifierIdentity = me
		}
	}
	for _, b := range r.DeleteTemporalVersions {
		v := w.versions[b]
		if v.HasPollers || (v.Status != drained && v.Status != inactive) {
			w.t.Fatalf("%s: Temporal refuses to delete version %s (%+v)", w.clock(), b, *v)
		}
		delete(w.versions, b)
	}
	if g := r.StartGate; g != nil {
		w.gate = &GateRun{BuildID: g.BuildID, Phase: GateRunning}
		w.gateDone = w.now.Add(simGateRun)
	}
}

// checkScaleDown: an old version loses its workers only after Temporal said
// it drained and scaledownDelay passed.
func (w *simWorld) checkScaleDown(b string) {
	v, ok := w.versions[b]
	if !ok {
		return // never registered
	}
	if v.Status != drained || v.DrainedSince == nil || w.now.Before(v.DrainedSince.Add(w.spec.ScaledownDelay)) {
		w.t.Fatalf("%s: version %s scaled down while %s (drained since %v)", w.clock(), b, v.Status, v.DrainedSince)
	}
}

func (w *simWorld) clock() string { return w.now.Format("15:04:05") }

// run plans until Ready and only the target is left (or the step limit).
func (w *simWorld) run() Result {
	w.t.Helper()
	var last Result
	for i := 0; i < 5000; i++ {
		w.settle()
		if w.human != nil {
			w.human(w, last)
		}
		in := w.input()
		r := Plan(in)
		w.reconciles++
		for _, err := range safetyViolations(in, r) {
			w.t.Fatalf("%s: %v\ninput: %+v\nresult: %+v", w.clock(), err, in, r)
		}
		w.apply(r)
		last = r
		if r.Ready.Status == metav1.ConditionTrue && len(w.deps) == 1 && len(w.versions) == 1 {
			return r
		}
		next := w.now.Add(r.RequeueAfter)
		for b, d := range w.deps { // a watch delivers Deployment changes
			if !d.Available && w.readyAt[b].After(w.now) && w.readyAt[b].Before(next) {
				next = w.readyAt[b]
			}
		}
		w.now = next
	}
	w.t.Fatalf("rollout did not finish: last result %+v\nrouting: %v", last, w.routing)
	return last
}

// TestSimulatedRollouts rolls out v1 to an empty deployment, then v2, with
// each strategy, and checks it ends Ready with v1 gone only after drainage.
func TestSimulatedRollouts(t *testing.T) {
	progressive := []Step{{RampPercentage: 10, Pause: 2 * time.Minute}, {RampPercentage: 50, Pause: 3 * time.Minute}}
	// manualPromote is an operator promoting the target from the CLI once
	// the controller asks for it.
	manualPromote := func(w *simWorld, last Result) {
		b := w.spec.TargetBuildID
		if v, ok := w.versions[b]; ok && v.HasPollers && last.Ready.Reason == v1alpha1.ReasonWaitingForPromotion && w.temporal.CurrentBuildID != b {
			w.setCurrent(b, "alice")
		}
	}
	cases := map[string]struct {
		strategy v1alpha1.RolloutStrategy
		steps    []Step
		gate     string
		human    func(*simWorld, Result)
		replicas *int32
		// wantRouting are the controller's routing writes for v2, without times.
		wantRouting []string
	}{
		"AllAtOnce": {strategy: v1alpha1.StrategyAllAtOnce, replicas: ptr[int32](2),
			wantRouting: []string{"SetCurrent v2 0"}},
		"AllAtOnce with gate and autoscaler": {strategy: v1alpha1.StrategyAllAtOnce, gate: "Validate",
			wantRouting: []string{"SetCurrent v2 0"}},
		"Progressive": {strategy: v1alpha1.StrategyProgressive, steps: progressive, replicas: ptr[int32](2),
			wantRouting: []string{"SetRamp v2 10", "SetRamp v2 50", "SetCurrent v2 0"}},
		"Progressive with gate": {strategy: v1alpha1.StrategyProgressive, steps: progressive, gate: "Validate", replicas: ptr[int32](2),
			wantRouting: []string{"SetRamp v2 10", "SetRamp v2 50", "SetCurrent v2 0"}},
		"Manual": {strategy: v1alpha1.StrategyManual, human: manualPromote, replicas: ptr[int32](2)},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			w := newSim(t, Spec{
				TargetBuildID: "v1", Replicas: tc.replicas, Strategy: tc.strategy, Steps: tc.steps,
				GateWorkflowType: tc.gate, ScaledownDelay: 30 * time.Minute, DeleteDelay: 2 * time.Hour, MaxVersions: 100,
			})
			w.human = tc.human
			w.run()
			if w.temporal.CurrentBuildID != "v1" {
				t.Fatalf("first version: current is %q", w.temporal.CurrentBuildID)
			}

			w.spec.TargetBuildID = "v2"
			w.routing, w.rampWrites = nil, nil
			start := w.now
			final := w.run()

			if final.Ready.Reason != v1alpha1.ReasonRolloutComplete || w.temporal.CurrentBuildID != "v2" {
				t.Errorf("ended with %+v, current %q", final.Ready, w.temporal.CurrentBuildID)
			}
			var ops []string
			for _, r := range w.routing {
				ops = append(ops, strings.SplitN(r, " ", 2)[1])
			}
			if strings.Join(ops, "|") != strings.Join(tc.wantRouting, "|") {
				t.Errorf("routing writes = %v, want %v", w.routing, tc.wantRouting)
			}
			for i := 1; i < len(w.rampWrites); i++ {
				if gap := w.rampWrites[i].Sub(w.rampWrites[i-1]); gap < tc.steps[i-1].Pause {
					t.Errorf("step %d held %s, want at least %s", i-1, gap, tc.steps[i-1].Pause)
				}
			}
			drainedAt := w.drainAt["v1"]
			if sd, ok := w.scaledDown["v1"]; !ok || sd.Before(drainedAt.Add(w.spec.ScaledownDelay)) {
				t.Errorf("v1 scaled down at %v, drained at %v", sd, drainedAt)
			}
			if del := w.deleted["v1"]; del.Before(w.scaledDown["v1"].Add(w.spec.DeleteDelay)) {
				t.Errorf("v1 deleted at %v, scaled down at %v", del, w.scaledDown["v1"])
			}
			// Sunset is timed to the second: no reconcile is wasted waiting for it.
			if late := w.deleted["v1"].Sub(w.scaledDown["v1"].Add(w.spec.DeleteDelay)); late > time.Minute {
				t.Errorf("v1 deleted %s after its deadline", late)
			}
			t.Logf("v2 rollout: %s simulated, %d reconciles in total; routing %v", w.now.Sub(start), w.reconciles, w.routing)
		})
	}
}

// TestSimulatedSpecChangeMidRamp: the spec moves to v3 while v2 ramps; v3
// replaces v2's ramp and v2 is retired after draining.
func TestSimulatedSpecChangeMidRamp(t *testing.T) {
	w := newSim(t, Spec{
		TargetBuildID: "v1", Replicas: ptr[int32](1), Strategy: v1alpha1.StrategyProgressive,
		Steps:          []Step{{RampPercentage: 10, Pause: 2 * time.Minute}, {RampPercentage: 50, Pause: 3 * time.Minute}},
		ScaledownDelay: 10 * time.Minute, DeleteDelay: time.Hour,
	})
	w.run()
	w.spec.TargetBuildID = "v2"
	// Plan until v2 ramps, then change the spec.
	for i := 0; i < 200 && w.temporal.RampingBuildID != "v2"; i++ {
		w.settle()
		in := w.input()
		r := Plan(in)
		for _, err := range safetyViolations(in, r) {
			t.Fatal(err)
		}
		w.apply(r)
		w.now = w.now.Add(r.RequeueAfter)
	}
	if w.temporal.RampingBuildID != "v2" {
		t.Fatalf("v2 never ramped")
	}
	w.spec.TargetBuildID = "v3"
	w.routing = nil
	w.run()
	if w.temporal.CurrentBuildID != "v3" {
		t.Fatalf("current = %q", w.temporal.CurrentBuildID)
	}
	if len(w.routing) == 0 || !strings.Contains(w.routing[0], "SetRamp v3 10") {
		t.Errorf("first write after the spec change = %v, want v3 replacing v2's ramp", w.routing)
	}
	for _, b := range []string{"v1", "v2"} {
		if _, ok := w.deleted[b]; !ok {
			t.Errorf("%s was not retired", b)
		}
	}
}
