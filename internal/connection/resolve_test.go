package connection

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
)

// TestResolveRefusesAServerTooOld: a TemporalWorkerDeployment gets a
// Problem, and so acts on nothing, when the connection controller found
// the server older than the controller supports; an unknown or supported
// version is no problem. ResolveObject, which the connection controller
// probes with, does not look at the recorded version.
func TestResolveRefusesAServerTooOld(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	for version, tooOld := range map[string]bool{"": false, "1.28.3": true, "1.29.0": false, "1.32.1": false, "custom": false} {
		conn := &v1alpha1.TemporalConnection{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "prod"},
			Spec:       v1alpha1.TemporalConnectionSpec{HostPort: "temporal:7233"},
			Status:     v1alpha1.TemporalConnectionStatus{ServerVersion: version},
		}
		c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(conn).Build()
		resolved, prob, err := Resolve(context.Background(), c, "ns", "prod", "default", time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if !tooOld {
			if prob != nil || resolved == nil {
				t.Errorf("version %q: problem %+v, want the connection", version, prob)
			}
			continue
		}
		if resolved != nil || prob == nil || prob.Reason != v1alpha1.ReasonUnsupportedServerVersion ||
			!strings.HasPrefix(prob.Message, "TemporalConnection prod: Temporal at temporal:7233 runs server version "+version) {
			t.Errorf("version %q: resolved %v, problem %+v; want UnsupportedServerVersion naming the connection and version", version, resolved, prob)
		}
		if r, prob, _ := ResolveObject(context.Background(), c, conn, "", time.Now()); r == nil || prob != nil {
			t.Errorf("version %q: ResolveObject refused: %+v", version, prob)
		}
	}
}
