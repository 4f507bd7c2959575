package planner

import (
	"fmt"
	"testing"
)

// TestNoDeploymentWriteWithoutConnection: without a resolved connection
// the plan creates, updates and syncs no Deployment: their pods would get
// no Temporal address. (The executor used to drop such writes silently.)
func TestNoDeploymentWriteWithoutConnection(t *testing.T) {
	in := with(base(), func(in *Input) {
		dropDep(in, "v2")
		in.Server = Server{}
		in.Temporal = nil
		in.TemporalError = &Problem{Reason: "TemporalConnectionNotFound", Message: "TemporalConnection temporal not found"}
	})
	res := Plan(in)
	if res.CreateDeployment != nil || len(res.Events) > 0 {
		t.Errorf("create %+v, events %+v: want neither without a connection", res.CreateDeployment, res.Events)
	}
	if res.Ready.Reason != "TemporalConnectionNotFound" {
		t.Errorf("Ready reason %q, want the connection's problem", res.Ready.Reason)
	}
	in.Server = here
	if Plan(in).CreateDeployment == nil {
		t.Errorf("with the connection resolved the target's Deployment is not created")
	}
}

func FuzzNoDeploymentWriteWithoutConnection(f *testing.F) {
	f.Add([]byte("no connection"))
	f.Fuzz(func(t *testing.T, data []byte) {
		in := fuzzInput(data)
		in.Server = Server{}
		for _, err := range unconnectedViolations(Plan(in)) {
			t.Error(err)
		}
	})
}

func TestNoDeploymentWriteWithoutConnectionRandom(t *testing.T) {
	eachRandomInput(t, 521288629, 5000, func(in Input) []error {
		in.Server = Server{}
		return unconnectedViolations(Plan(in))
	})
}

func unconnectedViolations(res Result) []error {
	if res.CreateDeployment != nil || res.UpdateDeployment != nil || len(res.SyncDeployments) > 0 {
		return []error{fmt.Errorf("without a connection: create %+v, update %+v, sync %+v", res.CreateDeployment, res.UpdateDeployment, res.SyncDeployments)}
	}
	return nil
}
