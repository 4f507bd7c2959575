package migrate

import (
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/internal/workload"
)

const wdUID = "6f1c1f0e-0000-4000-8000-000000000001"

// incumbentSnapshot is the state the incumbent leaves: a WorkerDeployment
// with a current and a draining version, its Connection and an HPA
// template, its controller uninstalled.
func incumbentSnapshot(t *testing.T) Snapshot {
	wd := object(t, strings.Replace(workerDeployment, "status:\n", "status:\n  managerIdentity: temporal-worker-controller/temporal-system/ns-uid\n", 1))
	unstructured.RemoveNestedField(wd.Object, "spec", "workerOptions", "unsafeCustomBuildID")
	_ = unstructured.SetNestedField(wd.Object, "orders-v1-2-3-b7c4", "status", "targetVersion", "buildID")
	conn := object(t, `{apiVersion: temporal.io/v1alpha1, kind: Connection, metadata: {name: prod, namespace: shop, uid: c1, finalizers: [temporal.io/delete-protection]}, spec: {hostPort: "temporal:7233"}}`)
	wrt := object(t, workerResourceTemplate)
	wrt.SetUID("w1")
	return Snapshot{
		WorkerDeployments: []unstructured.Unstructured{*wd},
		Connections:       []unstructured.Unstructured{*conn},
		Templates:         []unstructured.Unstructured{*wrt},
		Deployments: []appsv1.Deployment{
			incumbentDeployment("orders-v1-2-3-b7c4", "v1.2.3-b7c4", wdUID),
			incumbentDeployment("orders-v1-2-2-d4f5", "v1.2.2-d4f5", wdUID),
			incumbentDeployment("billing-v1-x", "v1-x", "someone-else"),
		},
		Controllers: []appsv1.Deployment{{ObjectMeta: metav1.ObjectMeta{Name: "temporal-worker-controller-manager", Namespace: "temporal-system"},
			Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](0)}}},
	}
}

// incumbentDeployment is a versioned Deployment as the incumbent makes it
// (twc:internal/k8s/deployments.go:229-307).
func incumbentDeployment(name, build, owner string) appsv1.Deployment {
	return appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "shop",
		Labels: map[string]string{LabelIncumbentWorker: "orders", workload.LabelBuildID: build},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "temporal.io/v1alpha1", Kind: KindWorkerDeployment, Name: "orders",
			UID: types.UID(owner), Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}}}
}

func kinds(p Plan) []StepKind {
	var out []StepKind
	for _, s := range p.Steps {
		out = append(out, s.Kind)
	}
	return out
}

func TestPlanSwitch(t *testing.T) {
	p := PlanSwitch(incumbentSnapshot(t))
	if len(p.Refusals) > 0 {
		t.Fatalf("refused: %v", p.Refusals)
	}
	want := []StepKind{CreateConnection, CreateWorker, AdoptDeployment, AdoptDeployment, ReplaceTemplate, RetireWorker, RetireConnection, FinishAdoption}
	if got := kinds(p); !slices.Equal(got, want) {
		t.Fatalf("steps %v, want %v", got, want)
	}
	twd := p.Steps[1].TWD
	for k, v := range map[string]string{
		v1alpha1.AnnotationAdoptionPending: "true",
		v1alpha1.AnnotationAdoptedBuildID:  "orders-v1-2-3-b7c4",
		v1alpha1.AnnotationTakeManagerFrom: "temporal-worker-controller/temporal-system/ns-uid",
	} {
		if twd.Annotations[k] != v {
			t.Errorf("TWD annotation %s = %q, want %q", k, twd.Annotations[k], v)
		}
	}
	for _, s := range p.Steps[2:4] {
		if s.IncumbentUID != wdUID || s.Worker != "orders" || s.Name == "billing-v1-x" {
			t.Errorf("adopts %+v", s)
		}
	}
	if p.Steps[0].Connection.Annotations[v1alpha1.AnnotationAdoptedFrom] == "" || p.Steps[4].TWOR.Annotations[v1alpha1.AnnotationAdoptedFrom] == "" {
		t.Error("converted objects are not marked as converted")
	}
	// The Git manifests hold no hold, and the hash the switch writes.
	for _, m := range p.Manifests() {
		if w, ok := m.(*v1alpha1.TemporalWorkerDeployment); ok {
			if w.Annotations[v1alpha1.AnnotationAdoptionPending] != "" || w.Annotations[v1alpha1.AnnotationAdoptedTemplateHash] == "" {
				t.Errorf("manifest annotations %v", w.Annotations)
			}
		}
	}
	if twd.Annotations[v1alpha1.AnnotationAdoptedTemplateHash] != "" {
		t.Error("the plan's TWD carries a hash before the API server stored its template")
	}
}

func TestPlanSwitchRefuses(t *testing.T) {
	for name, tc := range map[string]struct {
		change func(*Snapshot)
		says   string
	}{
		"the worker controller runs": {func(s *Snapshot) { s.Controllers[0].Spec.Replicas = ptr.To[int32](1) }, "still runs"},
		"its pods still stop":        {func(s *Snapshot) { s.Controllers[0].Status.Replicas = 1 }, "still runs"},
		"its webhooks remain":        {func(s *Snapshot) { s.Webhooks = []string{"twc-wrt-validating-webhook-configuration"} }, "admission webhook"},
		"a TWD of that name exists": {func(s *Snapshot) {
			s.TWDs = []v1alpha1.TemporalWorkerDeployment{{ObjectMeta: metav1.ObjectMeta{Name: "orders", Namespace: "shop"}}}
		}, "was not converted"},
		"a leftover of the incumbent's rename": {func(s *Snapshot) {
			s.TWDs = []v1alpha1.TemporalWorkerDeployment{{ObjectMeta: metav1.ObjectMeta{Name: "old", Namespace: "shop", Finalizers: []string{FinalizerIncumbentRename}}}}
		}, "leftover"},
		"a TemporalConnection of that name exists": {func(s *Snapshot) {
			s.TemporalConnections = []v1alpha1.TemporalConnection{{ObjectMeta: metav1.ObjectMeta{Name: "prod", Namespace: "shop"}}}
		}, "TemporalConnection shop/prod exists"},
		"synced by Argo CD": {func(s *Snapshot) {
			s.WorkerDeployments[0].SetAnnotations(map[string]string{"argocd.argoproj.io/tracking-id": "app:temporal.io/WorkerDeployment:shop/orders"})
		}, "--gitops-paused"},
	} {
		t.Run(name, func(t *testing.T) {
			s := incumbentSnapshot(t)
			tc.change(&s)
			p := PlanSwitch(s)
			if !slices.ContainsFunc(p.Refusals, func(r string) bool { return strings.Contains(r, tc.says) }) {
				t.Errorf("refusals %v do not say %q", p.Refusals, tc.says)
			}
		})
	}
	s := incumbentSnapshot(t)
	s.WorkerDeployments[0].SetAnnotations(map[string]string{"argocd.argoproj.io/tracking-id": "x"})
	s.GitOpsPaused = true
	if p := PlanSwitch(s); len(p.Refusals) > 0 {
		t.Errorf("refused with GitOps paused: %v", p.Refusals)
	}
}

// TestPlanSwitchAgain: a run interrupted after the TWD was made and one
// Deployment handed over plans only what is left.
func TestPlanSwitchAgain(t *testing.T) {
	s := incumbentSnapshot(t)
	first := PlanSwitch(s)
	twd := *first.Steps[1].TWD
	twd.UID = "twd-uid"
	s.TWDs = []v1alpha1.TemporalWorkerDeployment{twd}
	s.TemporalConnections = []v1alpha1.TemporalConnection{*first.Steps[0].Connection}
	s.Deployments[0].OwnerReferences[0].Kind, s.Deployments[0].OwnerReferences[0].UID = "TemporalWorkerDeployment", "twd-uid"
	p := PlanSwitch(s)
	if len(p.Refusals) > 0 {
		t.Fatalf("refused its own half-done work: %v", p.Refusals)
	}
	want := []StepKind{AdoptDeployment, ReplaceTemplate, RetireWorker, RetireConnection, FinishAdoption}
	if got := kinds(p); !slices.Equal(got, want) {
		t.Errorf("steps %v, want %v", got, want)
	}
	// Once the old objects are gone, only the hold is left.
	s.WorkerDeployments, s.Connections, s.Templates = nil, nil, nil
	if got := kinds(PlanSwitch(s)); !slices.Equal(got, []StepKind{FinishAdoption}) {
		t.Errorf("after the old objects went: steps %v", got)
	}
}

// TestPlanSwitchWithoutManager: Rainbow takes the role only from an identity
// it is told.
func TestPlanSwitchWithoutManager(t *testing.T) {
	s := incumbentSnapshot(t)
	unstructured.RemoveNestedField(s.WorkerDeployments[0].Object, "status", "managerIdentity")
	p := PlanSwitch(s)
	if p.Steps[1].TWD.Annotations[v1alpha1.AnnotationTakeManagerFrom] != "" || !hasNote(p.Notes, "status.managerIdentity") {
		t.Errorf("annotations %v, notes %v", p.Steps[1].TWD.Annotations, p.Notes)
	}
	s.IncumbentIdentity = "twc/ns/uid"
	if got := PlanSwitch(s).Steps[1].TWD.Annotations[v1alpha1.AnnotationTakeManagerFrom]; got != "twc/ns/uid" {
		t.Errorf("--incumbent-identity gave %q", got)
	}
}
