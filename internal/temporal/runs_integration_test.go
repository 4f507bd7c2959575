package temporal

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/rainbow-deploy/rainbow/internal/planner"
)

// TestManagerChangeStartsARun: a change of the manager identity does not
// show in ListWorkerDeployments, but starts a run of the worker
// deployment's workflow, which DeploymentsChangedSince reports: the
// controller's cheap way to see a manager role handed back.
func TestManagerChangeStartsARun(t *testing.T) {
	ht := needEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	api := newAPI(ht, "rainbow-test-"+ht.Suffix)
	name := "runs-" + ht.Suffix
	startWorker(ht, name, "v1", ht.TaskQueue("q"))
	describeUntil(ht, api, name, 20*time.Second, "v1 registered", func(s *planner.TemporalState) bool {
		_, ok := version(s, "v1")
		return ok
	})
	ht.Eventually(15*time.Second, "v1 registered every task queue type", func() (bool, string) {
		d, err := api.DescribeVersion(ctx, name, "v1")
		return err == nil && len(d.TaskQueues) == 2, fmt.Sprintf("%+v %v", d, err)
	})
	quiet := time.Now()
	listed := func() DeploymentSummary {
		l, err := api.ListDeployments(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return l[name]
	}
	before := listed()
	if changed, err := api.DeploymentsChangedSince(ctx, quiet); err != nil || !changed[name].IsZero() {
		t.Fatalf("before any change: %v, %v; want no run of %s", changed, err, name)
	}

	person := NewAPI(api.Client(), env.Info.TemporalNamespace, "a-person")
	if _, err := person.BecomeManager(ctx, name, nil); err != nil {
		t.Fatal(err)
	}
	ht.Eventually(20*time.Second, "a run started after the manager changed", func() (bool, string) {
		changed, err := api.DeploymentsChangedSince(ctx, quiet)
		return err == nil && changed[name].After(quiet), fmt.Sprintf("%v %v", changed, err)
	})
	// What makes the query needed; logged, since a later server may add it.
	if after := listed(); after == before {
		t.Logf("ListWorkerDeployments shows nothing of the manager change: %+v", after)
	} else {
		t.Logf("ListWorkerDeployments changed with the manager: %+v -> %+v", before, after)
	}
}
