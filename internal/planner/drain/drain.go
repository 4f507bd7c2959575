package drain

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"time"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
)

// The drain deadline (spec.sunset.maxDrainDuration, drainAction) and the
// continue-as-new signal (spec.sunset.continueAsNewSignal) act on the
// pinned workflows of draining versions. Their pace towards Temporal:
const (
	// PinnedPageSize bounds the workflows one listing returns per version.
	PinnedPageSize = 100
	// MaxActionsPerPass bounds the cancellations, terminations and
	// signals of one pass, over all versions of the TWD.
	MaxActionsPerPass = 20
	// ActionInterval: passes that act are at least this far apart.
	// With MaxActionsPerPass that is at most 120 workflows a minute
	// per TWD.
	ActionInterval = 10 * time.Second
	// A draining version's pinned workflows are listed every quarter of
	// its drain so far, within these bounds, when the deadline passes,
	// and ActionInterval after a pass that acted (to go on with the
	// rest).
	drainListMin = 30 * time.Second
	drainListMax = 10 * time.Minute
	// maxHandledRuns bounds each list of runs acted on in status.
	maxHandledRuns = 100
)

// Spec is spec.sunset's drain deadline and continue-as-new signal.
type Spec struct {
	// MaxDuration is spec.sunset.maxDrainDuration; it counts only with
	// an Action.
	MaxDuration time.Duration
	// Action is what happens to pinned workflows past the deadline: ""
	// when no maxDrainDuration is set.
	Action v1alpha1.DrainAction
	// Signal is the continue-as-new signal's name; "" sends none.
	Signal string
}

func (d Spec) on() bool { return d.Action != "" || d.Signal != "" }

// Run is one run of a workflow.
type Run struct {
	WorkflowID string
	RunID      string
}

// Listing is, for one version ToList named, its open
// pinned workflows as Temporal's visibility listed them this pass.
type Listing struct {
	BuildID string
	// Count is how many are open; at least len(Runs).
	Count int
	// Runs are the first PinnedPageSize of them at most.
	Runs []Run
}

// Record is a version's status.drain: what was found and done about
// its pinned workflows.
type Record struct {
	BuildID       string
	DrainingSince *time.Time
	// SeenAt is when the controller first saw this drain, by its own
	// clock; nil in records written before it was kept.
	SeenAt *time.Time
	// Deadline is the later of DrainingSince and SeenAt, plus the spec's
	// MaxDuration, when an Action is set.
	Deadline *time.Time
	ListedAt *time.Time
	// PinnedWorkflows were open at ListedAt; Overdue of them past the
	// deadline.
	PinnedWorkflows, Overdue int
	// Counts of runs acted on during this drain.
	CancelRequested, Terminated, Signalled int
	// Pending runs of the listing are left for the next passes.
	Pending      int
	LastActionAt *time.Time
	// StoppedRuns and SignalledRuns are the RunKeys of the latest runs
	// cancelled or terminated, and signalled, oldest first.
	StoppedRuns, SignalledRuns []string
}

// Op is what is done to pinned workflows.
type Op string

const (
	OpCancel    Op = "Cancel"
	OpTerminate Op = "Terminate"
	OpSignal    Op = "Signal"
)

// Work asks to cancel, terminate or signal pinned workflow runs of a
// draining version. Each run is acted on at most once: the executor
// records the runs it succeeded on with Record.Done.
type Work struct {
	BuildID string
	Op      Op
	// Signal is the signal name (OpSignal only).
	Signal string
	// Reason is recorded in the workflows' history (cancel, terminate).
	Reason string
	Runs   []Run
}

// RunKey is how status remembers a run: short, and enough to tell apart
// the hundred runs it keeps.
func RunKey(runID string) string {
	h := sha256.Sum256([]byte(runID))
	return hex.EncodeToString(h[:4])
}

// Done is the record after op succeeded on runs at now: the runs are
// counted and remembered (the newest maxHandledRuns of each kind).
func (r Record) Done(op Op, runs []Run, now time.Time) Record {
	if len(runs) == 0 {
		return r
	}
	keys := make([]string, len(runs))
	for i, run := range runs {
		keys[i] = RunKey(run.RunID)
	}
	remember := func(list []string) []string {
		list = append(slices.Clone(list), keys...)
		return list[max(0, len(list)-maxHandledRuns):]
	}
	switch op {
	case OpCancel:
		r.CancelRequested += len(runs)
		r.StoppedRuns = remember(r.StoppedRuns)
	case OpTerminate:
		r.Terminated += len(runs)
		r.StoppedRuns = remember(r.StoppedRuns)
	case OpSignal:
		r.Signalled += len(runs)
		r.SignalledRuns = remember(r.SignalledRuns)
	}
	r.LastActionAt = &now
	return r
}

// ToList names the draining versions whose open pinned workflows the
// caller lists this pass (into Input.Listings): those the drain deadline
// or the continue-as-new signal may act on, when their listing is due.
// None while Temporal's state is unknown.
func ToList(in Input) []string {
	if !in.Known || !in.Spec.on() {
		return nil
	}
	v := newView(in)
	var out []string
	for _, b := range v.builds {
		if due, _ := listDue(v, b); due {
			out = append(out, b)
		}
	}
	return out
}

// drainingSince: the controller may act on the pinned workflows of build,
// which drains since the time returned, in whole seconds as status keeps
// it (so that a record and Temporal's time compare equal). Temporal's state is known; the
// routing config and the version's own status agree that it drains (a
// version on another server than the connection's is Unknown); it is not
// the target; nobody else manages the worker deployment; and Temporal
// says since when it drains.
func drainingSince(v *view, build string) (time.Time, bool) {
	if !v.known() || build == v.target || v.in.OtherManager || v.status(build) != v1alpha1.VersionDraining {
		return time.Time{}, false
	}
	s := v.vs[build].DrainingSince
	if s == nil {
		return time.Time{}, false
	}
	return s.Truncate(time.Second), true
}

// drainDeadline is when the pinned workflows of rec's version become
// overdue. It counts from Temporal's time or the controller's first sight,
// whichever is later: Temporal's timestamps come from the server's clock,
// and a controller clock running ahead would otherwise end workflows
// early by the skew.
func drainDeadline(v *view, rec Record) (time.Time, bool) {
	if v.in.Spec.Action == "" || rec.DrainingSince == nil {
		return time.Time{}, false
	}
	from := *rec.DrainingSince
	if rec.SeenAt != nil && rec.SeenAt.After(from) {
		from = *rec.SeenAt
	}
	return from.Add(v.in.Spec.MaxDuration), true
}

// stops: past the deadline, the action ends the workflows (not DryRun).
func stops(v *view) bool {
	a := v.in.Spec.Action
	return a == v1alpha1.DrainCancel || a == v1alpha1.DrainTerminate
}

// actAllowedAt is when this TWD may act on workflows again.
func actAllowedAt(v *view) time.Time {
	var last time.Time
	for _, r := range v.in.Records {
		if r.LastActionAt != nil && r.LastActionAt.After(last) {
			last = *r.LastActionAt
		}
	}
	if last.IsZero() {
		return time.Time{}
	}
	return last.Add(ActionInterval)
}

// listDue says whether build's pinned workflows are to be listed now, and
// when they are next (zero: never, as things stand).
func listDue(v *view, build string) (bool, time.Time) {
	since, ok := drainingSince(v, build)
	if !ok {
		return false, time.Time{}
	}
	now := v.now()
	rec := v.drain(build)
	deadlineRec := rec
	if rec.DrainingSince == nil || !rec.DrainingSince.Equal(since) {
		seen := now.Truncate(time.Second) // as planDrain will record it
		deadlineRec = Record{DrainingSince: &since, SeenAt: &seen}
	}
	deadline, hasDeadline := drainDeadline(v, deadlineRec)
	if v.in.Spec.Signal == "" && (!hasDeadline || now.Before(deadline)) {
		return false, deadline // nothing to do before the deadline
	}
	var next time.Time
	switch {
	case rec.ListedAt == nil || rec.ListedAt.Before(since):
		next = now // first look at this drain
	case hasDeadline && rec.ListedAt.Before(deadline):
		next = deadline // the first look past the deadline
	case rec.Pending > 0:
		next = *rec.ListedAt // go on with the rest, as soon as allowed
	default:
		next = rec.ListedAt.Add(min(drainListMax, max(drainListMin, now.Sub(since)/4)))
	}
	if allowed := actAllowedAt(v); next.Before(allowed) {
		next = allowed
	}
	return !now.Before(next), next
}

// drain is build's record from status, or an empty one.
func (v *view) drain(build string) Record {
	for _, r := range v.in.Records {
		if r.BuildID == build {
			return r
		}
	}
	return Record{BuildID: build}
}

// listing is this pass's listing of build's pinned workflows.
func (v *view) listing(build string) (Listing, bool) {
	for _, l := range v.in.Listings {
		if l.BuildID == build {
			return l, true
		}
	}
	return Listing{}, false
}

// planDrain applies the drain deadline and the continue-as-new signal to
// the draining versions listed this pass, and returns every version's
// drain record for status:
//   - past the deadline, Cancel or Terminate ends the pinned workflows not
//     ended before; DryRun only counts them (an Event when the count
//     changes);
//   - before it, or under DryRun, the signal goes to the runs not
//     signalled before;
//   - at most MaxActionsPerPass runs per pass, and passes that act at
//     least ActionInterval apart.
func planDrain(v *view, p *plan) map[string]Record {
	records := Kept(v.in.Records)
	if !v.known() {
		return records // kept as they were, like the versions' status
	}
	now := v.now()
	d := &drainPass{budget: MaxActionsPerPass, taken: map[string]bool{}}
	if now.Before(actAllowedAt(v)) {
		d.budget = 0
	}
	for _, b := range v.builds {
		switch v.status(b) {
		case v1alpha1.VersionCurrent, v1alpha1.VersionRamping:
			delete(records, b) // it gets new work again: a later drain starts afresh
			continue
		}
		since, ok := drainingSince(v, b)
		if !ok || !v.in.Spec.on() {
			if r, had := records[b]; had {
				r.Deadline = nil
				records[b] = r
			}
			continue
		}
		rec := v.drain(b)
		if rec.DrainingSince == nil || !rec.DrainingSince.Equal(since) {
			// A new drain: counts start again; the runs acted on are
			// still remembered.
			seen := now.Truncate(time.Second)
			rec = Record{BuildID: b, StoppedRuns: rec.StoppedRuns, SignalledRuns: rec.SignalledRuns, DrainingSince: &since, SeenAt: &seen}
		}
		deadline, hasDeadline := drainDeadline(v, rec)
		rec.Deadline = nil
		if hasDeadline {
			rec.Deadline = &deadline
			p.afterDeadline(now, deadline)
		}
		if l, listed := v.listing(b); listed {
			before := d.budget
			rec = d.version(v, p, rec, l)
			if d.budget < before && rec.Pending > 0 {
				p.after(ActionInterval) // the next pass may act again then
			}
		}
		records[b] = rec
		if _, next := listDue(withRecord(v, rec), b); !next.IsZero() {
			p.afterDeadline(now, next)
		}
	}
	return records
}

// drainPass is what one pass may still do: the runs left in its budget,
// and the runs already given work (op and run ID), each run once per op
// even if two listings show it.
type drainPass struct {
	budget int
	taken  map[string]bool
}

// version plans the work on one listed version and returns its record.
func (d *drainPass) version(v *view, p *plan, rec Record, l Listing) Record {
	now := v.now()
	since := *rec.DrainingSince
	prevOverdue := rec.Overdue
	rec.ListedAt, rec.PinnedWorkflows, rec.Overdue, rec.Pending = &now, l.Count, 0, 0
	overdue := rec.Deadline != nil && !now.Before(*rec.Deadline)
	if overdue {
		rec.Overdue = l.Count
	}
	spec := v.in.Spec
	drained := fmt.Sprintf("version %s has been draining for %s", l.BuildID, now.Sub(since).Round(time.Second))
	switch {
	case overdue && spec.Action == v1alpha1.DrainDryRun:
		if l.Count > 0 && l.Count != prevOverdue {
			p.event(EventDrainDeadlinePassed, fmt.Sprintf("%d pinned workflows are still open on version %s past spec.sunset.maxDrainDuration (%s): %s; drainAction DryRun only reports them",
				l.Count, l.BuildID, spec.MaxDuration, drained))
		}
	case overdue && stops(v):
		op, verb := OpCancel, "requesting cancellation of"
		if spec.Action == v1alpha1.DrainTerminate {
			op, verb = OpTerminate, "terminating"
		}
		runs := d.pick(l, op, rec.StoppedRuns, &rec)
		if len(runs) == 0 {
			return rec
		}
		reason := fmt.Sprintf("rainbow: version %s of worker deployment %s has been draining for %s, longer than spec.sunset.maxDrainDuration (%s) of TemporalWorkerDeployment %s/%s",
			l.BuildID, v.in.DeploymentName, now.Sub(since).Round(time.Second), spec.MaxDuration, v.in.Namespace, v.in.Name)
		p.res.Work = append(p.res.Work, Work{BuildID: l.BuildID, Op: op, Reason: reason, Runs: runs})
		p.event(drainEvent[op], fmt.Sprintf("%s %d of the %d pinned workflows open on version %s: %s, longer than spec.sunset.maxDrainDuration (%s)",
			verb, len(runs), l.Count, l.BuildID, drained, spec.MaxDuration))
	}
	if spec.Signal == "" || (overdue && stops(v)) {
		return rec
	}
	runs := d.pick(l, OpSignal, rec.SignalledRuns, &rec)
	if len(runs) == 0 {
		return rec
	}
	p.res.Work = append(p.res.Work, Work{BuildID: l.BuildID, Op: OpSignal, Signal: spec.Signal, Runs: runs})
	p.event(drainEvent[OpSignal], fmt.Sprintf("signalling %q to %d of the %d pinned workflows open on version %s, so that they continue as new on the current version",
		spec.Signal, len(runs), l.Count, l.BuildID))
	return rec
}

var drainEvent = map[Op]string{
	OpCancel:    EventCancelPinned,
	OpTerminate: EventTerminatePinned,
	OpSignal:    EventSignalPinned,
}

// pick takes, within the budget, the runs of the listing that op has not
// been done to (their keys are not in done, and this pass has not given
// them op yet), and adds those left to rec.Pending: the other such runs of
// the page, and the runs past the page when none of the page was done
// before. (Past a full page of runs done before that ignore the
// cancellation or the signal and stay open, nothing is seen.)
func (d *drainPass) pick(l Listing, op Op, done []string, rec *Record) []Run {
	var picked []Run
	handled := false
	for _, r := range l.Runs {
		key := string(op) + "/" + r.RunID
		switch {
		case r.RunID == "" || d.taken[key]:
		case slices.Contains(done, RunKey(r.RunID)):
			handled = true
		case d.budget > 0:
			picked = append(picked, r)
			d.taken[key] = true
			d.budget--
		default:
			rec.Pending++
		}
	}
	if !handled {
		rec.Pending += max(0, l.Count-len(l.Runs))
	}
	return picked
}

// withRecord is v with build's record replaced, to compute the next
// listing from this pass's.
func withRecord(v *view, rec Record) *view {
	in := v.in
	in.Records = append([]Record{rec}, slices.DeleteFunc(slices.Clone(in.Records), func(r Record) bool { return r.BuildID == rec.BuildID })...)
	c := *v
	c.in = in
	return &c
}

// Kept are the records from status, unchanged (while deleting, or while
// Temporal's state is unknown), by build ID.
func Kept(records []Record) map[string]Record {
	out := map[string]Record{}
	for _, r := range records {
		if _, dup := out[r.BuildID]; !dup {
			out[r.BuildID] = r
		}
	}
	return out
}
