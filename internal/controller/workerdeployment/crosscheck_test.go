package workerdeployment

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	deploymentpb "go.temporal.io/api/deployment/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"google.golang.org/protobuf/types/known/timestamppb"
	"k8s.io/apimachinery/pkg/types"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/internal/planner"
)

// A remembered cross-check stands only for the draining episode it was
// made in.
func TestDrainageCacheStamp(t *testing.T) {
	key := types.NamespacedName{Namespace: "ns", Name: "w"}
	t0 := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	since := t0.Add(-time.Hour)
	own := planner.OwnDrainage{Drained: true, ChangedAt: t0.Add(-30 * time.Minute), CheckedAt: t0, DrainingSince: since}
	state := func(status v1alpha1.VersionStatus, drainingSince time.Time) *planner.TemporalState {
		return &planner.TemporalState{Versions: []planner.TemporalVersion{{BuildID: "v1", Status: status, DrainingSince: &drainingSince}}}
	}

	var c drainageDescribes
	c.put(key, "v1", own)
	s := state(v1alpha1.VersionDraining, since)
	c.stamp(key, s)
	if got := s.Versions[0].OwnDrainage; got == nil || *got != own {
		t.Fatalf("same episode: OwnDrainage = %+v, want %+v", got, own)
	}

	s = state(v1alpha1.VersionDraining, t0.Add(-time.Minute)) // current again, then left again
	c.stamp(key, s)
	if got := s.Versions[0].OwnDrainage; got != nil {
		t.Fatalf("a later episode took the earlier one's report: %+v", got)
	}
	s = state(v1alpha1.VersionDraining, since)
	c.stamp(key, s)
	if got := s.Versions[0].OwnDrainage; got != nil {
		t.Fatalf("an entry dropped for a later episode came back: %+v", got)
	}

	c.put(key, "v1", own)
	s = state(v1alpha1.VersionDrained, since) // the summary caught up
	c.stamp(key, s)
	if s.Versions[0].OwnDrainage != nil || len(c.m[key]) != 0 {
		t.Fatalf("summary drained: OwnDrainage %+v, entries %v; want neither", s.Versions[0].OwnDrainage, c.m[key])
	}
}

// An old version the summary keeps draining, whose Deployment is gone and
// which reported itself drained, is described for pollers and deleted from
// Temporal on the next pass: the chaos scenario TestStaleDrainageSummary
// found it left in Temporal for good, since the remembered report was
// applied only after the describes for pollers had been chosen.
func TestCrossCheckedDrainedVersionLeavesTemporal(t *testing.T) {
	f := newFixture(t)
	f.runningDeployment()
	f.registered(true, enumspb.WORKER_DEPLOYMENT_VERSION_STATUS_CURRENT)
	const old = "v0-0123456789abcdef"
	deactivated := f.now.Add(-10 * time.Minute)
	f.temporal.state.VersionSummaries = append(f.temporal.state.VersionSummaries, &deploymentpb.WorkerDeploymentInfo_WorkerDeploymentVersionSummary{
		DeploymentVersion:    &deploymentpb.WorkerDeploymentVersion{DeploymentName: "shop/orders", BuildId: old},
		Status:               enumspb.WORKER_DEPLOYMENT_VERSION_STATUS_DRAINING,
		DrainageInfo:         &deploymentpb.VersionDrainageInfo{Status: enumspb.VERSION_DRAINAGE_STATUS_DRAINING, LastChangedTime: timestamppb.New(deactivated)},
		CreateTime:           timestamppb.New(f.now.Add(-2 * time.Hour)),
		LastDeactivationTime: timestamppb.New(deactivated),
	})
	f.temporal.drainedAt = map[string]time.Time{old: deactivated.Add(time.Minute)}
	f.drainage = map[types.NamespacedName]map[string]planner.OwnDrainage{}

	if _, tmprl, _ := f.reconcile(); len(tmprl) != 0 {
		t.Fatalf("first pass (the cross-check) wrote to Temporal: %q", tmprl)
	}
	if len(f.drainage[keyOf(f.twd)]) != 1 {
		t.Fatalf("the cross-check left no report: %v", f.drainage)
	}
	f.now = f.now.Add(20 * time.Second)
	want := []string{fmt.Sprintf("DeleteWorkerDeploymentVersion %q skipDrainage=false", old)}
	if _, tmprl, _ := f.reconcile(); !reflect.DeepEqual(tmprl, want) {
		t.Fatalf("second pass: Temporal writes = %q, want %q", tmprl, want)
	}
}
