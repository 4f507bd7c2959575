package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rainbow-deploy/rainbow/dev/demoworker"
	"github.com/rainbow-deploy/rainbow/internal/workerenv"
	"github.com/rainbow-deploy/rainbow/test/harness"
)

// TestEnvironmentIsReal proves the local environment runs real parts end to
// end: the Deployment controller rolls a Deployment out, the node agent runs
// the demo worker for each pod, the workers poll Temporal under the build ID
// from their env and run a workflow, and deleting the Deployment
// garbage-collects everything and stops the processes.
func TestEnvironmentIsReal(t *testing.T) {
	parallel(t)
	tt := env.NewTest(t)
	ctx := context.Background()
	deploymentName := tt.Namespace + "/demo"
	buildID := "v1-" + tt.Suffix
	taskQueue := tt.TaskQueue("demo")

	// The example runs as written, but in this test's namespace and with
	// this environment's Temporal address and names unique to the test.
	dep := &appsv1.Deployment{}
	env.ReadExample(t, "local-environment/demo-worker.yaml", dep)
	dep.Namespace = tt.Namespace
	labels := dep.Spec.Selector.MatchLabels
	overrides := map[string]string{
		workerenv.Address:        env.Info.TemporalAddress,
		workerenv.Namespace:      env.Info.TemporalNamespace,
		workerenv.DeploymentName: deploymentName,
		workerenv.BuildID:        buildID,
		"DEMO_TASK_QUEUE":        taskQueue,
	}
	c := &dep.Spec.Template.Spec.Containers[0]
	for i := range c.Env {
		if v, ok := overrides[c.Env[i].Name]; ok {
			c.Env[i].Value = v
			delete(overrides, c.Env[i].Name)
		}
	}
	if len(overrides) > 0 {
		t.Fatalf("example lacks env %v", overrides)
	}
	if err := env.KubectlApply(dep, harness.ClientSideApply); err != nil {
		t.Fatal(err)
	}

	var rsName string
	tt.Eventually(time.Minute, "a ReplicaSet owned by Deployment demo-worker", func() (bool, string) {
		var list appsv1.ReplicaSetList
		if err := env.Kube.List(ctx, &list, crclient.InNamespace(tt.Namespace)); err != nil {
			return false, err.Error()
		}
		for _, rs := range list.Items {
			if ref := metav1.GetControllerOf(&rs); ref != nil && ref.UID == dep.UID {
				rsName = rs.Name
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d ReplicaSets, none owned by the Deployment", len(list.Items))
	})

	var pids []int
	tt.Eventually(time.Minute, "2 Running, Ready pods with live worker processes and an available Deployment", func() (bool, string) {
		pods := podsOf(t, tt.Namespace, labels)
		pids = pids[:0]
		var seen []string
		for _, p := range pods {
			seen = append(seen, fmt.Sprintf("%s phase=%s ready=%v node=%s", p.Name, p.Status.Phase, harness.PodReady(&p), p.Spec.NodeName))
			if p.Status.Phase != corev1.PodRunning || !harness.PodReady(&p) || len(p.Status.ContainerStatuses) != 1 {
				continue
			}
			var pid int
			if _, err := fmt.Sscanf(p.Status.ContainerStatuses[0].ContainerID, "process://%d", &pid); err == nil && harness.ProcessAlive(pid) {
				pids = append(pids, pid)
			}
		}
		var d appsv1.Deployment
		if err := env.Kube.Get(ctx, crclient.ObjectKeyFromObject(dep), &d); err != nil {
			return false, err.Error()
		}
		seen = append(seen, fmt.Sprintf("deployment available=%d", d.Status.AvailableReplicas))
		return len(pids) == 2 && d.Status.AvailableReplicas == 2, strings.Join(seen, "; ")
	})

	handle := env.Temporal.WorkerDeploymentClient().GetHandle(deploymentName)
	tt.Eventually(time.Minute, fmt.Sprintf("version %s of worker deployment %s with its task queue, as the workers poll", buildID, deploymentName), func() (bool, string) {
		desc, err := handle.DescribeVersion(ctx, client.WorkerDeploymentDescribeVersionOptions{BuildID: buildID})
		if err != nil {
			return false, err.Error()
		}
		var queues []string
		for _, q := range desc.Info.TaskQueuesInfos {
			queues = append(queues, q.Name)
		}
		return len(queues) > 0 && queues[0] == taskQueue, fmt.Sprintf("task queues %v", queues)
	})

	if _, err := handle.SetCurrentVersion(ctx, client.WorkerDeploymentSetCurrentVersionOptions{BuildID: buildID, IgnoreMissingTaskQueues: true}); err != nil {
		t.Fatalf("set current version: %v", err)
	}
	runCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	run, err := env.Temporal.ExecuteWorkflow(runCtx, client.StartWorkflowOptions{TaskQueue: taskQueue}, demoworker.HelloWorkflow, "rainbow")
	if err != nil {
		t.Fatal(err)
	}
	var greeting string
	if err := run.Get(runCtx, &greeting); err != nil {
		t.Fatalf("workflow on the pods' workers: %v", err)
	}
	if want := "hello rainbow from " + buildID; greeting != want {
		t.Fatalf("workflow result = %q, want %q", greeting, want)
	}

	if err := env.Kube.Delete(ctx, dep, crclient.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatal(err)
	}
	tt.Eventually(time.Minute, "the ReplicaSet and pods garbage-collected and the worker processes stopped", func() (bool, string) {
		var rs appsv1.ReplicaSet
		err := env.Kube.Get(ctx, crclient.ObjectKey{Namespace: tt.Namespace, Name: rsName}, &rs)
		rsGone := apierrors.IsNotFound(err)
		pods := podsOf(t, tt.Namespace, labels)
		alive := 0
		for _, pid := range pids {
			if harness.ProcessAlive(pid) {
				alive++
			}
		}
		return rsGone && len(pods) == 0 && alive == 0, fmt.Sprintf("replicaset gone=%v, pods left=%d, processes alive=%d", rsGone, len(pods), alive)
	})
}

func podsOf(t *testing.T, ns string, labels map[string]string) []corev1.Pod {
	t.Helper()
	var list corev1.PodList
	if err := env.Kube.List(context.Background(), &list, crclient.InNamespace(ns), crclient.MatchingLabels(labels)); err != nil {
		t.Fatal(err)
	}
	return list.Items
}
