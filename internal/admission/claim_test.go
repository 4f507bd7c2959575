package admission

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	cradmission "sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/internal/claim"
)

func claimTWD(ns, name, deploymentName, conn string, age time.Duration) *v1alpha1.TemporalWorkerDeployment {
	return &v1alpha1.TemporalWorkerDeployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(ns + "-" + name),
			CreationTimestamp: metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(-age))},
		Spec: v1alpha1.TemporalWorkerDeploymentSpec{WorkerOptions: v1alpha1.WorkerOptions{
			ConnectionRef: v1alpha1.ConnectionReference{Name: conn}, TemporalNamespace: "default", DeploymentName: deploymentName}},
	}
}

func claimConn(ns, name, host string) *v1alpha1.TemporalConnection {
	return &v1alpha1.TemporalConnection{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: v1alpha1.TemporalConnectionSpec{HostPort: host}}
}

// TestClaimValidator: a TemporalWorkerDeployment naming a worker
// deployment (server, Temporal namespace, name) another one names is
// refused on create, and on an update that changes what it names, with
// the field and the other TemporalWorkerDeployment in the message.
func TestClaimValidator(t *testing.T) {
	scheme := runtime.NewScheme()
	_ = v1alpha1.AddToScheme(scheme)
	existing := []client.Object{
		claimTWD("team-a", "workers", "", "temporal", time.Hour),
		claimConn("team-a", "temporal", "temporal:7233"),
		claimConn("team-b", "temporal", "temporal:7233"),
		claimConn("team-b", "other", "elsewhere:7233"),
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(existing...).
		WithIndex(&v1alpha1.TemporalWorkerDeployment{}, claim.Index, claim.IndexKey).Build()
	v := NewClaimValidator(scheme, c)
	b := func(deploymentName, conn string) *v1alpha1.TemporalWorkerDeployment {
		return claimTWD("team-b", "mine", deploymentName, conn, 0)
	}
	cases := map[string]struct {
		op       admissionv1.Operation
		obj, old *v1alpha1.TemporalWorkerDeployment
		refused  bool
	}{
		"create naming another's default name":       {op: admissionv1.Create, obj: b("team-a/workers", "temporal"), refused: true},
		"create with a name of its own":              {op: admissionv1.Create, obj: b("", "temporal")},
		"create naming it on another server":         {op: admissionv1.Create, obj: b("team-a/workers", "other")},
		"create with a connection that is not there": {op: admissionv1.Create, obj: b("team-a/workers", "missing"), refused: true},
		"update onto another's name":                 {op: admissionv1.Update, obj: b("team-a/workers", "temporal"), old: b("", "temporal"), refused: true},
		"update moving onto its server":              {op: admissionv1.Update, obj: b("team-a/workers", "temporal"), old: b("team-a/workers", "other"), refused: true},
		// Stored past the webhook: it can still be changed, and fixed.
		"update leaving the claim as it was": {op: admissionv1.Update, obj: withReplicas(b("team-a/workers", "temporal")), old: b("team-a/workers", "temporal")},
		"update to a name of its own":        {op: admissionv1.Update, obj: b("", "temporal"), old: b("team-a/workers", "temporal")},
		"the holder itself updated":          {op: admissionv1.Update, obj: withReplicas(claimTWD("team-a", "workers", "x", "temporal", time.Hour)), old: claimTWD("team-a", "workers", "", "temporal", time.Hour)},
		"delete":                             {op: admissionv1.Delete, old: b("", "temporal"), refused: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			req := cradmission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: tc.op, Name: "mine", Namespace: "team-b"}}
			for _, d := range []struct {
				o  *v1alpha1.TemporalWorkerDeployment
				to *runtime.RawExtension
			}{{tc.obj, &req.Object}, {tc.old, &req.OldObject}} {
				if d.o != nil {
					raw, _ := json.Marshal(d.o)
					d.to.Raw = raw
				}
			}
			resp := v.Handle(context.Background(), req)
			if resp.Allowed == tc.refused {
				t.Fatalf("allowed %v, want %v: %+v", resp.Allowed, !tc.refused, resp.Result)
			}
			if tc.refused && tc.op != admissionv1.Delete {
				msg := resp.Result.Message
				for _, w := range []string{"spec.workerOptions.deploymentName", "team-a/workers", "is used by TemporalWorkerDeployment team-a/workers", "a name of its own"} {
					if !strings.Contains(msg, w) {
						t.Errorf("message %q does not say %q", msg, w)
					}
				}
			}
		})
	}
}

func withReplicas(twd *v1alpha1.TemporalWorkerDeployment) *v1alpha1.TemporalWorkerDeployment {
	r := int32(3)
	twd.Spec.Replicas = &r
	return twd
}
