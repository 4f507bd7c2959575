// Package drain decides what happens to the pinned workflows of draining
// versions (the drain deadline and the continue-as-new signal), and when
// a worker deployment's summary of a version's drainage is cross-checked
// against the version's own. It is pure, like the planner that calls it:
// the planner builds Input from its view and merges Result into its own.
package drain

import (
	"sort"
	"time"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
)

// Input is what the drain rules read.
type Input struct {
	Now time.Time
	// Known: Temporal's state was read. Without it nothing is acted on.
	Known bool
	// Target is the rollout's target build ID, never acted on.
	Target string
	// OtherManager: another identity manages the worker deployment.
	OtherManager bool
	// Versions are every build ID the planner knows, in any order; a
	// repeated build ID after the first is ignored.
	Versions []Version
	Spec     Spec
	// Records are the versions' drain records from status.
	Records []Record
	// Listings are this pass's listings of the versions ToList named.
	Listings []Listing
	// DeploymentName is the Temporal worker deployment's; Namespace and
	// Name the TWD's. They go into the reasons written to histories.
	DeploymentName, Namespace, Name string
}

// Version is where a version stands, as the planner judges it.
type Version struct {
	BuildID string
	// Status comes from the routing config first, then the version's
	// own status; Unknown for a version on another server than the
	// connection's.
	Status v1alpha1.VersionStatus
	// DrainingSince is Temporal's time the version stopped being current
	// or ramping; nil if Temporal does not say.
	DrainingSince *time.Time
}

// Result is the drain's part of a plan.
type Result struct {
	// Work cancels, terminates or signals pinned workflow runs.
	Work []Work
	// Records are every version's drain record for status, by build ID,
	// if every Work succeeds.
	Records map[string]Record
	// Events are Normal events, in order.
	Events []Event
	// RequeueAfter is when the drain wants to be looked at again; zero
	// when it does not.
	RequeueAfter time.Duration
}

// Event is a Normal Kubernetes event to record on the TWD.
type Event struct {
	Reason  string
	Message string
}

// Event reasons.
const (
	EventCancelPinned    = "CancelPinnedWorkflows"
	EventTerminatePinned = "TerminatePinnedWorkflows"
	EventSignalPinned    = "SignalPinnedWorkflows"
	// EventDrainDeadlinePassed reports, under DryRun, the pinned workflows
	// open past spec.sunset.maxDrainDuration (when their count changes).
	EventDrainDeadlinePassed = "DrainDeadlinePassed"
)

// Plan applies the drain deadline and the continue-as-new signal (planDrain).
func Plan(in Input) Result {
	p := &plan{}
	p.res.Records = planDrain(newView(in), p)
	return p.res
}

// view indexes the input; it never changes after newView.
type view struct {
	in     Input
	target string
	vs     map[string]Version
	builds []string // sorted
}

func newView(in Input) *view {
	v := &view{in: in, target: in.Target, vs: map[string]Version{}}
	for _, ver := range in.Versions {
		if _, dup := v.vs[ver.BuildID]; !dup && ver.BuildID != "" {
			v.vs[ver.BuildID] = ver
			v.builds = append(v.builds, ver.BuildID)
		}
	}
	sort.Strings(v.builds)
	return v
}

func (v *view) known() bool { return v.in.Known }

func (v *view) now() time.Time { return v.in.Now }

// status is where build stands, "" when Temporal is unknown.
func (v *view) status(build string) v1alpha1.VersionStatus {
	if !v.known() {
		return ""
	}
	return v.vs[build].Status
}

// plan accumulates the Result.
type plan struct{ res Result }

func (p *plan) event(reason, msg string) {
	p.res.Events = append(p.res.Events, Event{Reason: reason, Message: msg})
}

// after asks to be looked at again within d.
func (p *plan) after(d time.Duration) {
	if d > 0 && (p.res.RequeueAfter == 0 || d < p.res.RequeueAfter) {
		p.res.RequeueAfter = d
	}
}

// afterDeadline asks to be looked at exactly at t, if it is in the future.
func (p *plan) afterDeadline(now, t time.Time) {
	if t.After(now) {
		p.after(t.Sub(now))
	}
}
