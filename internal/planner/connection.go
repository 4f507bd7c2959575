package planner

import (
	"fmt"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
)

// onOtherServer: the Deployment's workers use another Temporal server than
// the connection names now (spec.workerOptions.connectionRef or the
// connection's hostPort changed to another server). Its workflows live on
// that server, which this controller no longer reads, so the version's
// drainage there is unknown. Two namespace IDs tell servers apart; without
// both, only an unchanged address proves the same server. An unresolved
// connection proves nothing and moves nothing.
func (v *view) onOtherServer(d Deployment) bool {
	cur := v.in.Server
	switch {
	case cur.Address == "":
		return false
	case d.Server.NamespaceID != "" && cur.NamespaceID != "":
		return d.Server.NamespaceID != cur.NamespaceID
	}
	return d.Server.Address != cur.Address
}

// connected: the TWD's connection resolved, so the controller knows what
// to give new or updated pods. Without it no Deployment is created or
// written (the connection's problem is what status reports).
func (v *view) connected() bool { return v.in.Server.Address != "" }

// targetOnOtherServer blocks a rollout whose target runs on the old server:
// moving its workers would strand the workflows pinned to it there.
func targetOnOtherServer(v *view, p *plan, dep Deployment) progress {
	msg := fmt.Sprintf("the workers of version %s (Deployment %s) use the Temporal server at %s, and the TemporalConnection now names %s, another server; "+
		"moving them would strand the workflows pinned to version %s on the old server, so they stay there. "+
		"Roll out a new version (change spec.template, or spec.workerOptions.customBuildID) to start workers on the new server, "+
		"then delete Deployment %s once its workflows on the old server are done",
		v.target, dep.Name, dep.Server.Address, v.in.Server.Address, v.target, dep.Name)
	p.event(EventWarning, v1alpha1.ReasonTemporalServerChanged, msg)
	p.after(requeueWatch)
	return blockedBecause(v1alpha1.ReasonTemporalServerChanged, msg)
}

// oldServerNote tells, on a complete rollout, which versions stay on the
// old server and what to do about them.
func oldServerNote(v *view) string {
	var old []string
	for _, b := range v.builds {
		if d, ok := v.deps[b]; ok && b != v.target && v.onOtherServer(d) {
			old = append(old, d.Name)
		}
	}
	if len(old) == 0 {
		return ""
	}
	return fmt.Sprintf("; Deployments %v use the previous Temporal server and keep their workers, since the controller cannot see "+
		"their workflows there: delete them once those are done", old)
}

// planSync brings each Deployment on the connection's server up to date
// with the connection and the spec's Deployment settings, and records the
// server's namespace ID on it. Deployments another action of this plan
// touches wait for the next pass, so two writes never race; those on
// another server are left alone.
func planSync(v *view, p *plan) {
	if !v.connected() {
		return
	}
	touched := map[string]bool{}
	if u := p.res.UpdateDeployment; u != nil {
		touched[u.BuildID] = true
	}
	for _, s := range p.res.Scale {
		touched[s.BuildID] = true
	}
	for _, d := range p.res.DeleteDeployments {
		touched[d.BuildID] = true
	}
	for _, b := range v.builds {
		d, ok := v.deps[b]
		if !ok || touched[b] || v.onOtherServer(d) {
			continue
		}
		record := v.in.Server.NamespaceID != "" && d.Server.NamespaceID != v.in.Server.NamespaceID
		if !d.ConnectionStale && !d.SettingsStale && !record {
			continue
		}
		p.res.SyncDeployments = append(p.res.SyncDeployments, SyncDeployment{Name: d.Name, BuildID: b, Roll: d.ConnectionStale})
		if d.ConnectionStale {
			p.event(EventNormal, EventSyncConnection, fmt.Sprintf("rolling Deployment %s of version %s to the changed TemporalConnection", d.Name, b))
			p.after(requeueWatch)
		}
	}
}

// Server identifies a Temporal server as the workers see it.
type Server struct {
	// Address is the host:port the workers are given.
	Address string
	// NamespaceID is the Temporal namespace's ID there, "" when unknown.
	// Two addresses of one server share it; two servers never do.
	NamespaceID string
}

// SyncDeployment re-applies the connection (address, credentials, the
// namespace ID annotation) and the spec's minReadySeconds and
// progressDeadlineSeconds to a version's Deployment. The build ID stays.
type SyncDeployment struct {
	Name    string
	BuildID string
	// Roll: the pod template changes, so its pods restart.
	Roll bool
}
