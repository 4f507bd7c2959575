package temporal

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	deploymentpb "go.temporal.io/api/deployment/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/internal/planner"
)

// API wraps the Worker Deployment API and gate workflows of one namespace.
// It uses the raw WorkflowService because the SDK's handle hides fields the
// planner needs (manager identity, drainage and routing timestamps). Every
// write carries the identity, so Temporal records us as last modifier.
type API struct {
	c         client.Client
	namespace string
	identity  string
}

// NewAPI wraps c, a client of namespace. identity is the controller's
// Temporal identity (planner.Input.Identity).
func NewAPI(c client.Client, namespace, identity string) *API {
	return &API{c: c, namespace: namespace, identity: identity}
}

// Client is the wrapped SDK client.
func (a *API) Client() client.Client { return a.c }

// Identity is the identity writes carry.
func (a *API) Identity() string { return a.identity }

// Describe reads the worker deployment with one DescribeWorkerDeployment
// call and returns it with its conflict token. A deployment no worker has
// polled yet (or a deleted one) is Exists=false, not an error.
//
// Describe leaves TaskQueuesReady, HasPollers and UnversionedPollers unset:
// the deployment description does not carry them. See DescribeVersion for
// how to fill them with few calls.
func (a *API) Describe(ctx context.Context, deploymentName string) (*planner.TemporalState, []byte, error) {
	resp, err := a.c.WorkflowService().DescribeWorkerDeployment(ctx, &workflowservice.DescribeWorkerDeploymentRequest{
		Namespace:      a.namespace,
		DeploymentName: deploymentName,
	})
	if err != nil {
		var nf *serviceerror.NotFound
		if errors.As(err, &nf) {
			return &planner.TemporalState{}, nil, nil
		}
		return nil, nil, wrapErr("Describe", deploymentName, "", err)
	}
	return stateFromInfo(resp.GetWorkerDeploymentInfo()), resp.GetConflictToken(), nil
}

func stateFromInfo(info *deploymentpb.WorkerDeploymentInfo) *planner.TemporalState {
	rc := info.GetRoutingConfig()
	s := &planner.TemporalState{
		Exists:               true,
		ManagerIdentity:      info.GetManagerIdentity(),
		LastModifierIdentity: info.GetLastModifierIdentity(),
		CurrentBuildID:       rc.GetCurrentDeploymentVersion().GetBuildId(),
		RampingBuildID:       rc.GetRampingDeploymentVersion().GetBuildId(),
		// Servers before 1.29 leave it unspecified: their routing writes
		// return once applied.
		RoutingPropagating: info.GetRoutingConfigUpdateState() == enumspb.ROUTING_CONFIG_UPDATE_STATE_IN_PROGRESS,
	}
	s.RoutingChangedAt = routingChangedAt(rc)
	// A ramp to unversioned workers has no build ID; the planner has no
	// way to express it, so it is reported as no ramp.
	if s.RampingBuildID != "" {
		s.RampPercentage = pct(rc.GetRampingVersionPercentage())
		s.RampChangedAt = rc.GetRampingVersionPercentageChangedTime().AsTime()
	}
	for _, vs := range info.GetVersionSummaries() {
		build := vs.GetDeploymentVersion().GetBuildId()
		if build == "" {
			continue
		}
		v := planner.TemporalVersion{
			BuildID:       build,
			Status:        versionStatus(vs.GetStatus(), build, s, vs.GetDrainageInfo()),
			RegisteredAt:  timeOrZero(vs.GetCreateTime()),
			CurrentSince:  timePtr(vs.GetCurrentSinceTime()),
			RampingSince:  timePtr(vs.GetRampingSinceTime()),
			LastCurrentAt: timePtr(vs.GetLastCurrentTime()),
			// The current version always has one on a server that reports
			// them; without, a version's activation is unknown.
			FirstActivatedAt: timePtr(vs.GetFirstActivationTime()),
		}
		if v.FirstActivatedAt != nil {
			s.ReportsActivation = true
		}
		if d := vs.GetDrainageInfo(); d.GetStatus() == enumspb.VERSION_DRAINAGE_STATUS_DRAINED {
			v.DrainedSince = timePtr(d.GetLastChangedTime())
		}
		v.DrainingSince = drainingSince(vs)
		s.Versions = append(s.Versions, v)
	}
	slices.SortFunc(s.Versions, func(x, y planner.TemporalVersion) int {
		return strings.Compare(x.BuildID, y.BuildID)
	})
	return s
}

// versionStatus maps Temporal's status. Where Temporal leaves it
// unspecified (or sends one this code does not know), it is derived from
// routing and drainage; with neither it is Unknown, not Inactive: the
// planner may retire an Inactive version's workers, and this one may still
// have open workflows.
func versionStatus(st enumspb.WorkerDeploymentVersionStatus, build string, s *planner.TemporalState, d *deploymentpb.VersionDrainageInfo) v1alpha1.VersionStatus {
	switch st {
	case enumspb.WORKER_DEPLOYMENT_VERSION_STATUS_CURRENT:
		return v1alpha1.VersionCurrent
	case enumspb.WORKER_DEPLOYMENT_VERSION_STATUS_RAMPING:
		return v1alpha1.VersionRamping
	case enumspb.WORKER_DEPLOYMENT_VERSION_STATUS_DRAINING:
		return v1alpha1.VersionDraining
	case enumspb.WORKER_DEPLOYMENT_VERSION_STATUS_DRAINED:
		return v1alpha1.VersionDrained
	case enumspb.WORKER_DEPLOYMENT_VERSION_STATUS_INACTIVE,
		// Created through the API and not polled yet: registered, no traffic.
		enumspb.WORKER_DEPLOYMENT_VERSION_STATUS_CREATED:
		return v1alpha1.VersionInactive
	}
	switch {
	case build == s.CurrentBuildID:
		return v1alpha1.VersionCurrent
	case build == s.RampingBuildID:
		return v1alpha1.VersionRamping
	case d.GetStatus() == enumspb.VERSION_DRAINAGE_STATUS_DRAINING:
		return v1alpha1.VersionDraining
	case d.GetStatus() == enumspb.VERSION_DRAINAGE_STATUS_DRAINED:
		return v1alpha1.VersionDrained
	}
	return v1alpha1.VersionUnknown
}

// TaskQueueType is the kind of a task queue a version polls.
type TaskQueueType string

const (
	TaskQueueWorkflow TaskQueueType = "Workflow"
	TaskQueueActivity TaskQueueType = "Activity"
	TaskQueueNexus    TaskQueueType = "Nexus"
)

func taskQueueType(t enumspb.TaskQueueType) TaskQueueType {
	switch t {
	case enumspb.TASK_QUEUE_TYPE_WORKFLOW:
		return TaskQueueWorkflow
	case enumspb.TASK_QUEUE_TYPE_ACTIVITY:
		return TaskQueueActivity
	case enumspb.TASK_QUEUE_TYPE_NEXUS:
		return TaskQueueNexus
	}
	return TaskQueueType(t.String())
}

// TaskQueue is one (name, type) a version's workers poll.
type TaskQueue struct {
	Name string
	Type TaskQueueType
}

// Drainage is Temporal's drainage report for a version that is neither
// current nor ramping.
type Drainage struct {
	// Status is VersionDraining or VersionDrained.
	Status    v1alpha1.VersionStatus
	ChangedAt time.Time
	CheckedAt time.Time
}

// VersionDetail is one version as DescribeWorkerDeploymentVersion and the
// task queues' poller lists report it.
type VersionDetail struct {
	BuildID   string
	Status    v1alpha1.VersionStatus
	CreatedAt time.Time
	// TaskQueues the version's workers have registered, sorted.
	TaskQueues []TaskQueue
	// Polled are the (name, type) pairs that workers of this version poll,
	// among the names of TaskQueues, sorted. A type is polled a little
	// before it is registered. Only DescribeVersion fills it.
	Polled []TaskQueue
	// Drainage is nil while the version is current or ramping, or never
	// was.
	Drainage *Drainage
	// HasPollers: a worker of this version polled one of its task queues
	// within the server's poller history (matching.PollerHistoryTTL, 5m by
	// default). Temporal refuses to delete a version while this is true.
	HasPollers bool
	// UnversionedPollers: unversioned workers poll one of these task queues.
	UnversionedPollers bool
	// Backlog is each task queue's statistics, in the order of TaskQueues;
	// nil when the server reported none (a server without task queue
	// statistics).
	Backlog []TaskQueueBacklog
	// Metadata are the version's metadata entries whose values are
	// strings (UpdateVersionMetadata writes those).
	Metadata map[string]string
}

// TaskQueueBacklog is what Temporal reports about one task queue of a
// version: its backlog and rates, approximate by Temporal's own account but
// meant for scaling decisions.
type TaskQueueBacklog struct {
	TaskQueue
	// Count is the approximate number of tasks waiting (sticky workflow
	// tasks not included).
	Count int64
	// Age is the approximate age of the oldest waiting task; 0 when none waits.
	Age time.Duration
	// AddRate and DispatchRate are tasks per second added and dispatched,
	// averaged over the last 30 seconds.
	AddRate, DispatchRate float64
}

// BacklogCount is the tasks waiting in all the version's task queues.
func (d VersionDetail) BacklogCount() int64 {
	var n int64
	for _, b := range d.Backlog {
		n += b.Count
	}
	return n
}

// TaskQueueNames are the distinct task queue names, sorted.
func (d VersionDetail) TaskQueueNames() []string {
	var names []string
	for _, tq := range d.TaskQueues {
		if !slices.Contains(names, tq.Name) {
			names = append(names, tq.Name)
		}
	}
	slices.Sort(names)
	return names
}

// DescribeVersion describes one version: one DescribeWorkerDeploymentVersion,
// plus one DescribeTaskQueue per distinct task queue name for the pollers
// (the version description does not say whether anyone polls). A version
// Temporal does not know is ErrNotFound.
//
// Which versions to describe is the planner's call
// (planner.VersionsToDescribe). For the target, DescribeVersion gives
// HasPollers; TaskQueuesReady is TaskQueuesReady(target, current) with
// current from DescribeVersionNoPollers of the current version (a zero
// VersionDetail when nothing is current); and when nothing is current,
// UnversionedPollers is the target's. That is 3 RPCs with one task queue
// name, 2 of them Worker Deployment reads. For a version to delete,
// DescribeVersion gives HasPollers.
func (a *API) DescribeVersion(ctx context.Context, deploymentName, buildID string) (VersionDetail, error) {
	return a.describeVersion(ctx, deploymentName, buildID, true)
}

// DescribeVersionNoPollers is DescribeVersion without the poller queries:
// one RPC, and Polled, HasPollers and UnversionedPollers stay unset. It is
// enough for the current version's side of TaskQueuesReady, and for the
// backlog.
//
// Both ask for the task queues' statistics (Backlog), which costs no RPC of
// ours: the server gathers them from its task queue partitions.
func (a *API) DescribeVersionNoPollers(ctx context.Context, deploymentName, buildID string) (VersionDetail, error) {
	return a.describeVersion(ctx, deploymentName, buildID, false)
}

func (a *API) describeVersion(ctx context.Context, deploymentName, buildID string, pollers bool) (VersionDetail, error) {
	resp, err := a.c.WorkflowService().DescribeWorkerDeploymentVersion(ctx, &workflowservice.DescribeWorkerDeploymentVersionRequest{
		Namespace:            a.namespace,
		DeploymentVersion:    &deploymentpb.WorkerDeploymentVersion{DeploymentName: deploymentName, BuildId: buildID},
		ReportTaskQueueStats: true,
	})
	if err != nil {
		return VersionDetail{}, wrapErr("DescribeVersion", deploymentName, buildID, err)
	}
	info := resp.GetWorkerDeploymentVersionInfo()
	d := VersionDetail{BuildID: buildID, CreatedAt: timeOrZero(info.GetCreateTime())}
	var routing planner.TemporalState
	switch {
	case info.GetCurrentSinceTime() != nil:
		routing.CurrentBuildID = buildID
	case info.GetRampingSinceTime() != nil:
		routing.RampingBuildID = buildID
	}
	d.Status = versionStatus(info.GetStatus(), buildID, &routing, info.GetDrainageInfo())
	if di := info.GetDrainageInfo(); di.GetStatus() != enumspb.VERSION_DRAINAGE_STATUS_UNSPECIFIED {
		d.Drainage = &Drainage{
			Status:    v1alpha1.VersionDraining,
			ChangedAt: timeOrZero(di.GetLastChangedTime()),
			CheckedAt: timeOrZero(di.GetLastCheckedTime()),
		}
		if di.GetStatus() == enumspb.VERSION_DRAINAGE_STATUS_DRAINED {
			d.Drainage.Status = v1alpha1.VersionDrained
		}
	}
	for _, tq := range resp.GetVersionTaskQueues() {
		d.TaskQueues = append(d.TaskQueues, TaskQueue{Name: tq.GetName(), Type: taskQueueType(tq.GetType())})
	}
	sortTaskQueues(d.TaskQueues)
	d.Backlog = backlogOf(resp.GetVersionTaskQueues())
	d.Metadata = stringEntries(info.GetMetadata().GetEntries())
	if !pollers {
		return d, nil
	}
	for _, name := range d.TaskQueueNames() {
		polled, unversioned, err := a.pollers(ctx, deploymentName, buildID, name)
		if err != nil {
			return VersionDetail{}, wrapErr("DescribeVersion", deploymentName, buildID, err)
		}
		for _, t := range polled {
			d.Polled = append(d.Polled, TaskQueue{Name: name, Type: t})
		}
		d.UnversionedPollers = d.UnversionedPollers || unversioned
	}
	sortTaskQueues(d.Polled)
	d.HasPollers = len(d.Polled) > 0
	return d, nil
}

// backlogOf reads the statistics of a version's task queues, sorted like
// TaskQueues; nil if any task queue came without them.
func backlogOf(tqs []*workflowservice.DescribeWorkerDeploymentVersionResponse_VersionTaskQueue) []TaskQueueBacklog {
	out := make([]TaskQueueBacklog, 0, len(tqs))
	for _, tq := range tqs {
		st := tq.GetStats()
		if st == nil {
			return nil
		}
		out = append(out, TaskQueueBacklog{
			TaskQueue:    TaskQueue{Name: tq.GetName(), Type: taskQueueType(tq.GetType())},
			Count:        st.GetApproximateBacklogCount(),
			Age:          st.GetApproximateBacklogAge().AsDuration(),
			AddRate:      float64(st.GetTasksAddRate()),
			DispatchRate: float64(st.GetTasksDispatchRate()),
		})
	}
	slices.SortFunc(out, func(x, y TaskQueueBacklog) int { return compareTaskQueues(x.TaskQueue, y.TaskQueue) })
	return out
}

func sortTaskQueues(tqs []TaskQueue) { slices.SortFunc(tqs, compareTaskQueues) }

func compareTaskQueues(x, y TaskQueue) int {
	return cmp.Or(strings.Compare(x.Name, y.Name), strings.Compare(string(x.Type), string(y.Type)))
}

// allTaskQueueTypes: a worker may poll any of them, registered or not yet.
var allTaskQueueTypes = []enumspb.TaskQueueType{
	enumspb.TASK_QUEUE_TYPE_WORKFLOW, enumspb.TASK_QUEUE_TYPE_ACTIVITY, enumspb.TASK_QUEUE_TYPE_NEXUS,
}

// pollers asks the task queue, across all its partitions and types, who
// polls it for this version and unversioned. It is the query the server
// runs itself before deleting a version (the "enhanced" DescribeTaskQueue
// mode, with the version written "deployment:build" as build ID), for
// every type rather than the registered ones: a type is polled a little
// before it is registered.
func (a *API) pollers(ctx context.Context, deploymentName, buildID, taskQueue string) (versioned []TaskQueueType, unversioned bool, err error) {
	version := deploymentName + ":" + buildID
	resp, err := a.c.WorkflowService().DescribeTaskQueue(ctx, &workflowservice.DescribeTaskQueueRequest{
		Namespace: a.namespace,
		TaskQueue: &taskqueuepb.TaskQueue{Name: taskQueue, Kind: enumspb.TASK_QUEUE_KIND_NORMAL},
		//nolint:staticcheck // SA1019: the only way to list a version's pollers over all partitions.
		ApiMode: enumspb.DESCRIBE_TASK_QUEUE_MODE_ENHANCED,
		//nolint:staticcheck // SA1019: as above.
		Versions:       &taskqueuepb.TaskQueueVersionSelection{BuildIds: []string{version}, Unversioned: true},
		TaskQueueTypes: allTaskQueueTypes,
		ReportPollers:  true,
	})
	if err != nil {
		return nil, false, err
	}
	versioned, unversioned = pollersOf(resp, version)
	return versioned, unversioned, nil
}

// pollersOf reads a DescribeTaskQueue answer: the types that versioned
// workers of version poll, sorted, and whether unversioned workers poll
// any type.
func pollersOf(resp *workflowservice.DescribeTaskQueueResponse, version string) (versioned []TaskQueueType, unversioned bool) {
	//nolint:staticcheck // SA1019: as in pollers.
	for key, vi := range resp.GetVersionsInfo() {
		for t, ti := range vi.GetTypesInfo() {
			for _, p := range ti.GetPollers() {
				isVersioned := p.GetDeploymentOptions().GetWorkerVersioningMode() == enumspb.WORKER_VERSIONING_MODE_VERSIONED
				switch {
				case key == version && isVersioned:
					if tt := taskQueueType(enumspb.TaskQueueType(t)); !slices.Contains(versioned, tt) {
						versioned = append(versioned, tt)
					}
				case key == "" && !isVersioned:
					unversioned = true
				}
			}
		}
	}
	slices.Sort(versioned)
	return versioned, unversioned
}

// TaskQueuesReady: the target has registered at least one task queue,
// every (name, type) its workers poll (target.Polled, from DescribeVersion)
// and every (name, type) of the current version. Temporal refuses to make
// a version current or ramping without the current version's ("missing
// active task queues from the current version"; it does skip queues that
// have gone idle, which this check does not know, so it may wait where
// Temporal would not), but with nothing current (pass a zero current) it
// would accept a version whose other types are still registering.
func TaskQueuesReady(target, current VersionDetail) bool {
	if len(target.TaskQueues) == 0 {
		return false
	}
	for _, tq := range slices.Concat(current.TaskQueues, target.Polled) {
		if !slices.Contains(target.TaskQueues, tq) {
			return false
		}
	}
	return true
}

// MissingTaskQueues are the task queues ("name (Type)") of the current
// version that the target has not registered, sorted: what keeps
// TaskQueuesReady false when the target polls other queues.
func MissingTaskQueues(target, current VersionDetail) []string {
	var missing []string
	for _, tq := range current.TaskQueues {
		if !slices.Contains(target.TaskQueues, tq) {
			missing = append(missing, tq.Name+" ("+string(tq.Type)+")")
		}
	}
	slices.Sort(missing)
	return slices.Compact(missing)
}

// UpdateVersionMetadata sets the entries of a version's metadata (strings,
// as JSON payloads, which Temporal's UI and CLI show as text), leaving its
// other entries as they are.
func (a *API) UpdateVersionMetadata(ctx context.Context, deploymentName, buildID string, entries map[string]string) error {
	upsert := make(map[string]*commonpb.Payload, len(entries))
	for k, v := range entries {
		p, err := converter.GetDefaultDataConverter().ToPayload(v)
		if err != nil {
			return err
		}
		upsert[k] = p
	}
	_, err := a.c.WorkflowService().UpdateWorkerDeploymentVersionMetadata(ctx, &workflowservice.UpdateWorkerDeploymentVersionMetadataRequest{
		Namespace:         a.namespace,
		DeploymentVersion: &deploymentpb.WorkerDeploymentVersion{DeploymentName: deploymentName, BuildId: buildID},
		UpsertEntries:     upsert,
		Identity:          a.identity,
	})
	return wrapErr("UpdateVersionMetadata", deploymentName, buildID, err)
}

// stringEntries decodes the entries that hold a string; nil when none do.
func stringEntries(entries map[string]*commonpb.Payload) map[string]string {
	var m map[string]string
	for k, p := range entries {
		var v string
		if converter.GetDefaultDataConverter().FromPayload(p, &v) != nil {
			continue
		}
		if m == nil {
			m = map[string]string{}
		}
		m[k] = v
	}
	return m
}

// SetCurrent makes buildID current and returns the new conflict token.
// Temporal clears the ramp if buildID was ramping.
func (a *API) SetCurrent(ctx context.Context, deploymentName, buildID string, token []byte) ([]byte, error) {
	resp, err := a.c.WorkflowService().SetWorkerDeploymentCurrentVersion(ctx, &workflowservice.SetWorkerDeploymentCurrentVersionRequest{
		Namespace:      a.namespace,
		DeploymentName: deploymentName,
		BuildId:        buildID,
		ConflictToken:  token,
		Identity:       a.identity,
	})
	if err != nil {
		return nil, wrapErr("SetCurrent", deploymentName, buildID, err)
	}
	return resp.GetConflictToken(), nil
}

// SetRamp ramps percent of new workflows to buildID, replacing any ramp.
func (a *API) SetRamp(ctx context.Context, deploymentName, buildID string, percent int32, token []byte) ([]byte, error) {
	if buildID == "" {
		// An empty build ID with a percentage ramps to unversioned workers.
		return nil, &Error{Op: "SetRamp", Deployment: deploymentName, Kind: ErrRefused, Err: errors.New("no build ID given")}
	}
	return a.setRamp(ctx, "SetRamp", deploymentName, buildID, percent, token)
}

// RemoveRamp removes the ramp, whatever version it is on.
func (a *API) RemoveRamp(ctx context.Context, deploymentName string, token []byte) ([]byte, error) {
	// No build ID and 0% is how the API spells "no ramp".
	return a.setRamp(ctx, "RemoveRamp", deploymentName, "", 0, token)
}

func (a *API) setRamp(ctx context.Context, op, deploymentName, buildID string, percent int32, token []byte) ([]byte, error) {
	resp, err := a.c.WorkflowService().SetWorkerDeploymentRampingVersion(ctx, &workflowservice.SetWorkerDeploymentRampingVersionRequest{
		Namespace:      a.namespace,
		DeploymentName: deploymentName,
		BuildId:        buildID,
		Percentage:     float32(percent),
		ConflictToken:  token,
		Identity:       a.identity,
	})
	if err != nil {
		return nil, wrapErr(op, deploymentName, buildID, err)
	}
	return resp.GetConflictToken(), nil
}

// Route applies one planner routing write.
func (a *API) Route(ctx context.Context, deploymentName string, r planner.Routing, token []byte) ([]byte, error) {
	switch r.Op {
	case planner.SetCurrent:
		return a.SetCurrent(ctx, deploymentName, r.BuildID, token)
	case planner.SetRamp:
		return a.SetRamp(ctx, deploymentName, r.BuildID, r.RampPercentage, token)
	case planner.RemoveRamp:
		return a.RemoveRamp(ctx, deploymentName, token)
	}
	return nil, &Error{Op: "Route", Deployment: deploymentName, Kind: ErrRefused, Err: errors.New("unknown routing op " + string(r.Op))}
}

// BecomeManager sets the worker deployment's manager identity to ours, so
// that other identities' routing writes are refused.
func (a *API) BecomeManager(ctx context.Context, deploymentName string, token []byte) ([]byte, error) {
	resp, err := a.c.WorkflowService().SetWorkerDeploymentManager(ctx, &workflowservice.SetWorkerDeploymentManagerRequest{
		Namespace:          a.namespace,
		DeploymentName:     deploymentName,
		NewManagerIdentity: &workflowservice.SetWorkerDeploymentManagerRequest_Self{Self: true},
		ConflictToken:      token,
		Identity:           a.identity,
	})
	if err != nil {
		return nil, wrapErr("BecomeManager", deploymentName, "", err)
	}
	return resp.GetConflictToken(), nil
}

// DeleteVersion deletes a version. It never skips drainage: Temporal
// refuses (ErrVersionInUse) while the version is current, ramping,
// draining or polled.
func (a *API) DeleteVersion(ctx context.Context, deploymentName, buildID string) error {
	_, err := a.c.WorkflowService().DeleteWorkerDeploymentVersion(ctx, &workflowservice.DeleteWorkerDeploymentVersionRequest{
		Namespace:         a.namespace,
		DeploymentVersion: &deploymentpb.WorkerDeploymentVersion{DeploymentName: deploymentName, BuildId: buildID},
		Identity:          a.identity,
	})
	return wrapErr("DeleteVersion", deploymentName, buildID, err)
}

// DeleteVersionSkipDrainage deletes a version even while it drains, for
// a worker deployment that is being removed. Temporal still refuses while
// the version is current, ramping or polled.
func (a *API) DeleteVersionSkipDrainage(ctx context.Context, deploymentName, buildID string) error {
	_, err := a.c.WorkflowService().DeleteWorkerDeploymentVersion(ctx, &workflowservice.DeleteWorkerDeploymentVersionRequest{
		Namespace:         a.namespace,
		DeploymentVersion: &deploymentpb.WorkerDeploymentVersion{DeploymentName: deploymentName, BuildId: buildID},
		SkipDrainage:      true,
		Identity:          a.identity,
	})
	return wrapErr("DeleteVersion", deploymentName, buildID, err)
}

// DeleteDeployment deletes a worker deployment that has no versions left.
func (a *API) DeleteDeployment(ctx context.Context, deploymentName string) error {
	_, err := a.c.WorkflowService().DeleteWorkerDeployment(ctx, &workflowservice.DeleteWorkerDeploymentRequest{
		Namespace:      a.namespace,
		DeploymentName: deploymentName,
		Identity:       a.identity,
	})
	return wrapErr("DeleteDeployment", deploymentName, "", err)
}

// DeploymentSummary is what ListWorkerDeployments tells about one worker
// deployment: enough to notice routing changes and new versions without
// describing each.
type DeploymentSummary struct {
	Name           string
	CreatedAt      time.Time
	CurrentBuildID string
	RampingBuildID string
	RampPercentage int32
	// RoutingChangedAt is the latest change of the current version, the
	// ramping version or its percentage.
	RoutingChangedAt time.Time
	// LatestBuildID is the most recently registered version.
	LatestBuildID   string
	LatestCreatedAt time.Time
}

// ListDeployments walks every page of ListWorkerDeployments. Temporal
// serves it from visibility, so it lags writes by up to a second or so and
// does not show drainage: describe deployments that have draining versions
// or pending writes, and use the list only to skip the idle ones.
func (a *API) ListDeployments(ctx context.Context) (map[string]DeploymentSummary, error) {
	out := map[string]DeploymentSummary{}
	var page []byte
	for {
		resp, err := a.c.WorkflowService().ListWorkerDeployments(ctx, &workflowservice.ListWorkerDeploymentsRequest{
			Namespace:     a.namespace,
			PageSize:      1000,
			NextPageToken: page,
		})
		if err != nil {
			return nil, wrapErr("ListDeployments", "", "", err)
		}
		for _, d := range resp.GetWorkerDeployments() {
			rc := d.GetRoutingConfig()
			s := DeploymentSummary{
				Name:            d.GetName(),
				CreatedAt:       timeOrZero(d.GetCreateTime()),
				CurrentBuildID:  rc.GetCurrentDeploymentVersion().GetBuildId(),
				RampingBuildID:  rc.GetRampingDeploymentVersion().GetBuildId(),
				LatestBuildID:   d.GetLatestVersionSummary().GetDeploymentVersion().GetBuildId(),
				LatestCreatedAt: timeOrZero(d.GetLatestVersionSummary().GetCreateTime()),
			}
			if s.RampingBuildID != "" {
				s.RampPercentage = pct(rc.GetRampingVersionPercentage())
			}
			s.RoutingChangedAt = routingChangedAt(rc)
			out[s.Name] = s
		}
		page = resp.GetNextPageToken()
		if len(page) == 0 {
			return out, nil
		}
	}
}

// routingChangedAt is the latest of a routing config's change times.
func routingChangedAt(rc *deploymentpb.RoutingConfig) time.Time {
	var at time.Time
	for _, t := range []*timestamppb.Timestamp{rc.GetCurrentVersionChangedTime(), rc.GetRampingVersionChangedTime(), rc.GetRampingVersionPercentageChangedTime()} {
		if t := timeOrZero(t); t.After(at) {
			at = t
		}
	}
	return at
}

func pct(f float32) int32 { return int32(math.Round(float64(f))) }

func timeOrZero(t *timestamppb.Timestamp) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.AsTime()
}

func timePtr(t *timestamppb.Timestamp) *time.Time {
	if t == nil {
		return nil
	}
	v := t.AsTime()
	return &v
}

// Temporal runs each worker deployment as a workflow of the namespace and
// continues it as new after each change it accepts: routing, versions, and
// the manager identity, which ListWorkerDeployments does not show (server
// 1.32 leaves its memo as it was). So the start times of those runs tell,
// in one visibility query per namespace, which worker deployments changed.
// These names are Temporal's internals, not its API: a server that no
// longer matches them makes the query find nothing, which only leaves the
// callers to their slower recheck.
const (
	deploymentWorkflowType     = "temporal-sys-worker-deployment-workflow"
	deploymentWorkflowIDPrefix = "temporal-sys-worker-deployment:"
	deploymentDivision         = "TemporalWorkerDeployment"
)

// DeploymentsChangedSince returns, for each worker deployment whose
// workflow started a run after since, the latest such start.
func (a *API) DeploymentsChangedSince(ctx context.Context, since time.Time) (map[string]time.Time, error) {
	query := fmt.Sprintf("WorkflowType = '%s' AND TemporalNamespaceDivision = '%s' AND StartTime > '%s'",
		deploymentWorkflowType, deploymentDivision, since.UTC().Format(time.RFC3339Nano))
	out := map[string]time.Time{}
	var page []byte
	for {
		resp, err := a.c.WorkflowService().ListWorkflowExecutions(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Namespace: a.namespace, PageSize: 1000, NextPageToken: page, Query: query,
		})
		if err != nil {
			return nil, wrapErr("DeploymentsChangedSince", "", "", err)
		}
		for _, e := range resp.GetExecutions() {
			name, ok := strings.CutPrefix(e.GetExecution().GetWorkflowId(), deploymentWorkflowIDPrefix)
			if t := timeOrZero(e.GetStartTime()); ok && t.After(out[name]) {
				out[name] = t
			}
		}
		page = resp.GetNextPageToken()
		if len(page) == 0 {
			return out, nil
		}
	}
}
