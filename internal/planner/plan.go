package planner

import (
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/internal/planner/drain"
)

// Plan decides what to do next, and what status shows after it. It is
// pure: the same Input gives the same Result, and it reads no clock and
// calls nothing.
func Plan(in Input) Result {
	res := decide(in)
	res.Projected = project(in, res)
	return res
}

func decide(in Input) Result {
	v := newView(in)
	p := &plan{}

	if in.ClaimedBy != nil {
		prog := planClaimed(v, p)
		p.res.State = prog.state.exported()
		p.res.Ready, p.res.Progressing = conditions(prog)
		p.res.Versions = versions(v)
		p.res.RequeueAfter = p.requeueAfter()
		return p.res
	}
	if in.Spec.AdoptionPending && in.Deletion == nil {
		prog := planAdoptionPending(v, p)
		p.res.State = prog.state.exported()
		p.res.Ready, p.res.Progressing = conditions(prog)
		p.res.Versions = versions(v)
		p.res.RequeueAfter = p.requeueAfter()
		return p.res
	}
	if in.Deletion != nil {
		takeManagerRole(v, p)
		prog := planDeletion(v, p)
		cancelStaleGate(v, p)
		planOwned(v, p)
		p.res.State = prog.state.exported()
		p.res.Ready, p.res.Progressing = conditions(prog)
		p.res.Versions = withDrain(versions(v), drain.Kept(in.Drains))
		p.res.RequeueAfter = p.requeueAfter()
		return p.res
	}
	takeManagerRole(v, p)
	prog := awaitPropagation(v, p, planTarget(v, p))
	if p.res.Analysis == nil {
		p.res.Analysis = keptRecord(v)
	}
	planSunset(v, p)
	drains := planDrain(v, p)
	planSync(v, p)
	cancelStaleGate(v, p)
	planOwned(v, p)
	if prog.state == done {
		prog.message += oldServerNote(v)
	}

	if p.res.Routing != nil && v.temporal().ManagerIdentity == "" && !p.res.BecomeManager {
		p.res.BecomeManager = true
		p.eventFirst(EventNormal, EventBecomeManager,
			fmt.Sprintf("setting the manager identity of worker deployment %s to %q", v.deploymentName(), in.Identity))
	}
	p.res.State = prog.state.exported()
	p.res.TargetCompleted = p.res.TargetCompleted || prog.state == done
	p.res.Ready, p.res.Progressing = conditions(prog)
	p.res.Versions = withDrain(versions(v), drains)
	p.res.RequeueAfter = p.requeueAfter()
	return p.res
}

// view indexes the input; it never changes after newView.
type view struct {
	in     Input
	target string
	deps   map[string]Deployment
	tvs    map[string]TemporalVersion
	builds []string // every build ID seen, sorted
}

func newView(in Input) *view {
	v := &view{
		in:     in,
		target: in.Spec.TargetBuildID,
		deps:   map[string]Deployment{},
		tvs:    map[string]TemporalVersion{},
	}
	seen := map[string]bool{}
	add := func(b string) {
		if b != "" && !seen[b] {
			seen[b] = true
			v.builds = append(v.builds, b)
		}
	}
	for _, d := range in.Deployments {
		if _, dup := v.deps[d.BuildID]; !dup {
			v.deps[d.BuildID] = d
		}
		add(d.BuildID)
	}
	if in.Temporal != nil {
		for _, tv := range in.Temporal.Versions {
			if _, dup := v.tvs[tv.BuildID]; !dup {
				v.tvs[tv.BuildID] = withOwnDrainage(tv, in.Temporal)
			}
			add(tv.BuildID)
		}
		add(in.Temporal.CurrentBuildID)
		add(in.Temporal.RampingBuildID)
	}
	add(v.target)
	sort.Strings(v.builds)
	return v
}

// temporal returns the Temporal state, or a zero one when unknown; callers
// that act on it must check known() first.
func (v *view) temporal() TemporalState {
	if v.in.Temporal == nil {
		return TemporalState{}
	}
	return *v.in.Temporal
}

func (v *view) known() bool { return v.in.Temporal != nil }

func (v *view) now() time.Time { return v.in.Now }

func (v *view) deploymentName() string {
	if v.in.DeploymentName == "" {
		return "(unnamed)"
	}
	return v.in.DeploymentName
}

// status is where a build stands in Temporal, "" when Temporal is unknown.
// The routing config is the truth for current and ramping; a version's own
// status (which may lag) only adds protection: a version is kept if either
// says it gets traffic.
func (v *view) status(build string) v1alpha1.VersionStatus {
	if !v.known() || build == "" {
		return ""
	}
	if d, ok := v.deps[build]; ok && v.onOtherServer(d) {
		return v1alpha1.VersionUnknown // its workflows live on a server we do not read
	}
	t := v.in.Temporal
	switch {
	case build == t.CurrentBuildID:
		return v1alpha1.VersionCurrent
	case build == t.RampingBuildID:
		return v1alpha1.VersionRamping
	}
	if tv, ok := v.tvs[build]; ok {
		return tv.Status
	}
	return v1alpha1.VersionNotRegistered
}

// getsWork: Temporal routes new or open workflows to the version, or we do
// not know. Such versions must keep their workers.
func (v *view) getsWork(build string) bool {
	switch v.status(build) {
	case v1alpha1.VersionDrained, v1alpha1.VersionInactive, v1alpha1.VersionNotRegistered:
		return false
	}
	return true
}

// otherManager is the identity that holds the worker deployment, if not us
// or the one whose role we take over.
func (v *view) otherManager() string {
	m := v.temporal().ManagerIdentity
	if m == "" || v.ours(m) {
		return ""
	}
	return m
}

// ours: an identity whose routing writes are ours. The one we take the
// manager role from counts: its ramp is the rollout we carry on.
func (v *view) ours(identity string) bool {
	return identity == v.in.Identity || (identity != "" && identity == v.in.Spec.TakeManagerFrom)
}

// canWriteRouting: Temporal is known and nobody else manages it.
func (v *view) canWriteRouting() bool {
	return v.known() && v.otherManager() == ""
}

// plan accumulates the Result and requeue candidates.
type plan struct {
	res     Result
	requeue []time.Duration
	// scaleEvents[i] is the index in res.Events of res.Scale[i]'s event.
	scaleEvents []int
}

func (p *plan) event(typ, reason, msg string) {
	p.res.Events = append(p.res.Events, Event{Type: typ, Reason: reason, Message: msg})
}

// eventOn records an event about one version.
func (p *plan) eventOn(buildID, typ, reason, msg string) {
	p.res.Events = append(p.res.Events, Event{Type: typ, Reason: reason, Message: msg, BuildID: buildID})
}

func (p *plan) eventFirst(typ, reason, msg string) {
	p.res.Events = append([]Event{{Type: typ, Reason: reason, Message: msg}}, p.res.Events...)
	for i := range p.scaleEvents {
		p.scaleEvents[i]++
	}
}

// after asks to reconcile again within d.
func (p *plan) after(d time.Duration) { p.requeue = append(p.requeue, d) }

func (p *plan) route(r Routing, reason, msg string) {
	p.res.Routing = &r
	p.eventOn(r.BuildID, EventNormal, reason, msg)
	p.after(requeueTemporal)
}

func (p *plan) scale(d Deployment, replicas int32, why ScaleReason, reason, msg string) {
	p.res.Scale = append(p.res.Scale, Scale{Name: d.Name, BuildID: d.BuildID, Replicas: replicas, Reason: why})
	p.scaleEvents = append(p.scaleEvents, len(p.res.Events))
	p.eventOn(d.BuildID, EventNormal, reason, msg)
}

// unscale withdraws a scale planned earlier in this pass, and its event.
func (p *plan) unscale(name string) {
	i := slices.IndexFunc(p.res.Scale, func(s Scale) bool { return s.Name == name })
	if i < 0 {
		return
	}
	e := p.scaleEvents[i]
	p.res.Scale = slices.Delete(p.res.Scale, i, i+1)
	p.scaleEvents = slices.Delete(p.scaleEvents, i, i+1)
	p.res.Events = slices.Delete(p.res.Events, e, e+1)
	for j := range p.scaleEvents {
		if p.scaleEvents[j] > e {
			p.scaleEvents[j]--
		}
	}
}

// Event types, as in corev1.
const (
	EventNormal  = "Normal"
	EventWarning = "Warning"
)

// Event is one Kubernetes event to record on the TWD.
type Event struct {
	Type    string
	Reason  string
	Message string
	// BuildID is the version the event is about, where there is one
	// (notifications name it).
	BuildID string
}
