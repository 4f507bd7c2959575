package workerdeployment

import (
	"context"
	"slices"
	"testing"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	sdkclient "go.temporal.io/sdk/client"
	"google.golang.org/grpc"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/internal/planner"
	"github.com/rainbow-deploy/rainbow/internal/temporal"
)

// TestReusedPassBringsTheLookForward: a pass on a remembered state that
// deleted a retired version's Deployment, and so now waits for Temporal to
// forget its pollers, makes the next pass from its own look on describe; a
// later look, or a pass that did something else, leaves the state as it was.
func TestReusedPassBringsTheLookForward(t *testing.T) {
	t0 := time.Date(2026, 11, 25, 20, 0, 0, 0, time.UTC)
	deleted := planner.Result{DeleteDeployments: []planner.DeleteDeployment{{BuildID: "old"}}}
	twd := &v1alpha1.TemporalWorkerDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "w", UID: "u", Generation: 1}}
	for _, tc := range []struct {
		name    string
		res     planner.Result
		requeue time.Duration
		want    time.Time
	}{
		{"acted, sooner look", deleted, 20 * time.Second, t0.Add(5*time.Second + 20*time.Second - minRequeue)},
		{"acted, later look", deleted, time.Minute, t0.Add(time.Minute - minRequeue)},
		{"did nothing, sooner look", planner.Result{}, 20 * time.Second, t0.Add(time.Minute - minRequeue)},
		{"scaled, sooner look", planner.Result{Scale: []planner.Scale{{BuildID: "old"}}}, 20 * time.Second, t0.Add(time.Minute - minRequeue)},
	} {
		var c rolloutDescribes
		o := &observation{twd: twd, api: &temporal.API{}, input: planner.Input{Temporal: &planner.TemporalState{Exists: true}}}
		rememberRecent(&c, o, planner.Result{}, outcome{}, time.Minute, t0)
		o.reused = true
		rememberRecent(&c, o, tc.res, outcome{}, tc.requeue, t0.Add(5*time.Second))
		if got, _ := c.lookup(keyOf(twd)); !got.Until.Equal(tc.want) {
			t.Errorf("%s: remembered until %s, want %s", tc.name, got.Until, tc.want)
		}
	}
}

// TestAcceptedSetCurrentRemembersTheQueues: the task queues a version had
// registered when described for its routing write stand as the current
// version's once Temporal accepted it current, so the next rollout's
// routing pass does not describe it again; a ramp, or a refused write,
// leaves the store as it was.
func TestAcceptedSetCurrentRemembersTheQueues(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 1, 0, 0, 0, time.UTC)
	twd := &v1alpha1.TemporalWorkerDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "orders", UID: "u", Generation: 1}}
	queues := []temporal.TaskQueue{{Name: "q", Type: temporal.TaskQueueActivity}, {Name: "q", Type: temporal.TaskQueueWorkflow}}
	for _, tc := range []struct {
		name    string
		routing planner.Routing
		refused bool
		want    bool
	}{
		{"set current", planner.Routing{Op: planner.SetCurrent, BuildID: "v2"}, false, true},
		{"a ramp", planner.Routing{Op: planner.SetRamp, BuildID: "v2", RampPercentage: 10}, false, false},
		{"refused", planner.Routing{Op: planner.SetCurrent, BuildID: "v2"}, true, false},
	} {
		var sdk sdkclient.Client = stubSDK{svc: &stubTemporal{polled: map[string]bool{}}}
		if tc.refused {
			sdk = refusingSDK{sdk.(stubSDK)}
		}
		o := &observation{twd: twd, api: temporal.NewAPI(sdk, "default", fixtureIdentity), deploymentName: "shop/orders",
			targetBuildID: "v2", token: []byte("token"),
			details: map[string]temporal.VersionDetail{"v2": {BuildID: "v2", TaskQueues: queues}},
			input: planner.Input{Now: t0, Identity: fixtureIdentity, Temporal: &planner.TemporalState{Exists: true, CurrentBuildID: "v1",
				ManagerIdentity: fixtureIdentity}}}
		r := &Reconciler{}
		var out outcome
		r.actTemporal(context.Background(), o, planner.Result{Routing: &tc.routing}, &out)
		e, ok := r.currentQueues.lookup(keyOf(twd))
		if ok != tc.want {
			t.Errorf("%s: remembered %v, want %v", tc.name, ok, tc.want)
			continue
		}
		if ok && (e.detail.BuildID != "v2" || !slices.Equal(e.detail.TaskQueues, queues) || !e.at.Equal(t0)) {
			t.Errorf("%s: remembered %+v at %s", tc.name, e.detail, e.at)
		}
	}
}

// refusingSDK's Temporal refuses every SetWorkerDeploymentCurrentVersion,
// as for a stale conflict token.
type refusingSDK struct{ stubSDK }

func (c refusingSDK) WorkflowService() workflowservice.WorkflowServiceClient {
	return refusingSetCurrent{c.svc}
}

type refusingSetCurrent struct{ *stubTemporal }

func (refusingSetCurrent) SetWorkerDeploymentCurrentVersion(context.Context, *workflowservice.SetWorkerDeploymentCurrentVersionRequest, ...grpc.CallOption) (*workflowservice.SetWorkerDeploymentCurrentVersionResponse, error) {
	return nil, serviceerror.NewFailedPrecondition("conflict token mismatch")
}
