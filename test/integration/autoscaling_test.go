package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/dev/demo"
	"github.com/rainbow-deploy/rainbow/dev/demoworker"
	"github.com/rainbow-deploy/rainbow/internal/ownedresource"
	"github.com/rainbow-deploy/rainbow/internal/planner"
	"github.com/rainbow-deploy/rainbow/test/harness"
)

// autoscaledExample creates examples/autoscaling/worker.yaml (with its
// TemporalConnection) in a namespace of the test's own, with a task queue
// of its own, and waits for its first version to be current.
func autoscaledExample(t *testing.T) (*rollout, string) {
	t.Helper()
	r, twd := createExample(t, "autoscaling/worker.yaml", nil)
	if twd.Spec.Replicas != nil {
		t.Fatal("examples/autoscaling/worker.yaml sets spec.replicas: its versions' replicas are the autoscaler's")
	}
	build := r.BuildID()
	r.WaitCurrent(5*time.Minute, build)
	return r, build
}

// attach applies an example owned resource for the test's TWD, with
// kubectl apply as people do (client-side: it drops the example's nulls).
func (r *rollout) attach(file string) *v1alpha1.TemporalWorkerOwnedResource {
	r.Helper()
	or := r.ownedExample(file)
	r.applyOwned(or, harness.ClientSideApply)
	return or
}

// startWork starts n Work workflows.
func (r *rollout) startWork(n int, in demoworker.WorkInput) []client.WorkflowRun {
	r.Helper()
	var runs []client.WorkflowRun
	for i := range n {
		run, err := r.Env.Temporal.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{
			ID: fmt.Sprintf("%s-work-%d-%d", r.Name, time.Now().UnixNano(), i), TaskQueue: r.TaskQueue,
		}, demoworker.WorkWorkflow, in)
		if err != nil {
			r.Fatalf("start Work: %v", err)
		}
		runs = append(runs, run)
	}
	return runs
}

// waitReplicas waits until the HPA (or the controller) set build's
// replicas to what ok accepts, and returns how long that took.
func (r *rollout) waitReplicas(timeout time.Duration, build, expected string, ok func(int32) bool) time.Duration {
	r.Helper()
	start := time.Now()
	r.Eventually(timeout, expected, func() (bool, string) {
		d := r.deployment(build)
		hpa := "no HPA"
		var list autoscalingv2.HorizontalPodAutoscalerList
		if err := r.Env.Kube.List(context.Background(), &list, crclient.InNamespace(r.Namespace)); err == nil && len(list.Items) > 0 {
			hpa = hpaState(&list.Items[0])
		}
		return ok(ptr.Deref(d.Spec.Replicas, 1)), deploymentState(d) + "; " + hpa
	})
	return time.Since(start)
}

func hpaState(h *autoscalingv2.HorizontalPodAutoscaler) string {
	var b strings.Builder
	fmt.Fprintf(&b, "HPA %s current=%d desired=%d", h.Name, h.Status.CurrentReplicas, h.Status.DesiredReplicas)
	for _, m := range h.Status.CurrentMetrics {
		switch {
		case m.Resource != nil && m.Resource.Current.AverageUtilization != nil:
			fmt.Fprintf(&b, " cpu=%d%%", *m.Resource.Current.AverageUtilization)
		case m.External != nil && m.External.Current.AverageValue != nil:
			fmt.Fprintf(&b, " %s=%s/pod", m.External.Metric.Name, m.External.Current.AverageValue)
		}
	}
	for _, c := range h.Status.Conditions {
		if c.Status != "True" {
			fmt.Fprintf(&b, " %s=%s(%s: %s)", c.Type, c.Status, c.Reason, c.Message)
		}
	}
	return b.String()
}

// TestCPUAutoscaling: the local environment's resource metrics API shows a
// version's pods (kubectl top), and the HPA of
// examples/autoscaling/hpa-cpu.yaml, run by the real HPA controller,
// scales the version up while its worker burns CPU and back down after.
func TestCPUAutoscaling(t *testing.T) {
	parallel(t)
	r, build := autoscaledExample(t)
	r.attach("autoscaling/hpa-cpu.yaml")
	r.Eventually(time.Minute, "kubectl top shows the version's pod", func() (bool, string) {
		out, err := r.kubectl(30*time.Second, "top", "pod", "-n", r.Namespace, "-l", "temporal.io/build-id="+build)
		return err == nil && strings.Contains(out, r.Name) && strings.Contains(out, "Mi"), out
	})

	r.startWork(1, demoworker.WorkInput{Burn: 40 * time.Second})
	up := r.waitReplicas(90*time.Second, build, "the HPA scales the version up on CPU", func(n int32) bool { return n >= 2 })
	down := r.waitReplicas(3*time.Minute, build, "the HPA scales the version back to 1 once the CPU is idle", func(n int32) bool { return n == 1 })
	t.Logf("CPU: scaled up %s after the burn started, back to 1 replica %s later", up.Round(time.Second), down.Round(time.Second))
}

// TestBacklogAutoscaling runs the autoscaling demo story (`make
// demo-autoscaling`, dev/demo) with examples/autoscaling as they are: the
// HPA of hpa-backlog.yaml reads the version's own backlog through the
// controller's external metrics API (selected by the build ID its template
// fills in), and the real HPA controller scales the version up while Work
// workflows queue up behind its two activity slots, then back down once
// the backlog is gone. The metric and the Prometheus gauge are read too.
func TestBacklogAutoscaling(t *testing.T) {
	parallel(t)
	tt := env.NewTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	res, err := demo.RunAutoscaling(ctx, demo.AutoscalingOptions{
		Kube: env.Kube, Temporal: env.Temporal, Out: testWriter{t},
		Dir:               filepath.Join(env.Root, "examples", "autoscaling"),
		ConnectionDir:     filepath.Join(env.Root, "examples", "demo"),
		Namespace:         tt.Namespace,
		TemporalAddress:   env.Info.TemporalAddress,
		TemporalNamespace: env.Info.TemporalNamespace,
		TaskQueue:         tt.TaskQueue("autoscaled"),
		Burst:             20,
	})
	if err != nil {
		t.Fatalf("the autoscaling story: %v", err)
	}
	if res.MostReplicas < 2 || res.MostBacklog < 2 {
		t.Errorf("at most %d replicas for a backlog of at most %d: want the HPA to scale on it", res.MostReplicas, res.MostBacklog)
	}
	r := &rollout{&harness.Rollout{T: tt, Name: "autoscaled-worker", TaskQueue: tt.TaskQueue("autoscaled")}}
	raw, err := r.kubectl(30*time.Second, "get", "--raw", fmt.Sprintf("/apis/external.metrics.k8s.io/v1beta1/namespaces/%s/temporal_backlog_count?labelSelector=temporal.io/build-id=%s", r.Namespace, res.BuildID))
	var list struct{ Items []struct{ Value string } }
	if err != nil || json.Unmarshal([]byte(raw), &list) != nil || len(list.Items) != 1 || list.Items[0].Value != "0" {
		t.Errorf("external metric once the backlog is gone: %v %s, want one value 0", err, raw)
	}
	if _, ok := metric(t, "rainbow_version_backlog_count", map[string]string{"namespace": r.Namespace, "build_id": res.BuildID, "task_queue_type": "Activity"}); !ok {
		t.Errorf("no rainbow_version_backlog_count for %s's activity queue", res.BuildID)
	}
	t.Logf("backlog: scaled up %s after %d tasks were queued (at most %d replicas, backlog at most %d); every task done after %s; back to 1 replica %s after that",
		res.ScaledUp.Round(time.Second), 20, res.MostReplicas, res.MostBacklog, res.Done.Round(time.Second), res.ScaledDown.Round(time.Second))
}

// TestZeroedVersionWithPinnedWorkGetsWorkersBack: a draining version that
// someone else (a person here, standing in for an autoscaler) scales to
// zero while a workflow is still pinned to it is not taken for drained:
// while nothing waits for it, its zero stands; once the workflow has a
// task, the controller gives the version one worker back (an Event,
// rainbow_workers_revived_total and status.revival, which kubectl describe
// shows), and the workflow finishes on it.
func TestZeroedVersionWithPinnedWorkGetsWorkersBack(t *testing.T) {
	parallel(t)
	r := newRollout(env.NewTest(t), "revive")
	twd := r.Spec("v1")
	twd.Spec.Replicas = nil
	v1 := r.Create(twd)
	r.WaitCurrent(5*time.Minute, v1)
	run, err := r.Env.Temporal.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{
		ID: r.Name + "-pinned", TaskQueue: r.TaskQueue,
	}, demoworker.LongPinnedWorkflow, demoworker.LongInput{})
	if err != nil {
		t.Fatal(err)
	}
	r.Eventually(time.Minute, "the pinned workflow runs on "+v1, func() (bool, string) {
		v, err := r.Env.Temporal.QueryWorkflow(context.Background(), run.GetID(), "", demoworker.BuildIDQuery)
		var got string
		if err == nil {
			err = v.Get(&got)
		}
		return got == v1, fmt.Sprint(got, err)
	})
	v2 := r.SetImage("v2")
	r.WaitCurrent(3*time.Minute, v2)

	// Scaled to zero by hand: nothing waits for v1 (its workflow waits for
	// a signal), so the zero stands, and v1 stays draining.
	patch := crclient.RawPatch(types.MergePatchType, []byte(`{"spec":{"replicas":0}}`))
	if err := r.Env.Kube.Patch(context.Background(), r.deployment(v1), patch); err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(12 * time.Second); time.Now().Before(end); time.Sleep(time.Second) {
		d := r.deployment(v1)
		if d == nil || d.DeletionTimestamp != nil || ptr.Deref(d.Spec.Replicas, 1) != 0 {
			t.Fatalf("v1 changed while nothing waited for it: %s; %s", deploymentState(d), describe(r.Get()))
		}
	}
	if st := versionStatus(r.Get(), v1); st != v1alpha1.VersionDraining {
		t.Fatalf("v1 at zero replicas is %q, want Draining: %s", st, describe(r.Get()))
	}
	before, _ := metric(t, "rainbow_workers_revived_total", map[string]string{"namespace": r.Namespace, "name": r.Name})

	// The workflow gets a task: v1 gets a worker back and finishes it.
	signalled := time.Now()
	if err := r.Env.Temporal.SignalWorkflow(context.Background(), run.GetID(), "", demoworker.FinishSignal, nil); err != nil {
		t.Fatal(err)
	}
	revived := r.waitReplicas(time.Minute, v1, "the controller gives v1 one worker back", func(n int32) bool { return n == 1 })
	r.waitEvent(30*time.Second, planner.EventScale)
	r.revivalRecorded(v1, signalled)
	var res demoworker.LongResult
	if err := run.Get(context.Background(), &res); err != nil || res.FinishedOn != v1 {
		t.Fatalf("the pinned workflow: %+v, %v; want it finished on %s", res, err, v1)
	}
	if after, _ := metric(t, "rainbow_workers_revived_total", map[string]string{"namespace": r.Namespace, "name": r.Name}); after != before+1 {
		t.Errorf("rainbow_workers_revived_total went from %v to %v, want one more", before, after)
	}
	t.Logf("revival: v1 had a worker %s after its pinned workflow got a task", revived.Round(100*time.Millisecond))
}

// revivalRecorded checks build's status.revival after its first revival,
// which happened after since, and that kubectl describe shows it.
func (r *rollout) revivalRecorded(build string, since time.Time) {
	r.Helper()
	var rv *v1alpha1.VersionRevival
	twd := r.waitFor(30*time.Second, "status records the revival of "+build, func(twd *v1alpha1.TemporalWorkerDeployment) bool {
		rv = revivalOf(twd, build)
		return rv != nil
	})
	// The record's time is the controller's clock, the same machine's.
	if rv.At.Time.Before(since.Truncate(time.Second)) || rv.FromReplicas != 0 || rv.Replicas != 1 || rv.Count != 1 ||
		rv.VersionStatus != v1alpha1.VersionDraining || (rv.Backlog != nil && *rv.Backlog < 1) ||
		!strings.Contains(rv.Message, "scaled to zero by someone else") || !strings.Contains(rv.Message, "Draining") {
		r.Fatalf("status.revival of %s: %+v (backlog %v); %s", build, *rv, ptr.Deref(rv.Backlog, -1), describe(twd))
	}
	out, err := r.kubectl(30*time.Second, "describe", "twd", "-n", r.Namespace, r.Name)
	if err != nil || !strings.Contains(out, "Revival:") || !strings.Contains(out, "From Replicas:") {
		r.Fatalf("kubectl describe twd does not show the revival (%v):\n%s", err, out)
	}
	r.Logf("status.revival of %s: at %s, %d -> %d replicas, %s, backlog %v, count %d: %s",
		build, rv.At.Format(time.RFC3339), rv.FromReplicas, rv.Replicas, rv.VersionStatus, ptr.Deref(rv.Backlog, -1), rv.Count, rv.Message)
}

// revivalOf is build's status.revival, nil if none.
func revivalOf(twd *v1alpha1.TemporalWorkerDeployment, build string) *v1alpha1.VersionRevival {
	if v := workerVersionOf(twd, build); v != nil {
		return v.Revival
	}
	return nil
}

// TestKEDAExampleApplies: no KEDA runs here, so the KEDA example goes as
// far as it can: with a stand-in for KEDA's ScaledObject CRD (any fields)
// and the RBAC docs/owned-resources.md asks for, the webhook admits it and
// the controller applies one ScaledObject per version, owned by the
// version's Deployment, its trigger filled in with the version's Temporal
// worker deployment, build ID and namespace.
func TestKEDAExampleApplies(t *testing.T) {
	parallel(t)
	crd := `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"scaledobjects.keda.sh"},
	"spec":{"group":"keda.sh","scope":"Namespaced","names":{"plural":"scaledobjects","singular":"scaledobject","kind":"ScaledObject","listKind":"ScaledObjectList"},
	"versions":[{"name":"v1alpha1","served":true,"storage":true,"schema":{"openAPIV3Schema":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}]}}`
	rbac := `{"apiVersion":"v1","kind":"List","items":[
	{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRole","metadata":{"name":"rainbow-test-keda"},
	 "rules":[{"apiGroups":["keda.sh"],"resources":["scaledobjects"],"verbs":["get","create","update","patch","delete"]}]},
	{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRoleBinding","metadata":{"name":"rainbow-test-keda"},
	 "roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"rainbow-test-keda"},
	 "subjects":[{"kind":"ServiceAccount","name":"rainbow-manager","namespace":"rainbow-system"}]}]}`
	for _, objs := range []string{crd, rbac} {
		if _, err := env.Kubectl([]byte(objs), "apply", "--server-side", "--field-manager=rainbow-test", "-f", "-"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := env.Kubectl(nil, "wait", "--for=condition=Established", "crd/scaledobjects.keda.sh", "--timeout=60s"); err != nil {
		t.Fatal(err)
	}
	r, build := autoscaledExample(t)
	or := r.attach("autoscaling/keda-scaledobject.yaml")
	r.waitOwnedReady(or.Name, "True", v1alpha1.ReasonApplied)
	so := &unstructured.Unstructured{}
	so.SetAPIVersion("keda.sh/v1alpha1")
	so.SetKind("ScaledObject")
	if err := r.Env.Kube.Get(context.Background(), types.NamespacedName{Namespace: r.Namespace, Name: ownedresource.Name(r.Name, or.Name, build)}, so); err != nil {
		t.Fatal(err)
	}
	dep := r.deployment(build)
	ref, _, _ := unstructured.NestedStringMap(so.Object, "spec", "scaleTargetRef")
	triggers, _, _ := unstructured.NestedSlice(so.Object, "spec", "triggers")
	trigger, _ := triggers[0].(map[string]any)["metadata"].(map[string]any)
	if ref["name"] != dep.Name || ref["kind"] != "Deployment" || ref["apiVersion"] != "apps/v1" {
		t.Errorf("scaleTargetRef = %v, want Deployment %s", ref, dep.Name)
	}
	if trigger["workerDeploymentName"] != r.DeploymentName() || trigger["workerDeploymentBuildId"] != build ||
		trigger["namespace"] != r.Env.Info.TemporalNamespace {
		t.Errorf("trigger metadata = %v, want worker deployment %s, build ID %s, namespace %s", trigger, r.DeploymentName(), build, r.Env.Info.TemporalNamespace)
	}
	if owner := metav1GetController(so); owner != string(dep.UID) {
		t.Errorf("the ScaledObject's controller is %q, want the version's Deployment", owner)
	}
}

func metav1GetController(u *unstructured.Unstructured) string {
	for _, o := range u.GetOwnerReferences() {
		if o.Controller != nil && *o.Controller {
			return string(o.UID)
		}
	}
	return ""
}
