package freshness

import (
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/internal/fuzzsrc"
	"github.com/rainbow-deploy/rainbow/internal/planner"
	"github.com/rainbow-deploy/rainbow/internal/temporal"
)

// FuzzReuseSafety: no remembered state makes the planner scale down,
// delete or route what a fresh read would not. The fuzzer builds a TWD, the
// Temporal state a pass remembered (kept only where the remembering plan
// allowed it), and the state Temporal has now, evolved from it as Temporal
// and people can; Decide sees only the facts a pass sees. Whenever it
// reuses, the plan on the remembered state must do no more than the plan
// on the fresh one, or than the remembering pass already did on what was
// then a fresh read (a Deployment it scaled down may show its old replicas
// to the next pass, which then repeats the write).
func FuzzReuseSafety(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("settled rainbow"))
	f.Add([]byte{3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3, 2, 3, 8, 4, 6, 2, 6, 4, 3, 3, 8, 3, 2, 7, 9, 5})
	for _, c := range reuseSeeds {
		f.Add(c)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, err := range reuseViolations(data) {
			t.Error(err)
		}
	})
}

// TestReuseSafetyRandom runs the fuzz invariant on generated cases as part
// of the normal test run.
func TestReuseSafetyRandom(t *testing.T) {
	for _, c := range reuseSeeds {
		if errs := reuseViolations(c); len(errs) > 0 {
			t.Fatalf("seed %x: %v", c, errs)
		}
	}
	fuzzsrc.EachRandom(t, 2463534242, 20000, 96, reuseViolations)
}

// reuseSeeds are cases the random ones reach rarely: a settled state
// whose drained version's scale-down falls due while a person made it
// current (only the list's routing shows it).
var reuseSeeds = [][]byte{
	mustHex("eb1bd03cd22ccc507ecb6168adbb547141d3beb226ab5474551352b4b62e5d349bcf4bcfc9b04943b40691b64d297ae55deeb754d66d79e088a2f9836fc806e5fd848c774cb4ea1cc6e7756cbffe8c00e206bc597f712f0c43c5f3f6d852169b"),
}

func mustHex(s string) []byte {
	b, err := hex.DecodeString(s)
	if err != nil {
		panic(err)
	}
	return b
}

const me = "rainbow"

var builds = []string{"a", "b", "c"}

func reuseViolations(data []byte) []error { return reuseViolationsWith(data, nil) }

// TestReuseSafetyPastDeadline runs the invariant with the target's
// progress deadline long past and abort asked for: the abort scales the
// target to zero on Temporal's word that it never had traffic, which a
// remembered state must not give where a fresh read would not.
func TestReuseSafetyPastDeadline(t *testing.T) {
	fuzzsrc.EachRandom(t, 1931, 20000, 96, func(data []byte) []error {
		return reuseViolationsWith(data, func(in *planner.Input) {
			in.Spec.ProgressDeadline, in.Spec.ProgressDeadlineAbort, in.TargetSince = time.Minute, true, t0.Add(-time.Hour)
		})
	})
}

func reuseViolationsWith(data []byte, mutate func(*planner.Input)) []error {
	s := fuzzsrc.New(data)
	now := t0
	in := fuzzTWD(s, now)
	if mutate != nil {
		mutate(&in)
	}
	remembered := fuzzTemporal(s, now, in.Spec.TargetBuildID)
	age := fuzzsrc.Pick(s, 100*time.Millisecond, 2*time.Second, 20*time.Second, 50*time.Second, 5*time.Minute, 11*time.Minute)
	at := now.Add(-age)
	fresh := evolve(s, remembered, at, now)

	p := Pass{Input: in, TargetAvailable: targetAvailable(in), OnlyTarget: onlyTarget(in)}
	p.StatusShowsVersions = in.TargetHadCompleted || s.Bool()
	p.GateRunning = s.Intn(4) == 0
	prev := in
	prev.Now, prev.Temporal = at, remembered
	if s.Bool() {
		// Deployments rolled since: availability changed.
		prev.Deployments = slices.Clone(in.Deployments)
		for i := range prev.Deployments {
			if s.Bool() {
				prev.Deployments[i].Available = !prev.Deployments[i].Available
			}
		}
	}
	describe(prev)
	var m Remembered
	res := planner.Plan(prev)
	if s.Bool() && slices.Equal(prev.Deployments, in.Deployments) && Settles(res) {
		m.Settled = &SettledState{DescribedAt: at, MaxAge: SettledFor(res, s.Bool()), Summary: summaryOf(remembered).DeploymentSummary, HasSummary: true}
	} else if KeepRecent(prev, res, false, false) {
		m.Recent = &RecentState{State: remembered, Until: at.Add(res.RequeueAfter - 10*time.Millisecond), DescribedAt: at,
			TargetAvailable: targetAvailable(prev)}
	}
	lagging := s.Intn(3) == 0
	list := &Listing{Summary: summaryOf(fresh).DeploymentSummary, Listed: fresh.Exists && !lagging}
	if s.Intn(8) == 0 {
		list = &Listing{Failed: true, Busy: s.Bool()}
	}
	m.SettledList, m.AbsenceList = list, list

	d := Decide(m, p, now)
	if !d.Reuses() {
		return nil
	}
	if (d.Use == Recent || d.Use == TargetOnRecent) && tokenRefuses(remembered, fresh) {
		// Accepted: these trust that no person changed the routing in the
		// seconds before the look the last plan asked for (30 s at most
		// for TargetOnRecent). Routing writes carry the remembered conflict
		// token, which Temporal then refuses; Kubernetes actions do not.
		return nil
	}
	believed := remembered
	switch d.Use {
	case Unlisted:
		believed = &planner.TemporalState{}
	case TargetOnRecent:
		var ok bool
		if believed, ok = targetOn(remembered, fresh, in.Spec.TargetBuildID); !ok {
			return nil // the executor describes in full
		}
	}
	withR, withF := in, in
	withR.Temporal, withF.Temporal = believed, fresh
	if !fresh.Exists {
		withF.Temporal = &planner.TemporalState{}
	}
	describe(withF)
	did := planner.Plan(withF)
	did.Scale = append(did.Scale, res.Scale...)
	did.DeleteDeployments = append(did.DeleteDeployments, res.DeleteDeployments...)
	return moreThanFresh(d, planner.Plan(withR), did, in, believed, fresh)
}

// moreThanFresh lists what the plan on the believed state does that the
// plan on the fresh state (with what was already done) does not: scale
// down, delete, route. A routing
// write carries the remembered conflict token, which Temporal refuses once
// the routing or the manager changed.
func moreThanFresh(d Decision, r, f planner.Result, in planner.Input, believed, fresh *planner.TemporalState) []error {
	var errs []error
	replicas := map[string]int32{}
	for _, dep := range in.Deployments {
		replicas[dep.BuildID] = dep.Replicas
	}
	for _, sc := range r.Scale {
		if sc.Replicas >= replicas[sc.BuildID] {
			continue
		}
		if !slices.ContainsFunc(f.Scale, func(x planner.Scale) bool { return x.BuildID == sc.BuildID && x.Replicas <= sc.Replicas }) {
			errs = append(errs, fmt.Errorf("%s (%s): scales %s down to %d, a fresh read would not (%v)", d.Reason, d.Use.String(), sc.BuildID, sc.Replicas, f.Scale))
		}
	}
	for _, del := range r.DeleteDeployments {
		if !slices.ContainsFunc(f.DeleteDeployments, func(x planner.DeleteDeployment) bool { return x.BuildID == del.BuildID }) {
			errs = append(errs, fmt.Errorf("%s: deletes the Deployment of %s, a fresh read would not", d.Reason, del.BuildID))
		}
	}
	for _, b := range r.DeleteTemporalVersions {
		if !slices.Contains(f.DeleteTemporalVersions, b) {
			errs = append(errs, fmt.Errorf("%s: deletes version %s from Temporal, a fresh read would not", d.Reason, b))
		}
	}
	if r.DeleteWorkerDeployment && !f.DeleteWorkerDeployment {
		errs = append(errs, fmt.Errorf("%s: deletes the worker deployment, a fresh read would not", d.Reason))
	}
	if r.Routing != nil && !tokenRefuses(believed, fresh) && (f.Routing == nil || *f.Routing != *r.Routing) {
		errs = append(errs, fmt.Errorf("%s: routes %+v, a fresh read would route %+v", d.Reason, *r.Routing, f.Routing))
	}
	return errs
}

// tokenRefuses: Temporal refuses a write carrying r's conflict token, the
// routing or the manager having changed since.
func tokenRefuses(r, f *planner.TemporalState) bool {
	return summaryOf(r).routing() != summaryOf(f).routing() || r.ManagerIdentity != f.ManagerIdentity
}

func (u Use) String() string {
	return [...]string{"Describe", "Settled", "Recent", "Unlisted", "TargetOnRecent", "Wait", "ListForSettled", "ListForAbsence"}[u]
}

type routing struct {
	current, ramping string
	pct              int32
	changed          time.Time
}

func (s summary) routing() routing {
	return routing{s.CurrentBuildID, s.RampingBuildID, s.RampPercentage, s.RoutingChangedAt}
}

type summary struct{ temporal.DeploymentSummary }

func summaryOf(t *planner.TemporalState) summary {
	s := temporal.DeploymentSummary{Name: "ns/w", CurrentBuildID: t.CurrentBuildID, RampingBuildID: t.RampingBuildID,
		RampPercentage: t.RampPercentage, RoutingChangedAt: t.RoutingChangedAt}
	for _, v := range t.Versions {
		if !v.RegisteredAt.Before(s.LatestCreatedAt) {
			s.LatestBuildID, s.LatestCreatedAt = v.BuildID, v.RegisteredAt
		}
	}
	return summary{s}
}

func fuzzTWD(s *fuzzsrc.Source, now time.Time) planner.Input {
	server := planner.Server{Address: "temporal:7233"}
	in := planner.Input{Now: now, Identity: me, DeploymentName: "ns/w", Namespace: "ns", Name: "w", Server: server}
	replicas := int32(1 + s.Intn(3))
	in.Spec = planner.Spec{
		TargetBuildID:  fuzzsrc.Pick(s, builds...),
		Replicas:       &replicas,
		Strategy:       fuzzsrc.Pick(s, v1alpha1.StrategyAllAtOnce, v1alpha1.StrategyProgressive, v1alpha1.StrategyManual),
		ScaledownDelay: fuzzsrc.Pick(s, 0, time.Minute, time.Hour),
		DeleteDelay:    fuzzsrc.Pick(s, 0, time.Minute, time.Hour),
		TemplateHash:   "h",
	}
	if in.Spec.Strategy == v1alpha1.StrategyProgressive {
		in.Spec.Steps = []planner.Step{{RampPercentage: 10, Pause: fuzzsrc.Pick(s, 0, time.Minute)}}
	}
	for _, b := range builds {
		target := b == in.Spec.TargetBuildID
		if s.Intn(3) == 0 && (!target || s.Bool()) {
			continue
		}
		d := planner.Deployment{BuildID: b, Name: "w-" + b, UID: "uid-" + b, Replicas: int32(s.Intn(3)), Available: s.Bool(),
			TemplateHash: "h", Server: server}
		if target && s.Intn(4) != 0 {
			d.Replicas, d.Available = replicas, true // often settled
		}
		if d.Replicas == 0 && s.Bool() {
			d.ScaledDownAt = ptr(now.Add(-fuzzsrc.Pick(s, time.Minute, 2*time.Hour)))
		}
		in.Deployments = append(in.Deployments, d)
	}
	in.TargetHadCompleted = s.Intn(4) == 0
	return in
}

func fuzzTemporal(s *fuzzsrc.Source, now time.Time, target string) *planner.TemporalState {
	t := &planner.TemporalState{Exists: s.Intn(6) != 0, ManagerIdentity: fuzzsrc.Pick(s, "", me, me, "alice"),
		RoutingChangedAt: now.Add(-fuzzsrc.Pick(s, time.Minute, 2*time.Hour))}
	if !t.Exists {
		return t
	}
	t.CurrentBuildID = fuzzsrc.Pick(s, "", "a", "b", "c", target, target) // often settled
	if s.Intn(3) == 0 {
		t.RampingBuildID, t.RampPercentage = fuzzsrc.Pick(s, "a", "b", "c"), int32(fuzzsrc.Pick(s, 10, 50))
		if t.RampingBuildID == t.CurrentBuildID {
			t.RampingBuildID, t.RampPercentage = "", 0
		}
	}
	for _, b := range builds {
		if b != t.CurrentBuildID && b != t.RampingBuildID && s.Intn(3) == 0 {
			continue
		}
		v := planner.TemporalVersion{BuildID: b, RegisteredAt: now.Add(-3 * time.Hour).Add(time.Duration(len(t.Versions)) * time.Minute),
			Described: s.Intn(4) != 0, TaskQueuesReady: s.Intn(3) != 0, HasPollers: s.Bool()}
		switch {
		case b == t.CurrentBuildID:
			v.Status, v.CurrentSince = v1alpha1.VersionCurrent, ptr(t.RoutingChangedAt)
		case b == t.RampingBuildID:
			v.Status, v.RampingSince = v1alpha1.VersionRamping, ptr(t.RoutingChangedAt)
		default:
			v.Status = fuzzsrc.Pick(s, v1alpha1.VersionInactive, v1alpha1.VersionDraining, v1alpha1.VersionDrained)
			if v.Status != v1alpha1.VersionInactive {
				v.LastCurrentAt, v.DrainingSince = ptr(t.RoutingChangedAt), ptr(t.RoutingChangedAt)
			}
			if v.Status == v1alpha1.VersionDrained {
				v.DrainedSince = ptr(now.Add(-fuzzsrc.Pick(s, 30*time.Second, 3*time.Minute, 2*time.Hour)))
			}
		}
		t.Versions = append(t.Versions, v)
	}
	return t
}

// evolve is the remembered state as Temporal may have it now: drainage
// and pollers moving on their own, workers registering new versions, a
// person changing the routing or taking the manager role, the worker
// deployment created.
func evolve(s *fuzzsrc.Source, r *planner.TemporalState, since, now time.Time) *planner.TemporalState {
	f := *r
	f.Versions = slices.Clone(r.Versions)
	when := func() time.Time { return since.Add(now.Sub(since) / time.Duration(1+s.Intn(4))) }
	if !f.Exists && s.Bool() {
		f.Exists, f.RoutingChangedAt = true, time.Time{}
	}
	for n := s.Intn(4); n > 0 && f.Exists; n-- {
		switch s.Intn(6) {
		case 0: // a draining version drains
			for i, v := range f.Versions {
				if v.Status == v1alpha1.VersionDraining {
					f.Versions[i].Status, f.Versions[i].DrainedSince = v1alpha1.VersionDrained, ptr(when())
					break
				}
			}
		case 1: // workers start or stop polling
			if len(f.Versions) > 0 {
				i := s.Intn(len(f.Versions))
				f.Versions[i].HasPollers = !f.Versions[i].HasPollers
			}
		case 2: // a version registers
			b := fuzzsrc.Pick(s, builds...)
			if !slices.ContainsFunc(f.Versions, func(v planner.TemporalVersion) bool { return v.BuildID == b }) {
				f.Versions = append(f.Versions, planner.TemporalVersion{BuildID: b, Status: v1alpha1.VersionInactive, RegisteredAt: when(),
					Described: true, TaskQueuesReady: s.Bool(), HasPollers: true})
			}
		case 3: // a person makes a version current
			if len(f.Versions) > 0 {
				if b := f.Versions[s.Intn(len(f.Versions))].BuildID; b != f.CurrentBuildID {
					setCurrent(&f, b, when())
				}
			}
		case 4:
			f.ManagerIdentity = fuzzsrc.Pick(s, "", "alice")
		case 5:
			f.RoutingPropagating = false
		}
	}
	return &f
}

// describe marks described the versions a read of in.Temporal describes.
func describe(in planner.Input) {
	for _, b := range planner.VersionsToDescribe(in) {
		i := slices.IndexFunc(in.Temporal.Versions, func(v planner.TemporalVersion) bool { return v.BuildID == b })
		in.Temporal.Versions[i].Described = true
	}
}

func setCurrent(t *planner.TemporalState, b string, at time.Time) {
	for i := range t.Versions {
		v := &t.Versions[i]
		switch {
		case v.BuildID == b:
			v.Status, v.CurrentSince, v.DrainingSince, v.DrainedSince = v1alpha1.VersionCurrent, ptr(at), nil, nil
		case v.BuildID == t.CurrentBuildID || v.BuildID == t.RampingBuildID:
			v.Status, v.LastCurrentAt, v.DrainingSince = v1alpha1.VersionDraining, ptr(at), ptr(at)
		}
	}
	t.CurrentBuildID, t.RoutingChangedAt, t.LastModifierIdentity = b, at, "alice"
	if t.RampingBuildID == b {
		t.RampingBuildID, t.RampPercentage = "", 0
	}
}

// targetOn is the remembered state with the target described afresh, as
// the executor's observeTargetOn builds it; false where it would describe
// in full instead.
func targetOn(r, f *planner.TemporalState, target string) (*planner.TemporalState, bool) {
	i := slices.IndexFunc(f.Versions, func(v planner.TemporalVersion) bool { return v.BuildID == target })
	if !r.Exists || !f.Exists || i < 0 || (r.ManagerIdentity != "" && r.ManagerIdentity != me) {
		return nil, false
	}
	fv := f.Versions[i]
	t := *r
	t.Versions = slices.Clone(r.Versions)
	j := slices.IndexFunc(t.Versions, func(v planner.TemporalVersion) bool { return v.BuildID == target })
	if j < 0 {
		t.Versions = append(t.Versions, planner.TemporalVersion{BuildID: target})
		j = len(t.Versions) - 1
	}
	v := &t.Versions[j]
	if !TargetStands(v.Status, fv.Status) {
		return nil, false
	}
	v.Status = fv.Status
	if v.RegisteredAt.IsZero() {
		v.RegisteredAt = fv.RegisteredAt
	}
	v.HasPollers, v.TaskQueuesReady, v.Described = fv.HasPollers, fv.TaskQueuesReady, true
	slices.SortFunc(t.Versions, func(x, y planner.TemporalVersion) int { return strings.Compare(x.BuildID, y.BuildID) })
	return &t, true
}

func targetAvailable(in planner.Input) bool {
	return slices.ContainsFunc(in.Deployments, func(d planner.Deployment) bool { return d.BuildID == in.Spec.TargetBuildID && d.Available })
}

func onlyTarget(in planner.Input) bool {
	return len(in.Deployments) == 0 || (len(in.Deployments) == 1 && in.Deployments[0].BuildID == in.Spec.TargetBuildID)
}

func ptr[T any](v T) *T { return &v }
