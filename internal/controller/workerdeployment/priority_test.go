package workerdeployment

import (
	"errors"
	"testing"

	enumspb "go.temporal.io/api/enums/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// A pass of a rollout under way is queued before passes that would start
// one, or look at a TWD with nothing to do.
func TestQueuePriority(t *testing.T) {
	cases := map[string]struct {
		setup func(*fixture)
		want  int
	}{
		"the rollout starts: its Deployment is created": {
			setup: func(f *fixture) {},
			want:  priorityMoving,
		},
		"waiting for the target's Deployment to become available": {
			setup: func(f *fixture) {
				d := f.runningDeployment()
				d.Status.AvailableReplicas = 0
				d.Status.Conditions = []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionFalse}}
			},
			want: priorityMoving,
		},
		"workers poll and the version is made current: the rollout is done": {
			setup: func(f *fixture) {
				f.runningDeployment()
				f.registered(false, enumspb.WORKER_DEPLOYMENT_VERSION_STATUS_INACTIVE)
			},
			want: 0,
		},
		"the target is current": {
			setup: func(f *fixture) {
				f.runningDeployment()
				f.registered(true, enumspb.WORKER_DEPLOYMENT_VERSION_STATUS_CURRENT)
			},
			want: 0,
		},
		"the action failed: retried without rank, so failures cannot starve other TWDs": {
			setup: func(f *fixture) {
				f.failKube = func(verb string, _ client.Object) error {
					if verb == "create" {
						return errors.New("forbidden")
					}
					return nil
				}
			},
			want: 0,
		},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			c.setup(f)
			_, _, res := f.reconcile()
			if res.Priority == nil {
				t.Fatalf("no priority set; the queue would keep the last one")
			}
			if *res.Priority != c.want {
				t.Errorf("priority = %d, want %d", *res.Priority, c.want)
			}
		})
	}
}
