package planner

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rainbow-deploy/rainbow/internal/ownedresource"
)

// hpa is an owned HPA with the scaleTargetRef sentinel.
func hpa() OwnedResource {
	return OwnedResource{Name: "hpa", Generation: 1, Adopted: true, Finalized: true, Object: map[string]any{
		"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
		"spec": map[string]any{"scaleTargetRef": nil, "minReplicas": int64(2), "maxReplicas": int64(5)},
	}}
}

// pdb is an owned PDB with the matchLabels sentinel.
func pdb() OwnedResource {
	return OwnedResource{Name: "pdb", Generation: 1, Adopted: true, Finalized: true, Object: map[string]any{
		"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
		"spec": map[string]any{"minAvailable": int64(1), "selector": map[string]any{"matchLabels": nil}},
	}}
}

// ownedBase is base() with Deployment UIDs, which copies need.
func ownedBase(mods ...func(*Input)) Input {
	in := with(base(), func(in *Input) {
		in.Namespace, in.Name, in.TemporalNamespace = "default", "worker", "orders"
		for i := range in.Deployments {
			in.Deployments[i].UID = "uid-" + in.Deployments[i].BuildID
		}
	})
	return with(in, mods...)
}

// applied records the copy of or for build as applied at t0+d from the
// plan of the same input.
func applied(in Input, or OwnedResource, build string, d time.Duration) OwnedCopy {
	for _, w := range Plan(with(in, func(in *Input) { in.OwnedResources = []OwnedResource{or} })).OwnedResources {
		for _, a := range w.Apply {
			if a.Copy.BuildID == build {
				c := a.Copy
				c.Applied, c.AppliedAt = true, t0.Add(d)
				return c
			}
		}
	}
	panic("no copy of " + build)
}

// ownedActions lists the plan's owned-resource work and status compactly.
func ownedActions(res Result) []string {
	var out []string
	for _, w := range res.OwnedResources {
		if w.Adopt {
			out = append(out, "adopt "+w.Name)
		}
		for _, c := range w.Delete {
			out = append(out, fmt.Sprintf("delete %s %s %s", w.Name, c.BuildID, c.Kind))
		}
		for _, a := range w.Apply {
			out = append(out, fmt.Sprintf("apply %s %s %s", w.Name, a.Copy.BuildID, a.Copy.Kind))
		}
		if w.RemoveFinalizer {
			out = append(out, "finalize "+w.Name)
		}
	}
	for _, st := range res.OwnedResourceStatus {
		for _, v := range st.Versions {
			s := fmt.Sprintf("status %s %s", st.Name, v.Copy.BuildID)
			switch {
			case v.Error != "":
				s += " error: " + v.Error[:min(len(v.Error), 18)]
			case v.Deleting:
				s += " deleting"
			}
			out = append(out, s)
		}
	}
	return out
}

func TestOwnedResources(t *testing.T) {
	withCopies := func(or OwnedResource, copies ...OwnedCopy) OwnedResource {
		or.Copies = copies
		return or
	}
	badTemplate := hpa()
	badTemplate.Name = "bad"
	badTemplate.Object = map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "data": map[string]any{"x": "{{ .Nope }}"}}

	cases := map[string]struct {
		in   Input
		want []string
	}{
		"none: nothing to do": {ownedBase(), nil},
		"a new one is adopted and copied to every version": {
			ownedBase(func(in *Input) {
				o := hpa()
				o.Adopted, o.Finalized = false, false
				in.OwnedResources = []OwnedResource{o}
			}),
			[]string{"adopt hpa", "apply hpa v1 HorizontalPodAutoscaler", "apply hpa v2 HorizontalPodAutoscaler", "status hpa v1", "status hpa v2"},
		},
		"up-to-date copies are left alone": {
			ownedBase(func(in *Input) {
				in.OwnedResources = []OwnedResource{withCopies(hpa(), applied(*in, hpa(), "v1", -time.Minute), applied(*in, hpa(), "v2", -time.Minute))}
			}),
			[]string{"status hpa v1", "status hpa v2"},
		},
		"a copy applied more than the resync period ago is applied again": {
			ownedBase(func(in *Input) {
				in.OwnedResources = []OwnedResource{withCopies(hpa(), applied(*in, hpa(), "v1", -11*time.Minute), applied(*in, hpa(), "v2", -time.Minute))}
			}),
			[]string{"apply hpa v1 HorizontalPodAutoscaler", "status hpa v1", "status hpa v2"},
		},
		"a new generation is applied to every version": {
			ownedBase(func(in *Input) {
				o := withCopies(hpa(), applied(*in, hpa(), "v1", -time.Minute), applied(*in, hpa(), "v2", -time.Minute))
				o.Generation = 2
				in.OwnedResources = []OwnedResource{o}
			}),
			[]string{"apply hpa v1 HorizontalPodAutoscaler", "apply hpa v2 HorizontalPodAutoscaler", "status hpa v1", "status hpa v2"},
		},
		"a failed apply is retried": {
			ownedBase(func(in *Input) {
				c := applied(*in, hpa(), "v1", -time.Minute)
				c.Applied = false
				in.OwnedResources = []OwnedResource{withCopies(hpa(), c, applied(*in, hpa(), "v2", -time.Minute))}
			}),
			[]string{"apply hpa v1 HorizontalPodAutoscaler", "status hpa v1", "status hpa v2"},
		},
		"a sunset version's copy is deleted": {
			ownedBase(func(in *Input) {
				c1, c2 := applied(*in, hpa(), "v1", -time.Minute), applied(*in, hpa(), "v2", -time.Minute)
				setDep(in, Deployment{BuildID: "v1", Name: "worker-v1", UID: "uid-v1", ScaledDownAt: at(-time.Minute)})
				in.OwnedResources = []OwnedResource{withCopies(hpa(), c1, c2)}
			}),
			[]string{"delete hpa v1 HorizontalPodAutoscaler", "status hpa v1 deleting", "status hpa v2"},
		},
		"a version whose Deployment is gone loses its copy": {
			ownedBase(func(in *Input) {
				c0 := applied(*in, hpa(), "v1", -time.Minute)
				c0.BuildID = "v0"
				in.OwnedResources = []OwnedResource{withCopies(hpa(), c0, applied(*in, hpa(), "v1", -time.Minute), applied(*in, hpa(), "v2", -time.Minute))}
			}),
			[]string{"delete hpa v0 HorizontalPodAutoscaler", "status hpa v0 deleting", "status hpa v1", "status hpa v2"},
		},
		"an autoscaler that scaled to zero keeps its copy": {
			ownedBase(func(in *Input) {
				c1, c2 := applied(*in, hpa(), "v1", -time.Minute), applied(*in, hpa(), "v2", -time.Minute)
				setDep(in, Deployment{BuildID: "v1", Name: "worker-v1", UID: "uid-v1"})
				in.OwnedResources = []OwnedResource{withCopies(hpa(), c1, c2)}
			}),
			[]string{"status hpa v1", "status hpa v2"},
		},
		"a new kind replaces the old copy": {
			ownedBase(func(in *Input) {
				in.OwnedResources = []OwnedResource{withCopies(hpa(), applied(*in, pdb(), "v1", -time.Minute), applied(*in, pdb(), "v2", -time.Minute))}
			}),
			[]string{"delete hpa v1 PodDisruptionBudget", "delete hpa v2 PodDisruptionBudget",
				"apply hpa v1 HorizontalPodAutoscaler", "apply hpa v2 HorizontalPodAutoscaler", "status hpa v1", "status hpa v2"},
		},
		"a template error is reported per version and keeps the previous copies": {
			ownedBase(func(in *Input) {
				prev := applied(*in, pdb(), "v1", -time.Minute)
				o := withCopies(badTemplate, prev)
				in.OwnedResources = []OwnedResource{o}
			}),
			[]string{"status bad v1 error: spec.object.data.x", "status bad v2 error: spec.object.data.x"},
		},
		"one bad owned resource does not stop another": {
			ownedBase(func(in *Input) { in.OwnedResources = []OwnedResource{badTemplate, pdb()} }),
			[]string{"apply pdb v1 PodDisruptionBudget", "apply pdb v2 PodDisruptionBudget",
				"status bad v1 error: spec.object.data.x", "status bad v2 error: spec.object.data.x",
				"status pdb v1", "status pdb v2"},
		},
		"spec.object that is no JSON object is reported": {
			ownedBase(func(in *Input) { o := pdb(); o.Object = nil; in.OwnedResources = []OwnedResource{o} }),
			[]string{"status pdb v1 error: spec.object is not", "status pdb v2 error: spec.object is not"},
		},
		"a deleted owned resource deletes its copies, then lets go": {
			ownedBase(func(in *Input) {
				o := withCopies(hpa(), applied(*in, hpa(), "v1", -time.Minute), OwnedCopy{BuildID: "v2"})
				o.Deleting = true
				in.OwnedResources = []OwnedResource{o}
			}),
			[]string{"delete hpa v1 HorizontalPodAutoscaler", "finalize hpa"},
		},
		"a deleted owned resource without our finalizer: nothing": {
			ownedBase(func(in *Input) {
				o := hpa()
				o.Deleting, o.Finalized = true, false
				in.OwnedResources = []OwnedResource{o}
			}),
			nil,
		},
		"copies do not wait for Temporal": {
			ownedBase(func(in *Input) { in.Temporal = nil; in.OwnedResources = []OwnedResource{pdb()} }),
			[]string{"apply pdb v1 PodDisruptionBudget", "apply pdb v2 PodDisruptionBudget", "status pdb v1", "status pdb v2"},
		},
		"a Deployment not yet created gets its copy once it exists": {
			ownedBase(func(in *Input) { dropDep(in, "v2"); in.OwnedResources = []OwnedResource{pdb()} }),
			[]string{"apply pdb v1 PodDisruptionBudget", "status pdb v1"},
		},
		"while the TWD is deleted, copies still follow their versions": {
			ownedBase(func(in *Input) {
				in.Deletion = &Deletion{RequestedAt: t0, Policy: "WaitForDrain"}
				in.OwnedResources = []OwnedResource{pdb()}
			}),
			[]string{"apply pdb v1 PodDisruptionBudget", "apply pdb v2 PodDisruptionBudget", "status pdb v1", "status pdb v2"},
		},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			got := ownedActions(Plan(c.in))
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("got\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(c.want, "\n  "))
			}
		})
	}
}

// TestOwnedCopyContents: a copy is the rendered object, named, labelled
// and owned by the version's Deployment, with the sentinels filled in.
func TestOwnedCopyContents(t *testing.T) {
	res := Plan(ownedBase(func(in *Input) { in.OwnedResources = []OwnedResource{hpa()} }))
	a := res.OwnedResources[0].Apply[1]
	spec := a.Object["spec"].(map[string]any)
	if ref := spec["scaleTargetRef"].(map[string]any); ref["name"] != "worker-v2" || ref["kind"] != "Deployment" {
		t.Errorf("scaleTargetRef = %v, want the Deployment worker-v2", ref)
	}
	meta := a.Object["metadata"].(map[string]any)
	if meta["name"] != ownedresource.Name("worker", "hpa", "v2") || meta["name"] != a.Copy.Name || meta["namespace"] != "default" {
		t.Errorf("metadata = %v, copy = %+v", meta, a.Copy)
	}
	owners := meta["ownerReferences"].([]any)
	if len(owners) != 1 || owners[0].(map[string]any)["uid"] != "uid-v2" {
		t.Errorf("ownerReferences = %v, want the Deployment of v2", owners)
	}
	if a.Copy.Generation != 1 || a.Copy.Hash == "" || a.Copy.Applied {
		t.Errorf("copy = %+v, want generation 1, a hash, not yet applied", a.Copy)
	}
}

// TestOwnedResync: an up-to-date copy asks for a pass when its resync is due.
func TestOwnedResync(t *testing.T) {
	in := ownedBase(rolledOut, func(in *Input) { in.Spec.Replicas = nil })
	in.OwnedResources = []OwnedResource{{Name: "pdb", Generation: 1, Adopted: true, Finalized: true, Object: pdb().Object,
		Copies: []OwnedCopy{applied(in, pdb(), "v1", -9*time.Minute-30*time.Second), applied(in, pdb(), "v2", -time.Minute)}}}
	if got := Plan(in).RequeueAfter; got != 30*time.Second {
		t.Errorf("RequeueAfter = %s, want 30s (the resync of v1's copy)", got)
	}
}

// TestAutoscaledReplicas: an owned autoscaler takes the replicas of the
// versions; spec.replicas only sizes a new Deployment.
func TestAutoscaledReplicas(t *testing.T) {
	scaledByHPA := func(in *Input) {
		setDep(in, Deployment{BuildID: "v2", Name: "worker-v2", UID: "uid-v2", Replicas: 5, Available: true})
	}
	if got := Plan(ownedBase(scaledByHPA)).Scale; len(got) != 1 || got[0].Replicas != 3 {
		t.Fatalf("without an autoscaler: Scale = %+v, want v2 back to spec.replicas 3", got)
	}
	if got := Plan(ownedBase(scaledByHPA, func(in *Input) { in.OwnedResources = []OwnedResource{hpa()} })).Scale; len(got) != 0 {
		t.Errorf("with an owned HPA: Scale = %+v, want none: the HPA owns replicas", got)
	}
	if got := Plan(ownedBase(scaledByHPA, func(in *Input) { in.OwnedResources = []OwnedResource{pdb()} })).Scale; len(got) != 1 {
		t.Errorf("with an owned PDB: Scale = %+v, want v2 back to spec.replicas", got)
	}
	// The other forms of the sentinel: {}, and none at all in an HPA, as
	// kubectl apply without --server-side leaves `scaleTargetRef: null`.
	for name, ref := range map[string]any{"{}": map[string]any{}, "dropped": "dropped"} {
		h := hpa()
		spec := h.Object["spec"].(map[string]any)
		if ref == "dropped" {
			delete(spec, "scaleTargetRef")
		} else {
			spec["scaleTargetRef"] = ref
		}
		if got := Plan(ownedBase(scaledByHPA, func(in *Input) { in.OwnedResources = []OwnedResource{h} })).Scale; len(got) != 0 {
			t.Errorf("with an owned HPA whose scaleTargetRef is %s: Scale = %+v, want none: the HPA owns replicas", name, got)
		}
	}
	create := Plan(ownedBase(func(in *Input) { dropDep(in, "v2"); in.OwnedResources = []OwnedResource{hpa()} })).CreateDeployment
	if create == nil || create.Replicas != 3 {
		t.Errorf("CreateDeployment = %+v, want spec.replicas 3 to start from", create)
	}
	restore := Plan(ownedBase(func(in *Input) {
		setDep(in, Deployment{BuildID: "v2", Name: "worker-v2", UID: "uid-v2", ScaledDownAt: at(-time.Hour)})
		in.OwnedResources = []OwnedResource{hpa()}
	})).Scale
	if len(restore) != 1 || restore[0].Replicas != 3 || restore[0].Reason != ScaleRestore {
		t.Errorf("Scale = %+v, want a sunset target restored to spec.replicas 3", restore)
	}
}
