package invariants

import (
	"context"
	"fmt"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/rainbow-deploy/rainbow/internal/workload"
	"github.com/rainbow-deploy/rainbow/test/harness"
)

// Removals watches the versioned Deployments of a namespace and records,
// with the time the watch delivered it, every scale to zero and every
// deletion: each moment a version loses its workers.
type Removals struct {
	deployment func(twd string) string
	on         func(Removal)
	stop       context.CancelFunc
	wait       func()

	mu       sync.Mutex
	removals []Removal
	created  int
	scales   int
}

// WatchRemovals starts watching namespace. deployment maps a TWD's name
// to its Temporal worker deployment; on, if not nil, is called with each
// removal as the watch delivers it, one at a time. It returns once the
// watch has listed what is there, so no later removal is missed.
func WatchRemovals(ctx context.Context, clients kubernetes.Interface, namespace string, deployment func(twd string) string, on func(Removal)) (*Removals, error) {
	ctx, cancel := context.WithCancel(ctx)
	l := &Removals{deployment: deployment, on: on, stop: cancel}
	wait, err := harness.InformDeployments(ctx, clients, namespace, cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) {
			l.mu.Lock()
			l.created++
			l.mu.Unlock()
		},
		UpdateFunc: func(oldObj, newObj any) {
			o, n := oldObj.(*appsv1.Deployment), newObj.(*appsv1.Deployment)
			before, after := ptr.Deref(o.Spec.Replicas, 1), ptr.Deref(n.Spec.Replicas, 1)
			if before != after {
				l.mu.Lock()
				l.scales++
				l.mu.Unlock()
				if after == 0 {
					l.record(n, fmt.Sprintf("scaled to 0 (from %d)", before))
				}
			}
			if o.DeletionTimestamp == nil && n.DeletionTimestamp != nil {
				l.record(n, "deletion requested")
			}
		},
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if d, ok := obj.(*appsv1.Deployment); ok {
				l.record(d, "deleted")
			}
		},
	})
	if err != nil {
		cancel()
		return nil, err
	}
	l.wait = wait
	return l, nil
}

func (l *Removals) record(d *appsv1.Deployment, what string) {
	build := d.Labels[workload.LabelBuildID]
	if build == "" {
		return
	}
	r := Removal{Version: Version{l.deployment(d.Labels[workload.LabelWorker]), build}, At: time.Now(), What: "Deployment " + d.Name + " " + what}
	l.mu.Lock()
	l.removals = append(l.removals, r)
	l.mu.Unlock()
	if l.on != nil {
		l.on(r)
	}
}

// Stop ends the watch and waits until its last handler has returned.
func (l *Removals) Stop() {
	l.stop()
	l.wait()
}

// Snapshot is what the watch saw so far: the removals, and how many
// Deployments were created and how many times one's replicas changed.
func (l *Removals) Snapshot() (removals []Removal, created, scales int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Removal(nil), l.removals...), l.created, l.scales
}
