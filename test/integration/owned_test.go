package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	policyv1 "k8s.io/api/policy/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/internal/controller/workerdeployment"
	"github.com/rainbow-deploy/rainbow/internal/ownedresource"
	"github.com/rainbow-deploy/rainbow/test/harness"
)

// TestOwnedResourcesFollowVersions applies examples/twor-hpa.yaml and
// examples/twor-pdb.yaml to a TWD without spec.replicas, with kubectl apply
// as people do (client-side: it drops the examples' nulls), and a third
// owned resource whose template fails for the second version only. Each
// version with running workers gets its HPA and PDB: the real HPA controller
// scales the version to the HPA's minReplicas (so scaleTargetRef names the
// right Deployment), and the disruption controller counts the version's
// pods (so matchLabels selects them). The bad template is reported for
// that build ID while the other version's copy applies. The controller
// and the HPA controller share the HPA without a write war, and the
// version's replicas stay the HPA's; the HPA's scaling never makes the TWD
// look unready. The old version's copies go at
// sunset; deleting an owned resource deletes its copies; deleting the TWD
// removes everything.
func TestOwnedResourcesFollowVersions(t *testing.T) {
	parallel(t)
	r := newRollout(env.NewTest(t), "owned")
	twd := r.Spec("v1")
	twd.Spec.Replicas = nil
	v1 := r.Create(twd)
	readySince := findCondition(r.WaitCurrent(5*time.Minute, v1), v1alpha1.ConditionReady).LastTransitionTime

	v2 := r.BuildIDOf("v2")
	hpa := r.ownedExample("twor-hpa.yaml")
	pdb := r.ownedExample("twor-pdb.yaml")
	flaky := r.ownedPDB("flaky", map[string]any{"annotations": map[string]any{
		"example.com/note": fmt.Sprintf(`{{ if eq .BuildID %q }}{{ index .BuildID 999 }}{{ end }}ok`, v2),
	}})
	r.applyOwned(hpa, harness.ClientSideApply)
	r.applyOwned(pdb, harness.ClientSideApply)
	if err := r.Env.Kube.Create(context.Background(), flaky); err != nil {
		t.Fatalf("create TemporalWorkerOwnedResource %s: %v", flaky.Name, err)
	}

	r.versionHasCopies(v1)
	r.Eventually(2*time.Minute, "the HPA scales "+v1+" to its minReplicas, 2", func() (bool, string) {
		d := r.deployment(v1)
		return ptr.Deref(d.Spec.Replicas, 0) == 2 && d.Status.AvailableReplicas == 2, deploymentState(d)
	})
	// The HPA's scale-up is no rollout: the TWD stayed Ready throughout.
	if c := findCondition(r.Get(), v1alpha1.ConditionReady); c.Status != metav1.ConditionTrue || !c.LastTransitionTime.Equal(&readySince) {
		t.Errorf("Ready changed while the HPA scaled %s: %+v, was True since %s", v1, c, readySince)
	}
	r.Eventually(time.Minute, "the PDB of "+v1+" counts its 2 pods", func() (bool, string) {
		p := r.pdbOf(pdb.Name, v1)
		return p != nil && p.Status.ExpectedPods == 2, fmt.Sprintf("%+v", p)
	})
	if p, want := r.pdbOf(flaky.Name, v1), r.deployment(v1).Spec.Selector.MatchLabels; p == nil || fmt.Sprint(p.Spec.Selector.MatchLabels) != fmt.Sprint(want) {
		t.Errorf("the PDB of %s with matchLabels {}: %+v, want it to select %v", v1, p, want)
	}
	for _, or := range []string{hpa.Name, pdb.Name, flaky.Name} {
		got := r.waitOwnedReady(or, metav1.ConditionTrue, v1alpha1.ReasonApplied)
		if !metav1.IsControlledBy(got, r.Get()) || !slices.Contains(got.Finalizers, v1alpha1.FinalizerOwnedResourceCleanup) {
			t.Fatalf("%s: owners %+v, finalizers %v: want the TWD as controller and the cleanup finalizer", or, got.OwnerReferences, got.Finalizers)
		}
	}

	// No write war: the controller owns the HPA's spec, the HPA controller
	// its status; passes of the TWD re-apply nothing and leave replicas.
	applied := r.owned(hpa.Name).Status.Versions[0].AppliedAt
	r.Update(func(t *v1alpha1.TemporalWorkerDeployment) {
		t.Spec.Sunset.DeleteDelay = &metav1.Duration{Duration: 4 * time.Second}
	})
	r.WaitCurrent(3*time.Minute, v1)
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(500 * time.Millisecond) {
		if got := ptr.Deref(r.deployment(v1).Spec.Replicas, 0); got != 2 {
			t.Fatalf("the replicas of %s went from the HPA's 2 to %d", v1, got)
		}
	}
	if got := r.owned(hpa.Name).Status.Versions[0].AppliedAt; !got.Equal(applied) {
		t.Errorf("the unchanged HPA was applied again (%v, then %v)", applied, got)
	}
	managers := map[string]string{}
	for _, f := range r.hpaOf(hpa.Name, v1).ManagedFields {
		managers[f.Manager+" "+f.Subresource] = string(f.Operation)
	}
	if managers[workerdeployment.FieldManager(hpa.Name)+" "] != "Apply" || managers["kube-controller-manager status"] == "" {
		t.Errorf("HPA managers: %v, want %s applying the object and kube-controller-manager writing status", managers, workerdeployment.FieldManager(hpa.Name))
	}

	// A second version: its copies, and the bad template only for it.
	r.SetImage("v2")
	r.WaitCurrent(3*time.Minute, v2)
	r.versionHasCopies(v2)
	got := r.waitOwnedReady(flaky.Name, metav1.ConditionFalse, v1alpha1.ReasonApplyFailed)
	for _, v := range got.Status.Versions {
		switch v.BuildID {
		case v1:
			if !v.Applied {
				t.Errorf("flaky's copy of %s: %+v, want applied", v1, v)
			}
		case v2:
			if v.Applied || !strings.Contains(v.Message, "out of range") {
				t.Errorf("flaky's copy of %s: %+v, want the template error", v2, v)
			}
		}
	}
	if c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionReady); !strings.Contains(c.Message, v2) {
		t.Errorf("flaky's Ready message does not name %s: %s", v2, c.Message)
	}
	r.Eventually(2*time.Minute, "the HPA scales "+v2+" to 2", func() (bool, string) {
		d := r.deployment(v2)
		return ptr.Deref(d.Spec.Replicas, 0) == 2, deploymentState(d)
	})

	// v1 drains and is sunset: its copies go, at the latest with its Deployment.
	r.Eventually(drainBound, "the copies of "+v1+" are deleted", func() (bool, string) {
		h, p := r.hpaOf(hpa.Name, v1), r.pdbOf(pdb.Name, v1)
		return h == nil && p == nil, fmt.Sprintf("HPA %v, PDB %v, Deployment %s", h != nil, p != nil, deploymentState(r.deployment(v1)))
	})
	r.Eventually(time.Minute, "status forgets "+v1, func() (bool, string) {
		vs := r.owned(hpa.Name).Status.Versions
		return len(vs) == 1 && vs[0].BuildID == v2, fmt.Sprintf("%+v", vs)
	})

	// Deleting an owned resource deletes its copies.
	if err := r.Env.Kube.Delete(context.Background(), pdb); err != nil {
		t.Fatal(err)
	}
	r.Eventually(time.Minute, "the PDB owned resource and its copy are gone", func() (bool, string) {
		var or v1alpha1.TemporalWorkerOwnedResource
		err := r.Env.Kube.Get(context.Background(), crclient.ObjectKeyFromObject(pdb), &or)
		return apierrors.IsNotFound(err) && r.pdbOf(pdb.Name, v2) == nil, fmt.Sprintf("get: %v", err)
	})

	// Deleting the TWD removes everything.
	if err := r.Env.Kube.Delete(context.Background(), r.Get()); err != nil {
		t.Fatal(err)
	}
	r.Eventually(drainBound, "the TWD, its Deployments, owned resources and copies are gone", func() (bool, string) {
		var twors v1alpha1.TemporalWorkerOwnedResourceList
		var hpas autoscalingv2.HorizontalPodAutoscalerList
		var pdbs policyv1.PodDisruptionBudgetList
		var deps appsv1.DeploymentList
		ctx, ns := context.Background(), crclient.InNamespace(r.Namespace)
		for _, l := range []crclient.ObjectList{&twors, &hpas, &pdbs, &deps} {
			if err := r.Env.Kube.List(ctx, l, ns); err != nil {
				return false, err.Error()
			}
		}
		n := len(twors.Items) + len(hpas.Items) + len(pdbs.Items) + len(deps.Items)
		return n == 0, fmt.Sprintf("%d owned resources, %d HPAs, %d PDBs, %d Deployments", len(twors.Items), len(hpas.Items), len(pdbs.Items), len(deps.Items))
	})
}

// TestOwnedExamplesEveryWayOfApplying applies examples/twor-hpa.yaml and
// examples/twor-pdb.yaml in each way people write objects with kubectl:
// client-side apply (kubectl's default, which drops the examples' nulls,
// their sentinels), server-side apply, kubectl create, and a client-side
// apply over a server-side one (a JSON merge patch, which deletes the
// nulls). Each time the version gets both copies, with its Deployment and
// pod labels filled in, and its replicas are the HPA's 2 rather than the
// TWD's spec.replicas 1. A null that kubectl drops and that nothing fills
// in (an HPA metric's selector) is refused, with a message that says to
// write {}; with {} the object is admitted. examples/autoscaling/
// hpa-backlog.yaml, applied client-side, gets its copy too.
func TestOwnedExamplesEveryWayOfApplying(t *testing.T) {
	t.Parallel()
	for _, way := range []struct {
		name string
		how  [][]string // one kubectl command after the other
	}{
		{"client-side apply", [][]string{harness.ClientSideApply}},
		{"server-side apply", [][]string{harness.ServerSideApply}},
		{"create", [][]string{harness.KubectlCreate}},
		{"client-side apply over server-side apply", [][]string{harness.ServerSideApply, harness.ClientSideApply}},
	} {
		t.Run(way.name, func(t *testing.T) {
			parallel(t)
			r := newRollout(env.NewTest(t), "owned")
			build := r.Create(r.Spec("v1"))
			r.WaitCurrent(5*time.Minute, build)
			clientSide := slices.Equal(way.how[len(way.how)-1], harness.ClientSideApply)
			for _, file := range []string{"twor-hpa.yaml", "twor-pdb.yaml"} {
				var or *v1alpha1.TemporalWorkerOwnedResource
				for _, how := range way.how {
					or = r.ownedExample(file)
					r.applyOwned(or, how)
				}
				// The test is worth its name only if kubectl did drop them.
				raw := string(or.Spec.Object.Raw)
				if kept := strings.Contains(raw, "scaleTargetRef") || strings.Contains(raw, "matchLabels"); kept == clientSide {
					t.Fatalf("%s stored as %s: the sentinel kept = %v, want %v", file, raw, kept, !clientSide)
				}
			}
			for _, name := range []string{"demo-worker-hpa", "demo-worker-pdb"} {
				r.waitOwnedReady(name, metav1.ConditionTrue, v1alpha1.ReasonApplied)
			}
			r.versionHasCopies(build)
			r.Eventually(2*time.Minute, "the HPA scales "+build+" to its minReplicas, 2", func() (bool, string) {
				d := r.deployment(build)
				return ptr.Deref(d.Spec.Replicas, 0) == 2, deploymentState(d)
			})
			for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(500 * time.Millisecond) {
				if got := ptr.Deref(r.deployment(build).Spec.Replicas, 0); got != 2 {
					t.Fatalf("the replicas of %s went from the HPA's 2 to %d", build, got)
				}
			}
		})
	}
	// The one owned-resource example no other test applies with kubectl
	// (TestBacklogAutoscaling's demo program creates it).
	t.Run("autoscaling/hpa-backlog.yaml, client-side apply", func(t *testing.T) {
		parallel(t)
		r := newRollout(env.NewTest(t), "backlog")
		twd := r.Spec("v1")
		twd.Spec.Replicas = nil
		build := r.Create(twd)
		or := r.attach("autoscaling/hpa-backlog.yaml")
		r.waitOwnedReady(or.Name, metav1.ConditionTrue, v1alpha1.ReasonApplied)
		h, d := r.hpaOf(or.Name, build), r.deployment(build)
		if h == nil || h.Spec.ScaleTargetRef.Name != d.Name || h.Spec.ScaleTargetRef.Kind != "Deployment" {
			t.Fatalf("the HPA of %s: %+v, want it to target Deployment %s", build, h, d.Name)
		}
		if sel := h.Spec.Metrics[0].External.Metric.Selector; sel == nil || fmt.Sprint(sel.MatchExpressions[1].Values) != "["+build+"]" {
			t.Errorf("the HPA's metric selector %+v, want the build ID %s filled in", sel, build)
		}
	})
	t.Run("a dropped null that nothing fills in", func(t *testing.T) {
		parallel(t)
		tt := env.NewTest(t)
		hpa := func(matchLabels string) *v1alpha1.TemporalWorkerOwnedResource {
			return ownedResource(tt.Namespace, "backlog", `{"apiVersion":"autoscaling/v2","kind":"HorizontalPodAutoscaler","spec":{"scaleTargetRef":null,"minReplicas":1,"maxReplicas":3,`+
				`"metrics":[{"type":"External","external":{"metric":{"name":"temporal_backlog_count","selector":{"matchLabels":`+matchLabels+`}},"target":{"type":"AverageValue","averageValue":"2"}}}]}}`)
		}
		err := env.KubectlApply(hpa("null"), harness.ClientSideApply)
		if err == nil || !strings.Contains(err.Error(), "spec.object.spec.metrics[0].external.metric.selector.matchLabels: Required value") ||
			!strings.Contains(err.Error(), "write `matchLabels: {}`") {
			t.Fatalf("kubectl apply of a metric selector's matchLabels: null: %v; want it refused, saying to write {}", err)
		}
		if err := env.KubectlApply(hpa("{}"), harness.ClientSideApply); err != nil {
			t.Fatalf("kubectl apply with matchLabels: {}: %v", err)
		}
	})
}

// applyOwned writes or with kubectl (how: harness.ClientSideApply, ...).
func (r *rollout) applyOwned(or *v1alpha1.TemporalWorkerOwnedResource, how []string) {
	r.Helper()
	if err := r.Env.KubectlApply(or, how); err != nil {
		r.Fatalf("%s TemporalWorkerOwnedResource %s: %v", strings.Join(how, " "), or.Name, err)
	}
}

// ownedExample reads an example owned resource, for this test's TWD.
func (r *rollout) ownedExample(file string) *v1alpha1.TemporalWorkerOwnedResource {
	r.Helper()
	var or v1alpha1.TemporalWorkerOwnedResource
	r.Env.ReadExample(r.T.T, file, &or)
	or.Namespace, or.Spec.WorkerRef.Name = r.Namespace, r.Name
	return &or
}

// versionHasCopies waits for the HPA and PDB of the examples on build's
// Deployment, with the sentinels filled in for it.
func (r *rollout) versionHasCopies(build string) {
	r.Helper()
	r.Eventually(time.Minute, "an HPA and a PDB for "+build, func() (bool, string) {
		h, p := r.hpaOf("demo-worker-hpa", build), r.pdbOf("demo-worker-pdb", build)
		return h != nil && p != nil, fmt.Sprintf("HPA %v, PDB %v", h != nil, p != nil)
	})
	d := r.deployment(build)
	h := r.hpaOf("demo-worker-hpa", build)
	if h.Spec.ScaleTargetRef.Name != d.Name || h.Spec.ScaleTargetRef.Kind != "Deployment" {
		r.Fatalf("HPA of %s targets %+v, want Deployment %s", build, h.Spec.ScaleTargetRef, d.Name)
	}
	if want := r.Env.Info.TemporalNamespace + "/" + build; h.Annotations["example.com/worker-version"] != want {
		r.Fatalf("templated annotation %q, want %q", h.Annotations["example.com/worker-version"], want)
	}
	if ref := metav1.GetControllerOf(h); ref == nil || ref.UID != d.UID {
		r.Fatalf("HPA of %s is owned by %+v, want its Deployment", build, h.OwnerReferences)
	}
	p := r.pdbOf("demo-worker-pdb", build)
	if got, want := p.Spec.Selector.MatchLabels, d.Spec.Selector.MatchLabels; fmt.Sprint(got) != fmt.Sprint(want) {
		r.Fatalf("PDB of %s selects %v, want the Deployment's %v", build, got, want)
	}
}

func (r *rollout) hpaOf(owned, build string) *autoscalingv2.HorizontalPodAutoscaler {
	var h autoscalingv2.HorizontalPodAutoscaler
	return getOrNil(r.T, ownedresource.Name(r.Name, owned, build), &h)
}

func (r *rollout) pdbOf(owned, build string) *policyv1.PodDisruptionBudget {
	var p policyv1.PodDisruptionBudget
	return getOrNil(r.T, ownedresource.Name(r.Name, owned, build), &p)
}

func getOrNil[O crclient.Object](t *harness.T, name string, o O) O {
	t.Helper()
	err := t.Env.Kube.Get(context.Background(), crclient.ObjectKey{Namespace: t.Namespace, Name: name}, o)
	if apierrors.IsNotFound(err) {
		var zero O
		return zero
	}
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func (r *rollout) owned(name string) *v1alpha1.TemporalWorkerOwnedResource {
	r.Helper()
	var or v1alpha1.TemporalWorkerOwnedResource
	if err := r.Env.Kube.Get(context.Background(), crclient.ObjectKey{Namespace: r.Namespace, Name: name}, &or); err != nil {
		r.Fatal(err)
	}
	return &or
}

func (r *rollout) waitOwnedReady(name string, status metav1.ConditionStatus, reason string) *v1alpha1.TemporalWorkerOwnedResource {
	r.Helper()
	var got *v1alpha1.TemporalWorkerOwnedResource
	r.Eventually(time.Minute, fmt.Sprintf("%s Ready=%s (%s)", name, status, reason), func() (bool, string) {
		got = r.owned(name)
		c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionReady)
		return c != nil && c.Status == status && c.Reason == reason && c.ObservedGeneration == got.Generation, fmt.Sprintf("%+v", got.Status)
	})
	return got
}

// ownedPDB is a TemporalWorkerOwnedResource named name that gives each
// version of r a PodDisruptionBudget with metadata. Its empty matchLabels
// is the sentinel every way of applying keeps.
func (r *rollout) ownedPDB(name string, metadata map[string]any) *v1alpha1.TemporalWorkerOwnedResource {
	return &v1alpha1.TemporalWorkerOwnedResource{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: r.Namespace},
		Spec: v1alpha1.TemporalWorkerOwnedResourceSpec{
			WorkerRef: v1alpha1.WorkerReference{Name: r.Name},
			Object: rawJSON(r.T.T, map[string]any{
				"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": metadata,
				"spec": map[string]any{"maxUnavailable": 1, "selector": map[string]any{"matchLabels": map[string]any{}}},
			}),
		},
	}
}

func rawJSON(t *testing.T, v any) apiextensionsv1.JSON {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return apiextensionsv1.JSON{Raw: raw}
}
