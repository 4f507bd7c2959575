package workerdeployment

import (
	"testing"
	"time"

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
