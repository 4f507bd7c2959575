package temporal

import (
	"reflect"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/api/workflowservice/v1"
	"google.golang.org/protobuf/types/known/durationpb"
)

func TestBacklogOf(t *testing.T) {
	type vtq = workflowservice.DescribeWorkerDeploymentVersionResponse_VersionTaskQueue
	stats := func(n int64, age time.Duration) *taskqueuepb.TaskQueueStats {
		return &taskqueuepb.TaskQueueStats{ApproximateBacklogCount: n, ApproximateBacklogAge: durationpb.New(age), TasksAddRate: 1.5, TasksDispatchRate: 0.5}
	}
	got := backlogOf([]*vtq{
		{Name: "b", Type: enumspb.TASK_QUEUE_TYPE_WORKFLOW, Stats: stats(1, time.Second)},
		{Name: "a", Type: enumspb.TASK_QUEUE_TYPE_WORKFLOW, Stats: stats(0, 0)},
		{Name: "a", Type: enumspb.TASK_QUEUE_TYPE_ACTIVITY, Stats: stats(7, 3*time.Second)},
	})
	want := []TaskQueueBacklog{
		{TaskQueue: TaskQueue{Name: "a", Type: TaskQueueActivity}, Count: 7, Age: 3 * time.Second, AddRate: 1.5, DispatchRate: 0.5},
		{TaskQueue: TaskQueue{Name: "a", Type: TaskQueueWorkflow}, AddRate: 1.5, DispatchRate: 0.5},
		{TaskQueue: TaskQueue{Name: "b", Type: TaskQueueWorkflow}, Count: 1, Age: time.Second, AddRate: 1.5, DispatchRate: 0.5},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("backlogOf = %+v, want %+v", got, want)
	}
	if n := (VersionDetail{Backlog: got}).BacklogCount(); n != 8 {
		t.Errorf("BacklogCount = %d, want 8", n)
	}
	if got := backlogOf([]*vtq{{Name: "a", Stats: stats(1, 0)}, {Name: "b"}}); got != nil {
		t.Errorf("backlogOf without stats on one queue = %+v, want nil (unknown)", got)
	}
}
