package main

import (
	"context"
	"fmt"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/internal/buildid"
	"github.com/rainbow-deploy/rainbow/test/harness"
)

// createNamespace makes a Kubernetes namespace with a TemporalConnection
// to the environment's Temporal.
func createNamespace(ctx context.Context, e *benchEnv, ns string) error {
	if err := e.Kube.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		return err
	}
	return e.CreateConnection(ctx, ns)
}

// newTWD is one replica of the demo worker at tag, polling its own task
// queue (named like the TWD), retiring old versions within seconds.
func newTWD(e *benchEnv, ns, name, tag string, rollout v1alpha1.RolloutSpec) *v1alpha1.TemporalWorkerDeployment {
	return e.DemoTWD(ns, name, harness.DemoImage(tag), taskQueueOf(ns, name), harness.WithRollout(rollout))
}

func taskQueueOf(ns, name string) string { return ns + "-" + name }

// temporalName is the worker deployment name the controller uses by default.
func temporalName(key types.NamespacedName) string { return key.Namespace + "/" + key.Name }

// change is one spec change the benchmark made.
type change struct {
	generation int64
	build      string
	at         time.Time // when the API server accepted it
}

// setTag changes the TWD's image tag, retrying conflicts with the controller.
func setTag(ctx context.Context, e *benchEnv, key types.NamespacedName, tag string) (change, error) {
	t, err := e.UpdateTWD(ctx, key, func(t *v1alpha1.TemporalWorkerDeployment) {
		t.Spec.Template.Spec.Containers[0].Image = harness.DemoImage(tag)
	})
	if err != nil {
		return change{}, fmt.Errorf("update %s: %w", key, err)
	}
	return change{generation: t.Generation, build: buildid.Of(&t.Spec), at: time.Now()}, nil
}

// create creates a TWD and returns its first generation's change.
func create(ctx context.Context, e *benchEnv, t *v1alpha1.TemporalWorkerDeployment) (change, error) {
	if err := e.Kube.Create(ctx, t); err != nil {
		return change{}, fmt.Errorf("create %s/%s: %w", t.Namespace, t.Name, err)
	}
	return change{generation: t.Generation, build: buildid.Of(&t.Spec), at: time.Now()}, nil
}

// describe reads the worker deployment, retrying while Temporal says it
// is busy (its workflow is applying an update) or does not know it yet.
func describe(ctx context.Context, e *benchEnv, name string) (*workflowservice.DescribeWorkerDeploymentResponse, error) {
	var last error
	for i := 0; i < 50; i++ {
		resp, err := e.temporal.WorkflowService().DescribeWorkerDeployment(ctx, &workflowservice.DescribeWorkerDeploymentRequest{
			Namespace: e.Info.TemporalNamespace, DeploymentName: name,
		})
		if err == nil {
			return resp, nil
		}
		last = err
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return nil, fmt.Errorf("describe worker deployment %s: %w", name, last)
}

// versionCreated is when Temporal registered build: its first poller.
func versionCreated(resp *workflowservice.DescribeWorkerDeploymentResponse, build string) (time.Time, bool) {
	for _, vs := range resp.GetWorkerDeploymentInfo().GetVersionSummaries() {
		if vs.GetDeploymentVersion().GetBuildId() == build && vs.GetCreateTime() != nil {
			return vs.GetCreateTime().AsTime(), true
		}
	}
	return time.Time{}, false
}
