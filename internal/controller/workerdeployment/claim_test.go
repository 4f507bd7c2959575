package workerdeployment

import (
	"context"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
)

// TestClaimedWorkerDeployment: a TWD stored past the webhook that names
// the worker deployment of an older TWD in another namespace writes
// nothing to Temporal and nothing but its status to Kubernetes, and says
// who holds the name; a younger rival does not stop it; deleting it only
// removes its finalizer.
func TestClaimedWorkerDeployment(t *testing.T) {
	holder := func(f *fixture, age time.Duration, host string) {
		f.twd.CreationTimestamp = metav1.NewTime(f.now.Add(-time.Minute))
		other := f.twd.DeepCopy()
		other.Namespace, other.Name, other.UID = "team-a", "holder", types.UID("holder-uid")
		other.CreationTimestamp = metav1.NewTime(f.now.Add(-time.Minute - age))
		other.Spec.WorkerOptions.DeploymentName = "shop/orders"
		other.Finalizers, other.DeletionTimestamp = nil, nil
		conn := f.objects[0].(*v1alpha1.TemporalConnection).DeepCopy()
		conn.Namespace, conn.Spec.HostPort = "team-a", host
		f.objects = append(f.objects, other, conn)
	}
	pollsFirstVersion := func(f *fixture) {
		f.runningDeployment()
		f.registered(false, enumspb.WORKER_DEPLOYMENT_VERSION_STATUS_INACTIVE)
		f.temporal.state.ManagerIdentity = ""
	}
	cases := map[string]struct {
		setup   func(*fixture)
		claimed bool
		kube    []string
	}{
		"an older TWD names it: nothing": {
			setup:   func(f *fixture) { pollsFirstVersion(f); holder(f, time.Hour, "temporal:7233") },
			claimed: true, kube: []string{"patch status TemporalWorkerDeployment orders"},
		},
		"an older TWD whose connection cannot be read: nothing": {
			setup: func(f *fixture) {
				pollsFirstVersion(f)
				holder(f, time.Hour, "temporal:7233")
				f.objects = f.objects[:len(f.objects)-1]
			},
			claimed: true, kube: []string{"patch status TemporalWorkerDeployment orders"},
		},
		"a younger TWD names it: the rollout goes on": {
			setup: func(f *fixture) { pollsFirstVersion(f); holder(f, -time.Hour, "temporal:7233") },
			kube:  []string{"patch status TemporalWorkerDeployment orders"},
		},
		"an older TWD on another server: the rollout goes on": {
			setup: func(f *fixture) { pollsFirstVersion(f); holder(f, time.Hour, "elsewhere:7233") },
			kube:  []string{"patch status TemporalWorkerDeployment orders"},
		},
		"a new TWD: no Deployment is made": {
			setup:   func(f *fixture) { holder(f, time.Hour, "temporal:7233") },
			claimed: true, kube: []string{"patch status TemporalWorkerDeployment orders"},
		},
		"deleting it: only the finalizer goes": {
			setup: func(f *fixture) {
				f.registered(true, enumspb.WORKER_DEPLOYMENT_VERSION_STATUS_CURRENT)
				f.twd.DeletionTimestamp = &metav1.Time{Time: f.now}
				holder(f, time.Hour, "temporal:7233")
			},
			claimed: true, kube: []string{"patch TemporalWorkerDeployment orders"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			tc.setup(f)
			kube, tmprl, _ := f.reconcile()
			if tc.claimed && len(tmprl) > 0 {
				t.Errorf("Temporal writes %q, want none", tmprl)
			}
			if !tc.claimed && len(tmprl) == 0 {
				t.Errorf("no Temporal write: the rival should not stop this TWD")
			}
			if strings.Join(kube, "\n") != strings.Join(tc.kube, "\n") {
				t.Errorf("Kubernetes writes %q, want %q", kube, tc.kube)
			}
			var got v1alpha1.TemporalWorkerDeployment
			if err := f.client.Get(context.Background(), client.ObjectKeyFromObject(f.twd), &got); err != nil || got.DeletionTimestamp != nil {
				return // deleted
			}
			c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionReady)
			if tc.claimed != (c != nil && c.Reason == v1alpha1.ReasonWorkerDeploymentClaimed) {
				t.Fatalf("Ready = %+v, claimed %v", c, tc.claimed)
			}
			if tc.claimed {
				for _, w := range []string{"team-a/holder", "spec.workerOptions.deploymentName", `"shop/orders"`} {
					if !strings.Contains(c.Message, w) {
						t.Errorf("message %q does not say %q", c.Message, w)
					}
				}
			}
		})
	}
}
