package temporal

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	deploymentpb "go.temporal.io/api/deployment/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/api/workflowservice/v1"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/internal/inflight"
	"github.com/rainbow-deploy/rainbow/internal/planner"
)

func TestTaskQueuesReady(t *testing.T) {
	wf := TaskQueue{Name: "q", Type: TaskQueueWorkflow}
	act := TaskQueue{Name: "q", Type: TaskQueueActivity}
	other := TaskQueue{Name: "q2", Type: TaskQueueWorkflow}
	nexus := TaskQueue{Name: "q", Type: TaskQueueNexus}
	vd := func(tqs ...TaskQueue) VersionDetail { return VersionDetail{TaskQueues: tqs} }
	polling := func(d VersionDetail, tqs ...TaskQueue) VersionDetail { d.Polled = tqs; return d }
	cases := []struct {
		name            string
		target, current VersionDetail
		want            bool
	}{
		{"nothing registered", vd(), vd(), false},
		{"first version, one type", vd(wf), vd(), true},
		{"same queues", vd(wf, act), vd(act, wf), true},
		{"activity type not registered yet", vd(wf), vd(wf, act), false},
		{"extra queue is fine", vd(wf, act, other), vd(wf, act), true},
		{"queue dropped", vd(other), vd(wf), false},
		{"target has none while current has some", vd(), vd(wf), false},
		{"first version: activity polled, not registered yet", polling(vd(wf), act, wf), vd(), false},
		{"first version: every polled type registered", polling(vd(act, wf), act, wf), vd(), true},
		{"registered but no longer polled is fine", polling(vd(act, wf), wf), vd(), true},
		{"a new type polled, not registered yet, beside a current version", polling(vd(wf, act), act, nexus, wf), vd(wf, act), false},
	}
	for _, tc := range cases {
		if got := TaskQueuesReady(tc.target, tc.current); got != tc.want {
			t.Errorf("%s: TaskQueuesReady = %t, want %t", tc.name, got, tc.want)
		}
	}
}

func TestMissingTaskQueues(t *testing.T) {
	wf := TaskQueue{Name: "orders", Type: TaskQueueWorkflow}
	act := TaskQueue{Name: "orders", Type: TaskQueueActivity}
	wrong := TaskQueue{Name: "orders-typo", Type: TaskQueueWorkflow}
	vd := func(tqs ...TaskQueue) VersionDetail { return VersionDetail{TaskQueues: tqs} }
	if got := MissingTaskQueues(vd(wrong), vd(wf, act)); !slices.Equal(got, []string{"orders (Activity)", "orders (Workflow)"}) {
		t.Errorf("a version polling another queue misses %v, want both of the current version's", got)
	}
	if got := MissingTaskQueues(vd(wf, act, wrong), vd(wf, act)); got != nil {
		t.Errorf("a version polling every queue of the current version misses %v, want none", got)
	}
	if got := MissingTaskQueues(vd(wrong), vd()); got != nil {
		t.Errorf("with nothing current, missing %v, want none", got)
	}
}

// TestVersionStatus: Temporal's own status wins; without one, routing and
// drainage decide; with neither, the status is Unknown, never Inactive,
// which could lose the version its workers.
func TestVersionStatus(t *testing.T) {
	routing := &planner.TemporalState{CurrentBuildID: "cur", RampingBuildID: "ramp"}
	drainage := func(s enumspb.VersionDrainageStatus) *deploymentpb.VersionDrainageInfo {
		return &deploymentpb.VersionDrainageInfo{Status: s}
	}
	cases := map[string]struct {
		st    enumspb.WorkerDeploymentVersionStatus
		build string
		d     *deploymentpb.VersionDrainageInfo
		want  v1alpha1.VersionStatus
	}{
		"reported current":                    {enumspb.WORKER_DEPLOYMENT_VERSION_STATUS_CURRENT, "v", nil, v1alpha1.VersionCurrent},
		"reported draining":                   {enumspb.WORKER_DEPLOYMENT_VERSION_STATUS_DRAINING, "v", nil, v1alpha1.VersionDraining},
		"reported drained":                    {enumspb.WORKER_DEPLOYMENT_VERSION_STATUS_DRAINED, "v", nil, v1alpha1.VersionDrained},
		"reported inactive":                   {enumspb.WORKER_DEPLOYMENT_VERSION_STATUS_INACTIVE, "v", nil, v1alpha1.VersionInactive},
		"created through the API":             {enumspb.WORKER_DEPLOYMENT_VERSION_STATUS_CREATED, "v", nil, v1alpha1.VersionInactive},
		"unspecified, current in routing":     {0, "cur", nil, v1alpha1.VersionCurrent},
		"unspecified, ramping in routing":     {0, "ramp", nil, v1alpha1.VersionRamping},
		"unspecified, drainage says draining": {0, "v", drainage(enumspb.VERSION_DRAINAGE_STATUS_DRAINING), v1alpha1.VersionDraining},
		"unspecified, drainage says drained":  {0, "v", drainage(enumspb.VERSION_DRAINAGE_STATUS_DRAINED), v1alpha1.VersionDrained},
		"unspecified, no drainage":            {0, "v", nil, v1alpha1.VersionUnknown},
		"unspecified, drainage unspecified":   {0, "v", drainage(enumspb.VERSION_DRAINAGE_STATUS_UNSPECIFIED), v1alpha1.VersionUnknown},
		"a status this code does not know":    {enumspb.WorkerDeploymentVersionStatus(99), "v", nil, v1alpha1.VersionUnknown},
	}
	for name, tc := range cases {
		if got := versionStatus(tc.st, tc.build, routing, tc.d); got != tc.want {
			t.Errorf("%s: versionStatus = %s, want %s", name, got, tc.want)
		}
	}
}

// The messages are the server's own (go.temporal.io/server 1.32,
// service/worker/workerdeployment/util.go and workflow.go).
func TestWrapErr(t *testing.T) {
	cases := []struct {
		err     error
		kind    error
		manager string
	}{
		{serviceerror.NewFailedPrecondition("conflict token mismatch"), ErrConflict, ""},
		{serviceerror.NewFailedPrecondition(fmt.Sprintf("ManagerIdentity '%s' is set and does not match user identity '%s'; to proceed, set your own identity as the ManagerIdentity, remove the ManagerIdentity, or wait for the other client to do so", "rainbow/ctl", "me")), ErrManagedByOther, "rainbow/ctl"},
		{serviceerror.NewFailedPrecondition("proposed ramping version 'd:v2' is missing active task queues from the current version; these would become unversioned if it is set as the ramping version"), ErrMissingTaskQueues, ""},
		{serviceerror.NewFailedPrecondition("Pinned version 'd:v2' is not present in task queue 'q' of type 'Workflow'"), ErrMissingTaskQueues, ""},
		{serviceerror.NewFailedPrecondition("version 'd:v1' cannot be deleted since it has active pollers"), ErrVersionInUse, ""},
		{serviceerror.NewInternal("version 'd:v1' cannot be deleted since it is draining"), ErrVersionInUse, ""},
		{serviceerror.NewFailedPrecondition("something new"), ErrRefused, ""},
		{serviceerror.NewNotFound("no Worker Deployment found with name 'd'"), ErrNotFound, ""},
		{serviceerror.NewUnavailable("down"), nil, ""},
		{serviceerror.NewNamespaceNotFound("ns"), nil, ""},
	}
	sentinels := []error{ErrConflict, ErrManagedByOther, ErrNotFound, ErrMissingTaskQueues, ErrVersionInUse, ErrRefused}
	for _, tc := range cases {
		err := wrapErr("Op", "d", "v1", tc.err)
		for _, s := range sentinels {
			if got, want := errors.Is(err, s), s == tc.kind; got != want {
				t.Errorf("%v: errors.Is(%v) = %t, want %t", tc.err, s, got, want)
			}
		}
		var e *Error
		if !errors.As(err, &e) || e.Manager != tc.manager {
			t.Errorf("%v: manager = %+v, want %q", tc.err, e, tc.manager)
		}
		// The cause stays reachable.
		if !errors.Is(err, tc.err) {
			t.Errorf("%v: cause lost", tc.err)
		}
	}
	if wrapErr("Op", "", "", nil) != nil {
		t.Error("nil error wrapped")
	}
}

func TestShortMethod(t *testing.T) {
	if got := shortMethod("/temporal.api.workflowservice.v1.WorkflowService/DescribeWorkerDeployment"); got != "DescribeWorkerDeployment" {
		t.Errorf("shortMethod = %q", got)
	}
	if got := shortMethod("Plain"); got != "Plain" {
		t.Errorf("shortMethod = %q", got)
	}
}

func TestGateWorkflowID(t *testing.T) {
	a, b := GateWorkflowID("ns/orders", "v2"), GateWorkflowID("ns/orders", "v2")
	if a != b {
		t.Fatal("not deterministic")
	}
	if a == GateWorkflowID("ns/orders2", "v2") || a == GateWorkflowID("ns/orders", "v3") {
		t.Fatal("collides")
	}
	if want := "rainbow-gate-"; a[:len(want)] != want || a[len(a)-3:] != "-v2" {
		t.Fatalf("id = %q", a)
	}
}

func TestRetryAfter(t *testing.T) {
	busy := func(c enumspb.ResourceExhaustedCause) error {
		return wrapErr("Describe", "d", "", &serviceerror.ResourceExhausted{Cause: c, Message: "x"})
	}
	cases := map[string]struct {
		err  error
		want time.Duration
	}{
		"busy workflow: soon":     {busy(enumspb.RESOURCE_EXHAUSTED_CAUSE_BUSY_WORKFLOW), 200 * time.Millisecond},
		"concurrent limit: soon":  {busy(enumspb.RESOURCE_EXHAUSTED_CAUSE_CONCURRENT_LIMIT), 200 * time.Millisecond},
		"rate limit: a second":    {busy(enumspb.RESOURCE_EXHAUSTED_CAUSE_RPS_LIMIT), time.Second},
		"anything else: a second": {errors.New("x"), time.Second},
	}
	for name, tc := range cases {
		if got := RetryAfter(tc.err); got != tc.want {
			t.Errorf("%s: RetryAfter = %s, want %s", name, got, tc.want)
		}
	}
}

func TestServerVersion(t *testing.T) {
	cases := map[string]struct {
		in         string
		want       ServerVersion
		ok, tooOld bool
	}{
		"release":                  {"1.32.1", ServerVersion{1, 32, 1}, true, false},
		"the minimum":              {"1.29.0", ServerVersion{1, 29, 0}, true, false},
		"last release before":      {"1.28.9", ServerVersion{1, 28, 9}, true, true},
		"older minor, more digits": {"1.9.40", ServerVersion{1, 9, 40}, true, true},
		"newer major":              {"2.0.0", ServerVersion{2, 0, 0}, true, false},
		"v prefix":                 {"v1.30.4", ServerVersion{1, 30, 4}, true, false},
		"no patch":                 {"1.27", ServerVersion{1, 27, 0}, true, true},
		"pre-release suffix":       {"1.29.0-rc.1", ServerVersion{1, 29, 0}, true, false},
		"build suffix":             {"1.27.2+abc", ServerVersion{1, 27, 2}, true, true},
		"empty: unknown":           {"", ServerVersion{}, false, false},
		"not a version":            {"cloud", ServerVersion{}, false, false},
		"four parts":               {"1.28.0.1", ServerVersion{}, false, false},
		"huge number":              {"1.99999999999999999999.0", ServerVersion{}, false, false},
	}
	for name, tc := range cases {
		got, ok := ParseServerVersion(tc.in)
		if ok != tc.ok || got != tc.want {
			t.Errorf("%s: ParseServerVersion(%q) = %v, %t; want %v, %t", name, tc.in, got, ok, tc.want, tc.ok)
		}
		if old := ServerTooOld(tc.in); old != tc.tooOld {
			t.Errorf("%s: ServerTooOld(%q) = %t, want %t", name, tc.in, old, tc.tooOld)
		}
	}
	if !(ServerVersion{1, 28, 9}).Less(ServerVersion{1, 29, 0}) || (ServerVersion{1, 29, 0}).Less(ServerVersion{1, 29, 0}) ||
		!(ServerVersion{1, 29, 0}).Less(ServerVersion{1, 29, 1}) || (ServerVersion{2, 0, 0}).Less(ServerVersion{1, 99, 99}) {
		t.Error("Less orders versions wrongly")
	}
}

// TestPollersOf reads which types this version's workers poll from a
// DescribeTaskQueue answer: versioned pollers under the version's key,
// unversioned ones under the empty key; other versions are not ours.
func TestPollersOf(t *testing.T) {
	poller := func(m enumspb.WorkerVersioningMode) *taskqueuepb.PollerInfo {
		return &taskqueuepb.PollerInfo{DeploymentOptions: &deploymentpb.WorkerDeploymentOptions{WorkerVersioningMode: m}}
	}
	versioned, unversioned := poller(enumspb.WORKER_VERSIONING_MODE_VERSIONED), poller(enumspb.WORKER_VERSIONING_MODE_UNVERSIONED)
	types := func(byType map[enumspb.TaskQueueType][]*taskqueuepb.PollerInfo) *taskqueuepb.TaskQueueVersionInfo {
		vi := &taskqueuepb.TaskQueueVersionInfo{TypesInfo: map[int32]*taskqueuepb.TaskQueueTypeInfo{}}
		for t, ps := range byType {
			vi.TypesInfo[int32(t)] = &taskqueuepb.TaskQueueTypeInfo{Pollers: ps}
		}
		return vi
	}
	const wf, act, nexus = enumspb.TASK_QUEUE_TYPE_WORKFLOW, enumspb.TASK_QUEUE_TYPE_ACTIVITY, enumspb.TASK_QUEUE_TYPE_NEXUS
	cases := map[string]struct {
		info            map[string]*taskqueuepb.TaskQueueVersionInfo
		want            []TaskQueueType
		wantUnversioned bool
	}{
		"nobody polls": {info: map[string]*taskqueuepb.TaskQueueVersionInfo{
			"d:v1": types(map[enumspb.TaskQueueType][]*taskqueuepb.PollerInfo{wf: nil, act: nil, nexus: nil}),
		}},
		"workflow and activity, each type once": {
			info: map[string]*taskqueuepb.TaskQueueVersionInfo{
				"d:v1": types(map[enumspb.TaskQueueType][]*taskqueuepb.PollerInfo{act: {versioned}, wf: {versioned, versioned}, nexus: nil}),
			},
			want: []TaskQueueType{TaskQueueActivity, TaskQueueWorkflow},
		},
		"nexus too": {
			info: map[string]*taskqueuepb.TaskQueueVersionInfo{
				"d:v1": types(map[enumspb.TaskQueueType][]*taskqueuepb.PollerInfo{nexus: {versioned}}),
			},
			want: []TaskQueueType{TaskQueueNexus},
		},
		"another version's and unversioned pollers are not ours": {
			info: map[string]*taskqueuepb.TaskQueueVersionInfo{
				"d:v0": types(map[enumspb.TaskQueueType][]*taskqueuepb.PollerInfo{wf: {versioned}}),
				"":     types(map[enumspb.TaskQueueType][]*taskqueuepb.PollerInfo{act: {unversioned}}),
				"d:v1": types(map[enumspb.TaskQueueType][]*taskqueuepb.PollerInfo{wf: {unversioned}}),
			},
			wantUnversioned: true,
		},
	}
	for name, tc := range cases {
		//nolint:staticcheck // SA1019: the field pollers reads.
		resp := &workflowservice.DescribeTaskQueueResponse{VersionsInfo: tc.info}
		got, unv := pollersOf(resp, "d:v1")
		if !slices.Equal(got, tc.want) || unv != tc.wantUnversioned {
			t.Errorf("%s: pollersOf = %v, %t; want %v, %t", name, got, unv, tc.want, tc.wantUnversioned)
		}
	}
}

// TestStateFromInfoActivation: a version's first activation time is kept,
// and a server that reports it for one version is taken to report it for
// all, so a version without one was never routed.
func TestStateFromInfoActivation(t *testing.T) {
	ts := timestamppb.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	summary := func(build string, status enumspb.WorkerDeploymentVersionStatus, activated *timestamppb.Timestamp) *deploymentpb.WorkerDeploymentInfo_WorkerDeploymentVersionSummary {
		return &deploymentpb.WorkerDeploymentInfo_WorkerDeploymentVersionSummary{
			DeploymentVersion:   &deploymentpb.WorkerDeploymentVersion{DeploymentName: "d", BuildId: build},
			Status:              status,
			FirstActivationTime: activated,
		}
	}
	s := stateFromInfo(&deploymentpb.WorkerDeploymentInfo{VersionSummaries: []*deploymentpb.WorkerDeploymentInfo_WorkerDeploymentVersionSummary{
		summary("v1", enumspb.WORKER_DEPLOYMENT_VERSION_STATUS_CURRENT, ts),
		summary("v2", enumspb.WORKER_DEPLOYMENT_VERSION_STATUS_DRAINED, nil),
	}})
	if !s.ReportsActivation || s.Versions[0].FirstActivatedAt == nil || !s.Versions[0].FirstActivatedAt.Equal(ts.AsTime()) || s.Versions[1].FirstActivatedAt != nil {
		t.Fatalf("activation not kept: %+v", s)
	}
	if s := stateFromInfo(&deploymentpb.WorkerDeploymentInfo{VersionSummaries: []*deploymentpb.WorkerDeploymentInfo_WorkerDeploymentVersionSummary{
		summary("v1", enumspb.WORKER_DEPLOYMENT_VERSION_STATUS_CURRENT, nil),
	}}); s.ReportsActivation {
		t.Fatalf("a server that reports no activation time was taken to report them: %+v", s)
	}
}

func TestStepGateWorkflowID(t *testing.T) {
	rollout := GateWorkflowID("ns/orders", "v2")
	if StepGateWorkflowID("ns/orders", "v2", 0) != rollout {
		t.Fatal("step 0 is not the rollout gate's ID")
	}
	ids := map[string]bool{rollout: true}
	for _, id := range []string{StepGateWorkflowID("ns/orders", "v2", 10), StepGateWorkflowID("ns/orders", "v2", 50), StepGateWorkflowID("ns/orders", "v3", 10)} {
		if ids[id] {
			t.Fatalf("%q collides", id)
		}
		ids[id] = true
	}
}

// TestLimitedCall: the in-flight limit holds the worker-deployment calls
// and the task-queue describes, routing writes first and the retirement's
// deletes and metadata last; visibility and workflow calls go as they come.
func TestLimitedCall(t *testing.T) {
	for method, want := range map[string]struct {
		limited bool
		class   inflight.Class
	}{
		"SetWorkerDeploymentCurrentVersion":     {true, inflight.Urgent},
		"SetWorkerDeploymentRampingVersion":     {true, inflight.Urgent},
		"SetWorkerDeploymentManager":            {true, inflight.Urgent},
		"DescribeWorkerDeployment":              {true, inflight.Normal},
		"DescribeWorkerDeploymentVersion":       {true, inflight.Normal},
		"ListWorkerDeployments":                 {true, inflight.Normal},
		"DescribeTaskQueue":                     {true, inflight.Normal},
		"DeleteWorkerDeploymentVersion":         {true, inflight.Background},
		"DeleteWorkerDeployment":                {true, inflight.Background},
		"UpdateWorkerDeploymentVersionMetadata": {true, inflight.Background},
		"CountWorkflowExecutions":               {false, 0},
		"ListWorkflowExecutions":                {false, 0},
		"StartWorkflowExecution":                {false, 0},
		"GetWorkflowExecutionHistory":           {false, 0},
	} {
		if limited, class := limitedCall(method); limited != want.limited || class != want.class {
			t.Errorf("%s: limited %v, class %d; want %v, %d", method, limited, class, want.limited, want.class)
		}
	}
}

// TestOverloaded: only a refusal for the namespace's or server's load cuts
// the calls in flight; a busy worker deployment does not.
func TestOverloaded(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{serviceerror.NewResourceExhausted(enumspb.RESOURCE_EXHAUSTED_CAUSE_RPS_LIMIT, "namespace rate limit exceeded"), true},
		{serviceerror.NewResourceExhausted(enumspb.RESOURCE_EXHAUSTED_CAUSE_SYSTEM_OVERLOADED, "overloaded"), true},
		{serviceerror.NewResourceExhausted(enumspb.RESOURCE_EXHAUSTED_CAUSE_CONCURRENT_LIMIT, "too many"), true},
		{serviceerror.NewResourceExhausted(enumspb.RESOURCE_EXHAUSTED_CAUSE_UNSPECIFIED, "?"), true},
		{fmt.Errorf("describe: %w", serviceerror.NewResourceExhausted(enumspb.RESOURCE_EXHAUSTED_CAUSE_PERSISTENCE_LIMIT, "db")), true},
		{serviceerror.NewResourceExhausted(enumspb.RESOURCE_EXHAUSTED_CAUSE_BUSY_WORKFLOW, "workflow is busy"), false},
		{serviceerror.NewResourceExhausted(enumspb.RESOURCE_EXHAUSTED_CAUSE_WORKER_DEPLOYMENT_LIMITS, "too many deployments"), false},
		{serviceerror.NewResourceExhausted(enumspb.RESOURCE_EXHAUSTED_CAUSE_PERSISTENCE_STORAGE_LIMIT, "full"), false},
		{serviceerror.NewDeadlineExceeded("late"), false},
		{serviceerror.NewNotFound("gone"), false},
		{nil, false},
	} {
		if got := Overloaded(tc.err); got != tc.want {
			t.Errorf("Overloaded(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
