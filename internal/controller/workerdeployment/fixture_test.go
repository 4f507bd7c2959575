package workerdeployment

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

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
func (f *fixture) runningDeployment() *appsv1.Deployment {
	build := f.build()
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
	rc := &deploymentpb.RoutingConfig{}
	if current {
		rc.CurrentDeploymentVersion = &deploymentpb.WorkerDeploymentVersion{DeploymentName: "shop/orders", BuildId: build}
	}
	f.temporal.state = &deploymentpb.WorkerDeploymentInfo{
		Name: "shop/orders", RoutingConfig: rc, ManagerIdentity: fixtureIdentity, LastModifierIdentity: fixtureIdentity,
		VersionSummaries: []*deploymentpb.WorkerDeploymentInfo_WorkerDeploymentVersionSummary{{
			DeploymentVersion: &deploymentpb.WorkerDeploymentVersion{DeploymentName: "shop/orders", BuildId: build},
			Status:            status,
			CreateTime:        timestamppb.New(f.now.Add(-time.Hour)),
		}},
	}
	f.temporal.polled[build] = true
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
			SubResourcePatch: func(ctx context.Context, c client.Client, sub string, o client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
				if err := record("patch "+sub, o); err != nil {
					return err
				}
				return c.SubResource(sub).Patch(ctx, o, p, opts...)
			},
		}).Build()
	pool := temporal.NewPool(fixtureIdentity, nil).WithDialer(func(context.Context, sdkclient.Options) (sdkclient.Client, error) {
		return stubSDK{svc: f.temporal}, nil
	})
	defer pool.Close()
	f.client = c
	r := &Reconciler{Client: c, Pool: pool, Clock: clocktesting.NewFakePassiveClock(f.now), drainage: drainageDescribes{twds: f.drainage}}
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
	cases := map[string]struct {
		setup       func(*fixture)
		kube, tmprl []string
	}{
		"a new TWD: the target's Deployment is created, nothing is written to Temporal": {
			setup: func(f *fixture) {},
			kube:  []string{"create Deployment orders-v1-%s", "patch status TemporalWorkerDeployment orders"},
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
			// writes the whole build ID.
			fill := func(want []string, value string) []string {
				var out []string
				for _, w := range want {
					if countVerbs(w) == 1 {
						w = fmt.Sprintf(w, value)
					}
					out = append(out, w)
				}
				return out
			}
			kube, tmprl, _ := f.reconcile()
			if want := fill(c.kube, buildSuffix(build)); !reflect.DeepEqual(kube, want) {
				t.Errorf("Kubernetes writes = %q, want %q", kube, want)
			}
			if want := fill(c.tmprl, build); !reflect.DeepEqual(tmprl, want) {
				t.Errorf("Temporal writes = %q, want %q", tmprl, want)
			}
		})
	}
}

func countVerbs(s string) int {
	n := 0
	for i := 0; i+1 < len(s); i++ {
		if s[i] == '%' && s[i+1] == 's' {
			n++
		}
	}
	return n
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
