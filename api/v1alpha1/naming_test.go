package v1alpha1

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestWorkerDeploymentName(t *testing.T) {
	twd := &TemporalWorkerDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "orders"}}
	if got := twd.WorkerDeploymentName(); got != "shop/orders" {
		t.Errorf("default name = %q, want shop/orders", got)
	}
	twd.Spec.WorkerOptions.DeploymentName = "orders-workers"
	if got := twd.WorkerDeploymentName(); got != "orders-workers" {
		t.Errorf("set name = %q, want orders-workers", got)
	}
}
