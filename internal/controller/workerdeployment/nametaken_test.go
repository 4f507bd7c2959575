package workerdeployment

import (
	"context"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/internal/workload"
)

// TestNameTakenSaysWhoHoldsTheName: a create that finds its name taken
// names what holds it and what to do, and is no error when the holder is
// this version's own Deployment that the cache had not shown yet.
func TestNameTakenSaysWhoHoldsTheName(t *testing.T) {
	twd := &v1alpha1.TemporalWorkerDeployment{ObjectMeta: metav1.ObjectMeta{Name: "orders", Namespace: "shop", UID: "twd-uid"}}
	holder := func(build string, owner *metav1.OwnerReference) *appsv1.Deployment {
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "orders-v1-0", Namespace: "shop",
			Labels: map[string]string{workload.LabelBuildID: build}}}
		if owner != nil {
			d.OwnerReferences = []metav1.OwnerReference{*owner}
		}
		return d
	}
	ours := &metav1.OwnerReference{Kind: "TemporalWorkerDeployment", Name: "orders", UID: "twd-uid", Controller: ptr.To(true)}
	other := &metav1.OwnerReference{Kind: "TemporalWorkerDeployment", Name: "orders-v1", UID: "other-uid", Controller: ptr.To(true)}
	cases := map[string]struct {
		existing *appsv1.Deployment
		want     []string // substrings; none means no error
	}{
		"our own, not yet cached": {holder("v1-0", ours), nil},
		"our other version":       {holder("v1.0", ours), []string{"version v1.0 of this TemporalWorkerDeployment", "once version v1.0 is retired"}},
		"another controller's":    {holder("v1-0", other), []string{"orders-v1-0", "TemporalWorkerDeployment orders-v1", "does not own", "delete or rename"}},
		"no owner":                {holder("v1-0", nil), []string{"no controlling owner", "delete or rename"}},
		"not visible (no label)":  {nil, []string{"does not carry the label " + workload.LabelWorker + "=orders", "delete or rename"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			b := fake.NewClientBuilder()
			if tc.existing != nil {
				b = b.WithObjects(tc.existing)
			}
			err := nameTaken(context.Background(), b.Build(), twd, "orders-v1-0", "v1-0")
			if tc.want == nil {
				if err != nil {
					t.Fatalf("nameTaken = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatal("nameTaken = nil, want an error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("message %q does not say %q", err, w)
				}
			}
		})
	}
}
