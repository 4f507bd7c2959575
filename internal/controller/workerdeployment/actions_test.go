package workerdeployment

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/rainbow-deploy/rainbow/internal/planner"
	"github.com/rainbow-deploy/rainbow/internal/workload"
)

// These tests use the fake client for the pure patch logic; the behaviour
// against a real API server is covered by the integration tests.
func TestScaleRecordsSunsetTime(t *testing.T) {
	ctx := context.Background()
	d := deployment(nil)
	d.Namespace = "ns"
	c := fake.NewClientBuilder().WithObjects(d).Build()
	var got appsv1.Deployment
	if err := c.Get(ctx, client.ObjectKeyFromObject(d), &got); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	if err := scaleDeployment(ctx, c, &got, planner.Scale{Name: d.Name, Replicas: 0, Reason: planner.ScaleSunset}, now); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(d), &got); err != nil {
		t.Fatal(err)
	}
	if *got.Spec.Replicas != 0 || got.Annotations[workload.AnnotationScaledDownAt] != "2026-03-04T05:06:07Z" {
		t.Fatalf("after sunset: replicas=%d annotations=%v", *got.Spec.Replicas, got.Annotations)
	}
	if err := scaleDeployment(ctx, c, &got, planner.Scale{Name: d.Name, Replicas: 2, Reason: planner.ScaleRestore}, now); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(d), &got); err != nil {
		t.Fatal(err)
	}
	if _, ok := got.Annotations[workload.AnnotationScaledDownAt]; ok || *got.Spec.Replicas != 2 {
		t.Fatalf("after restore: replicas=%d annotations=%v", *got.Spec.Replicas, got.Annotations)
	}
}

func TestScaleFailsOnStaleObservation(t *testing.T) {
	ctx := context.Background()
	d := deployment(nil)
	d.Namespace = "ns"
	c := fake.NewClientBuilder().WithObjects(d).Build()
	var seen appsv1.Deployment
	if err := c.Get(ctx, client.ObjectKeyFromObject(d), &seen); err != nil {
		t.Fatal(err)
	}
	fresh := seen.DeepCopy()
	fresh.Spec.Replicas = ptr.To[int32](5)
	if err := c.Update(ctx, fresh); err != nil {
		t.Fatal(err)
	}
	if err := scaleDeployment(ctx, c, &seen, planner.Scale{Replicas: 0, Reason: planner.ScaleSunset}, time.Now()); err == nil {
		t.Fatal("scaling from a stale observation succeeded")
	}
}

func TestDeleteRefusesRunningDeployment(t *testing.T) {
	d := deployment(nil)
	if err := deleteDeployment(context.Background(), fake.NewClientBuilder().WithObjects(d).Build(), d, planner.DeleteDeployment{Name: d.Name}); err == nil {
		t.Fatal("deleted a Deployment with replicas")
	}
}
