package manager

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// stubLock is a Lease lock whose writes fail when err is set; holder is
// whom Get reports, updates counts the writes that reached it.
type stubLock struct {
	resourcelock.Interface
	err     error
	holder  string
	updates int
}

func (l *stubLock) Get(context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	return &resourcelock.LeaderElectionRecord{HolderIdentity: l.holder}, nil, nil
}

func (l *stubLock) Identity() string { return "me" }
func (l *stubLock) Create(context.Context, resourcelock.LeaderElectionRecord) error {
	return l.err
}
func (l *stubLock) Update(context.Context, resourcelock.LeaderElectionRecord) error {
	l.updates++
	return l.err
}

// A leader that stops renewing (frozen, partitioned) must stop writing
// before another replica can take the Lease: the chaos failover test found
// a resumed old leader patching status after the new one took over.
func TestLeaseFence(t *testing.T) {
	now := time.Unix(1000, 0)
	f := newLeaseFence(renewDeadline, logr.Discard())
	f.now = func() time.Time { return now }
	inner := &stubLock{}
	lock := f.lock(inner)
	ctx := context.Background()

	if f.check() == nil {
		t.Fatal("the fence is open before the Lease was ever taken")
	}
	if err := lock.Create(ctx, resourcelock.LeaderElectionRecord{HolderIdentity: "me"}); err != nil {
		t.Fatal(err)
	}
	if err := f.check(); err != nil {
		t.Fatalf("just took the Lease, fence says %v", err)
	}
	now = now.Add(renewDeadline - time.Millisecond)
	if err := f.check(); err != nil {
		t.Fatalf("within the renew deadline, fence says %v", err)
	}
	now = now.Add(time.Millisecond)
	var notLeader errNotLeader
	if err := f.check(); !errors.As(err, &notLeader) {
		t.Fatalf("at the renew deadline without a renewal the fence passed (%v)", err)
	}
	if renewDeadline >= leaseDuration {
		t.Fatalf("the fence (%s) must close before another replica may take the Lease (%s)", renewDeadline, leaseDuration)
	}

	// A failed renewal moves nothing; a good one reopens.
	inner.err = errors.New("conflict")
	_ = lock.Update(ctx, resourcelock.LeaderElectionRecord{HolderIdentity: "me"})
	if f.check() == nil {
		t.Fatal("a failed renewal opened the fence")
	}
	inner.err = nil
	_ = lock.Update(ctx, resourcelock.LeaderElectionRecord{HolderIdentity: "me"})
	if f.check() != nil {
		t.Fatal("a renewal did not open the fence")
	}
	// Releasing the Lease (an empty holder) closes it at once.
	inner.holder = "me"
	_ = lock.Update(ctx, resourcelock.LeaderElectionRecord{HolderIdentity: ""})
	if f.check() == nil {
		t.Fatal("the fence stayed open after the Lease was released")
	}
}

// client-go's release() decides from the record it saw last, so an old
// leader resumed after another took over would clear the new holder's
// Lease: the chaos failover test saw a third process take it while the
// second still led. Only a Lease this replica holds is released.
func TestLeaseFenceReleasesOnlyItsOwnLease(t *testing.T) {
	f := newLeaseFence(renewDeadline, logr.Discard())
	inner := &stubLock{holder: "other"}
	lock := f.lock(inner)
	if err := lock.Update(context.Background(), resourcelock.LeaderElectionRecord{HolderIdentity: ""}); err == nil || inner.updates != 0 {
		t.Fatalf("released a Lease another replica holds: err %v, %d writes", err, inner.updates)
	}
	inner.holder = "me"
	if err := lock.Update(context.Background(), resourcelock.LeaderElectionRecord{HolderIdentity: ""}); err != nil || inner.updates != 1 {
		t.Fatalf("did not release its own Lease: err %v, %d writes", err, inner.updates)
	}
}

func TestLeaseFenceGuardsWritesOnly(t *testing.T) {
	now := time.Unix(1000, 0)
	f := newLeaseFence(renewDeadline, logr.Discard())
	f.now = func() time.Time { return now }
	f.renewed(now, "me", "me")
	ctx := context.Background()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}}
	c := f.client(fake.NewClientBuilder().WithObjects(pod).WithStatusSubresource(pod).Build())

	if err := c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns"}}); err != nil {
		t.Fatalf("create while leading: %v", err)
	}
	now = now.Add(renewDeadline)
	writes := map[string]func() error{
		"create": func() error {
			return c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "ns"}})
		},
		"update":        func() error { return c.Update(ctx, pod) },
		"patch":         func() error { return c.Patch(ctx, pod, client.MergeFrom(pod.DeepCopy())) },
		"delete":        func() error { return c.Delete(ctx, pod) },
		"deleteAllOf":   func() error { return c.DeleteAllOf(ctx, &corev1.ConfigMap{}, client.InNamespace("ns")) },
		"status update": func() error { return c.Status().Update(ctx, pod) },
		"status patch":  func() error { return c.Status().Patch(ctx, pod, client.MergeFrom(pod.DeepCopy())) },
		"subresource":   func() error { return c.SubResource("status").Update(ctx, pod) },
	}
	for name, write := range writes {
		var notLeader errNotLeader
		if err := write(); !errors.As(err, &notLeader) {
			t.Errorf("%s after the renew deadline: %v, want it refused", name, err)
		}
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(pod), &corev1.Pod{}); err != nil {
		t.Errorf("a read was refused: %v", err)
	}

	called := map[string]bool{}
	invoker := func(_ context.Context, method string, _, _ any, _ *grpc.ClientConn, _ ...grpc.CallOption) error {
		called[method] = true
		return nil
	}
	const svc = "/temporal.api.workflowservice.v1.WorkflowService/"
	for _, m := range []string{"DescribeWorkerDeployment", "ListWorkflowExecutions", "GetSystemInfo", "CountWorkflowExecutions"} {
		if err := f.temporalWrites(ctx, svc+m, nil, nil, nil, invoker); err != nil || !called[svc+m] {
			t.Errorf("read %s: %v, called %v", m, err, called[svc+m])
		}
	}
	for _, m := range []string{"SetWorkerDeploymentCurrentVersion", "SetWorkerDeploymentRampingVersion", "DeleteWorkerDeploymentVersion", "StartWorkflowExecution", "SignalWorkflowExecution"} {
		err := f.temporalWrites(ctx, svc+m, nil, nil, nil, invoker)
		if status.Code(err) != codes.FailedPrecondition || called[svc+m] {
			t.Errorf("write %s after the renew deadline: %v, sent %v; want it refused unsent", m, err, called[svc+m])
		}
	}
}

// Events leave asynchronously: one recorded while leading must not be sent
// once the fence closed.
func TestLeaseFenceHoldsEventWrites(t *testing.T) {
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Method+" "+r.URL.Path)
	}))
	defer srv.Close()
	now := time.Unix(1000, 0)
	f := newLeaseFence(renewDeadline, logr.Discard())
	f.now = func() time.Time { return now }
	f.renewed(now.Add(-renewDeadline), "me", "me") // closed
	rt := f.transport(http.DefaultTransport)
	send := func(method, path string) error {
		req, _ := http.NewRequest(method, srv.URL+path, nil)
		resp, err := rt.RoundTrip(req)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	for _, p := range []string{"/api/v1/namespaces/ns/events", "/api/v1/namespaces/ns/events/e1", "/apis/events.k8s.io/v1/namespaces/ns/events"} {
		for _, m := range []string{http.MethodPost, http.MethodPatch, http.MethodPut} {
			if err := send(m, p); err == nil {
				t.Errorf("%s %s passed a closed fence", m, p)
			}
		}
	}
	for _, p := range []string{"/api/v1/namespaces/ns/secrets", "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/x",
		"/apis/temporal.io/v1alpha1/namespaces/events/temporalworkerdeployments/events"} {
		if err := send(http.MethodPut, p); err != nil {
			t.Errorf("PUT %s was held: %v", p, err)
		}
	}
	if err := send(http.MethodGet, "/api/v1/namespaces/ns/events"); err != nil {
		t.Errorf("a read of Events was held: %v", err)
	}
	if len(got) != 4 {
		t.Errorf("the server got %v, want the 3 other writes and the read", got)
	}
}
