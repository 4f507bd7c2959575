package planner

import (
	"fmt"
	"strings"
	"time"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
)

// Claimant is a TWD that names a Temporal worker deployment, as the API
// server describes it: its creation time and UID are set by the API server
// alone, so whoever writes a TWD cannot make it look older than another.
type Claimant struct {
	Namespace, Name string
	UID             string
	Created         time.Time
	// Address is the host:port of its connection; "" when the connection
	// cannot be read, so it may be any server.
	Address string
}

func (c Claimant) String() string { return c.Namespace + "/" + c.Name }

// ClaimHolder is the TWD that holds the Temporal worker deployment self
// names, nil if self holds it. rivals name the same Temporal namespace and
// worker deployment name; those on another server are no rivals. The
// oldest holds it (creation time, then UID), so every TWD of a claim
// reaches the same answer, whichever is reconciled first: of two that
// claim the same, the younger always yields.
func ClaimHolder(self Claimant, rivals []Claimant) *Claimant {
	var holder *Claimant
	for i := range rivals {
		r := rivals[i]
		if r.UID == self.UID || !SameServer(self.Address, r.Address) || !olderThan(r, self) {
			continue
		}
		if holder == nil || olderThan(r, *holder) {
			holder = &r
		}
	}
	return holder
}

func olderThan(a, b Claimant) bool {
	if !a.Created.Equal(b.Created) {
		return a.Created.Before(b.Created)
	}
	return a.UID < b.UID
}

// SameServer: two connection addresses may name one server. An unknown
// address ("") may be any; two addresses of one server (an IP and a DNS
// name) are not recognised as such.
func SameServer(a, b string) bool {
	return a == "" || b == "" || strings.EqualFold(a, b)
}

// Claimed says which TWD holds the worker deployment this one names.
type Claimed struct {
	// Holder is the holding TWD's "namespace/name".
	Holder string
	// Address and TemporalNamespace are where the claim is.
	Address, TemporalNamespace string
}

// ClaimedMessage says who holds the worker deployment and what to change.
func ClaimedMessage(deploymentName string, c Claimed) string {
	where := "at " + c.Address
	if c.Address == "" {
		where = "(on any server: this TemporalWorkerDeployment's connection cannot be read)"
	}
	return fmt.Sprintf("Temporal worker deployment %q in namespace %s %s belongs to TemporalWorkerDeployment %s, created earlier; "+
		"this one changes nothing in Temporal and runs no workers: set spec.workerOptions.deploymentName to a name of its own, or delete this TemporalWorkerDeployment",
		deploymentName, c.TemporalNamespace, where, c.Holder)
}

// planClaimed: a TWD whose worker deployment another TWD holds does
// nothing, in Temporal or Kubernetes, and deleting it leaves Temporal to
// the holder. Its own Deployments (made before an older TWD came to name
// the same) are left as they are.
func planClaimed(v *view, p *plan) progress {
	c := *v.in.ClaimedBy
	msg := ClaimedMessage(v.deploymentName(), c)
	if v.in.Deletion != nil && len(v.deps) > 0 {
		var names []string
		for _, b := range v.builds {
			if d, ok := v.deps[b]; ok {
				names = append(names, d.Name)
			}
		}
		p.after(requeueClaimed)
		return blockedBecause(v1alpha1.ReasonWorkerDeploymentClaimed, fmt.Sprintf("deletion waits: the workers of Deployments %v poll Temporal worker deployment %s, "+
			"which belongs to TemporalWorkerDeployment %s, and may run its workflows; delete those Deployments once that is safe, and the finalizer goes", names, v.deploymentName(), c.Holder))
	}
	if v.in.Deletion != nil {
		p.res.RemoveFinalizer = true
		p.event(EventNormal, v1alpha1.ReasonDeleting, fmt.Sprintf("leaving worker deployment %s in Temporal to TemporalWorkerDeployment %s", v.deploymentName(), c.Holder))
		return movingBecause(v1alpha1.ReasonDeleting, "removing the finalizer: Temporal worker deployment "+v.deploymentName()+" belongs to "+c.Holder)
	}
	p.after(requeueClaimed)
	return blockedBecause(v1alpha1.ReasonWorkerDeploymentClaimed, msg)
}
