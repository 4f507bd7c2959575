package temporal

import (
	"testing"
	"time"

	deploymentpb "go.temporal.io/api/deployment/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"google.golang.org/protobuf/types/known/timestamppb"
)

func TestPinnedQuery(t *testing.T) {
	if got, want := PinnedQuery("shop/orders", "v1-abc"),
		"TemporalWorkerDeploymentVersion = 'shop/orders:v1-abc' AND TemporalWorkflowVersioningBehavior = 'Pinned' AND ExecutionStatus = 'Running'"; got != want {
		t.Errorf("PinnedQuery = %s, want %s", got, want)
	}
	if got, want := PinnedQuery(`o'brien\x`, "v1"), `TemporalWorkerDeploymentVersion = 'o\'brien\\x:v1'`; got[:len(want)] != want {
		t.Errorf("a name with a quote and a backslash: %s, want it to start %s", got, want)
	}
}

func TestDrainingSince(t *testing.T) {
	deactivated, changed := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC), time.Date(2026, 3, 1, 11, 0, 0, 0, time.UTC)
	drainage := func(s enumspb.VersionDrainageStatus) *deploymentpb.VersionDrainageInfo {
		return &deploymentpb.VersionDrainageInfo{Status: s, LastChangedTime: timestamppb.New(changed)}
	}
	for name, c := range map[string]struct {
		vs   *deploymentpb.WorkerDeploymentInfo_WorkerDeploymentVersionSummary
		want *time.Time
	}{
		"the deactivation time": {&deploymentpb.WorkerDeploymentInfo_WorkerDeploymentVersionSummary{
			LastDeactivationTime: timestamppb.New(deactivated), DrainageInfo: drainage(enumspb.VERSION_DRAINAGE_STATUS_DRAINING)}, &deactivated},
		"without it, the drainage's start": {&deploymentpb.WorkerDeploymentInfo_WorkerDeploymentVersionSummary{
			DrainageInfo: drainage(enumspb.VERSION_DRAINAGE_STATUS_DRAINING)}, &changed},
		"drained, without it: unknown": {&deploymentpb.WorkerDeploymentInfo_WorkerDeploymentVersionSummary{
			DrainageInfo: drainage(enumspb.VERSION_DRAINAGE_STATUS_DRAINED)}, nil},
		"never deactivated": {&deploymentpb.WorkerDeploymentInfo_WorkerDeploymentVersionSummary{}, nil},
	} {
		got := drainingSince(c.vs)
		if (got == nil) != (c.want == nil) || (got != nil && !got.Equal(*c.want)) {
			t.Errorf("%s: drainingSince = %v, want %v", name, got, c.want)
		}
	}
}
