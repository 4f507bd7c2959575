package planner

import (
	"fmt"
	"slices"

	"github.com/rainbow-deploy/rainbow/internal/fuzzsrc"
	"github.com/rainbow-deploy/rainbow/internal/planner/owned/ownedtest"
)

// fuzzOwned adds owned resources, with recorded copies, to a fuzz input;
// Deployments get UIDs (some not yet).
func fuzzOwned(s *fuzzsrc.Source, in *Input) {
	in.Namespace, in.Name, in.TemporalNamespace = "ns", "w", "tns"
	for i := range in.Deployments {
		in.Deployments[i].UID = fuzzsrc.Pick(s, "", "uid-"+in.Deployments[i].BuildID, "uid-"+in.Deployments[i].BuildID)
	}
	// The HPA as kubectl apply without --server-side leaves it: no null.
	dropped := hpa().Object
	delete(dropped["spec"].(map[string]any), "scaleTargetRef")
	objects := append([]map[string]any{nil, hpa().Object, pdb().Object, dropped}, ownedtest.Hazards("b")...)
	in.BannedKinds = fuzzsrc.Pick(s, nil, []string{"Deployment"}, []string{"ConfigMap"})
	for _, name := range []string{"h", "p"} {
		if !s.Bool() {
			continue
		}
		or := OwnedResource{Name: name, Generation: int64(1 + s.Intn(2)), Object: fuzzsrc.Pick(s, objects...),
			Deleting: s.Intn(4) == 0, Finalized: s.Bool(), ClusterScoped: s.Intn(4) == 0}
		or.Adopted = or.Finalized && s.Bool()
		or.Copies = ownedtest.Copies(s, "w", name, fuzzBuilds, t0)
		in.OwnedResources = append(in.OwnedResources, or)
	}
}

// ownedViolations checks which versions Plan gives copies: those with
// running workers (a UID, and not scaled to zero at sunset), each listed
// in status. Package owned's fuzz invariants check the copies themselves,
// ApplyRefusal and DeleteRefusal.
func ownedViolations(in Input, r Result) []error {
	var errs []error
	running := map[string]bool{}
	for _, d := range in.Deployments {
		if _, seen := running[d.BuildID]; !seen {
			running[d.BuildID] = d.UID != "" && !(d.Replicas == 0 && d.ScaledDownAt != nil)
		}
	}
	for _, w := range r.OwnedResources {
		for _, a := range w.Apply {
			if !running[a.Copy.BuildID] {
				errs = append(errs, fmt.Errorf("%s: a copy is applied for %s, which has no running Deployment", w.Name, a.Copy.BuildID))
			}
		}
	}
	for _, st := range r.OwnedResourceStatus {
		for b, run := range running {
			if run && !slices.ContainsFunc(st.Versions, func(v OwnedVersion) bool { return v.Copy.BuildID == b }) {
				errs = append(errs, fmt.Errorf("%s: status misses running version %s", st.Name, b))
			}
		}
	}
	return errs
}
