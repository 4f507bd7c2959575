package migrate

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/internal/workload"
)

// rainbowSnapshot is the state after a switch and one Rainbow rollout.
func rainbowSnapshot(t *testing.T) Snapshot {
	first := PlanSwitch(incumbentSnapshot(t))
	twd := first.Steps[1].TWD.DeepCopy()
	twd.UID = "twd-uid"
	twd.Finalizers = []string{v1alpha1.FinalizerCleanup}
	delete(twd.Annotations, v1alpha1.AnnotationAdoptionPending)
	twd.Spec.WorkerOptions.CustomBuildID = ""
	twd.Spec.Rollout.ProgressDeadline = &metav1.Duration{Duration: 600e9}
	conn := first.Steps[0].Connection.DeepCopy()
	twor := first.Steps[4].TWOR.DeepCopy()
	twor.UID = "twor-uid"
	d := incumbentDeployment("orders-v3-0123456789abcdef", "v3-0123456789abcdef", "twd-uid")
	d.OwnerReferences[0].Kind = "TemporalWorkerDeployment"
	d.Labels = workload.SelectorLabels("orders", "v3-0123456789abcdef")
	return Snapshot{
		TWDs: []v1alpha1.TemporalWorkerDeployment{*twd}, TemporalConnections: []v1alpha1.TemporalConnection{*conn},
		TWORs: []v1alpha1.TemporalWorkerOwnedResource{*twor}, Deployments: []appsv1.Deployment{d},
	}
}

func TestPlanBack(t *testing.T) {
	p := PlanBack(rainbowSnapshot(t))
	if len(p.Refusals) > 0 {
		t.Fatalf("refused: %v", p.Refusals)
	}
	want := []StepKind{HoldWorker, CreateIncumbentConn, CreateIncumbent, ReturnDeployment, ReturnOwned, RetireTWD, RetireTConn}
	if got := kinds(p); !slices.Equal(got, want) {
		t.Fatalf("steps %v, want %v", got, want)
	}
	wd := p.Steps[2].Incumbent
	if wd.GetKind() != KindWorkerDeployment || wd.GetName() != "orders" {
		t.Errorf("created %s %s", wd.GetKind(), wd.GetName())
	}
	for k := range wd.GetAnnotations() {
		if strings.HasPrefix(k, "temporal.io/") {
			t.Errorf("WorkerDeployment keeps Rainbow's annotation %s", k)
		}
	}
	if _, ok, _ := unstructured.NestedFieldNoCopy(wd.Object, "spec", "rollout", "progressDeadline"); ok || !hasNote(p.Notes, "spec.rollout.progressDeadline") {
		t.Errorf("progressDeadline carried over or not noted: %v", p.Notes)
	}
	if !hasNote(p.Notes, "manager identity") {
		t.Error("no note on handing the manager role back")
	}
	wrt := p.Steps[4].Incumbent
	if ref, _, _ := unstructured.NestedString(wrt.Object, "spec", "workerDeploymentRef", "name"); ref != "orders" {
		t.Errorf("WorkerResourceTemplate names worker %q", ref)
	}
	metrics, _, _ := unstructured.NestedSlice(wrt.Object, "spec", "template", "spec", "metrics")
	if len(metrics) != 2 {
		t.Fatalf("metrics %v", metrics)
	}
	// The incumbent adds its three metric labels itself and refuses them
	// in the template: only the user's stay.
	if labels, _, _ := unstructured.NestedStringMap(asMap(metrics[1]), "external", "metric", "selector", "matchLabels"); len(labels) != 1 || labels["worker_type"] != "ActivityWorker" {
		t.Errorf("external metric selector %v", labels)
	}
	// A run again after the hold and the incumbent's objects were made
	// plans only what is left.
	s := rainbowSnapshot(t)
	s.TWDs[0].Annotations[v1alpha1.AnnotationAdoptionPending] = "true"
	s.WorkerDeployments = []unstructured.Unstructured{*wd}
	s.Connections = []unstructured.Unstructured{*p.Steps[1].Incumbent}
	if got := kinds(PlanBack(s)); !slices.Equal(got, []StepKind{ReturnDeployment, ReturnOwned, RetireTWD, RetireTConn}) {
		t.Errorf("again: steps %v", got)
	}
}

func TestPlanBackRefuses(t *testing.T) {
	for name, tc := range map[string]struct {
		change func(*Snapshot)
		says   string
	}{
		"the worker controller runs already": {func(s *Snapshot) {
			s.Controllers = []appsv1.Deployment{{ObjectMeta: metav1.ObjectMeta{Name: "twc", Namespace: "temporal-system"}, Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](1)}}}
		}, "already runs"},
		"another Temporal deployment name": {func(s *Snapshot) { s.TWDs[0].Spec.WorkerOptions.DeploymentName = "orders-prod" }, "always names it"},
		"Rainbow's template values": {func(s *Snapshot) {
			s.TWORs[0].Spec.Object.Raw = []byte(`{"apiVersion":"v1","kind":"ConfigMap","data":{"b":"{{ .BuildID }}"}}`)
		}, "template values"},
	} {
		t.Run(name, func(t *testing.T) {
			s := rainbowSnapshot(t)
			tc.change(&s)
			if p := PlanBack(s); !slices.ContainsFunc(p.Refusals, func(r string) bool { return strings.Contains(r, tc.says) }) {
				t.Errorf("refusals %v do not say %q", p.Refusals, tc.says)
			}
		})
	}
}

// TestSwitchAndBackKeepTheSpec: converting there and back gives the
// incumbent's spec again, less what Rainbow does not keep.
func TestSwitchAndBackKeepTheSpec(t *testing.T) {
	in := object(t, workerDeployment)
	res, err := Convert(in)
	if err != nil {
		t.Fatal(err)
	}
	back, _, err := BackWorker(res.Object.(*v1alpha1.TemporalWorkerDeployment))
	if err != nil {
		t.Fatal(err)
	}
	want := runtime.DeepCopyJSON(in.Object["spec"].(map[string]any))
	got := back.Object["spec"].(map[string]any)
	for _, path := range [][]string{{"workerOptions"}, {"replicas"}, {"rollout", "gate"}, {"template", "metadata"}} {
		w, _, _ := unstructured.NestedFieldNoCopy(want, path...)
		g, _, _ := unstructured.NestedFieldNoCopy(got, path...)
		if !equalJSON(t, w, g) {
			t.Errorf("spec.%s: %v, want %v", strings.Join(path, "."), g, w)
		}
	}
	if img, _, _ := unstructured.NestedSlice(got, "template", "spec", "containers"); len(img) != 1 || asMap(img[0])["image"] != "registry.example.com/orders:v1.2.3" {
		t.Errorf("containers %v", img)
	}
}

func equalJSON(t *testing.T, a, b any) bool {
	t.Helper()
	ja, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	jb, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	var x, y any
	_ = json.Unmarshal(ja, &x)
	_ = json.Unmarshal(jb, &y)
	return reflect.DeepEqual(x, y)
}
