package planner

import (
	"fmt"
	"time"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
)

// zeroedByOthers: the Deployment is at zero replicas and the controller did
// not put it there (no ScaledDownAt): an autoscaler or a person did. That
// says nothing about the version's workflows; only Temporal's drainage
// does, so such a version is never taken for drained.
func zeroedByOthers(d Deployment) bool {
	return d.Replicas == 0 && d.ScaledDownAt == nil
}

// stranded: a version someone else scaled to zero has work waiting for it.
// Temporal may hand it tasks (it is current, ramping, draining, or of
// unknown status) and tasks wait in its task queues; a backlog not read
// counts as waiting. With no task waiting it may stay at zero: that is an
// autoscaler's scale-to-zero, and the first task brings it back (KEDA
// scales from zero by itself, and so does this rule once the task shows in
// the backlog), so the two never pull the other way. A version on another
// Temporal server is left alone: its backlog cannot be read here.
func (v *view) stranded(d Deployment) bool {
	if !zeroedByOthers(d) || !v.known() || v.onOtherServer(d) || !v.getsWork(d.BuildID) {
		return false
	}
	b := v.tvs[d.BuildID].Backlog
	return b == nil || *b > 0
}

// ReplicasAutoscaled: an autoscaler owns the versions' replicas (no
// spec.replicas, or an owned resource attaches one to every version), so
// their backlog is what they may be scaled on.
func ReplicasAutoscaled(in Input) bool { return newView(in).specReplicas() == nil }

// BacklogsToRead are the versions whose backlog Plan needs: those someone
// else scaled to zero that Temporal may hand work (see stranded). The
// caller fills TemporalVersion.Backlog for them; for the others it may
// leave it nil.
func BacklogsToRead(in Input) []string {
	v := newView(in)
	if !v.known() {
		return nil
	}
	var out []string
	for _, b := range v.builds {
		d, ok := v.deps[b]
		if _, registered := v.tvs[b]; ok && registered && zeroedByOthers(d) && !v.onOtherServer(d) && v.getsWork(b) {
			out = append(out, b)
		}
	}
	return out
}

// revive gives a stranded version one worker, for its autoscaler (if any)
// to take over from: an HPA does nothing while its target has no replicas.
// Status records the revival once the scale is written.
func revive(v *view, p *plan, d Deployment) {
	const replicas = 1
	why := fmt.Sprintf("it was scaled to zero by someone else (an autoscaler or a person) while Temporal reports it %s and %s",
		v.status(d.BuildID), waiting(v, d.BuildID))
	p.scale(d, replicas, ScaleRevive, EventScale, fmt.Sprintf("scaling Deployment %s of version %s back up to %d replica: %s", d.Name, d.BuildID, replicas, why))
	rev := &Revival{At: v.now(), FromReplicas: d.Replicas, Replicas: replicas, Status: v.status(d.BuildID), Message: why}
	if b := v.tvs[d.BuildID].Backlog; b != nil {
		n := *b
		rev.Backlog = &n
	}
	p.res.Scale[len(p.res.Scale)-1].Revival = rev
	p.after(requeueWatch)
}

// waiting says what waits for a stranded version.
func waiting(v *view, build string) string {
	b := v.tvs[build].Backlog
	if b == nil {
		return "its backlog could not be read, so tasks may wait for it"
	}
	if v.status(build) == v1alpha1.VersionDraining {
		return fmt.Sprintf("%d task(s) of its pinned workflows wait in its task queues", *b)
	}
	return fmt.Sprintf("%d task(s) wait in its task queues", *b)
}

// Revival is a revived version's record for status (the executor counts
// the revivals).
type Revival struct {
	At time.Time
	// FromReplicas is the Deployment's replicas found (someone else's zero).
	FromReplicas int32
	Replicas     int32
	// Status is the version's status in Temporal.
	Status v1alpha1.VersionStatus
	// Backlog is the tasks that waited, nil when not read.
	Backlog *int64
	// Message says why.
	Message string
}
