package planner

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/rainbow-deploy/rainbow/internal/fuzzsrc"
	"github.com/rainbow-deploy/rainbow/internal/ownedresource"
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
	objects := []map[string]any{nil, hpa().Object, pdb().Object, dropped,
		{"apiVersion": "v1", "kind": "ConfigMap", "data": map[string]any{"b": `{{ if eq .BuildID "b" }}{{ .Nope }}{{ end }}`}},
		// Admitted while the webhook was absent.
		{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding"},
		{"apiVersion": "apps/v1", "kind": "Deployment"},
		{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"namespace": "other"}}}
	in.BannedKinds = fuzzsrc.Pick(s, nil, []string{"Deployment"}, []string{"ConfigMap"})
	for _, name := range []string{"h", "p"} {
		if !s.Bool() {
			continue
		}
		or := OwnedResource{Name: name, Generation: int64(1 + s.Intn(2)), Object: fuzzsrc.Pick(s, objects...),
			Deleting: s.Intn(4) == 0, Finalized: s.Bool(), ClusterScoped: s.Intn(4) == 0}
		or.Adopted = or.Finalized && s.Bool()
		for _, b := range append(fuzzBuilds, "forged") {
			if s.Bool() {
				// Anyone who may write status may record anything.
				kind := fuzzsrc.Pick(s, "autoscaling/v2 HorizontalPodAutoscaler", "policy/v1 PodDisruptionBudget", "apps/v1 Deployment",
					"v1 ConfigMap", "rbac.authorization.k8s.io/v1 ClusterRole")
				apiVersion, kind, _ := strings.Cut(kind, " ")
				or.Copies = append(or.Copies, OwnedCopy{
					BuildID: b, APIVersion: apiVersion, Kind: kind,
					Name: fuzzsrc.Pick(s, "", ownedresource.Name("w", name, b), "old"), Applied: s.Bool(), Generation: int64(1 + s.Intn(2)),
					Hash: fuzzsrc.Pick(s, "", "x"), AppliedAt: fuzzsrc.Pick(s, time.Time{}, t0.Add(-time.Minute), t0.Add(-time.Hour)),
				})
			}
		}
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
