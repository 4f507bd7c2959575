package workerdeployment

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/rainbow-deploy/rainbow/internal/planner"
)

// priorityFinish ranks the passes that can finish a rollout above all
// others (0, and controller-runtime's -100 for a restart's initial list):
// the one a Deployment becoming available starts, and one that routes
// next. When hundreds of TWDs change at once they go before the passes
// that would start more rollouts. The looks in between (for workers, for
// a routing change to land) are not ranked: ranked, they took the
// workers from the starts and doubled Temporal's calls
// (docs/performance.md, "Work-queue ordering").
const priorityFinish = 10

// nextPassPriority is the rank of a TWD's next pass. Every pass sets it,
// since the queue would otherwise keep the rank the pass was taken with.
func nextPassPriority(shown planner.Report, out outcome) *int {
	if shown.Routes && len(out.failed) == 0 {
		return ptr.To(priorityFinish)
	}
	return ptr.To(0)
}

// rankAvailable queues a Deployment's TWD as its owner handler does, and
// ranks the event that shows the Deployment became available.
type rankAvailable struct {
	handler.EventHandler
}

func (h rankAvailable) Update(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	old, okOld := e.ObjectOld.(*appsv1.Deployment)
	cur, okNew := e.ObjectNew.(*appsv1.Deployment)
	if pq, ok := q.(priorityqueue.PriorityQueue[reconcile.Request]); ok && okOld && okNew && !available(old) && available(cur) {
		q = rankedAdds{PriorityQueue: pq, priority: priorityFinish}
	}
	h.EventHandler.Update(ctx, e, q)
}

// rankedAdds gives every add that names no priority its own; the owner
// handler adds through controller-runtime's wrapper, which names none.
type rankedAdds struct {
	priorityqueue.PriorityQueue[reconcile.Request]
	priority int
}

func (q rankedAdds) Add(r reconcile.Request) {
	q.AddWithOpts(priorityqueue.AddOpts{}, r)
}

func (q rankedAdds) AddWithOpts(o priorityqueue.AddOpts, items ...reconcile.Request) {
	if o.Priority == nil {
		o.Priority = ptr.To(q.priority)
	}
	q.PriorityQueue.AddWithOpts(o, items...)
}
