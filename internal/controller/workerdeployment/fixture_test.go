package workerdeployment

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	deploymentpb "go.temporal.io/api/deployment/v1"
	enumspb "go.temporal.io/api/enums/v1"
	namespacepb "go.temporal.io/api/namespace/v1"
	"go.temporal.io/api/serviceerror"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/api/workflowservice/v1"
	sdkclient "go.temporal.io/sdk/client"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/timestamppb"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/internal/backlog"
	"github.com/rainbow-deploy/rainbow/internal/buildid"
	"github.com/rainbow-deploy/rainbow/internal/claim"
	"github.com/rainbow-deploy/rainbow/internal/connection"
	"github.com/rainbow-deploy/rainbow/internal/ownedresource"
	"github.com/rainbow-deploy/rainbow/internal/planner"
	"github.com/rainbow-deploy/rainbow/internal/temporal"
	"github.com/rainbow-deploy/rainbow/internal/workload"
)

// These tests drive Reconcile against a fake Kubernetes client and a stub
// Temporal service, and assert the exact, ordered writes each scenario
// makes to both, in the manner of the Kubernetes Deployment controller's
// tests. Reads are free to change; writes are the contract.

const fixtureIdentity = "rainbow-test"

// stubTemporal answers the Worker Deployment API from a fixed description
// and records every write.
type stubTemporal struct {
	workflowservice.WorkflowServiceClient
	mu     sync.Mutex
	writes []string
	// state is what DescribeWorkerDeployment returns; nil is NotFound.
	state *deploymentpb.WorkerDeploymentInfo
	// polled are the build IDs whose workers poll (workflow and activity
	// on task queue "q").
	polled map[string]bool
	// unavailable makes every read fail as during an outage; busy as when
	// Temporal throttles reads.
	unavailable, busy bool
	// unreadable are versions the deployment lists that cannot be described
	// yet (NotFound), as seen right after registration.
	unreadable map[string]bool
	// backlog is the tasks waiting in each build's activity task queue.
	backlog map[string]int64
	// drain is what the drain deadline's and signal's calls see (drain_test.go).
	drain drainStub
	// gate is what describing and terminating gate runs see (gate_test.go).
	gate gateStub
	// drainedAt are versions that report themselves drained since then,
	// whatever the summary says (crosscheck_test.go).
	drainedAt map[string]time.Time
	// metadata is each version's metadata; metadataWrites records its
	// updates apart from writes, which the tables of writes assert
	// (versionmeta_test.go asserts these).
	metadata       map[string]map[string]*commonpb.Payload
	metadataWrites []string
}

func (s *stubTemporal) write(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.writes = append(s.writes, fmt.Sprintf(format, args...))
}

func (s *stubTemporal) DescribeNamespace(context.Context, *workflowservice.DescribeNamespaceRequest, ...grpc.CallOption) (*workflowservice.DescribeNamespaceResponse, error) {
	return &workflowservice.DescribeNamespaceResponse{NamespaceInfo: &namespacepb.NamespaceInfo{Id: "ns-id"}}, nil
}

// readErr is what every read of the worker deployment answers during an
// outage or throttling.
func (s *stubTemporal) readErr() error {
	switch {
	case s.unavailable:
		return serviceerror.NewUnavailable("connection refused")
	case s.busy:
		return serviceerror.NewResourceExhausted(enumspb.RESOURCE_EXHAUSTED_CAUSE_RPS_LIMIT, "rate limited")
	}
	return nil
}

func (s *stubTemporal) DescribeWorkerDeployment(context.Context, *workflowservice.DescribeWorkerDeploymentRequest, ...grpc.CallOption) (*workflowservice.DescribeWorkerDeploymentResponse, error) {
	if err := s.readErr(); err != nil {
		return nil, err
	}
	if s.state == nil {
		return nil, serviceerror.NewNotFound("no such worker deployment")
	}
	return &workflowservice.DescribeWorkerDeploymentResponse{WorkerDeploymentInfo: s.state, ConflictToken: []byte("token")}, nil
}

func (s *stubTemporal) ListWorkerDeployments(context.Context, *workflowservice.ListWorkerDeploymentsRequest, ...grpc.CallOption) (*workflowservice.ListWorkerDeploymentsResponse, error) {
	if err := s.readErr(); err != nil {
		return nil, err
	}
	if s.state == nil {
		return &workflowservice.ListWorkerDeploymentsResponse{}, nil
	}
	return &workflowservice.ListWorkerDeploymentsResponse{WorkerDeployments: []*workflowservice.ListWorkerDeploymentsResponse_WorkerDeploymentSummary{
		{Name: s.state.GetName(), RoutingConfig: s.state.GetRoutingConfig()},
	}}, nil
}

func (s *stubTemporal) DescribeWorkerDeploymentVersion(_ context.Context, req *workflowservice.DescribeWorkerDeploymentVersionRequest, _ ...grpc.CallOption) (*workflowservice.DescribeWorkerDeploymentVersionResponse, error) {
	build := req.GetDeploymentVersion().GetBuildId()
	if s.unreadable[build] {
		return nil, serviceerror.NewNotFound("Worker Deployment Version not found")
	}
	info := &deploymentpb.WorkerDeploymentVersionInfo{Status: enumspb.WORKER_DEPLOYMENT_VERSION_STATUS_INACTIVE}
	if at, ok := s.drainedAt[build]; ok {
		info.Status = enumspb.WORKER_DEPLOYMENT_VERSION_STATUS_DRAINED
		info.DrainageInfo = &deploymentpb.VersionDrainageInfo{Status: enumspb.VERSION_DRAINAGE_STATUS_DRAINED, LastChangedTime: timestamppb.New(at)}
	}
	if s.state.GetRoutingConfig().GetCurrentDeploymentVersion().GetBuildId() == build {
		info.CurrentSinceTime = timestamppb.Now()
	}
	s.mu.Lock()
	if m := s.metadata[build]; m != nil {
		info.Metadata = &deploymentpb.VersionMetadata{Entries: maps.Clone(m)}
	}
	s.mu.Unlock()
	return &workflowservice.DescribeWorkerDeploymentVersionResponse{
		WorkerDeploymentVersionInfo: info,
		VersionTaskQueues: []*workflowservice.DescribeWorkerDeploymentVersionResponse_VersionTaskQueue{
			{Name: "q", Type: enumspb.TASK_QUEUE_TYPE_WORKFLOW, Stats: &taskqueuepb.TaskQueueStats{}},
			{Name: "q", Type: enumspb.TASK_QUEUE_TYPE_ACTIVITY, Stats: &taskqueuepb.TaskQueueStats{ApproximateBacklogCount: s.backlog[build]}},
		},
	}, nil
}

func (s *stubTemporal) DescribeTaskQueue(_ context.Context, req *workflowservice.DescribeTaskQueueRequest, _ ...grpc.CallOption) (*workflowservice.DescribeTaskQueueResponse, error) {
	versions := map[string]*taskqueuepb.TaskQueueVersionInfo{}
	for _, v := range req.GetVersions().GetBuildIds() { //nolint:staticcheck // the API the controller uses
		var build string
		if _, after, ok := strings.Cut(v, ":"); ok {
			build = after
		}
		if !s.polled[build] {
			continue
		}
		versioned := []*taskqueuepb.PollerInfo{{DeploymentOptions: &deploymentpb.WorkerDeploymentOptions{
			WorkerVersioningMode: enumspb.WORKER_VERSIONING_MODE_VERSIONED}}}
		versions[v] = &taskqueuepb.TaskQueueVersionInfo{TypesInfo: map[int32]*taskqueuepb.TaskQueueTypeInfo{
			int32(enumspb.TASK_QUEUE_TYPE_WORKFLOW): {Pollers: versioned},
			int32(enumspb.TASK_QUEUE_TYPE_ACTIVITY): {Pollers: versioned},
		}}
	}
	return &workflowservice.DescribeTaskQueueResponse{VersionsInfo: versions}, nil //nolint:staticcheck // as above
}

func (s *stubTemporal) SetWorkerDeploymentManager(context.Context, *workflowservice.SetWorkerDeploymentManagerRequest, ...grpc.CallOption) (*workflowservice.SetWorkerDeploymentManagerResponse, error) {
	s.write("SetWorkerDeploymentManager self")
	return &workflowservice.SetWorkerDeploymentManagerResponse{ConflictToken: []byte("token2")}, nil
}

func (s *stubTemporal) SetWorkerDeploymentCurrentVersion(_ context.Context, req *workflowservice.SetWorkerDeploymentCurrentVersionRequest, _ ...grpc.CallOption) (*workflowservice.SetWorkerDeploymentCurrentVersionResponse, error) {
	s.write("SetWorkerDeploymentCurrentVersion %q token=%s", req.GetBuildId(), req.GetConflictToken())
	return &workflowservice.SetWorkerDeploymentCurrentVersionResponse{}, nil
}

func (s *stubTemporal) SetWorkerDeploymentRampingVersion(_ context.Context, req *workflowservice.SetWorkerDeploymentRampingVersionRequest, _ ...grpc.CallOption) (*workflowservice.SetWorkerDeploymentRampingVersionResponse, error) {
	s.write("SetWorkerDeploymentRampingVersion %q %v%%", req.GetBuildId(), req.GetPercentage())
	return &workflowservice.SetWorkerDeploymentRampingVersionResponse{}, nil
}

func (s *stubTemporal) DeleteWorkerDeploymentVersion(_ context.Context, req *workflowservice.DeleteWorkerDeploymentVersionRequest, _ ...grpc.CallOption) (*workflowservice.DeleteWorkerDeploymentVersionResponse, error) {
	s.write("DeleteWorkerDeploymentVersion %q skipDrainage=%v", req.GetDeploymentVersion().GetBuildId(), req.GetSkipDrainage())
	return &workflowservice.DeleteWorkerDeploymentVersionResponse{}, nil
}

func (s *stubTemporal) UpdateWorkerDeploymentVersionMetadata(_ context.Context, req *workflowservice.UpdateWorkerDeploymentVersionMetadataRequest, _ ...grpc.CallOption) (*workflowservice.UpdateWorkerDeploymentVersionMetadataResponse, error) {
	build := req.GetDeploymentVersion().GetBuildId()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.metadataWrites = append(s.metadataWrites, fmt.Sprintf("UpdateWorkerDeploymentVersionMetadata %q by %s", build, req.GetIdentity()))
	if s.metadata == nil {
		s.metadata = map[string]map[string]*commonpb.Payload{}
	}
	if s.metadata[build] == nil {
		s.metadata[build] = map[string]*commonpb.Payload{}
	}
	maps.Copy(s.metadata[build], req.GetUpsertEntries())
	return &workflowservice.UpdateWorkerDeploymentVersionMetadataResponse{}, nil
}

func (s *stubTemporal) DeleteWorkerDeployment(context.Context, *workflowservice.DeleteWorkerDeploymentRequest, ...grpc.CallOption) (*workflowservice.DeleteWorkerDeploymentResponse, error) {
	s.write("DeleteWorkerDeployment")
	return &workflowservice.DeleteWorkerDeploymentResponse{}, nil
}

// stubSDK is the SDK client the pool dials: only what the controller uses
// outside gates.
type stubSDK struct {
	sdkclient.Client
	svc *stubTemporal
}

func (c stubSDK) WorkflowService() workflowservice.WorkflowServiceClient { return c.svc }
func (c stubSDK) CheckHealth(context.Context, *sdkclient.CheckHealthRequest) (*sdkclient.CheckHealthResponse, error) {
	return &sdkclient.CheckHealthResponse{}, nil
}
func (c stubSDK) Close() {}
func (c stubSDK) CancelWorkflow(_ context.Context, id, _ string) error {
	c.svc.write("CancelWorkflow %s", id)
	return nil
}

// fixture is one scenario's world.
type fixture struct {
	t        *testing.T
	now      time.Time
	twd      *v1alpha1.TemporalWorkerDeployment
	objects  []client.Object
	temporal *stubTemporal
	kube     []string
	// client is the fake API server of the last reconcile.
	client client.Client
	// backlogs gives the reconciler a Backlogs (no background reads).
	backlogs bool
	// failKube, if set, fails the writes it returns an error for (after
	// recording them), as the API server would.
	failKube func(verb string, o client.Object) error
	// drainage, if not nil, is the drainage cross-check's memory, kept
	// from one reconcile to the next as one process keeps it.
	drainage map[types.NamespacedName]map[string]planner.OwnDrainage
	// mapper, if set, is the fake API server's RESTMapper (none knows no
	// kind).
	mapper meta.RESTMapper
	// dialErr, if set, is what dialing Temporal fails with (a server
	// that refuses the credentials).
	dialErr error
}

func newFixture(t *testing.T) *fixture {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	twd := &v1alpha1.TemporalWorkerDeployment{
		ObjectMeta: metav1.ObjectMeta{Name: "orders", Namespace: "shop", UID: types.UID("twd-uid"), Generation: 1,
			Finalizers: []string{Finalizer}},
		Spec: v1alpha1.TemporalWorkerDeploymentSpec{
			Replicas: ptr.To[int32](1),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "worker", Image: "orders:v1"}}}},
			WorkerOptions: v1alpha1.WorkerOptions{ConnectionRef: v1alpha1.ConnectionReference{Name: "temporal"},
				TemporalNamespace: "default"},
			Rollout: v1alpha1.RolloutSpec{Strategy: v1alpha1.StrategyAllAtOnce},
		},
	}
	conn := &v1alpha1.TemporalConnection{ObjectMeta: metav1.ObjectMeta{Name: "temporal", Namespace: "shop"},
		Spec: v1alpha1.TemporalConnectionSpec{HostPort: "temporal:7233"}}
	return &fixture{t: t, now: now, twd: twd, objects: []client.Object{conn}, temporal: &stubTemporal{polled: map[string]bool{}}}
}

func (f *fixture) build() string { return buildid.Of(&f.twd.Spec) }

// runningDeployment adds the target's Deployment, rolled out and available.
func (f *fixture) runningDeployment() *appsv1.Deployment { return f.deploymentOf(f.build()) }

// deploymentOf adds a build's Deployment, made from the spec as it is now,
// rolled out and available.
func (f *fixture) deploymentOf(build string) *appsv1.Deployment {
	// Made with the connection as the controller resolves it, so only a
	// real change would make it stale.
	scheme := runtime.NewScheme()
	_ = v1alpha1.AddToScheme(scheme)
	conn, prob, err := connection.Resolve(context.Background(), fake.NewClientBuilder().WithScheme(scheme).WithObjects(f.objects[0]).Build(),
		"shop", "temporal", "default", temporal.AllowedHosts{}, f.now)
	if err != nil || prob != nil {
		f.t.Fatalf("resolve the connection: %v %v", err, prob)
	}
	d := workload.NewDeployment(f.twd, workload.Identity{TemporalNamespace: "default", DeploymentName: "shop/orders", BuildID: build},
		conn.Workers, ptr.To[int32](1))
	d.Annotations[workload.AnnotationNamespaceID] = "ns-id"
	// Copies of owned resources name it as their controller.
	d.UID = types.UID("uid-" + build)
	d.Generation = 1
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1,
		Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue}}}
	f.objects = append(f.objects, d)
	return d
}

// registered describes the worker deployment with the build registered,
// current or not, and its workers polling.
func (f *fixture) registered(current bool, status enumspb.WorkerDeploymentVersionStatus) {
	build := f.build()
	f.temporal.state = &deploymentpb.WorkerDeploymentInfo{
		Name: "shop/orders", RoutingConfig: &deploymentpb.RoutingConfig{}, ManagerIdentity: fixtureIdentity, LastModifierIdentity: fixtureIdentity,
	}
	f.version(build, status)
	if current {
		f.current(build)
	}
	f.temporal.polled[build] = true
}

// version lists a build in the worker deployment, registered an hour ago.
func (f *fixture) version(build string, status enumspb.WorkerDeploymentVersionStatus) *deploymentpb.WorkerDeploymentInfo_WorkerDeploymentVersionSummary {
	vs := &deploymentpb.WorkerDeploymentInfo_WorkerDeploymentVersionSummary{
		DeploymentVersion: &deploymentpb.WorkerDeploymentVersion{DeploymentName: "shop/orders", BuildId: build},
		Status:            status,
		CreateTime:        timestamppb.New(f.now.Add(-time.Hour)),
	}
	f.temporal.state.VersionSummaries = append(f.temporal.state.VersionSummaries, vs)
	return vs
}

// current routes new workflows to build.
func (f *fixture) current(build string) {
	f.temporal.state.RoutingConfig.CurrentDeploymentVersion = &deploymentpb.WorkerDeploymentVersion{DeploymentName: "shop/orders", BuildId: build}
}

// drained lists an older build that Temporal has reported drained for ago.
func (f *fixture) drained(build string, ago time.Duration) {
	f.version(build, enumspb.WORKER_DEPLOYMENT_VERSION_STATUS_DRAINED).DrainageInfo = &deploymentpb.VersionDrainageInfo{
		Status: enumspb.VERSION_DRAINAGE_STATUS_DRAINED, LastChangedTime: timestamppb.New(f.now.Add(-ago))}
}

// scaledDown makes d a Deployment the controller scaled to zero ago.
func (f *fixture) scaledDown(d *appsv1.Deployment, ago time.Duration) {
	d.Spec.Replicas = ptr.To[int32](0)
	d.Annotations[workload.AnnotationScaledDownAt] = f.now.Add(-ago).Format(time.RFC3339)
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: 1}
}

// reconcile runs one pass and returns the ordered writes to Kubernetes and
// to Temporal.
func (f *fixture) reconcile() (kube, temporalWrites []string, res reconcile.Result) {
	f.t.Helper()
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = v1alpha1.AddToScheme(scheme)
	record := func(verb string, o client.Object) error {
		f.kube = append(f.kube, fmt.Sprintf("%s %s %s", verb, reflect.TypeOf(o).Elem().Name(), o.GetName()))
		if f.failKube != nil {
			return f.failKube(verb, o)
		}
		return nil
	}
	builder := fake.NewClientBuilder()
	if f.mapper != nil {
		builder = builder.WithRESTMapper(f.mapper)
	}
	c := builder.WithScheme(scheme).WithObjects(append(f.objects, f.twd)...).
		WithStatusSubresource(&v1alpha1.TemporalWorkerDeployment{}, &v1alpha1.TemporalWorkerOwnedResource{}).
		WithIndex(&v1alpha1.TemporalWorkerOwnedResource{}, ownedByWorker, indexOwnedByWorker).
		WithIndex(&appsv1.Deployment{}, deploymentsByWorker, indexDeploymentsByWorker).
		WithIndex(&v1alpha1.TemporalWorkerDeployment{}, claim.Index, claim.IndexKey).
		WithInterceptorFuncs(interceptor.Funcs{
			Create: func(ctx context.Context, c client.WithWatch, o client.Object, opts ...client.CreateOption) error {
				if err := record("create", o); err != nil {
					return err
				}
				return c.Create(ctx, o, opts...)
			},
			Patch: func(ctx context.Context, c client.WithWatch, o client.Object, p client.Patch, opts ...client.PatchOption) error {
				if err := record("patch", o); err != nil {
					return err
				}
				return c.Patch(ctx, o, p, opts...)
			},
			Update: func(ctx context.Context, c client.WithWatch, o client.Object, opts ...client.UpdateOption) error {
				if err := record("update", o); err != nil {
					return err
				}
				return c.Update(ctx, o, opts...)
			},
			Delete: func(ctx context.Context, c client.WithWatch, o client.Object, opts ...client.DeleteOption) error {
				if err := record("delete", o); err != nil {
					return err
				}
				return c.Delete(ctx, o, opts...)
			},
			Apply: func(ctx context.Context, c client.WithWatch, o runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
				// Owned resources' copies are applied unstructured; failKube
				// does not see them.
				u, ok := o.(interface {
					GetKind() string
					GetName() string
				})
				if !ok {
					f.t.Fatalf("apply of an unexpected %T", o)
				}
				f.kube = append(f.kube, fmt.Sprintf("apply %s %s", u.GetKind(), u.GetName()))
				return c.Apply(ctx, o, opts...)
			},
			SubResourcePatch: func(ctx context.Context, c client.Client, sub string, o client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
				if err := record("patch "+sub, o); err != nil {
					return err
				}
				return c.SubResource(sub).Patch(ctx, o, p, opts...)
			},
		}).Build()
	pool := temporal.NewPool(fixtureIdentity, nil).WithDialer(func(context.Context, sdkclient.Options) (sdkclient.Client, error) {
		if f.dialErr != nil {
			return nil, f.dialErr
		}
		return stubSDK{svc: f.temporal}, nil
	})
	defer pool.Close()
	f.client = c
	r := &Reconciler{Client: c, Pool: pool, Clock: clocktesting.NewFakePassiveClock(f.now), drainage: drainageDescribes{byBuild[planner.OwnDrainage]{m: f.drainage}}}
	if f.backlogs {
		r.Backlogs = backlog.New(c, pool, r.Clock, 0, Fleet{Client: c})
	}
	res, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKeyFromObject(f.twd)})
	if err != nil {
		f.t.Fatalf("Reconcile: %v", err)
	}
	return f.kube, f.temporal.writes, res
}

func TestReconcileWrites(t *testing.T) {
	// anotherCurrent: an older version v0 is current, its workers running;
	// the target's workers run and poll, registered but without traffic.
	anotherCurrent := func(f *fixture) {
		f.runningDeployment()
		f.registered(false, enumspb.WORKER_DEPLOYMENT_VERSION_STATUS_INACTIVE)
		f.deploymentOf("v0")
		f.version("v0", enumspb.WORKER_DEPLOYMENT_VERSION_STATUS_CURRENT)
		f.current("v0")
		f.temporal.polled["v0"] = true
	}
	progressive := func(f *fixture) {
		f.twd.Spec.Rollout = v1alpha1.RolloutSpec{Strategy: v1alpha1.StrategyProgressive, Steps: []v1alpha1.RolloutStep{
			{RampPercentage: 25, PauseDuration: metav1.Duration{Duration: 5 * time.Minute}},
			{RampPercentage: 75, PauseDuration: metav1.Duration{Duration: 10 * time.Minute}},
		}}
		anotherCurrent(f)
	}
	// ramped: the target has ramped at pct for ago.
	ramped := func(f *fixture, pct float32, ago time.Duration) {
		f.temporal.state.VersionSummaries[0].Status = enumspb.WORKER_DEPLOYMENT_VERSION_STATUS_RAMPING
		rc := f.temporal.state.RoutingConfig
		rc.RampingDeploymentVersion = &deploymentpb.WorkerDeploymentVersion{DeploymentName: "shop/orders", BuildId: f.build()}
		rc.RampingVersionPercentage, rc.RampingVersionPercentageChangedTime = pct, timestamppb.New(f.now.Add(-ago))
	}
	// targetCurrent: the target is current, its workers running.
	targetCurrent := func(f *fixture) *appsv1.Deployment {
		d := f.runningDeployment()
		f.registered(true, enumspb.WORKER_DEPLOYMENT_VERSION_STATUS_CURRENT)
		return d
	}
	sunset := func(f *fixture) {
		targetCurrent(f)
		f.twd.Spec.Sunset.ScaledownDelay = &metav1.Duration{Duration: time.Hour}
		f.twd.Spec.Sunset.DeleteDelay = &metav1.Duration{Duration: 24 * time.Hour}
	}
	gate := func(f *fixture) {
		f.twd.Spec.Rollout.Gate = &v1alpha1.GateWorkflow{WorkflowType: "SmokeTest",
			Input: &apiextensionsv1.JSON{Raw: []byte(`{"orders":3}`)}, Timeout: &metav1.Duration{Duration: 10 * time.Minute}}
		anotherCurrent(f)
	}
	cases := map[string]struct {
		setup       func(*fixture)
		kube, tmprl []string
		// ready, if set, is the Ready condition's reason after the pass.
		ready string
	}{
		"a new TWD: the target's Deployment is created, nothing is written to Temporal": {
			setup: func(f *fixture) {},
			kube:  []string{"create Deployment orders-v1-%s", "patch status TemporalWorkerDeployment orders"},
		},
		"a new TWD without the finalizer: the first pass writes only the finalizer": {
			setup: func(f *fixture) { f.twd.Finalizers = nil },
			kube:  []string{"patch TemporalWorkerDeployment orders"},
		},
		"workers poll the first version: claim the manager role, then make it current": {
			setup: func(f *fixture) {
				f.runningDeployment()
				f.registered(false, enumspb.WORKER_DEPLOYMENT_VERSION_STATUS_INACTIVE)
				f.temporal.state.ManagerIdentity = ""
			},
			tmprl: []string{"SetWorkerDeploymentManager self", `SetWorkerDeploymentCurrentVersion "%s" token=token2`},
			kube:  []string{"patch status TemporalWorkerDeployment orders"},
		},
		"the target is current: only status": {
			setup: func(f *fixture) {
				f.runningDeployment()
				f.registered(true, enumspb.WORKER_DEPLOYMENT_VERSION_STATUS_CURRENT)
			},
			kube: []string{"patch status TemporalWorkerDeployment orders"},
		},
		"a registered version not yet readable on its own: no write, and no outage": {
			setup: func(f *fixture) {
				f.runningDeployment()
				f.registered(false, enumspb.WORKER_DEPLOYMENT_VERSION_STATUS_INACTIVE)
				f.temporal.unreadable = map[string]bool{f.build(): true}
			},
			kube: []string{"patch status TemporalWorkerDeployment orders"},
		},
		"Temporal unreachable: no write but status": {
			setup: func(f *fixture) {
				f.runningDeployment()
				f.temporal.unavailable = true
			},
			kube: []string{"patch status TemporalWorkerDeployment orders"},
		},
		"a throttled read of a spec already acted on: no write at all, status stands": {
			setup: func(f *fixture) {
				f.runningDeployment()
				f.temporal.busy = true
				f.twd.Status.ObservedGeneration = 1
			},
		},
		"credentials changed and the server refuses them: no pod is rolled to them": {
			setup: func(f *fixture) {
				targetCurrent(f)
				f.objects[0].(*v1alpha1.TemporalConnection).Spec.TLSServerName = "temporal.example"
				f.dialErr = errors.New("remote error: tls: unknown certificate authority")
			},
			kube:  []string{"patch status TemporalWorkerDeployment orders"},
			ready: v1alpha1.ReasonTemporalClientCreationFailed,
		},
		"credentials changed and the server accepts them: the workers roll": {
			setup: func(f *fixture) {
				targetCurrent(f)
				f.objects[0].(*v1alpha1.TemporalConnection).Spec.TLSServerName = "temporal.example"
			},
			kube: []string{"patch Deployment orders-v1-%s", "patch status TemporalWorkerDeployment orders"},
		},
		"Progressive, the target polls while another version is current: the first step's ramp": {
			setup: progressive,
			tmprl: []string{`SetWorkerDeploymentRampingVersion "%s" 25%`},
			kube:  []string{"patch status TemporalWorkerDeployment orders"},
			// Status shows the ramp once Temporal has applied it.
			ready: v1alpha1.ReasonWaitingForTemporal,
		},
		"Progressive, the first step's pause not over: no write but status": {
			setup: func(f *fixture) { progressive(f); ramped(f, 25, 4*time.Minute) },
			kube:  []string{"patch status TemporalWorkerDeployment orders"},
			ready: v1alpha1.ReasonRamping,
		},
		"Progressive, the first step's pause over: the next step's ramp": {
			setup: func(f *fixture) { progressive(f); ramped(f, 25, 5*time.Minute) },
			tmprl: []string{`SetWorkerDeploymentRampingVersion "%s" 75%`},
			kube:  []string{"patch status TemporalWorkerDeployment orders"},
			ready: v1alpha1.ReasonWaitingForTemporal,
		},
		"Progressive, the last step's pause over: the target becomes current": {
			setup: func(f *fixture) { progressive(f); ramped(f, 75, 10*time.Minute) },
			tmprl: []string{`SetWorkerDeploymentCurrentVersion "%s" token=token`},
			kube:  []string{"patch status TemporalWorkerDeployment orders"},
			ready: v1alpha1.ReasonWaitingForTemporal,
		},
		"sunset: an older version drained for less than scaledownDelay keeps its workers": {
			setup: func(f *fixture) { sunset(f); f.deploymentOf("v0"); f.drained("v0", 59*time.Minute) },
			kube:  []string{"patch status TemporalWorkerDeployment orders"},
		},
		"sunset: an older version drained for scaledownDelay is scaled to zero": {
			setup: func(f *fixture) { sunset(f); f.deploymentOf("v0"); f.drained("v0", time.Hour) },
			kube:  []string{"patch Deployment orders-v0", "patch status TemporalWorkerDeployment orders"},
		},
		"sunset: an older version scaled down deleteDelay ago loses its Deployment": {
			setup: func(f *fixture) {
				sunset(f)
				f.scaledDown(f.deploymentOf("v0"), 24*time.Hour)
				f.drained("v0", 25*time.Hour)
			},
			kube: []string{"delete Deployment orders-v0", "patch status TemporalWorkerDeployment orders"},
		},
		"sunset: an older version without Deployment or pollers is deleted from Temporal": {
			setup: func(f *fixture) { sunset(f); f.drained("v0", 25*time.Hour) },
			tmprl: []string{`DeleteWorkerDeploymentVersion "v0" skipDrainage=false`},
			kube:  []string{"patch status TemporalWorkerDeployment orders"},
		},
		"a gate, the target polls: the gate starts pinned to it, on its workflow task queue": {
			setup: gate,
			// The gate's workflow ID ends with the build ID.
			tmprl: []string{"ExecuteWorkflow SmokeTest queue=q id=" + temporal.GateWorkflowID("shop/orders", "%s") +
				` pinned=%s input={"orders":3} timeout=10m0s`},
			kube:  []string{"patch status TemporalWorkerDeployment orders"},
			ready: v1alpha1.ReasonWaitingForPromotion,
		},
		"a gate whose inputFrom names a missing ConfigMap: no start, GateCannotStart": {
			setup: func(f *fixture) {
				gate(f)
				f.twd.Spec.Rollout.Gate.Input = nil
				f.twd.Spec.Rollout.Gate.InputFrom = &v1alpha1.GateInputSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
					LocalObjectReference: corev1.LocalObjectReference{Name: "smoke"}, Key: "input.json"}}
			},
			kube:  []string{"patch status TemporalWorkerDeployment orders"},
			ready: v1alpha1.ReasonGateCannotStart,
		},
		"a custom build ID kept while the template changes: the target's Deployment is updated in place": {
			setup: func(f *fixture) {
				f.twd.Spec.WorkerOptions.CustomBuildID = "v1-custom"
				targetCurrent(f)
				f.twd.Spec.Template.Spec.Containers[0].Image = "orders:v2"
			},
			kube:  []string{"patch Deployment orders-v1-custom", "patch status TemporalWorkerDeployment orders"},
			ready: v1alpha1.ReasonWaitingForPollers,
		},
		"the connection's address changed, same server: the Deployment gets the new address": {
			setup: func(f *fixture) {
				targetCurrent(f)
				f.objects[0].(*v1alpha1.TemporalConnection).Spec.HostPort = "temporal.shop.svc:7233"
			},
			kube: []string{"patch Deployment orders-v1-%s", "patch status TemporalWorkerDeployment orders"},
			// Its pods roll from this pass on: not Ready now, or Ready
			// would turn False in the next pass.
			ready: v1alpha1.ReasonWaitingForPollers,
		},
		"a Deployment's injected connection is stale (its template replaced without it): it is patched back": {
			setup: func(f *fixture) {
				tpl := &targetCurrent(f).Spec.Template
				tpl.Spec.Containers[0].Env = slices.DeleteFunc(tpl.Spec.Containers[0].Env, func(e corev1.EnvVar) bool { return e.Name == "TEMPORAL_ADDRESS" })
				delete(tpl.Annotations, workload.AnnotationConnectionHash)
			},
			kube:  []string{"patch Deployment orders-v1-%s", "patch status TemporalWorkerDeployment orders"},
			ready: v1alpha1.ReasonWaitingForPollers,
		},
		"an owned resource: adopted, its copy for the target applied, its status written": {
			setup: func(f *fixture) {
				f.mapper = guardMapper()
				targetCurrent(f)
				f.objects = append(f.objects, guardTWOR(f.t, "settings", map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
					"data": map[string]any{"level": "info"}}))
			},
			kube: []string{"patch TemporalWorkerOwnedResource settings", "apply ConfigMap %copy",
				"patch status TemporalWorkerOwnedResource settings", "patch status TemporalWorkerDeployment orders"},
		},
		"deleting: new workflows move to unversioned workers first, workers stay": {
			setup: func(f *fixture) {
				f.runningDeployment()
				f.registered(true, enumspb.WORKER_DEPLOYMENT_VERSION_STATUS_CURRENT)
				f.twd.DeletionTimestamp = &metav1.Time{Time: f.now}
			},
			tmprl: []string{`SetWorkerDeploymentCurrentVersion "" token=token`},
			kube:  []string{"patch status TemporalWorkerDeployment orders"},
		},
		"deleting while a gate runs: the gate is cancelled along with the first step": {
			setup: func(f *fixture) {
				f.runningDeployment()
				f.registered(true, enumspb.WORKER_DEPLOYMENT_VERSION_STATUS_CURRENT)
				f.twd.DeletionTimestamp = &metav1.Time{Time: f.now}
				f.twd.Status.Gate = &v1alpha1.GateStatus{BuildID: "v0", WorkflowID: "gate-v0", Result: "Running"}
			},
			tmprl: []string{`SetWorkerDeploymentCurrentVersion "" token=token`, "CancelWorkflow " + temporal.GateWorkflowID("shop/orders", "v0")},
			kube:  []string{"patch status TemporalWorkerDeployment orders"},
		},
		"deleting while the version drains: nothing is deleted": {
			setup: func(f *fixture) {
				f.runningDeployment()
				f.registered(false, enumspb.WORKER_DEPLOYMENT_VERSION_STATUS_DRAINING)
				f.twd.DeletionTimestamp = &metav1.Time{Time: f.now}
			},
			kube: []string{"patch status TemporalWorkerDeployment orders"},
		},
		"deleting once drained: the Deployment goes": {
			setup: func(f *fixture) {
				f.runningDeployment()
				f.registered(false, enumspb.WORKER_DEPLOYMENT_VERSION_STATUS_DRAINED)
				f.twd.DeletionTimestamp = &metav1.Time{Time: f.now}
			},
			kube: []string{"delete Deployment orders-v1-%s", "patch status TemporalWorkerDeployment orders"},
		},
		"deleting, workers gone and unpolled: the version is deleted from Temporal": {
			setup: func(f *fixture) {
				f.registered(false, enumspb.WORKER_DEPLOYMENT_VERSION_STATUS_DRAINED)
				f.temporal.polled = map[string]bool{}
				f.twd.DeletionTimestamp = &metav1.Time{Time: f.now}
			},
			tmprl: []string{`DeleteWorkerDeploymentVersion "%s" skipDrainage=true`},
			kube:  []string{"patch status TemporalWorkerDeployment orders"},
		},
		"deleting, nothing left in Temporal: the worker deployment goes, then the finalizer": {
			setup: func(f *fixture) {
				f.registered(false, enumspb.WORKER_DEPLOYMENT_VERSION_STATUS_DRAINED)
				f.temporal.state.VersionSummaries = nil
				f.twd.DeletionTimestamp = &metav1.Time{Time: f.now}
			},
			tmprl: []string{"DeleteWorkerDeployment"},
			kube:  []string{"patch TemporalWorkerDeployment orders"},
		},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			c.setup(f)
			build := f.build()
			// Deployment names carry the build ID's hash part; Temporal
			// writes the whole build ID. %copy is the target's copy of the
			// owned resource "settings".
			fill := func(want []string, r *strings.Replacer) []string {
				var out []string
				for _, w := range want {
					out = append(out, r.Replace(w))
				}
				return out
			}
			kube, tmprl, _ := f.reconcile()
			inKube := strings.NewReplacer("%s", buildSuffix(build), "%copy", ownedresource.Name("orders", "settings", build))
			if want := fill(c.kube, inKube); !reflect.DeepEqual(kube, want) {
				t.Errorf("Kubernetes writes = %q, want %q", kube, want)
			}
			if want := fill(c.tmprl, strings.NewReplacer("%s", build)); !reflect.DeepEqual(tmprl, want) {
				t.Errorf("Temporal writes = %q, want %q", tmprl, want)
			}
			if c.ready != "" {
				var got v1alpha1.TemporalWorkerDeployment
				if err := f.client.Get(context.Background(), client.ObjectKeyFromObject(f.twd), &got); err != nil {
					t.Fatal(err)
				}
				if r := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionReady); r == nil || r.Reason != c.ready {
					t.Errorf("Ready = %+v, want reason %s", r, c.ready)
				}
			}
		})
	}
}

// buildSuffix is the build ID part of the Deployment name after "orders-v1-".
func buildSuffix(build string) string { return build[len("v1-"):] }

// TestUnreadableNewVersionIsNoOutage: Temporal lists a version a moment
// before it can describe it; the rollout waits for it instead of reporting
// TemporalStateFetchFailed, which kstatus tools would read as failed.
func TestUnreadableNewVersionIsNoOutage(t *testing.T) {
	f := newFixture(t)
	f.runningDeployment()
	f.registered(false, enumspb.WORKER_DEPLOYMENT_VERSION_STATUS_INACTIVE)
	f.temporal.unreadable = map[string]bool{f.build(): true}
	f.reconcile()
	var got v1alpha1.TemporalWorkerDeployment
	if err := f.client.Get(context.Background(), client.ObjectKeyFromObject(f.twd), &got); err != nil {
		t.Fatal(err)
	}
	for _, c := range got.Status.Conditions {
		if c.Reason != v1alpha1.ReasonWaitingForPollers || (c.Type == v1alpha1.ConditionStalled && c.Status != metav1.ConditionFalse) {
			t.Errorf("condition %s = %s/%s (%s), want WaitingForPollers and not Stalled", c.Type, c.Status, c.Reason, c.Message)
		}
	}
}
