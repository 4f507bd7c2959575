package connection

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/internal/temporal"
)

// TestResolveAsksTheAPIServerBeforeReportingAConnectionMissing: a
// connection the cache has not seen yet but the API server has is no
// problem; one missing from both is TemporalConnectionNotFound.
func TestResolveAsksTheAPIServerBeforeReportingAConnectionMissing(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	conn := &v1alpha1.TemporalConnection{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "prod"},
		Spec:       v1alpha1.TemporalConnectionSpec{HostPort: "temporal:7233"},
	}
	lagging := fake.NewClientBuilder().WithScheme(scheme).Build()
	live := fake.NewClientBuilder().WithScheme(scheme).WithObjects(conn).Build()

	resolved, prob, err := Resolve(context.Background(), ConfirmMissing{Cached: lagging, Live: live}, "ns", "prod", "default", temporal.AllowedHosts{}, time.Now())
	if err != nil || prob != nil || resolved == nil {
		t.Fatalf("connection only the API server has: resolved %v, problem %+v, err %v; want it resolved", resolved, prob, err)
	}
	_, prob, err = Resolve(context.Background(), ConfirmMissing{Cached: lagging, Live: lagging}, "ns", "prod", "default", temporal.AllowedHosts{}, time.Now())
	if err != nil || prob == nil || prob.Reason != v1alpha1.ReasonTemporalConnectionNotFound {
		t.Fatalf("connection missing everywhere: problem %+v, err %v; want %s", prob, err, v1alpha1.ReasonTemporalConnectionNotFound)
	}
}
