package planner

import (
	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/internal/planner/drain"
)

// The drain rules live in package drain; these are the names Input,
// Result and the executor use for its types.
type (
	DrainSpec     = drain.Spec
	DrainRecord   = drain.Record
	DrainWork     = drain.Work
	DrainOp       = drain.Op
	PinnedListing = drain.Listing
	WorkflowRun   = drain.Run
	OwnDrainage   = drain.OwnDrainage
)

const (
	DrainOpCancel    = drain.OpCancel
	DrainOpTerminate = drain.OpTerminate
	DrainOpSignal    = drain.OpSignal
	PinnedPageSize   = drain.PinnedPageSize
)

// RunKey is how status remembers a run (drain.RunKey).
func RunKey(runID string) string { return drain.RunKey(runID) }

// drainInput is what the drain rules read of the view.
func (v *view) drainInput() drain.Input {
	in := drain.Input{
		Now: v.now(), Known: v.known(), Target: v.target, OtherManager: v.otherManager() != "",
		Spec: v.in.Spec.Drain, Records: v.in.Drains, Listings: v.in.Pinned,
		DeploymentName: v.deploymentName(), Namespace: v.in.Namespace, Name: v.in.Name,
	}
	for _, b := range v.builds {
		in.Versions = append(in.Versions, drain.Version{BuildID: b, Status: v.status(b), DrainingSince: v.tvs[b].DrainingSince})
	}
	return in
}

// planDrain merges the drain's plan into p and returns every version's
// drain record for status.
func planDrain(v *view, p *plan) map[string]DrainRecord {
	r := drain.Plan(v.drainInput())
	p.res.DrainWork = append(p.res.DrainWork, r.Work...)
	for _, e := range r.Events {
		p.event(EventNormal, e.Reason, e.Message)
	}
	p.after(r.RequeueAfter)
	return r.Records
}

// DrainVersionsToList names the draining versions whose open pinned
// workflows the caller lists this pass (into Input.Pinned), drain.ToList;
// none while the TWD is being deleted.
func DrainVersionsToList(in Input) []string {
	if in.Deletion != nil || in.Temporal == nil {
		return nil
	}
	return drain.ToList(newView(in).drainInput())
}

// summary is tv as the drain cross-check reads it.
func summary(tv TemporalVersion, t *TemporalState) drain.Summary {
	return drain.Summary{
		BuildID: tv.BuildID, Status: tv.Status, DrainingSince: tv.DrainingSince, Own: tv.OwnDrainage,
		Routed: tv.BuildID == t.CurrentBuildID || tv.BuildID == t.RampingBuildID,
	}
}

// DrainageToCrossCheck lists the versions to describe themselves because
// the summary has shown them draining for long (drain.ToCrossCheck).
func DrainageToCrossCheck(in Input) []string {
	t := in.Temporal
	if t == nil {
		return nil
	}
	var s []drain.Summary
	for _, tv := range t.Versions {
		s = append(s, summary(tv, t))
	}
	return drain.ToCrossCheck(in.Now, s)
}

// withOwnDrainage takes a version's own report of drained over the
// summary's draining (drain.OwnDrained).
func withOwnDrainage(tv TemporalVersion, t *TemporalState) TemporalVersion {
	if since, ok := drain.OwnDrained(summary(tv, t)); ok {
		tv.Status = v1alpha1.VersionDrained
		tv.DrainedSince = &since
	}
	return tv
}

// withDrain attaches the drain records to the versions of status.
func withDrain(vs []Version, records map[string]DrainRecord) []Version {
	for i := range vs {
		if r, ok := records[vs[i].BuildID]; ok {
			vs[i].Drain = &r
		}
	}
	return vs
}
