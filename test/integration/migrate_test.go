package integration

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	deploymentpb "go.temporal.io/api/deployment/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/dev/demoworker"
	"github.com/rainbow-deploy/rainbow/internal/migrate"
	"github.com/rainbow-deploy/rainbow/internal/planner"
	"github.com/rainbow-deploy/rainbow/internal/workerenv"
	"github.com/rainbow-deploy/rainbow/internal/workload"
	"github.com/rainbow-deploy/rainbow/test/harness"
)

// incumbentIdentity is the worker controller's Temporal identity as its
// chart and main make it: <release>/<release namespace>/<UID of that
// namespace> (twc:helm/temporal-worker-controller/templates/manager.yaml:78-79,
// twc:cmd/main.go:156-175, twc:internal/controller/util.go:71-80).
const incumbentIdentity = "temporal-worker-controller/temporal-system/0c8a3b5e-7d1f-4e0a-9b6c-2f4d8e1a7c3b"

// incumbent builds, in the test's namespace, the state Temporal's worker
// controller v1.8.1 leaves behind, detail by detail from
// docs/migration-from-twc.md (its study of that release's source).
type incumbent struct {
	r      *rollout
	wd     *unstructured.Unstructured
	client client.Client
}

func incumbentObject(kind, namespace, name string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind(kind))
	u.SetNamespace(namespace)
	u.SetName(name)
	// twc:internal/controller/worker_controller.go:51-55, 148-193: added on
	// the first reconcile of a WorkerDeployment and of a Connection in use.
	u.SetFinalizers([]string{migrate.FinalizerIncumbent})
	return u
}

func (in *incumbent) create(obj crclient.Object) {
	in.r.Helper()
	if err := in.r.Env.Kube.Create(context.Background(), obj); err != nil {
		in.r.Fatalf("create %T %s: %v", obj, obj.GetName(), err)
	}
}

// deployment is a versioned Deployment as the incumbent makes it
// (twc:internal/k8s/deployments.go).
func (in *incumbent) deployment(template corev1.PodTemplateSpec, build string) *appsv1.Deployment {
	name, ns := in.wd.GetName(), in.wd.GetNamespace()
	// :229-240, selector and pod labels: the WorkerDeployment's name
	// (DNS-safe) and the build ID.
	selector := map[string]string{migrate.LabelIncumbentWorker: name, "temporal.io/build-id": build}
	tpl := *template.DeepCopy()
	// :330-339, the hash of the user's template before the additions.
	raw, _ := json.Marshal(template)
	sum := sha256.Sum256(raw)
	tpl.Labels = map[string]string{}
	for k, v := range selector {
		tpl.Labels[k] = v
	}
	// :264-271, 309-328: both hashes on the pod template.
	conn := sha256.Sum256([]byte(in.r.Env.Info.TemporalAddress))
	tpl.Annotations = map[string]string{"temporal.io/pod-template-spec-hash": hex.EncodeToString(sum[:]),
		"temporal.io/connection-spec-hash": hex.EncodeToString(conn[:])}
	// :341-428, appended after the user's variables.
	c := &tpl.Spec.Containers[0]
	c.Env = append(c.Env,
		corev1.EnvVar{Name: workerenv.Address, Value: in.r.Env.Info.TemporalAddress},
		corev1.EnvVar{Name: workerenv.Namespace, Value: in.r.Env.Info.TemporalNamespace},
		corev1.EnvVar{Name: workerenv.DeploymentName, Value: ns + "/" + name},
		corev1.EnvVar{Name: workerenv.BuildID, Value: build})
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{
			// :156-165, 198-203: <name>-<build ID>, DNS-safe, lowercase.
			Name: name + "-" + build, Namespace: ns, Labels: selector,
			// :281-288, 444: the WorkerDeployment is the controller.
			OwnerReferences: []metav1.OwnerReference{{APIVersion: v1alpha1.GroupVersion.String(), Kind: migrate.KindWorkerDeployment,
				Name: name, UID: in.wd.GetUID(), Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}},
		},
		// :292-305: no strategy, no progressDeadlineSeconds of its own.
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: selector}, Template: tpl},
	}
}

// hpa is the incumbent's copy of an HPA template for one version
// (twc:internal/k8s/workerresourcetemplates.go:54-75, 117-145): owned by
// the WorkerResourceTemplate, scaling the version's Deployment.
func (in *incumbent) hpa(wrt *unstructured.Unstructured, d *appsv1.Deployment) *autoscalingv2.HorizontalPodAutoscaler {
	return &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: in.wd.GetName() + "-" + wrt.GetName() + "-" + d.Labels["temporal.io/build-id"], Namespace: d.Namespace,
			Labels: map[string]string{migrate.LabelIncumbentWorker: in.wd.GetName(), "temporal.io/build-id": d.Labels["temporal.io/build-id"]},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: v1alpha1.GroupVersion.String(), Kind: migrate.KindWorkerResourceTemplate,
				Name: wrt.GetName(), UID: wrt.GetUID(), Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: d.Name},
			MinReplicas:    ptr.To[int32](1), MaxReplicas: 2,
			Metrics: []autoscalingv2.MetricSpec{{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
				Name: corev1.ResourceCPU, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To[int32](90)}}}},
		},
	}
}

// route makes build current as the incumbent does, with its identity, once
// its workers poll (twc:internal/controller/execplan.go:199-244).
func (in *incumbent) route(deployment, build string) {
	in.r.Helper()
	svc, ns := in.client.WorkflowService(), in.r.Env.Info.TemporalNamespace
	in.r.Eventually(2*time.Minute, "the incumbent's routing to "+build, func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := svc.SetWorkerDeploymentManager(ctx, &workflowservice.SetWorkerDeploymentManagerRequest{Namespace: ns, DeploymentName: deployment,
			NewManagerIdentity: &workflowservice.SetWorkerDeploymentManagerRequest_Self{Self: true}, Identity: incumbentIdentity}); err != nil {
			return false, "set manager: " + err.Error()
		}
		if _, err := svc.SetWorkerDeploymentCurrentVersion(ctx, &workflowservice.SetWorkerDeploymentCurrentVersionRequest{Namespace: ns,
			DeploymentName: deployment, BuildId: build, Identity: incumbentIdentity}); err != nil {
			return false, "set current: " + err.Error()
		}
		cur, _, _, err := in.r.Routing(ctx)
		return err == nil && cur == build, fmt.Sprintf("current %q (%v)", cur, err)
	})
}

// TestMigrateFromTheWorkerController builds what Temporal's worker
// controller leaves (its CRDs and objects, two versions it registered and
// routed with its identity, a pinned workflow open on the old one, an HPA
// per version), runs kubectl rainbow migrate, and checks that no pod
// restarted, that routing did not move until the spec changed, that the
// pinned workflow finished on its version, that the next change rolled out
// through Rainbow, and that the incumbent's versions were retired by
// Rainbow's rules.
func TestMigrateFromTheWorkerController(t *testing.T) {
	parallel(t)
	tt := env.NewTest(t)
	ctx := context.Background()
	const name = "orders"
	r := &rollout{&harness.Rollout{T: tt, Name: name, TaskQueue: tt.TaskQueue(name)}}
	if out, err := r.kubectl(time.Minute, "apply", "-f", filepath.Join("testdata", "twc", "crds.yaml")); err != nil {
		t.Fatalf("install the worker controller's CRDs: %v\n%s", err, out)
	}
	if out, err := r.kubectl(time.Minute, "wait", "--for=condition=Established", "--timeout=50s",
		"crd/workerdeployments.temporal.io", "crd/connections.temporal.io", "crd/workerresourcetemplates.temporal.io"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	opts, err := r.Env.TemporalOptions()
	if err != nil {
		t.Fatal(err)
	}
	opts.Identity = incumbentIdentity
	tc, err := client.Dial(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	in := &incumbent{r: r, client: tc}

	// The Connection and the WorkerDeployment as the user wrote them
	// (twc:api/v1alpha1/connection_types.go, workerdeployment_types.go).
	in.create(incumbentObject(migrate.KindConnection, tt.Namespace, harness.ConnectionName, map[string]any{"hostPort": r.Env.Info.TemporalAddress}))
	template := r.Spec("v2").Spec.Template
	tplJSON, _ := json.Marshal(template)
	var tplMap map[string]any
	_ = json.Unmarshal(tplJSON, &tplMap)
	in.wd = incumbentObject(migrate.KindWorkerDeployment, tt.Namespace, name, map[string]any{
		"workerOptions": map[string]any{"connectionRef": map[string]any{"name": harness.ConnectionName}, "temporalNamespace": r.Env.Info.TemporalNamespace},
		"rollout":       map[string]any{"strategy": "AllAtOnce"},
		"sunset":        map[string]any{"scaledownDelay": "2s", "deleteDelay": "3s"},
		"template":      tplMap,
	})
	in.create(in.wd)

	// Build IDs as the incumbent generates them: the image tag, "-", four
	// characters of its hash alphabet (twc:internal/k8s/deployments.go:173-227).
	v1, v2 := "v1-b7c4", "v2-d5f6"
	d1, d2 := in.deployment(r.Spec("v1").Spec.Template, v1), in.deployment(template, v2)
	in.create(d1)
	in.create(d2)
	deploymentName := tt.Namespace + "/" + name
	in.route(deploymentName, v1)
	pinned := r.startLong(demoworker.LongPinnedWorkflow)
	r.Eventually(time.Minute, "the pinned workflow running on "+v1, func() (bool, string) {
		on := r.queryBuild(pinned)
		return on == v1, "on " + on
	})
	in.route(deploymentName, v2)

	// Its status, as its reconciler writes it (twc:api/v1alpha1/workerdeployment_types.go).
	_ = unstructured.SetNestedField(in.wd.Object, map[string]any{
		"targetVersion":   map[string]any{"buildID": v2, "status": "Current"},
		"currentVersion":  map[string]any{"buildID": v2, "status": "Current"},
		"managerIdentity": incumbentIdentity,
	}, "status")
	if err := r.Env.Kube.Status().Update(ctx, in.wd); err != nil {
		t.Fatal(err)
	}
	// Its HPA template, with the {} sentinel, and a copy per version.
	wrt := incumbentObject(migrate.KindWorkerResourceTemplate, tt.Namespace, "hpa", map[string]any{
		"workerDeploymentRef": map[string]any{"name": name},
		"template": map[string]any{"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "spec": map[string]any{
			"scaleTargetRef": map[string]any{}, "minReplicas": int64(1), "maxReplicas": int64(2),
			"metrics": []any{map[string]any{"type": "Resource", "resource": map[string]any{"name": "cpu",
				"target": map[string]any{"type": "Utilization", "averageUtilization": int64(90)}}}}}},
	})
	wrt.SetFinalizers(nil) // it has none (docs/migration-from-twc.md, finalizers)
	in.create(wrt)
	oldHPAs := []string{}
	for _, d := range []*appsv1.Deployment{d1, d2} {
		h := in.hpa(wrt, d)
		in.create(h)
		oldHPAs = append(oldHPAs, h.Name)
	}

	pods := map[string][]string{}
	for _, b := range []string{v1, v2} {
		r.Eventually(2*time.Minute, "a running pod of "+b, func() (bool, string) {
			pods[b] = r.podUIDs(b)
			d := r.deployment(b)
			return len(pods[b]) == 1 && d != nil && d.Status.AvailableReplicas == 1, deploymentState(d)
		})
	}
	before := routingInfo(t, r)

	bin := filepath.Join(env.BinDir, "kubectl-rainbow")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%v: build it with make bins", err)
	}
	plugin := func(args ...string) string {
		t.Helper()
		cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		out, err := exec.CommandContext(cctx, bin, append([]string{"--kubeconfig", r.Env.Info.Kubeconfig, "-n", tt.Namespace}, args...)...).CombinedOutput()
		t.Logf("$ kubectl rainbow %s\n%s", strings.Join(args, " "), out)
		if err != nil {
			t.Fatalf("kubectl rainbow %s: %v", strings.Join(args, " "), err)
		}
		return string(out)
	}
	out := plugin("migrate", "--dry-run")
	for _, want := range []string{"create TemporalConnection", "hand Deployment " + tt.Namespace + "/" + d1.Name, "hand Deployment " + tt.Namespace + "/" + d2.Name,
		"replace WorkerResourceTemplate", incumbentIdentity} {
		if !strings.Contains(out, want) {
			t.Fatalf("the dry run does not say %q", want)
		}
	}
	if _, err := r.Read(); !apierrors.IsNotFound(err) {
		t.Fatalf("the dry run created the TemporalWorkerDeployment (%v)", err)
	}
	if manifests := plugin("migrate", "-o", "yaml"); !strings.Contains(manifests, "kind: TemporalWorkerDeployment") ||
		strings.Contains(manifests, v1alpha1.AnnotationAdoptionPending) {
		t.Fatalf("-o yaml:\n%s", manifests)
	}

	plugin("migrate")

	// Rainbow holds v2 as current with its own build ID kept, and took the
	// manager role with an Event.
	twd := r.WaitCurrent(5*time.Minute, v2)
	if v := workerVersionOf(twd, v2); v == nil || v.Deployment != d2.Name {
		t.Fatalf("status does not record Deployment %s of %s: %s", d2.Name, v2, describe(twd))
	}
	r.waitEvent(time.Minute, planner.EventTakeManagerRole)
	r.Eventually(time.Minute, "Rainbow's identity manages the worker deployment", func() (bool, string) {
		resp, err := r.Env.Temporal.WorkflowService().DescribeWorkerDeployment(ctx, &workflowservice.DescribeWorkerDeploymentRequest{
			Namespace: r.Env.Info.TemporalNamespace, DeploymentName: deploymentName})
		if err != nil {
			return false, err.Error()
		}
		m := resp.GetWorkerDeploymentInfo().GetManagerIdentity()
		return m != "" && m != incumbentIdentity, "manager " + m
	})
	for k, n := range map[string]string{migrate.KindWorkerDeployment: name, migrate.KindConnection: harness.ConnectionName, migrate.KindWorkerResourceTemplate: "hpa"} {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind(k))
		r.Eventually(time.Minute, "the worker controller's "+k+" gone", func() (bool, string) {
			err := r.Env.Kube.Get(ctx, types.NamespacedName{Namespace: tt.Namespace, Name: n}, u)
			return apierrors.IsNotFound(err), fmt.Sprint(err)
		})
	}
	// Rainbow's HPA copies replace the incumbent's, one per running version,
	// each scaling the adopted Deployment by its kept name.
	r.Eventually(2*time.Minute, "Rainbow's HPA on each version instead of the incumbent's", func() (bool, string) {
		var list autoscalingv2.HorizontalPodAutoscalerList
		if err := r.Env.Kube.List(ctx, &list, crclient.InNamespace(tt.Namespace)); err != nil {
			return false, err.Error()
		}
		var targets []string
		for _, h := range list.Items {
			if slices.Contains(oldHPAs, h.Name) {
				return false, "the incumbent's " + h.Name + " is still there"
			}
			targets = append(targets, h.Spec.ScaleTargetRef.Name)
		}
		slices.Sort(targets)
		return slices.Equal(targets, []string{d1.Name, d2.Name}), fmt.Sprintf("HPAs scale %v", targets)
	})
	if after := routingInfo(t, r); after != before {
		t.Fatalf("routing changed with the switch:\nbefore %s\nafter  %s", before, after)
	}
	checkSamePods := func(when string, builds ...string) {
		t.Helper()
		for _, b := range builds {
			if got := r.podUIDs(b); !slices.Equal(got, pods[b]) {
				t.Fatalf("%s: the pods of %s were %v, now %v: restarted", when, b, pods[b], got)
			}
		}
	}
	checkSamePods("after the switch", v1, v2)

	// The pinned workflow finishes on the version it started on.
	if err := r.Env.Temporal.SignalWorkflow(ctx, pinned.GetID(), "", demoworker.FinishSignal, nil); err != nil {
		t.Fatal(err)
	}
	var res demoworker.LongResult
	if err := pinned.Get(ctx, &res); err != nil {
		t.Fatal(err)
	}
	if res.StartedOn != v1 || res.FinishedOn != v1 {
		t.Fatalf("the pinned workflow ran on %s then %s, want %s", res.StartedOn, res.FinishedOn, v1)
	}
	checkSamePods("after the pinned workflow", v2)

	// The next change rolls out through Rainbow; the incumbent's versions
	// are retired by Rainbow's rules.
	v3 := r.SetImage("v3")
	r.WaitCurrent(3*time.Minute, v3)
	r.Eventually(drainBound, "the incumbent's versions scaled down and deleted", func() (bool, string) {
		for _, b := range []string{v1, v2} {
			if d := r.deployment(b); d != nil {
				if ptr.Deref(d.Spec.Replicas, 1) == 0 {
					checkScaledDownDrained(t, r, deploymentName, d, b)
				}
				return false, b + ": " + deploymentState(d) + "; " + describe(r.Get()) + "; " + openWorkflows(r)
			}
		}
		return true, ""
	})

	// The way back: the worker controller's objects again, the running
	// version handed to them, Rainbow's objects gone, no pod restarted,
	// routing untouched.
	pods[v3] = r.podUIDs(v3)
	d3 := r.deployment(v3)
	before = routingInfo(t, r)
	if out := plugin("migrate", "--back", "--dry-run"); !strings.Contains(out, "hand Deployment "+tt.Namespace+"/"+d3.Name+" (build ID "+v3+") to WorkerDeployment") ||
		!strings.Contains(out, "manager-identity unset") {
		t.Fatalf("the dry run of the way back does not say what it does")
	}
	plugin("migrate", "--back")
	wd := &unstructured.Unstructured{}
	wd.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind(migrate.KindWorkerDeployment))
	if err := r.Env.Kube.Get(ctx, types.NamespacedName{Namespace: tt.Namespace, Name: name}, wd); err != nil {
		t.Fatalf("no WorkerDeployment after the way back: %v", err)
	}
	if img, _, _ := unstructured.NestedSlice(wd.Object, "spec", "template", "spec", "containers"); len(img) != 1 || img[0].(map[string]any)["image"] != harness.DemoImage("v3") {
		t.Fatalf("the WorkerDeployment's template is not the running one: %v", img)
	}
	r.Eventually(time.Minute, "Rainbow's objects gone", func() (bool, string) {
		_, err := r.Read()
		var twor v1alpha1.TemporalWorkerOwnedResource
		terr := r.Env.Kube.Get(ctx, types.NamespacedName{Namespace: tt.Namespace, Name: "hpa"}, &twor)
		return apierrors.IsNotFound(err) && apierrors.IsNotFound(terr), fmt.Sprintf("TWD: %v, TWOR: %v", err, terr)
	})
	d3 = r.deployment(v3)
	if ref := metav1.GetControllerOf(d3); ref == nil || ref.Kind != migrate.KindWorkerDeployment || ref.UID != wd.GetUID() {
		t.Fatalf("Deployment %s is controlled by %+v, want the WorkerDeployment", d3.Name, ref)
	}
	var hpas autoscalingv2.HorizontalPodAutoscalerList
	if err := r.Env.Kube.List(ctx, &hpas, crclient.InNamespace(tt.Namespace)); err != nil || len(hpas.Items) != 0 {
		t.Fatalf("Rainbow's HPA copies are left (%v): %d", err, len(hpas.Items))
	}
	tmpl := &unstructured.Unstructured{}
	tmpl.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind(migrate.KindWorkerResourceTemplate))
	if err := r.Env.Kube.Get(ctx, types.NamespacedName{Namespace: tt.Namespace, Name: "hpa"}, tmpl); err != nil {
		t.Fatalf("no WorkerResourceTemplate after the way back: %v", err)
	}
	// Long enough for a Rainbow that still acted to show it.
	time.Sleep(3 * time.Second)
	checkSamePods("after the way back", v3)
	if after := routingInfo(t, r); after != before {
		t.Fatalf("routing changed with the way back:\nbefore %s\nafter  %s", before, after)
	}
}

// routingInfo is what Temporal's routing says, with when it last changed.
func routingInfo(t *testing.T, r *rollout) string {
	t.Helper()
	resp, err := r.Env.Temporal.WorkflowService().DescribeWorkerDeployment(context.Background(), &workflowservice.DescribeWorkerDeploymentRequest{
		Namespace: r.Env.Info.TemporalNamespace, DeploymentName: r.Namespace + "/" + r.Name})
	if err != nil {
		t.Fatal(err)
	}
	rc := resp.GetWorkerDeploymentInfo().GetRoutingConfig()
	return fmt.Sprintf("current %s since %s, ramping %q %.0f%%", rc.GetCurrentDeploymentVersion().GetBuildId(),
		rc.GetCurrentVersionChangedTime().AsTime().Format(time.RFC3339Nano), rc.GetRampingDeploymentVersion().GetBuildId(), rc.GetRampingVersionPercentage())
}

// podUIDs are the UIDs of build's live pods, sorted.
func (r *rollout) podUIDs(build string) []string {
	out := r.livePods(build, func(p corev1.Pod) string { return string(p.UID) })
	slices.Sort(out)
	return out
}

// openWorkflows names the namespace's running workflows of this test's
// task queue and the version each runs on, for failure messages.
func openWorkflows(r *rollout) string {
	resp, err := r.Env.Temporal.ListWorkflow(context.Background(), &workflowservice.ListWorkflowExecutionsRequest{
		Namespace: r.Env.Info.TemporalNamespace, Query: fmt.Sprintf("ExecutionStatus = 'Running' AND TaskQueue = '%s'", r.TaskQueue)})
	if err != nil {
		return "open workflows: " + err.Error()
	}
	var out []string
	for _, e := range resp.GetExecutions() {
		out = append(out, fmt.Sprintf("%s(%s on %s)", e.GetExecution().GetWorkflowId(), e.GetType().GetName(), e.GetVersioningInfo().GetDeploymentVersion().GetBuildId()))
	}
	return fmt.Sprintf("open workflows %v", out)
}

// TestMigrateRemovalOutlastsAPutBackFinalizer: the way back removes a TWD
// without its clean-up even when Rainbow's controller puts its finalizer
// back between the command's two writes (the controller adds it to any TWD
// it sees without one). A plain delete after that would start the TWD's
// clean-up, which routes new workflows to unversioned workers; the TWD
// must be gone when the command returns, never Terminating.
func TestMigrateRemovalOutlastsAPutBackFinalizer(t *testing.T) {
	parallel(t)
	tt := env.NewTest(t)
	r := newRollout(tt, "held")
	ctx := context.Background()
	twd := r.Spec("v1")
	twd.Annotations = map[string]string{v1alpha1.AnnotationAdoptionPending: "true"}
	r.Create(twd)
	r.Eventually(time.Minute, "the controller's finalizer on the held TWD", func() (bool, string) {
		got := r.Get()
		return slices.Contains(got.Finalizers, v1alpha1.FinalizerCleanup), fmt.Sprintf("finalizers %v", got.Finalizers)
	})
	plan := migrate.Plan{Steps: []migrate.Step{{Kind: migrate.RetireTWD, Namespace: r.Namespace, Name: r.Name,
		IncumbentUID: string(r.Get().UID), Says: "remove the TWD without its clean-up"}}}
	c := &finalizerPutBack{Client: r.Env.Kube}
	if err := migrate.Run(ctx, c, plan, &strings.Builder{}); err != nil {
		t.Fatal(err)
	}
	if !c.putBack {
		t.Fatal("the finalizer was never put back: the test did not race the command")
	}
	if got, err := r.Read(); !apierrors.IsNotFound(err) {
		t.Fatalf("after the command the TWD is still there (%v): deletion %v, finalizers %v", err, got.DeletionTimestamp, got.Finalizers)
	}
}

// finalizerPutBack is a client that, once, puts the cleanup finalizer
// back on a TWD right after a patch took it away, as Rainbow's controller
// does when it sees the TWD without one.
type finalizerPutBack struct {
	crclient.Client
	putBack bool
}

func (c *finalizerPutBack) Patch(ctx context.Context, obj crclient.Object, patch crclient.Patch, opts ...crclient.PatchOption) error {
	if err := c.Client.Patch(ctx, obj, patch, opts...); err != nil {
		return err
	}
	twd, ok := obj.(*v1alpha1.TemporalWorkerDeployment)
	if !ok || c.putBack || len(twd.Finalizers) > 0 {
		return nil
	}
	c.putBack = true
	var fresh v1alpha1.TemporalWorkerDeployment
	if err := c.Client.Get(ctx, crclient.ObjectKeyFromObject(twd), &fresh); err != nil {
		return err
	}
	if slices.Contains(fresh.Finalizers, v1alpha1.FinalizerCleanup) {
		return nil // the controller was first
	}
	fresh.Finalizers = append(fresh.Finalizers, v1alpha1.FinalizerCleanup)
	return c.Client.Update(ctx, &fresh)
}

// checkScaledDownDrained fails the test unless Temporal's own report of
// version build (not the TWD's status, which the controller writes after it
// acts) says it drained before the controller scaled Deployment d to zero.
// Drained stays drained: only a workflow newly pinned to the version by an
// override would make it draining again, and none is.
func checkScaledDownDrained(t *testing.T, r *rollout, deploymentName string, d *appsv1.Deployment, build string) {
	t.Helper()
	at, err := time.Parse(time.RFC3339, d.Annotations[workload.AnnotationScaledDownAt])
	if err != nil {
		t.Fatalf("Deployment %s of %s has zero replicas and no valid %s: %v", d.Name, build, workload.AnnotationScaledDownAt, err)
	}
	resp, err := r.Env.Temporal.WorkflowService().DescribeWorkerDeploymentVersion(context.Background(), &workflowservice.DescribeWorkerDeploymentVersionRequest{
		Namespace:         r.Env.Info.TemporalNamespace,
		DeploymentVersion: &deploymentpb.WorkerDeploymentVersion{DeploymentName: deploymentName, BuildId: build},
	})
	if err != nil {
		t.Fatalf("describe version %s after its Deployment was scaled to zero: %v", build, err)
	}
	dr := resp.GetWorkerDeploymentVersionInfo().GetDrainageInfo()
	// scaled-down-at has whole seconds; scaledownDelay (2 s) separates the two.
	if dr.GetStatus() != enumspb.VERSION_DRAINAGE_STATUS_DRAINED || dr.GetLastChangedTime().AsTime().After(at.Add(time.Second)) {
		t.Fatalf("version %s was scaled down at %s; Temporal reports its drainage %s since %s", build, at.Format(time.RFC3339),
			dr.GetStatus(), dr.GetLastChangedTime().AsTime().Format(time.RFC3339Nano))
	}
}
