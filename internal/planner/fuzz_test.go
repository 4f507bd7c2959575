package planner

import (
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/internal/fuzzsrc"
)

// FuzzPlanSafety builds arbitrary, often inconsistent, inputs and checks the
// rules that must hold whatever Temporal and Kubernetes report.
func FuzzPlanSafety(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("rainbow rollout"))
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32})
	f.Add([]byte{255, 254, 253, 252, 251, 250, 249, 248, 247, 246, 245, 244, 243, 242, 241, 240, 239, 238, 237, 236})
	f.Fuzz(func(t *testing.T, data []byte) {
		in := fuzzInput(data)
		got := Plan(in)
		for _, err := range violations(in, got) {
			t.Error(err)
		}
		if again := Plan(fuzzInput(data)); !sameValue(got, again) {
			t.Errorf("Plan is not deterministic:\n%+v\n%+v", got, again)
		}
		if !sameValue(in, fuzzInput(data)) {
			t.Errorf("Plan modified its input")
		}
	})
}

// sameValue is reflect.DeepEqual but for NaN, which equals itself here:
// a Prometheus reading may hold one.
func sameValue(a, b any) bool {
	return cmp.Equal(a, b, cmpopts.EquateNaNs(), cmp.Exporter(func(reflect.Type) bool { return true }))
}

// TestPlanSafetyRandom runs the fuzz invariants on many generated inputs as
// part of the normal test run.
func TestPlanSafetyRandom(t *testing.T) {
	eachRandomInput(t, 2463534242, 20000, func(in Input) []error { return violations(in, Plan(in)) })
}

// eachRandomInput checks n generated inputs, as a fuzz target's invariant
// in the normal test run.
func eachRandomInput(t *testing.T, seed uint32, n int, check func(Input) []error) {
	t.Helper()
	fuzzsrc.EachRandom(t, seed, n, 96, func(data []byte) []error { return check(fuzzInput(data)) })
}

// violations are the broken rules of every invariant: safety, owned
// resources, autoscaling, the drain, and what the observe step is told
// to read.
func violations(in Input, r Result) []error {
	if in.ClaimedBy != nil {
		// It plans nothing, so the rules of what it plans do not apply.
		return slices.Concat(claimViolations(in, r), readViolations(in))
	}
	if in.Spec.AdoptionPending && in.Deletion == nil {
		return slices.Concat(adoptionViolations(in, r), readViolations(in))
	}
	return slices.Concat(safetyViolations(in, r), ownedViolations(in, r), autoscaleViolations(in, r), drainViolations(in, r), readViolations(in),
		gateViolations(in, r), deadlineViolations(in, r), pausedViolations(in, r), analysisViolations(in, r), stepGateViolations(in, r))
}

// readViolations checks the lists that tell observe what to read from
// Temporal: each names versions Temporal reported, once, and nothing is
// read while Temporal's state is unknown.
func readViolations(in Input) []error {
	var errs []error
	for name, builds := range map[string][]string{
		"VersionsToDescribe": VersionsToDescribe(in), "DrainVersionsToList": DrainVersionsToList(in), "BacklogsToRead": BacklogsToRead(in),
		"DrainageToCrossCheck": DrainageToCrossCheck(in),
	} {
		seen := map[string]bool{}
		for _, b := range builds {
			if _, ok := versionIn(in.Temporal, b); !ok || seen[b] {
				errs = append(errs, fmt.Errorf("%s names %q twice or not a version Temporal reported: %v", name, b, builds))
			}
			seen[b] = true
		}
	}
	for _, b := range DrainageToCrossCheck(in) {
		if v, _ := versionIn(in.Temporal, b); v.Status != draining || b == in.Temporal.CurrentBuildID || b == in.Temporal.RampingBuildID {
			errs = append(errs, fmt.Errorf("DrainageToCrossCheck names %q, which the summary does not show draining or which is routed", b))
		}
	}
	return errs
}

// offset is a time relative to t0, around the delays and pauses used.
func offset(s *fuzzsrc.Source) time.Duration {
	return fuzzsrc.Pick(s, -72*time.Hour, -25*time.Hour, -24*time.Hour, -2*time.Hour, -time.Hour, -10*time.Minute,
		-5*time.Minute, -time.Second, 0, time.Minute)
}

func maybeTime(s *fuzzsrc.Source) *time.Time {
	if s.Bool() {
		return nil
	}
	return at(offset(s))
}

var fuzzBuilds = []string{"a", "b", "c", "d", "e"}

func fuzzInput(data []byte) Input {
	s := fuzzsrc.New(data)
	build := func() string { return fuzzsrc.Pick(s, "", "a", "b", "c", "d", "e") }
	identity := func() string { return fuzzsrc.Pick(s, "", me, "alice") }

	in := Input{Now: t0, Identity: me, DeploymentName: "ns/w"}
	in.Spec = Spec{
		TargetBuildID:    fuzzsrc.Pick(s, "a", "b", "c", "d", "e", "a", "b", ""),
		Strategy:         fuzzsrc.Pick(s, v1alpha1.StrategyManual, v1alpha1.StrategyAllAtOnce, v1alpha1.StrategyProgressive, v1alpha1.StrategyProgressive, "Bogus"),
		GateWorkflowType: fuzzsrc.Pick(s, "", "Gate"),
		ScaledownDelay:   fuzzsrc.Pick(s, 0, time.Minute, time.Hour, 24*time.Hour),
		DeleteDelay:      fuzzsrc.Pick(s, 0, time.Hour, 24*time.Hour),
		MaxVersions:      s.Intn(5),
		TemplateHash:     fuzzsrc.Pick(s, "", "h1", "h2"),
		GeneratedBuildID: fuzzsrc.Pick(s, "a", "b", "x"),
	}
	if s.Bool() {
		in.Spec.Replicas = ptr(int32(s.Intn(4)))
	}
	in.TargetHadCompleted = s.Intn(4) == 0
	if s.Bool() {
		in.Spec.ProgressDeadline = fuzzsrc.Pick(s, time.Minute, 10*time.Minute)
		in.Spec.ProgressDeadlineAbort = s.Bool()
		in.TargetSince = fuzzsrc.Pick(s, time.Time{}, t0.Add(-time.Hour), t0.Add(-5*time.Minute), t0)
	}
	pct := int32(0)
	for n := s.Intn(4); n > 0; n-- {
		pct += int32(s.Intn(60)) - 5 // sometimes not increasing
		in.Spec.Steps = append(in.Spec.Steps, Step{RampPercentage: pct, Pause: fuzzsrc.Pick(s, 0, time.Second, 5*time.Minute, time.Hour)})
	}
	for _, b := range fuzzBuilds {
		if s.Bool() {
			d := Deployment{BuildID: b, Name: "worker-" + b, Replicas: int32(s.Intn(4)), Available: s.Bool()}
			if s.Bool() {
				d.ScaledDownAt = at(offset(s))
			}
			d.TemplateHash = fuzzsrc.Pick(s, "", "h1", "h2")
			d.Rolling = s.Intn(4) == 0
			d.Server = fuzzsrc.Pick(s, serverA, serverA, Server{Address: serverA.Address}, serverA2, serverB, Server{})
			d.ConnectionStale, d.SettingsStale = s.Bool(), s.Intn(4) == 0
			if d.Available && s.Bool() {
				d.AvailableSince = t0.Add(fuzzsrc.Pick(s, -time.Second, -9*time.Second, -11*time.Second, -10*time.Minute))
			}
			d.CreatedAt = fuzzsrc.Pick(s, time.Time{}, t0.Add(-time.Hour), t0.Add(-time.Minute))
			d.ReadyReplicas = int32(s.Intn(4))
			in.Deployments = append(in.Deployments, d)
		}
	}
	in.Server = fuzzsrc.Pick(s, serverA, serverA, Server{}, serverA2, serverB, Server{Address: serverB.Address})
	if s.Intn(5) != 0 {
		ts := &TemporalState{
			Exists:               s.Intn(4) != 0,
			ManagerIdentity:      identity(),
			LastModifierIdentity: identity(),
			CurrentBuildID:       build(),
			RampingBuildID:       build(),
			RampPercentage:       int32(s.Intn(101)),
			UnversionedPollers:   s.Bool(),
			RoutingPropagating:   s.Intn(4) == 0,
		}
		if s.Bool() {
			ts.RampChangedAt = t0.Add(offset(s))
		}
		for _, b := range fuzzBuilds {
			if s.Bool() {
				drainingSince := maybeTime(s)
				ts.Versions = append(ts.Versions, TemporalVersion{
					BuildID:          b,
					Status:           fuzzsrc.Pick(s, current, ramping, inactive, draining, drained, drained, "Created"),
					RegisteredAt:     fuzzsrc.Pick(s, time.Time{}, t0.Add(offset(s))),
					DrainedSince:     maybeTime(s),
					CurrentSince:     maybeTime(s),
					RampingSince:     maybeTime(s),
					LastCurrentAt:    maybeTime(s),
					DrainingSince:    drainingSince,
					OwnDrainage:      fuzzOwnDrainage(s, drainingSince),
					Described:        s.Intn(4) != 0,
					TaskQueuesReady:  s.Intn(3) != 0,
					HasPollers:       s.Bool(),
					FirstActivatedAt: maybeTime(s),
				})
			}
		}
		in.Temporal = ts
	} else if s.Bool() {
		in.TemporalError = fuzzsrc.Pick(s, &Problem{Reason: "TemporalClientCreationFailed", Message: "dial failed"},
			&Problem{Reason: v1alpha1.ReasonTemporalStateFetchFailed, Message: "unavailable", Since: t0.Add(fuzzsrc.Pick(s, -time.Second, -59*time.Second, -61*time.Second))},
			&Problem{Reason: v1alpha1.ReasonTemporalStateFetchFailed, Message: "throttled", Since: t0.Add(fuzzsrc.Pick(s, -time.Second, -time.Hour)), Throttled: true})
	}
	if s.Intn(3) == 0 {
		in.Deletion = &Deletion{
			Object:               "ns/w",
			RequestedAt:          t0.Add(offset(s)),
			Policy:               fuzzsrc.Pick(s, v1alpha1.DeletionWaitForDrain, v1alpha1.DeletionImmediate),
			MaxDrainWait:         fuzzsrc.Pick(s, 0, time.Minute, time.Hour),
			StatusShowedVersions: s.Bool(),
		}
		if s.Intn(4) == 0 && in.Temporal == nil {
			in.TemporalError = &Problem{Reason: fuzzsrc.Pick(s, v1alpha1.ReasonTemporalConnectionNotFound, v1alpha1.ReasonAddressNotAllowed), Message: "no connection"}
		}
	}
	if s.Bool() {
		in.Gate = &GateRun{BuildID: build(), Phase: fuzzsrc.Pick(s, GateRunning, GateSucceeded, GateFailed, "Weird"), Message: "m"}
		if s.Bool() {
			in.Gate.CancelRequestedAt = t0.Add(fuzzsrc.Pick(s, -time.Hour, -GateCancelGrace, -GateCancelGrace+time.Second, -time.Second, 0))
		}
	}
	fuzzOwned(s, &in)
	fuzzAutoscale(s, &in)
	if s.Intn(4) == 0 {
		in.Spec.AbortedBuildID = fuzzsrc.Pick(s, in.Spec.TargetBuildID, "a")
	}
	in.TargetShownReady = s.Intn(3) == 0
	if in.Temporal != nil && s.Bool() {
		in.Temporal.RoutingChangedAt = t0.Add(fuzzsrc.Pick(s, -time.Second, -3*time.Second, -TemporalOutageBound))
	}
	if in.Temporal != nil && len(in.Spec.Steps) > 0 && s.Intn(3) == 0 {
		// Ramping at one of the steps, as a Progressive rollout does.
		in.Temporal.RampPercentage = in.Spec.Steps[s.Intn(len(in.Spec.Steps))].RampPercentage
	}
	if s.Intn(5) == 0 {
		in.ClaimedBy = &Claimed{Holder: "other/w", Address: fuzzsrc.Pick(s, serverA.Address, ""), TemporalNamespace: "default"}
	}
	in.Spec.Paused = s.Intn(4) == 0
	if s.Intn(10) == 0 {
		in.Spec.TakeManagerFrom = "twc/temporal-system/uid"
		if in.Temporal != nil && s.Bool() {
			in.Temporal.ManagerIdentity = fuzzsrc.Pick(s, in.Spec.TakeManagerFrom, "twc/temporal-system/other-uid")
		}
	}
	in.Spec.AdoptionPending = s.Intn(10) == 0
	fuzzAnalysis(s, &in)
	fuzzStepGates(s, &in)
	return in
}

// takesManagerRole: the plan must take the manager role from the identity
// the TWD names (Input.Spec.TakeManagerFrom), and only from it.
func takesManagerRole(in Input) bool {
	ts := in.Temporal
	return ts != nil && in.ClaimedBy == nil && in.Spec.TakeManagerFrom != "" && ts.ManagerIdentity == in.Spec.TakeManagerFrom &&
		in.Spec.TakeManagerFrom != in.Identity && (!in.Spec.AdoptionPending || in.Deletion != nil)
}

// fuzzOwnDrainage is mostly a report of the version's draining episode,
// sometimes one of another episode.
func fuzzOwnDrainage(s *fuzzsrc.Source, drainingSince *time.Time) *OwnDrainage {
	if s.Intn(3) != 0 {
		return nil
	}
	o := &OwnDrainage{Drained: s.Bool(), ChangedAt: t0.Add(offset(s)), CheckedAt: t0.Add(offset(s)), DrainingSince: t0.Add(offset(s))}
	if drainingSince != nil && s.Intn(4) != 0 {
		o.DrainingSince = *drainingSince
	}
	return o
}

// reportedDrained: Temporal reports the version drained, in the worker
// deployment's summary or, where the summary says draining, in the
// version's own describe.
func reportedDrained(v TemporalVersion) bool {
	o := v.OwnDrainage
	return v.Status == drained || (v.Status == draining && o != nil && o.Drained && v.DrainingSince != nil && v.DrainingSince.Equal(o.DrainingSince))
}

// otherServer restates which Deployments run against another server than
// the connection names: different namespace IDs, or without both IDs a
// different address; nothing is known without a connection.
func otherServer(in Input, d Deployment) bool {
	cur := in.Server
	if cur.Address == "" {
		return false
	}
	if cur.NamespaceID != "" && d.Server.NamespaceID != "" {
		return cur.NamespaceID != d.Server.NamespaceID
	}
	return cur.Address != d.Server.Address
}

// mayAbortTarget restates when the target may be scaled to zero for its
// progress deadline: abort asked for, the deadline past since the start
// status recorded, and Temporal showing that it never had traffic.
func mayAbortTarget(in Input) bool {
	ts, b := in.Temporal, in.Spec.TargetBuildID
	if !in.Spec.ProgressDeadlineAbort || in.Spec.ProgressDeadline <= 0 || in.TargetSince.IsZero() || in.TargetHadCompleted ||
		in.Now.Before(in.TargetSince.Add(in.Spec.ProgressDeadline)) || ts == nil || ts.CurrentBuildID == b || ts.RampingBuildID == b {
		return false
	}
	v, ok := versionIn(ts, b)
	return !ok || (v.Status == inactive && v.FirstActivatedAt == nil)
}

// safetyViolations lists every broken safety rule. It only reads the input,
// so it restates the rules independently of the planner's code.
func safetyViolations(in Input, r Result) []error {
	if in.Deletion != nil {
		return deletionViolations(in, r)
	}
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	deps := map[string]Deployment{}
	for _, d := range in.Deployments {
		deps[d.Name] = d
	}
	depOf := map[string]Deployment{}
	for _, d := range in.Deployments {
		if _, ok := depOf[d.BuildID]; !ok {
			depOf[d.BuildID] = d
		}
	}
	ts := in.Temporal
	tv := func(b string) (TemporalVersion, bool) { return versionIn(ts, b) }
	routed := func(b string) bool { return ts != nil && b != "" && (ts.CurrentBuildID == b || ts.RampingBuildID == b) }
	// mayLoseWorkers: Temporal says the version gets no work.
	mayLoseWorkers := func(b string) bool {
		if d, ok := depOf[b]; ts == nil || routed(b) || (ok && otherServer(in, d)) {
			return false
		}
		v, ok := tv(b)
		if !ok {
			return ts.Exists // never registered
		}
		return reportedDrained(v) || v.Status == inactive
	}
	otherManager := ts != nil && ts.ManagerIdentity != "" && ts.ManagerIdentity != in.Identity && !takesManagerRole(in)

	if r.RequeueAfter <= 0 || r.RequeueAfter > time.Minute {
		bad("RequeueAfter = %s, want in (0, 1m]", r.RequeueAfter)
	}
	// Status promises what new workflows get: while Temporal still applies
	// a routing change, the target is Ready only if status showed it so
	// before, and no version is retired (a partition that has not applied
	// the change may still send it new workflows).
	propagating := ts != nil && ts.RoutingPropagating && (ts.RoutingChangedAt.IsZero() || in.Now.Sub(ts.RoutingChangedAt) < TemporalOutageBound)
	if propagating {
		if (r.Ready.Status == metav1.ConditionTrue && !in.TargetShownReady) || !r.RoutingPropagating {
			bad("Ready = %s, RoutingPropagating = %v while Temporal still applies a routing change", r.Ready.Status, r.RoutingPropagating)
		}
		for _, sc := range r.Scale {
			if sc.Reason == ScaleSunset {
				bad("version %s scaled to zero while Temporal still applies a routing change", sc.BuildID)
			}
		}
		if len(r.DeleteDeployments) > 0 || len(r.DeleteTemporalVersions) > 0 {
			bad("versions deleted while Temporal still applies a routing change: %+v %v", r.DeleteDeployments, r.DeleteTemporalVersions)
		}
		// A Progressive step ends only once Temporal applied its ramp: the
		// target ramping at one of the steps is neither ramped further nor
		// made current meanwhile.
		target := in.Spec.TargetBuildID
		atStep := slices.ContainsFunc(in.Spec.Steps, func(st Step) bool { return st.RampPercentage == ts.RampPercentage })
		if rt := r.Routing; rt != nil && in.Spec.Strategy == v1alpha1.StrategyProgressive && target != "" && ts.RampingBuildID == target && atStep &&
			rt.BuildID == target && (rt.Op == SetCurrent || (rt.Op == SetRamp && rt.RampPercentage > ts.RampPercentage)) {
			bad("the %d%% step of %s ended (%+v) while Temporal still applies its ramp", ts.RampPercentage, target, *rt)
		}
	}
	// A throttle, or reads failing for less than the outage bound, is never
	// reported as a failure (kstatus Failed, Argo CD Degraded).
	if e := in.TemporalError; ts == nil && e != nil && e.Reason == v1alpha1.ReasonTemporalStateFetchFailed &&
		(e.Throttled || in.Now.Sub(e.Since) < TemporalOutageBound) && r.Ready.Reason == v1alpha1.ReasonTemporalStateFetchFailed {
		bad("reads failing since %s (throttled %v) reported as %s", e.Since, e.Throttled, r.Ready.Reason)
	}
	if d, ok := depOf[in.Spec.TargetBuildID]; ok && ts != nil && ts.CurrentBuildID != in.Spec.TargetBuildID && r.Ready.Reason == v1alpha1.ReasonWaitingForPollers &&
		d.Available && !d.Rolling && r.UpdateDeployment == nil && d.Replicas > 0 &&
		(in.Spec.Replicas == nil || *in.Spec.Replicas > 0) && !d.AvailableSince.IsZero() && in.Now.Sub(d.AvailableSince) < pollersDue &&
		r.RequeueAfter > requeueTaskQueues {
		// Workers usually poll soon after their Deployment is available:
		// the target is routed to soon after they do.
		bad("target %s waits for pollers %s after its Deployment became available, but the next look is in %s (%s)",
			in.Spec.TargetBuildID, in.Now.Sub(d.AvailableSince), r.RequeueAfter, r.Ready.Message)
	}
	if ts == nil && (r.Routing != nil || r.StartGate != nil || len(r.DeleteTemporalVersions) > 0 || len(r.DeleteDeployments) > 0 || r.BecomeManager) {
		bad("Temporal unknown but Temporal or destructive actions planned: %+v", r)
	}

	touched := map[string]bool{}
	for _, s := range r.Scale {
		d, ok := deps[s.Name]
		if !ok || d.BuildID != s.BuildID {
			bad("Scale of unknown Deployment %+v", s)
		}
		if touched[s.Name] {
			bad("two actions on Deployment %s", s.Name)
		}
		touched[s.Name] = true
		if s.Replicas != 0 {
			continue
		}
		if s.BuildID == in.Spec.TargetBuildID {
			if s.Reason == ScaleAbort && mayAbortTarget(in) {
				continue
			}
			if s.Reason != ScaleToSpec || in.Spec.Replicas == nil || *in.Spec.Replicas != 0 {
				bad("target %s scaled to zero without spec.replicas: 0 (%+v)", s.BuildID, s)
			}
			continue
		}
		if s.Reason != ScaleSunset || !mayLoseWorkers(s.BuildID) {
			bad("version %s scaled to zero while it may get work (%+v)", s.BuildID, s)
		}
	}
	for _, del := range r.DeleteDeployments {
		d, ok := deps[del.Name]
		switch {
		case !ok || d.BuildID != del.BuildID:
			bad("delete of unknown Deployment %+v", del)
		case del.BuildID == in.Spec.TargetBuildID:
			bad("target Deployment %s deleted", del.Name)
		case !mayLoseWorkers(del.BuildID):
			bad("Deployment %s deleted while its version may get work", del.Name)
		case d.Replicas != 0 || d.ScaledDownAt == nil || in.Now.Before(d.ScaledDownAt.Add(in.Spec.DeleteDelay)):
			bad("Deployment %s deleted before deleteDelay at zero (%+v)", del.Name, d)
		}
		if touched[del.Name] {
			bad("two actions on Deployment %s", del.Name)
		}
		touched[del.Name] = true
	}

	for _, sy := range r.SyncDeployments {
		d, ok := deps[sy.Name]
		switch {
		case !ok || d.BuildID != sy.BuildID:
			bad("sync of unknown Deployment %+v", sy)
		case otherServer(in, d):
			bad("Deployment %s synced to the connection of another server than its workflows' (%+v -> %+v)", sy.Name, d.Server, in.Server)
		case sy.Roll != d.ConnectionStale:
			bad("sync of %s rolls = %v, its connection stale = %v", sy.Name, sy.Roll, d.ConnectionStale)
		case touched[sy.Name] || (r.UpdateDeployment != nil && r.UpdateDeployment.Name == sy.Name):
			bad("two actions on Deployment %s", sy.Name)
		}
		touched[sy.Name] = true
	}
	if d, ok := depOf[in.Spec.TargetBuildID]; ok && otherServer(in, d) && (r.Routing != nil || r.UpdateDeployment != nil || r.StartGate != nil) {
		bad("the target's workers use another server, yet the plan routes to, updates or gates it: %+v", r)
	}

	if c := r.CreateDeployment; c != nil {
		if c.BuildID != in.Spec.TargetBuildID {
			bad("created %s, not the target %s", c.BuildID, in.Spec.TargetBuildID)
		}
		if _, ok := depOf[c.BuildID]; ok {
			bad("created %s, which has a Deployment", c.BuildID)
		}
	}

	if rt := r.Routing; rt != nil {
		if otherManager {
			bad("routing written while %q manages the deployment", ts.ManagerIdentity)
		}
		if in.Spec.Strategy == v1alpha1.StrategyManual {
			bad("routing written under Manual: %+v", rt)
		}
		switch rt.Op {
		case SetCurrent, SetRamp:
			v, ok := tv(rt.BuildID)
			d, hasDep := depOf[rt.BuildID]
			if rt.BuildID != in.Spec.TargetBuildID {
				bad("routed to %s, not the target", rt.BuildID)
			}
			if !ok || !v.Described || !v.TaskQueuesReady || !v.HasPollers || !hasDep || !d.Available || d.Replicas == 0 {
				bad("routed to %s whose workers do not poll every task queue", rt.BuildID)
			}
			if ts != nil && ts.CurrentBuildID == rt.BuildID {
				bad("routing %s to %s, which is already current", rt.Op, rt.BuildID)
			}
			if rt.Op == SetRamp && (rt.RampPercentage < 1 || rt.RampPercentage > 99) {
				bad("ramp of %d%%", rt.RampPercentage)
			}
			if rt.Op == SetCurrent && ts != nil && ts.RampingBuildID != "" && ts.RampingBuildID != rt.BuildID {
				bad("made %s current while %s still ramps", rt.BuildID, ts.RampingBuildID)
			}
		case RemoveRamp:
			if ts == nil || ts.RampingBuildID == "" {
				bad("removed a ramp that does not exist")
			}
		default:
			bad("unknown routing op %q", rt.Op)
		}
	}
	if want := takesManagerRole(in) || (r.Routing != nil && ts != nil && ts.ManagerIdentity == ""); r.BecomeManager != want {
		bad("BecomeManager = %v with routing %+v and manager %q", r.BecomeManager, r.Routing, ts.ManagerIdentity)
	}

	for _, b := range r.DeleteTemporalVersions {
		v, ok := tv(b)
		_, hasDep := depOf[b]
		switch {
		case !ok:
			bad("deleted unknown Temporal version %s", b)
		case !v.Described || v.HasPollers:
			bad("deleted Temporal version %s, which has pollers or was not described", b)
		case routed(b) || (!reportedDrained(v) && v.Status != inactive):
			bad("deleted Temporal version %s with status %s", b, v.Status)
		case b == in.Spec.TargetBuildID || hasDep:
			bad("deleted Temporal version %s, which is the target or has a Deployment", b)
		case otherManager:
			bad("deleted Temporal version %s while %q manages the deployment", b, ts.ManagerIdentity)
		}
	}

	if c := r.CancelGate; c != nil && c.BuildID == in.Spec.TargetBuildID && ownGateAsked(in, c.Step) {
		bad("cancelled the target's own gate %+v, which the spec still asks for", c)
	}
	if g := r.StartGate; g != nil {
		v, ok := tv(g.BuildID)
		if g.BuildID != in.Spec.TargetBuildID || g.WorkflowType == "" || in.Spec.GateWorkflowType == "" || !ok || !v.HasPollers || !v.TaskQueuesReady {
			bad("gate started on %+v", g)
		}
	}

	// Ready: the target is current and its Deployment runs the spec's
	// template and the connection (no in-place update or roll under way).
	targetCurrent := ts != nil && in.Spec.TargetBuildID != "" && ts.CurrentBuildID == in.Spec.TargetBuildID
	if r.Ready.Status == metav1.ConditionTrue && !targetCurrent && !(ts == nil && in.TargetShownReady) {
		bad("Ready = True but the target is not current")
	}
	targetDep, ok := depOf[in.Spec.TargetBuildID]
	rolling := ok && (targetDep.Rolling || r.UpdateDeployment != nil && !r.UpdateDeployment.HashOnly ||
		targetDep.ConnectionStale && in.Server.Address != "")
	if ok && otherServer(in, targetDep) {
		if r.Ready.Status == metav1.ConditionTrue {
			bad("Ready = True while the target's workers use another server")
		}
	} else if targetCurrent && (!propagating || in.TargetShownReady) && (r.Ready.Status == metav1.ConditionTrue) == rolling {
		bad("Ready = %s for a current target whose Deployment rolls a changed template: %v", r.Ready.Status, rolling)
	}
	if u := r.UpdateDeployment; u != nil && u.BuildID != in.Spec.TargetBuildID {
		bad("updated the template of %s, which is not the target", u.BuildID)
	}
	if r.Ready.Reason == "" || r.Progressing.Reason == "" || r.Ready.Message == "" {
		bad("empty condition: %+v %+v", r.Ready, r.Progressing)
	}
	if a := in.Spec.AbortedBuildID; a != "" && a == in.Spec.TargetBuildID {
		if rt := r.Routing; rt != nil && (rt.Op == SetCurrent || rt.Op == SetRamp) && rt.BuildID == a {
			bad("the aborted target %s gets traffic: %+v", a, rt)
		}
		if r.StartGate != nil {
			bad("a gate starts for the aborted target %s", a)
		}
	}
	return errs
}

// deletionViolations restates the rules of a deletion: workers go only
// once routing is off them and they are drained (or the policy or its
// bound says so); Temporal is only changed by its manager; the finalizer
// goes only when nothing of the TWD is left that the controller may remove.
func deletionViolations(in Input, r Result) []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	ts, del := in.Temporal, in.Deletion
	otherManager := ts != nil && ts.ManagerIdentity != "" && ts.ManagerIdentity != in.Identity && !takesManagerRole(in)
	deps := map[string]Deployment{}
	for _, d := range in.Deployments {
		if _, ok := deps[d.BuildID]; !ok {
			deps[d.BuildID] = d
		}
	}
	status := func(b string) v1alpha1.VersionStatus {
		switch {
		case b == ts.CurrentBuildID:
			return current
		case b == ts.RampingBuildID:
			return ramping
		}
		for _, v := range ts.Versions {
			if v.BuildID == b {
				if reportedDrained(v) {
					return drained
				}
				return v.Status
			}
		}
		return v1alpha1.VersionNotRegistered
	}
	drainedOrIdle := func(b string) bool {
		if otherServer(in, deps[b]) {
			return false
		}
		s := status(b)
		return s == drained || s == inactive || s == v1alpha1.VersionNotRegistered
	}

	if r.RequeueAfter <= 0 || r.RequeueAfter > time.Minute {
		bad("RequeueAfter = %s, want in (0, 1m]", r.RequeueAfter)
	}
	if r.CreateDeployment != nil || r.UpdateDeployment != nil || r.StartGate != nil || len(r.SyncDeployments) > 0 {
		bad("a rollout action while deleting: %+v", r)
	}
	if r.BecomeManager != takesManagerRole(in) {
		bad("deleting, BecomeManager = %v with manager %q and %q to take it from", r.BecomeManager, ts.ManagerIdentity, in.Spec.TakeManagerFrom)
	}
	if ts == nil && (r.Routing != nil || len(r.DeleteDeployments) > 0 || len(r.DeleteTemporalVersions) > 0 || r.DeleteWorkerDeployment) {
		bad("Temporal unknown but deletion steps planned: %+v", r)
	}
	if rt := r.Routing; rt != nil {
		if otherManager {
			bad("routing written while %q manages the deployment", ts.ManagerIdentity)
		}
		if rt.BuildID != "" || (rt.Op != RemoveRamp && rt.Op != SetCurrent) {
			bad("deletion routes to a version: %+v", rt)
		}
	}
	if len(r.DeleteDeployments) > 0 {
		routedOff := ts != nil && (otherManager || (ts.CurrentBuildID == "" && ts.RampingBuildID == ""))
		if !routedOff || (otherManager && (ts.CurrentBuildID != "" || ts.RampingBuildID != "")) {
			bad("Deployments deleted while new workflows are routed to the worker deployment: %+v", r.DeleteDeployments)
		}
		expired := del.MaxDrainWait > 0 && !in.Now.Before(del.RequestedAt.Add(del.MaxDrainWait))
		if del.Policy != v1alpha1.DeletionImmediate && !expired {
			for _, d := range r.DeleteDeployments {
				if !drainedOrIdle(d.BuildID) {
					bad("Deployment %s deleted under WaitForDrain while its version is %q", d.Name, status(d.BuildID))
				}
			}
		}
	}
	for _, s := range r.Scale {
		if s.Replicas == 0 {
			bad("scaled %s to zero while deleting", s.Name)
		}
	}
	for _, b := range r.DeleteTemporalVersions {
		switch {
		case otherManager:
			bad("deleted version %s while %q manages the deployment", b, ts.ManagerIdentity)
		case len(deps) > 0:
			bad("deleted version %s while Deployments remain", b)
		case b == ts.CurrentBuildID || b == ts.RampingBuildID:
			bad("deleted version %s, which is routed", b)
		}
		for _, v := range ts.Versions {
			if v.BuildID == b && (!v.Described || v.HasPollers) {
				bad("deleted version %s, which has pollers or was not described", b)
			}
		}
	}
	if r.DeleteWorkerDeployment && (otherManager || len(deps) > 0 || len(ts.Versions) > 0 || !ts.Exists) {
		bad("deleted the worker deployment with versions, Deployments or another manager: %+v", r)
	}
	if r.RemoveFinalizer {
		switch {
		case len(deps) > 0:
			bad("finalizer removed while Deployments remain")
		case ts == nil && (del.StatusShowedVersions || in.TemporalError == nil ||
			in.TemporalError.Reason != v1alpha1.ReasonTemporalConnectionNotFound && in.TemporalError.Reason != v1alpha1.ReasonAddressNotAllowed):
			bad("finalizer removed without Temporal's state: %+v", in.TemporalError)
		case ts != nil && !otherManager && len(ts.Versions) > 0:
			bad("finalizer removed while Temporal holds versions")
		}
	}
	if r.Ready.Status != metav1.ConditionFalse || r.Ready.Reason == "" || r.Progressing.Reason == "" || r.Ready.Message == "" {
		bad("conditions while deleting: %+v %+v", r.Ready, r.Progressing)
	}
	return errs
}

// gateViolations: a gate run nobody needs is ended, never holding its
// version: its cancellation is requested once, and it is terminated as
// soon as it is still running GateCancelGrace later (looked at by then);
// only one gate run is open at a time, and a deletion keeps its finalizer
// until the run has ended.
func gateViolations(in Input, r Result) []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	g := in.Gate
	open := g != nil && g.Phase == GateRunning
	known := in.Temporal != nil
	requested := open && !g.CancelRequestedAt.IsZero()
	overdue := requested && !in.Now.Before(g.CancelRequestedAt.Add(GateCancelGrace))

	if c := r.CancelGate; c != nil && (!known || !open || requested || c.BuildID != g.BuildID || c.Reason == "") {
		bad("cancelled gate %+v, observed %+v (a run already asked to cancel is not asked again)", c, g)
	}
	if tg := r.TerminateGate; tg != nil && (!known || !overdue || tg.BuildID != g.BuildID || tg.Reason == "") {
		bad("terminated gate %+v, observed %+v: only a run still running %s after its cancellation request", tg, g, GateCancelGrace)
	}
	if known && overdue && r.TerminateGate == nil {
		bad("the gate run %+v is still running %s after its cancellation request, yet not terminated", g, in.Now.Sub(g.CancelRequestedAt))
	}
	if known && requested && !overdue && r.RequeueAfter > g.CancelRequestedAt.Add(GateCancelGrace).Sub(in.Now) {
		bad("the gate run %+v is terminated at %s, but the next look is in %s", g, g.CancelRequestedAt.Add(GateCancelGrace), r.RequeueAfter)
	}
	if r.StartGate != nil && open {
		bad("started a gate %+v while the run %+v is still open", r.StartGate, g)
	}
	if r.CancelGate != nil && r.TerminateGate != nil {
		bad("cancelled and terminated a gate in one plan: %+v %+v", r.CancelGate, r.TerminateGate)
	}
	if in.Deletion != nil && known && open && (r.RemoveFinalizer || len(r.DeleteTemporalVersions) > 0 || r.DeleteWorkerDeployment) {
		bad("a deletion removes the finalizer or deletes from Temporal while the gate run %+v is open: %+v", g, r)
	}
	return errs
}
