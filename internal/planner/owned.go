package planner

import (
	"k8s.io/apimachinery/pkg/labels"

	"github.com/rainbow-deploy/rainbow/internal/planner/owned"
)

// The owned-resource rules live in package owned; these are the names
// Input, Result and the executor use for its types.
type (
	OwnedResource       = owned.Resource
	OwnedCopy           = owned.Copy
	OwnedResourceWork   = owned.Work
	OwnedApply          = owned.Apply
	OwnedResourceStatus = owned.Status
	OwnedVersion        = owned.Version
	ObservedObject      = owned.ObservedObject
)

// ownedInput is what the owned-resource rules read of the input.
func ownedInput(in Input) owned.Input {
	out := owned.Input{
		Now: in.Now, Namespace: in.Namespace, Name: in.Name, TemporalNamespace: in.TemporalNamespace,
		DeploymentName: in.DeploymentName, Resources: in.OwnedResources, BannedKinds: in.BannedKinds,
	}
	for _, d := range in.Deployments {
		out.Deployments = append(out.Deployments, owned.Deployment{BuildID: d.BuildID, Name: d.Name, UID: d.UID, Running: Running(d), Selector: selectorLabels(d.Selector)})
	}
	return out
}

// planOwned merges the owned resources' plan into p.
func planOwned(v *view, p *plan) {
	r := owned.Plan(ownedInput(v.in))
	p.res.OwnedResources = append(p.res.OwnedResources, r.Work...)
	p.res.OwnedResourceStatus = append(p.res.OwnedResourceStatus, r.Status...)
	p.after(r.RequeueAfter)
}

// DeleteRefusal says why the object a recorded copy of owned resource
// ownedName names may not be deleted, or nil if it may (owned.DeleteRefusal).
func DeleteRefusal(in Input, ownedName string, c OwnedCopy, o ObservedObject) error {
	return owned.DeleteRefusal(ownedInput(in), ownedName, c, o)
}

// autoscaled: an owned resource puts an autoscaler on every version
// (owned.Autoscaled).
func (v *view) autoscaled() bool { return owned.Autoscaled(v.in.OwnedResources) }

// selectorLabels parses Deployment.Selector; nil when it is empty (ours).
func selectorLabels(s string) map[string]string {
	if s == "" {
		return nil
	}
	m, err := labels.ConvertSelectorToLabelsMap(s)
	if err != nil {
		return nil
	}
	return m
}
