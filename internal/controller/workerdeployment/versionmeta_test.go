package workerdeployment

import (
	"maps"
	"reflect"
	"testing"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/converter"
)

func TestMetadataToWrite(t *testing.T) {
	want := map[string]string{"a": "1", "b": "2"}
	for name, c := range map[string]struct {
		have, upsert map[string]string
	}{
		"none yet: all":                      {have: nil, upsert: want},
		"all set: no write":                  {have: map[string]string{"a": "1", "b": "2"}, upsert: nil},
		"others' entries do not matter":      {have: map[string]string{"a": "1", "b": "2", "team": "x"}, upsert: nil},
		"one changed (a new image): only it": {have: map[string]string{"a": "1", "b": "old"}, upsert: map[string]string{"b": "2"}},
		"one missing (an older manager): it": {have: map[string]string{"a": "1"}, upsert: map[string]string{"b": "2"}},
	} {
		if got := metadataToWrite(want, c.have); !reflect.DeepEqual(got, c.upsert) {
			t.Errorf("%s: metadataToWrite = %v, want %v", name, got, c.upsert)
		}
	}
}

// TestVersionMetadataWrittenOnce: the pass that routes to a new version
// writes its metadata once, after the routing write; a later pass that
// describes it again finds it set and writes nothing.
func TestVersionMetadataWrittenOnce(t *testing.T) {
	f := newFixture(t)
	f.runningDeployment()
	f.registered(false, enumspb.WORKER_DEPLOYMENT_VERSION_STATUS_INACTIVE)
	build := f.build()

	_, writes, _ := f.reconcile()
	if len(writes) == 0 {
		t.Fatal("the first pass made no routing write; the scenario is wrong")
	}
	if want := []string{`UpdateWorkerDeploymentVersionMetadata "` + build + `" by ` + fixtureIdentity}; !reflect.DeepEqual(f.temporal.metadataWrites, want) {
		t.Fatalf("metadata writes = %q, want %q", f.temporal.metadataWrites, want)
	}
	got := map[string]string{}
	for k, p := range f.temporal.metadata[build] {
		var v string
		if err := converter.GetDefaultDataConverter().FromPayload(p, &v); err != nil {
			t.Fatalf("entry %s: %v", k, err)
		}
		got[k] = v
	}
	want := map[string]string{
		MetadataController: fixtureIdentity, MetadataControllerVersion: "devel",
		MetadataTWD: "shop/orders", MetadataImage: "orders:v1",
	}
	if !maps.Equal(got, want) {
		t.Errorf("metadata = %v, want %v", got, want)
	}

	// Routed, not yet confirmed: the next pass describes the target again.
	f.temporal.writes = nil
	f.reconcile()
	if len(f.temporal.metadataWrites) != 1 {
		t.Errorf("metadata writes after a second pass = %q, want the first one only", f.temporal.metadataWrites)
	}
}

// TestVersionMetadataOfAnotherManager: a worker deployment someone else
// manages gets no metadata from the controller.
func TestVersionMetadataOfAnotherManager(t *testing.T) {
	f := newFixture(t)
	f.runningDeployment()
	f.registered(false, enumspb.WORKER_DEPLOYMENT_VERSION_STATUS_INACTIVE)
	f.temporal.state.ManagerIdentity = "someone-else"
	f.reconcile()
	if len(f.temporal.metadataWrites) != 0 {
		t.Errorf("metadata writes = %q, want none", f.temporal.metadataWrites)
	}
}
