package manager

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Leader election timing: controller-runtime's defaults, set explicitly
// because the fence depends on them.
const (
	leaseDuration = 15 * time.Second
	renewDeadline = 10 * time.Second
	retryPeriod   = 2 * time.Second
)

// leaseFence keeps a replica that may have lost the Lease from writing.
//
// controller-runtime stops the controllers only once the leader elector
// gives up renewing, up to the renew deadline after its last renewal, and
// in-flight reconciles go on meanwhile. A leader that was stopped (SIGSTOP,
// a stalled node) and resumes after another replica took the Lease thus
// keeps writing from its stale view for seconds: the chaos failover test
// saw it patch a TemporalWorkerDeployment's status over the new leader's.
//
// The fence is the replica's own bound on its leadership: writes pass only
// until the renew deadline after the start of the last successful renewal.
// Another replica takes the Lease only once a full lease duration passed
// since it saw that renewal, which is later (leaseDuration > renewDeadline,
// and it saw the renewal after it started), so the fence closes before any
// other replica can lead. Time is measured on the monotonic clock, which
// runs on while a process is stopped.
type leaseFence struct {
	mu         sync.Mutex
	validUntil time.Time
	deadline   time.Duration
	now        func() time.Time
	log        logr.Logger
}

// errNotLeader is what a fenced write returns.
type errNotLeader struct{ since time.Time }

func (e errNotLeader) Error() string {
	return fmt.Sprintf("write refused: this replica has not renewed the leader election Lease since %s, another may lead", e.since.Format(time.RFC3339Nano))
}

func newLeaseFence(deadline time.Duration, log logr.Logger) *leaseFence {
	return &leaseFence{deadline: deadline, now: time.Now, log: log}
}

// check is nil while this replica surely holds the Lease. A nil fence
// (no leader election) always passes.
func (f *leaseFence) check() error {
	if f == nil {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.now().Before(f.validUntil) {
		return nil
	}
	return errNotLeader{since: f.validUntil.Add(-f.deadline)}
}

// renewed records a write of the Lease that began at start.
func (f *leaseFence) renewed(start time.Time, holder, self string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if holder == self {
		f.validUntil = start.Add(f.deadline)
	} else {
		f.validUntil = time.Time{} // released
	}
}

// lock wraps the leader election lock so that each successful write of
// the Lease moves the fence.
func (f *leaseFence) lock(inner resourcelock.Interface) resourcelock.Interface {
	return &fencedLock{Interface: inner, f: f}
}

type fencedLock struct {
	resourcelock.Interface
	f *leaseFence
}

func (l *fencedLock) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	start := l.f.now()
	err := l.Interface.Create(ctx, ler)
	if err == nil {
		l.f.renewed(start, ler.HolderIdentity, l.Identity())
	}
	return err
}

func (l *fencedLock) Update(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	start := l.f.now()
	if ler.HolderIdentity == "" {
		// A release. client-go's release() reads the Lease (which
		// refreshes the resource version this write is checked against)
		// but decides from the record it saw last: an old leader resumed
		// after another took over would clear the new holder's Lease and
		// let a third replica in while the second still leads (seen by
		// the chaos failover test). Release only a Lease we hold.
		cur, _, err := l.Interface.Get(ctx)
		if err != nil {
			return err
		}
		if cur.HolderIdentity != l.Identity() {
			l.f.renewed(start, "", l.Identity())
			return fmt.Errorf("not releasing the Lease: %q holds it now", cur.HolderIdentity)
		}
	}
	err := l.Interface.Update(ctx, ler)
	if err == nil {
		l.f.renewed(start, ler.HolderIdentity, l.Identity())
	}
	return err
}

// client fences the writes of the controllers' Kubernetes client; reads
// pass.
func (f *leaseFence) client(c client.Client) client.Client {
	if f == nil {
		return c
	}
	return &fencedClient{Client: c, f: f}
}

type fencedClient struct {
	client.Client
	f *leaseFence
}

func (c *fencedClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	if err := c.f.check(); err != nil {
		return err
	}
	return c.Client.Create(ctx, obj, opts...)
}

func (c *fencedClient) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	if err := c.f.check(); err != nil {
		return err
	}
	return c.Client.Delete(ctx, obj, opts...)
}

func (c *fencedClient) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	if err := c.f.check(); err != nil {
		return err
	}
	return c.Client.Update(ctx, obj, opts...)
}

func (c *fencedClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	if err := c.f.check(); err != nil {
		return err
	}
	return c.Client.Patch(ctx, obj, patch, opts...)
}

func (c *fencedClient) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
	if err := c.f.check(); err != nil {
		return err
	}
	return c.Client.Apply(ctx, obj, opts...)
}

func (c *fencedClient) DeleteAllOf(ctx context.Context, obj client.Object, opts ...client.DeleteAllOfOption) error {
	if err := c.f.check(); err != nil {
		return err
	}
	return c.Client.DeleteAllOf(ctx, obj, opts...)
}

func (c *fencedClient) Status() client.SubResourceWriter {
	return &fencedSubResource{SubResourceClient: nil, w: c.Client.Status(), f: c.f}
}

func (c *fencedClient) SubResource(sub string) client.SubResourceClient {
	inner := c.Client.SubResource(sub)
	return &fencedSubResource{SubResourceClient: inner, w: inner, f: c.f}
}

// fencedSubResource fences a subresource's writes; its reads (Get) go to
// the embedded client, which Status() does not have.
type fencedSubResource struct {
	client.SubResourceClient
	w client.SubResourceWriter
	f *leaseFence
}

func (s *fencedSubResource) Create(ctx context.Context, obj, sub client.Object, opts ...client.SubResourceCreateOption) error {
	if err := s.f.check(); err != nil {
		return err
	}
	return s.w.Create(ctx, obj, sub, opts...)
}

func (s *fencedSubResource) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	if err := s.f.check(); err != nil {
		return err
	}
	return s.w.Update(ctx, obj, opts...)
}

func (s *fencedSubResource) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	if err := s.f.check(); err != nil {
		return err
	}
	return s.w.Patch(ctx, obj, patch, opts...)
}

func (s *fencedSubResource) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.SubResourceApplyOption) error {
	if err := s.f.check(); err != nil {
		return err
	}
	return s.w.Apply(ctx, obj, opts...)
}

// recorder drops the Events of a replica that may have lost the Lease.
func (f *leaseFence) recorder(r events.EventRecorder) events.EventRecorder {
	if f == nil {
		return r
	}
	return &fencedRecorder{EventRecorder: r, f: f}
}

type fencedRecorder struct {
	events.EventRecorder
	f *leaseFence
}

func (r *fencedRecorder) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	if r.f.check() == nil {
		r.EventRecorder.Eventf(regarding, related, eventtype, reason, action, note, args...)
	}
}

// temporalWrites is the unary interceptor of the controller's Temporal
// clients: a call that is not a read passes only through an open fence,
// and is logged (at debug level) with the time it was let through, so that
// the chaos tests can check that none left after the Lease was lost.
func (f *leaseFence) temporalWrites(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	name := method[strings.LastIndexByte(method, '/')+1:]
	if !temporalRead(name) {
		if err := f.check(); err != nil {
			f.log.Info("temporal write refused", "method", name, "reason", err.Error())
			return status.Error(codes.FailedPrecondition, err.Error())
		}
		f.log.V(1).Info("temporal write", "method", name)
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}

// temporalRead reports whether a WorkflowService method only reads.
func temporalRead(method string) bool {
	for _, p := range []string{"Describe", "List", "Get", "Count", "Scan", "Query", "Poll"} {
		if strings.HasPrefix(method, p) {
			return true
		}
	}
	return false
}

// noEvents gives the leader election lock no Event recorder.
type noEvents struct{}

func (noEvents) GetEventRecorderFor(string) record.EventRecorder { return nil }
func (noEvents) GetEventRecorder(string) events.EventRecorder    { return nil }

// transport drops the Event writes of a replica whose fence is closed. The
// Event broadcaster sends asynchronously and retries, so an Event recorded
// while leading may otherwise leave after the Lease was lost (the chaos
// failover test saw one 31s after). Other requests pass: the webhook's
// certificate rotation and reviews run on every replica.
func (f *leaseFence) transport(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		if req.Method != http.MethodGet && isEventPath(req.URL.Path) {
			if err := f.check(); err != nil {
				return nil, err
			}
		}
		return rt.RoundTrip(req)
	})
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// isEventPath reports whether path is of core or events.k8s.io Events:
// /api/v1/[namespaces/NS/]events[/NAME] or /apis/events.k8s.io/V/[...].
func isEventPath(path string) bool {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis" && parts[1] == "events.k8s.io":
		parts = parts[3:]
	default:
		return false
	}
	if len(parts) >= 2 && parts[0] == "namespaces" {
		parts = parts[2:]
	}
	return len(parts) >= 1 && len(parts) <= 2 && parts[0] == "events"
}
