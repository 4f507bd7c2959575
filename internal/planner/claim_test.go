package planner

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
)

func TestClaimHolder(t *testing.T) {
	a := Claimant{Namespace: "team-a", Name: "w", UID: "uid-a", Created: t0, Address: "temporal:7233"}
	b := Claimant{Namespace: "team-b", Name: "w", UID: "uid-b", Created: t0.Add(time.Minute), Address: "temporal:7233"}
	with := func(c Claimant, f func(*Claimant)) Claimant { f(&c); return c }
	cases := map[string]struct {
		self   Claimant
		rivals []Claimant
		want   string // holder, "" for self
	}{
		"alone":                              {a, nil, ""},
		"itself in the list":                 {a, []Claimant{a}, ""},
		"older rival holds":                  {b, []Claimant{a}, "team-a/w"},
		"younger rival does not":             {a, []Claimant{b}, ""},
		"same second: lower UID holds":       {with(b, func(c *Claimant) { c.Created = t0 }), []Claimant{a}, "team-a/w"},
		"same second: higher UID yields":     {a, []Claimant{with(b, func(c *Claimant) { c.Created = t0 })}, ""},
		"older rival on another server":      {b, []Claimant{with(a, func(c *Claimant) { c.Address = "other:7233" })}, ""},
		"address case does not matter":       {b, []Claimant{with(a, func(c *Claimant) { c.Address = "TEMPORAL:7233" })}, "team-a/w"},
		"older rival, connection unreadable": {b, []Claimant{with(a, func(c *Claimant) { c.Address = "" })}, "team-a/w"},
		"own connection unreadable":          {with(b, func(c *Claimant) { c.Address = "" }), []Claimant{with(a, func(c *Claimant) { c.Address = "other:7233" })}, "team-a/w"},
		"the oldest of several": {with(b, func(c *Claimant) { c.Created = t0.Add(time.Hour) }),
			[]Claimant{with(b, func(c *Claimant) { c.Name, c.UID = "x", "uid-x" }), a}, "team-a/w"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := ""
			if h := ClaimHolder(tc.self, tc.rivals); h != nil {
				got = h.String()
			}
			if got != tc.want {
				t.Errorf("ClaimHolder = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestClaimHolderAgrees: of any two TWDs that name the same worker
// deployment on the same server, whatever the others, at most one holds
// it, and one holds it.
func TestClaimHolderAgrees(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for n := 0; n < 5000; n++ {
		var cs []Claimant
		for i := range 2 + rng.IntN(4) {
			cs = append(cs, Claimant{Namespace: "ns", Name: fmt.Sprint(i), UID: fmt.Sprintf("uid-%d", rng.IntN(5)),
				Created: t0.Add(time.Duration(rng.IntN(3)) * time.Second), Address: []string{"", "a:1", "A:1", "b:1"}[rng.IntN(4)]})
		}
		holds := func(c Claimant) bool { return ClaimHolder(c, cs) == nil }
		for i, x := range cs {
			for _, y := range cs[i+1:] {
				if x.UID != y.UID && SameServer(x.Address, y.Address) && holds(x) && holds(y) {
					t.Fatalf("both %+v and %+v hold the claim among %+v", x, y, cs)
				}
			}
		}
		if oldest := cs[0]; true {
			for _, c := range cs[1:] {
				if olderThan(c, oldest) {
					oldest = c
				}
			}
			if !holds(oldest) {
				t.Fatalf("the oldest %+v does not hold the claim among %+v", oldest, cs)
			}
		}
	}
}

func TestPlanClaimedActsOnNothing(t *testing.T) {
	claimed := func(in *Input) {
		in.ClaimedBy = &Claimed{Holder: "team-a/w", Address: "temporal:7233", TemporalNamespace: "default"}
	}
	in := with(base(), claimed)
	res := Plan(in)
	if res.Acts() {
		t.Errorf("a claimed TWD acts: %+v", res)
	}
	if res.Ready.Reason != v1alpha1.ReasonWorkerDeploymentClaimed || res.Progressing.Reason != v1alpha1.ReasonWorkerDeploymentClaimed ||
		res.State != StateBlocked {
		t.Errorf("conditions %+v %+v, state %s", res.Ready, res.Progressing, res.State)
	}
	for _, w := range []string{"team-a/w", "spec.workerOptions.deploymentName", "temporal:7233", "changes nothing in Temporal"} {
		if !strings.Contains(res.Ready.Message, w) {
			t.Errorf("message %q does not say %q", res.Ready.Message, w)
		}
	}
	if res.RequeueAfter <= 0 {
		t.Errorf("RequeueAfter %v", res.RequeueAfter)
	}

	del := with(base(), claimed, func(in *Input) {
		in.Deployments = nil
		in.Deletion = &Deletion{Object: "team-b/w", RequestedAt: t0, Policy: v1alpha1.DeletionWaitForDrain, StatusShowedVersions: true}
	})
	res = Plan(del)
	if !res.RemoveFinalizer || res.Routing != nil || len(res.DeleteTemporalVersions) > 0 || res.DeleteWorkerDeployment || len(res.DeleteDeployments) > 0 {
		t.Errorf("deleting a claimed TWD: %+v", res)
	}
	// Its own workers (made before an older TWD took the name) stay until
	// a person removes them: they may serve the holder's workflows.
	res = Plan(with(del, func(in *Input) { in.Deployments = []Deployment{running("v1")} }))
	if res.Acts() || !strings.Contains(res.Ready.Message, "worker-v1") {
		t.Errorf("deleting a claimed TWD with workers: acts %v, %+v", res.Acts(), res.Ready)
	}
}

// claimViolations: a TWD whose worker deployment another holds writes
// nothing to Temporal and changes nothing in Kubernetes; deleting it only
// removes its finalizer.
func claimViolations(in Input, r Result) []error {
	if in.ClaimedBy == nil {
		return nil
	}
	var errs []error
	if r.Routing != nil || r.BecomeManager || len(r.DeleteTemporalVersions) > 0 || r.DeleteWorkerDeployment || r.StartGate != nil ||
		r.CancelGate != nil || r.TerminateGate != nil || len(r.DrainWork) > 0 {
		errs = append(errs, fmt.Errorf("a claimed TWD writes to Temporal: %+v", r))
	}
	if r.CreateDeployment != nil || r.UpdateDeployment != nil || len(r.Scale) > 0 || len(r.DeleteDeployments) > 0 ||
		len(r.SyncDeployments) > 0 || len(r.OwnedResources) > 0 {
		errs = append(errs, fmt.Errorf("a claimed TWD changes Kubernetes objects: %+v", r))
	}
	if r.RemoveFinalizer != (in.Deletion != nil && len(in.Deployments) == 0) {
		errs = append(errs, fmt.Errorf("RemoveFinalizer %v while deleting %v with %d Deployments", r.RemoveFinalizer, in.Deletion != nil, len(in.Deployments)))
	}
	if r.Ready.Status != metav1.ConditionFalse || r.Ready.Reason == "" || r.Ready.Message == "" || r.RequeueAfter <= 0 {
		errs = append(errs, fmt.Errorf("a claimed TWD reports Ready %+v, requeue %v", r.Ready, r.RequeueAfter))
	}
	return errs
}
