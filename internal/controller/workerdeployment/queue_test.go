package workerdeployment

import (
	"context"
	"errors"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/internal/planner"
)

func TestNextPassPriority(t *testing.T) {
	cases := map[string]struct {
		res  planner.Report
		out  outcome
		want int
	}{
		"nothing to route next: first come, first served": {res: planner.Report{State: planner.StateMoving}, want: 0},
		"a routing write next: it can finish the rollout": {res: planner.Report{Routes: true}, want: priorityFinish},
		"an action failed: retried unranked, so failures cannot starve other TWDs": {
			res: planner.Report{Routes: true}, out: outcome{failed: []error{errors.New("denied")}}, want: 0},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			if got := nextPassPriority(c.res, c.out); got == nil || *got != c.want {
				t.Errorf("priority = %v, want %d", got, c.want)
			}
		})
	}
}

// The event of a Deployment becoming available queues its TWD ranked; its
// other changes queue it as any event does.
func TestDeploymentBecomingAvailableIsRanked(t *testing.T) {
	scheme := runtime.NewScheme()
	_ = v1alpha1.AddToScheme(scheme)
	_ = appsv1.AddToScheme(scheme)
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(v1alpha1.GroupVersion.WithKind("TemporalWorkerDeployment"), meta.RESTScopeNamespace)
	owner := &v1alpha1.TemporalWorkerDeployment{ObjectMeta: metav1.ObjectMeta{Name: "orders", Namespace: "shop", UID: types.UID("twd-uid")}}
	dep := func(avail bool) *appsv1.Deployment {
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "orders-v1", Namespace: "shop", Generation: 1, ResourceVersion: "1",
			OwnerReferences: []metav1.OwnerReference{{APIVersion: v1alpha1.GroupVersion.String(), Kind: "TemporalWorkerDeployment",
				Name: owner.Name, UID: owner.UID, Controller: ptr.To(true)}}},
			Spec:   appsv1.DeploymentSpec{Replicas: ptr.To[int32](1)},
			Status: appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 1, UpdatedReplicas: 1}}
		if avail {
			d.ResourceVersion = "2"
			d.Status.AvailableReplicas = 1
			d.Status.Conditions = []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue}}
		}
		return d
	}
	cases := map[string]struct {
		old, new *appsv1.Deployment
		want     int
	}{
		"becomes available": {old: dep(false), new: dep(true), want: priorityFinish},
		"stays available":   {old: func() *appsv1.Deployment { d := dep(true); d.ResourceVersion = "1"; return d }(), new: dep(true), want: 0},
		"not yet available": {old: dep(false), new: func() *appsv1.Deployment { d := dep(false); d.ResourceVersion = "2"; return d }(), want: 0},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			q := priorityqueue.New[reconcile.Request]("test")
			defer q.ShutDown()
			h := rankAvailable{handler.EnqueueRequestForOwner(scheme, mapper, &v1alpha1.TemporalWorkerDeployment{}, handler.OnlyControllerOwner())}
			h.Update(context.Background(), event.UpdateEvent{ObjectOld: c.old, ObjectNew: c.new}, q)
			req, prio, _ := q.GetWithPriority()
			if req.Name != owner.Name || prio != c.want {
				t.Errorf("queued %v with priority %d, want %s with %d", req, prio, owner.Name, c.want)
			}
		})
	}
}
