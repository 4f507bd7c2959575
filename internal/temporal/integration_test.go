package temporal

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/dev/demoworker"
	"github.com/rainbow-deploy/rainbow/internal/planner"
	"github.com/rainbow-deploy/rainbow/test/harness"
)

func version(s *planner.TemporalState, build string) (planner.TemporalVersion, bool) {
	for _, v := range s.Versions {
		if v.BuildID == build {
			return v, true
		}
	}
	return planner.TemporalVersion{}, false
}

func statuses(s *planner.TemporalState) string {
	if s == nil {
		return "<nil>"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "exists=%t manager=%q current=%q ramping=%q@%d versions:", s.Exists, s.ManagerIdentity, s.CurrentBuildID, s.RampingBuildID, s.RampPercentage)
	for _, v := range s.Versions {
		fmt.Fprintf(&b, " %s=%s", v.BuildID, v.Status)
	}
	return b.String()
}

// describeUntil polls Describe until ok holds and returns the state and
// its conflict token.
func describeUntil(t *harness.T, api *API, name string, timeout time.Duration, what string, ok func(*planner.TemporalState) bool) (*planner.TemporalState, []byte) {
	t.Helper()
	var st *planner.TemporalState
	var tok []byte
	t.Eventually(timeout, what, func() (bool, string) {
		var err error
		st, tok, err = api.Describe(context.Background(), name)
		if err != nil {
			return false, err.Error()
		}
		return ok(st), statuses(st)
	})
	return st, tok
}

func wantKind(t *harness.T, what string, err, kind error) {
	t.Helper()
	if !errors.Is(err, kind) {
		t.Fatalf("%s: got %v, want %v", what, err, kind)
	}
}

// TestDeploymentLifecycle walks one worker deployment through a rollout
// with real workers: registration, manager, current, ramp, refusals,
// drainage with a pinned workflow, and deletion.
func TestDeploymentLifecycle(t *testing.T) {
	ht := needEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 85*time.Second)
	defer cancel()
	identity := "rainbow-test-" + ht.Suffix
	api := newAPI(ht, identity)
	name := "lifecycle-" + ht.Suffix
	tq := ht.TaskQueue("q")

	st, tok, err := api.Describe(ctx, name)
	if err != nil || st.Exists || tok != nil {
		t.Fatalf("before any poller: state %s, token %x, err %v; want Exists=false", statuses(st), tok, err)
	}

	stopV1 := startWorker(ht, name, "v1", tq)
	describeUntil(ht, api, name, 20*time.Second, "v1 registered and Inactive", func(s *planner.TemporalState) bool {
		v, ok := version(s, "v1")
		return s.Exists && ok && v.Status == v1alpha1.VersionInactive && !v.RegisteredAt.IsZero()
	})
	var d1 VersionDetail
	ht.Eventually(15*time.Second, "v1 polls its workflow and activity task queues", func() (bool, string) {
		d1, err = api.DescribeVersion(ctx, name, "v1")
		return err == nil && len(d1.TaskQueues) == 2 && TaskQueuesReady(d1, VersionDetail{}) && d1.HasPollers, fmt.Sprintf("%+v %v", d1, err)
	})
	if d1.UnversionedPollers || d1.Status != v1alpha1.VersionInactive || d1.TaskQueueNames()[0] != tq {
		t.Fatalf("v1 detail = %+v", d1)
	}

	st, tok = describeUntil(ht, api, name, 5*time.Second, "a token", func(s *planner.TemporalState) bool { return s.Exists })
	if tok, err = api.BecomeManager(ctx, name, tok); err != nil {
		t.Fatalf("BecomeManager: %v", err)
	}
	stale := tok
	if tok, err = api.SetCurrent(ctx, name, "v1", tok); err != nil || len(tok) == 0 {
		t.Fatalf("SetCurrent v1: token %x, err %v", tok, err)
	}
	st, tok = describeUntil(ht, api, name, 10*time.Second, "v1 current, managed by us", func(s *planner.TemporalState) bool {
		v, _ := version(s, "v1")
		return s.CurrentBuildID == "v1" && v.Status == v1alpha1.VersionCurrent
	})
	v1, _ := version(st, "v1")
	if st.ManagerIdentity != identity || st.LastModifierIdentity != identity || v1.CurrentSince == nil || v1.LastCurrentAt == nil {
		t.Fatalf("after SetCurrent v1: %+v, v1 %+v", st, v1)
	}

	startWorker(ht, name, "v2", tq)
	current, err := api.DescribeVersionNoPollers(ctx, name, "v1")
	if err != nil || len(current.TaskQueues) != 2 || current.HasPollers {
		t.Fatalf("v1 without pollers query: %+v %v", current, err)
	}
	ht.Eventually(20*time.Second, "v2 polls every task queue of v1", func() (bool, string) {
		d2, err := api.DescribeVersion(ctx, name, "v2")
		return err == nil && TaskQueuesReady(d2, current) && d2.HasPollers && d2.Status == v1alpha1.VersionInactive,
			fmt.Sprintf("%+v %v", d2, err)
	})

	other := NewAPI(api.Client(), env.Info.TemporalNamespace, "someone-else")
	_, err = other.SetRamp(ctx, name, "v2", 50, nil)
	wantKind(ht, "another identity's ramp", err, ErrManagedByOther)
	var e *Error
	if !errors.As(err, &e) || e.Manager != identity {
		t.Fatalf("ErrManagedByOther names manager %+v, want %q", e, identity)
	}
	_, err = api.SetRamp(ctx, name, "v2", 20, stale)
	wantKind(ht, "ramp with a stale token", err, ErrConflict)

	before := time.Now()
	if tok, err = api.SetRamp(ctx, name, "v2", 20, tok); err != nil {
		t.Fatalf("SetRamp v2 20%%: %v", err)
	}
	st, tok = describeUntil(ht, api, name, 10*time.Second, "v2 ramping at 20%", func(s *planner.TemporalState) bool {
		v, _ := version(s, "v2")
		return s.RampingBuildID == "v2" && s.RampPercentage == 20 && v.Status == v1alpha1.VersionRamping
	})
	v2, _ := version(st, "v2")
	if d := st.RampChangedAt.Sub(before); d < -5*time.Second || d > 10*time.Second || v2.RampingSince == nil {
		t.Fatalf("RampChangedAt %s (write at %s), v2 %+v", st.RampChangedAt, before, v2)
	}

	// A pinned workflow on v1 keeps it draining until it ends.
	run, err := env.Temporal.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                 "long-" + ht.Suffix,
		TaskQueue:          tq,
		VersioningOverride: &client.PinnedVersioningOverride{Version: worker.WorkerDeploymentVersion{DeploymentName: name, BuildID: "v1"}},
	}, demoworker.LongPinnedWorkflow, demoworker.LongInput{})
	if err != nil {
		t.Fatalf("start LongPinned: %v", err)
	}
	ht.Eventually(15*time.Second, "LongPinned runs on v1", func() (bool, string) {
		v, err := env.Temporal.QueryWorkflow(ctx, run.GetID(), run.GetRunID(), demoworker.BuildIDQuery)
		if err != nil {
			return false, err.Error()
		}
		var b string
		_ = v.Get(&b)
		return b == "v1", b
	})

	if _, err = api.SetCurrent(ctx, name, "v2", tok); err != nil {
		t.Fatalf("SetCurrent v2: %v", err)
	}
	describeUntil(ht, api, name, 10*time.Second, "v2 current, ramp cleared, v1 draining", func(s *planner.TemporalState) bool {
		a, _ := version(s, "v1")
		b, _ := version(s, "v2")
		return s.CurrentBuildID == "v2" && s.RampingBuildID == "" && a.Status == v1alpha1.VersionDraining && b.Status == v1alpha1.VersionCurrent
	})
	wantKind(ht, "delete a draining version", api.DeleteVersion(ctx, name, "v1"), ErrVersionInUse)

	// Wait for a drainage check after the grace period: the open workflow
	// must keep v1 draining.
	ht.Eventually(20*time.Second, "a drainage check of v1 after the grace period", func() (bool, string) {
		d, err := api.DescribeVersion(ctx, name, "v1")
		if err != nil || d.Drainage == nil {
			return false, fmt.Sprintf("%+v %v", d, err)
		}
		return d.Drainage.CheckedAt.After(d.Drainage.ChangedAt.Add(5 * time.Second)), fmt.Sprintf("%+v", *d.Drainage)
	})
	if st, _, err = api.Describe(ctx, name); err != nil {
		t.Fatal(err)
	}
	if v, _ := version(st, "v1"); v.Status != v1alpha1.VersionDraining || v.DrainedSince != nil {
		t.Fatalf("v1 with an open pinned workflow: %+v", v)
	}

	if err := env.Temporal.SignalWorkflow(ctx, run.GetID(), run.GetRunID(), demoworker.FinishSignal, nil); err != nil {
		t.Fatalf("signal: %v", err)
	}
	var res demoworker.LongResult
	if err := run.Get(ctx, &res); err != nil || res.FinishedOn != "v1" {
		t.Fatalf("LongPinned result %+v, err %v", res, err)
	}
	st, _ = describeUntil(ht, api, name, 20*time.Second, "v1 drained", func(s *planner.TemporalState) bool {
		v, _ := version(s, "v1")
		return v.Status == v1alpha1.VersionDrained
	})
	if v, _ := version(st, "v1"); v.DrainedSince == nil {
		t.Fatalf("v1 drained without DrainedSince: %+v", v)
	}

	wantKind(ht, "delete a drained version that is still polled", api.DeleteVersion(ctx, name, "v1"), ErrVersionInUse)
	stopV1()
	ht.Eventually(30*time.Second, "v1 deleted once its pollers are gone", func() (bool, string) {
		err := api.DeleteVersion(ctx, name, "v1")
		return err == nil, fmt.Sprint(err)
	})
	describeUntil(ht, api, name, 10*time.Second, "v1 gone, v2 current", func(s *planner.TemporalState) bool {
		_, ok := version(s, "v1")
		return !ok && s.CurrentBuildID == "v2"
	})

	t.Logf("RPCs so far in this package: DescribeWorkerDeployment %v, DescribeWorkerDeploymentVersion %v, DescribeTaskQueue %v",
		RPCCount("DescribeWorkerDeployment"), RPCCount("DescribeWorkerDeploymentVersion"), RPCCount("DescribeTaskQueue"))
	ht.Eventually(10*time.Second, "the list shows v2 current", func() (bool, string) {
		list, err := api.ListDeployments(ctx)
		s := list[name]
		return err == nil && s.CurrentBuildID == "v2" && s.RampingBuildID == "" && !s.RoutingChangedAt.IsZero() && !s.CreatedAt.IsZero(),
			fmt.Sprintf("%+v %v", s, err)
	})
}

// TestGate runs gate workflows pinned to versions that get no traffic.
func TestGate(t *testing.T) {
	ht := needEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	api := newAPI(ht, "rainbow-test-"+ht.Suffix)
	name := "gate-" + ht.Suffix
	tq := ht.TaskQueue("q")
	_, _, err := api.StartGate(ctx, name, "v2", 0, tq, demoworker.GateWorkflow, nil, 0)
	wantKind(ht, "gate pinned to a version nobody polls", err, ErrMissingTaskQueues)

	startWorker(ht, name, "v1", tq)
	startWorker(ht, name, "v2", tq)
	for _, b := range []string{"v1", "v2"} {
		ht.Eventually(20*time.Second, b+" polls the task queues", func() (bool, string) {
			d, err := api.DescribeVersion(ctx, name, b)
			return err == nil && len(d.TaskQueues) == 2, fmt.Sprintf("%+v %v", d, err)
		})
	}

	// The task queue learns of the version shortly after the deployment
	// does; until then Temporal refuses to pin.
	var id, runID string
	ht.Eventually(10*time.Second, "gate started on v2", func() (bool, string) {
		id, runID, err = api.StartGate(ctx, name, "v2", 0, tq, demoworker.GateWorkflow, nil, 0)
		if errors.Is(err, ErrMissingTaskQueues) {
			return false, err.Error()
		}
		if err != nil || id != GateWorkflowID(name, "v2") || runID == "" {
			t.Fatalf("StartGate: %q %q %v", id, runID, err)
		}
		return true, ""
	})
	if _, again, err := api.StartGate(ctx, name, "v2", 0, tq, demoworker.GateWorkflow, nil, 0); err != nil || again != runID {
		t.Fatalf("second start while running: run %q (first %q), err %v", again, runID, err)
	}
	var gs GateStatus
	ht.Eventually(20*time.Second, "gate on v2 succeeded", func() (bool, string) {
		gs, err = api.GateResult(ctx, id)
		return err == nil && gs.Phase != planner.GateRunning, fmt.Sprintf("%+v %v", gs, err)
	})
	if gs.Phase != planner.GateSucceeded || gs.Message != "gate passed on v2" || gs.BuildID != "v2" || gs.RunID != runID {
		t.Fatalf("gate = %+v", gs)
	}
	if _, again, err := api.StartGate(ctx, name, "v2", 0, tq, demoworker.GateWorkflow, nil, 0); err != nil || again != runID {
		t.Fatalf("start after it closed: run %q (first %q), err %v", again, runID, err)
	}

	id = startGateWhenPinnable(ctx, ht, api, name, "v1", tq, demoworker.GateWorkflow, []byte(`{"Fail":true,"Message":"x"}`), 0)
	ht.Eventually(20*time.Second, "gate on v1 failed", func() (bool, string) {
		gs, err = api.GateResult(ctx, id)
		return err == nil && gs.Phase != planner.GateRunning, fmt.Sprintf("%+v %v", gs, err)
	})
	if gs.Phase != planner.GateFailed || gs.Message != "gate failed on v1: x" {
		t.Fatalf("failing gate = %+v", gs)
	}

	// A gate that does not finish within its timeout fails, and says why.
	hang := []byte(`{"Hang":true}`)
	if err := api.CancelGate(ctx, name, "v1", 0); err != nil {
		t.Fatalf("cancelling a closed gate: %v", err)
	}
	timedOut := name + "-timeout"
	startWorker(ht, timedOut, "v1", tq)
	id = startGateWhenPinnable(ctx, ht, api, timedOut, "v1", tq, demoworker.GateWorkflow, hang, 2*time.Second)
	ht.Eventually(20*time.Second, "the hanging gate timed out", func() (bool, string) {
		gs, err = api.GateResult(ctx, id)
		return err == nil && gs.Phase != planner.GateRunning, fmt.Sprintf("%+v %v", gs, err)
	})
	if gs.Phase != planner.GateFailed || !strings.Contains(gs.Message, "spec.rollout.gate.timeout") {
		t.Fatalf("timed-out gate = %+v, want Failed naming spec.rollout.gate.timeout", gs)
	}

	// A cancelled gate reads as failed, not as running forever.
	cancelled := name + "-cancel"
	startWorker(ht, cancelled, "v1", tq)
	id = startGateWhenPinnable(ctx, ht, api, cancelled, "v1", tq, demoworker.GateWorkflow, hang, 0)
	if err := api.CancelGate(ctx, cancelled, "v1", 0); err != nil {
		t.Fatal(err)
	}
	ht.Eventually(20*time.Second, "the gate cancelled", func() (bool, string) {
		gs, err = api.GateResult(ctx, id)
		return err == nil && gs.Phase != planner.GateRunning, fmt.Sprintf("%+v %v", gs, err)
	})
	if gs.Phase != planner.GateCancelled {
		t.Fatalf("cancelled gate = %+v, want Cancelled: no verdict on the version", gs)
	}
	// The version may become the target again: its gate then runs anew.
	firstRun := gs.RunID
	again, rerun, err := api.StartGate(ctx, cancelled, "v1", 0, tq, demoworker.GateWorkflow, nil, 0)
	if err != nil || again != id || rerun == "" || rerun == firstRun {
		t.Fatalf("start after a cancellation: run %q (cancelled %q), err %v; want a new run", rerun, firstRun, err)
	}

	_, err = api.GateResult(ctx, GateWorkflowID(name, "never-started"))
	wantKind(ht, "result of a gate never started", err, ErrNotFound)
	_, _, err = api.StartGate(ctx, name, "v1", 0, tq, demoworker.GateWorkflow, []byte(`{`), 0)
	wantKind(ht, "invalid JSON input", err, ErrRefused)
}

// TestDeleteDeployment deletes a version once its worker stopped, then the
// worker deployment.
func TestDeleteDeployment(t *testing.T) {
	ht := needEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	api := newAPI(ht, "rainbow-test-"+ht.Suffix)
	name := "delete-" + ht.Suffix
	tq := ht.TaskQueue("q")
	stop := startWorker(ht, name, "v1", tq)
	describeUntil(ht, api, name, 20*time.Second, "v1 registered", func(s *planner.TemporalState) bool {
		_, ok := version(s, "v1")
		return ok
	})

	// An unversioned worker on the same task queue.
	uw := worker.New(env.Temporal, tq, worker.Options{})
	uw.RegisterWorkflowWithOptions(demoworker.Hello, workflow.RegisterOptions{Name: demoworker.HelloWorkflow})
	if err := uw.Start(); err != nil {
		t.Fatal(err)
	}
	ht.Eventually(15*time.Second, "v1 and unversioned pollers seen", func() (bool, string) {
		d, err := api.DescribeVersion(ctx, name, "v1")
		return err == nil && d.HasPollers && d.UnversionedPollers, fmt.Sprintf("%+v %v", d, err)
	})
	uw.Stop()
	err := api.DeleteDeployment(ctx, name)
	if err == nil {
		t.Fatal("deleting a worker deployment that has a version succeeded")
	}
	t.Logf("delete with a version: %v", err)

	stop()
	stopped := time.Now()
	ht.Eventually(30*time.Second, "no pollers of v1 once its worker stopped", func() (bool, string) {
		d, err := api.DescribeVersion(ctx, name, "v1")
		return err == nil && !d.HasPollers, fmt.Sprintf("%+v %v", d, err)
	})
	t.Logf("v1 reported without pollers %s after its worker stopped", time.Since(stopped).Round(100*time.Millisecond))
	// Temporal runs the same poller query before deleting, so it agrees.
	ht.Eventually(5*time.Second, "v1 deleted", func() (bool, string) {
		err := api.DeleteVersion(ctx, name, "v1")
		return err == nil, fmt.Sprint(err)
	})
	if err := api.DeleteDeployment(ctx, name); err != nil {
		t.Fatalf("DeleteDeployment: %v", err)
	}
	describeUntil(ht, api, name, 10*time.Second, "deployment gone", func(s *planner.TemporalState) bool { return !s.Exists })
	wantKind(ht, "describe a deleted version", func() error { _, err := api.DescribeVersion(ctx, name, "v1"); return err }(), ErrNotFound)
}

// TestPool checks sharing, rotation, failures and the RPC counter against
// the real server.
func TestPool(t *testing.T) {
	ht := needEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	pool := NewPool("rainbow-test-"+ht.Suffix, nil)
	defer pool.Close()
	dials := 0
	dial := pool.dial
	pool.dial = func(ctx context.Context, o client.Options) (client.Client, error) {
		dials++ // read only after the Gets that waited for this dial returned
		return dial(ctx, o)
	}

	p1 := envParams()
	// Same server, spelled differently: another key, as after a rotation.
	p2 := p1
	p2.HostPort = strings.Replace(p1.HostPort, "127.0.0.1", "localhost", 1)
	if p2.HostPort == p1.HostPort {
		t.Fatalf("cannot derive a second address from %s", p1.HostPort)
	}

	healthBefore := RPCCount("DescribeNamespace")
	a1, err := pool.Get(ctx, "ns/a", p1)
	if err != nil {
		t.Fatalf("Get a: %v", err)
	}
	if got := RPCCount("DescribeNamespace"); got < healthBefore+1 {
		t.Errorf("DescribeNamespace count %v, want > %v", got, healthBefore)
	}
	again, _ := pool.Get(ctx, "ns/a", p1)
	b1, _ := pool.Get(ctx, "ns/b", p1)
	if again != a1 || b1 != a1 || pool.Len() != 1 || dials != 1 {
		t.Fatalf("same key: clients %p %p %p, len %d, dials %d", a1, again, b1, pool.Len(), dials)
	}

	// a rotates: b still uses the old client.
	a2, err := pool.Get(ctx, "ns/a", p2)
	if err != nil || a2 == a1 || pool.Len() != 2 {
		t.Fatalf("rotation: %p vs %p, len %d, err %v", a2, a1, pool.Len(), err)
	}
	if _, err := b1.CheckHealth(ctx, &client.CheckHealthRequest{}); err != nil {
		t.Fatalf("b's client was closed by a's rotation: %v", err)
	}
	// b leaves: the old client is closed.
	pool.Forget("ns/b")
	if pool.Len() != 1 {
		t.Fatalf("len after Forget = %d", pool.Len())
	}
	if _, err := b1.CheckHealth(ctx, &client.CheckHealthRequest{}); err == nil {
		t.Fatal("old client still works after its last owner left")
	}

	// Concurrent Gets of a new key share one dial.
	p3 := p1
	p3.APIKey = "ignored-by-the-dev-server"
	p3.TLS = false
	dials = 0
	clients := make(chan client.Client, 8)
	for i := range 8 {
		go func() {
			c, err := pool.Get(ctx, fmt.Sprintf("ns/c%d", i), p3)
			if err != nil {
				t.Error(err)
			}
			clients <- c
		}()
	}
	first := <-clients
	for range 7 {
		if c := <-clients; c != first {
			t.Fatal("concurrent Gets of one key got different clients")
		}
	}
	if dials != 1 {
		t.Fatalf("%d dials for one key", dials)
	}

	// A caller that gives up does not cancel the dial for the others.
	release := make(chan struct{})
	pool.dial = func(ctx context.Context, o client.Options) (client.Client, error) {
		dials++
		<-release
		return dial(ctx, o)
	}
	dials = 0
	p4 := p1
	p4.ServerName = "only-a-different-key"
	short, cancelShort := context.WithTimeout(ctx, 100*time.Millisecond)
	if _, err := pool.Get(short, "ns/slow", p4); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Get with an expiring context: %v", err)
	}
	cancelShort()
	close(release)
	if _, err := pool.Get(ctx, "ns/slow", p4); err != nil || dials != 1 {
		t.Fatalf("Get after the dial finished: err %v, %d dials", err, dials)
	}
	pool.dial = dial

	// A wrong namespace fails the dial and is not cached.
	bad := p1
	bad.Namespace = "no-such-namespace-" + ht.Suffix
	if _, err := pool.Get(ctx, "ns/bad", bad); err == nil {
		t.Fatal("dial to a missing namespace succeeded")
	}
	if pool.Len() != 3 {
		t.Fatalf("a failed dial stays in the pool: len %d", pool.Len())
	}

	api := NewAPI(a2, p1.Namespace, pool.Identity())
	nf := RPCCountResult("DescribeWorkerDeployment", "NotFound")
	st, _, err := api.Describe(ctx, "never-polled-"+ht.Suffix)
	if err != nil || st.Exists {
		t.Fatalf("Describe: %+v %v", st, err)
	}
	if got := RPCCountResult("DescribeWorkerDeployment", "NotFound"); got < nf+1 {
		t.Fatalf("NotFound DescribeWorkerDeployment count %v, want > %v", got, nf)
	}

	pool.Close()
	if _, err := pool.Get(ctx, "ns/a", p1); !errors.Is(err, ErrPoolClosed) {
		t.Fatalf("Get after Close: %v", err)
	}
}

// TestFirstVersionWaitsForEveryTaskQueueType: a new version's task queue
// types register one by one (here workflow and activity, a few tens of
// milliseconds apart). With nothing current, Temporal would accept it as
// current in that gap; TaskQueuesReady must not, until every type its
// workers poll is registered.
// Describing every few milliseconds from the first poll catches the gap
// in most runs; a fresh deployment is tried a few times until one does.
func TestFirstVersionWaitsForEveryTaskQueueType(t *testing.T) {
	ht := needEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	api := newAPI(ht, "rainbow-test-"+ht.Suffix)
	gaps := 0
	for attempt := 0; attempt < 5 && gaps == 0; attempt++ {
		name := fmt.Sprintf("types-%s-%d", ht.Suffix, attempt)
		tq := ht.TaskQueue(fmt.Sprintf("q%d", attempt))
		stop := startWorker(ht, name, "v1", tq)
		polled := []TaskQueue{{tq, TaskQueueActivity}, {tq, TaskQueueWorkflow}}
		var seen []string
		for complete := false; !complete; {
			if ctx.Err() != nil {
				t.Fatalf("version %s never registered %v; seen: %v", name, polled, seen)
			}
			// Under the namespace's worker deployment read limit (50/s),
			// which the parallel tests share.
			time.Sleep(15 * time.Millisecond)
			d, err := api.DescribeVersion(ctx, name, "v1")
			if err != nil {
				continue // not registered yet
			}
			complete = slices.Equal(d.TaskQueues, polled)
			if !complete {
				gaps++
			}
			seen = append(seen, fmt.Sprint(d.TaskQueues))
			if ready := TaskQueuesReady(d, VersionDetail{}); ready != complete {
				t.Fatalf("TaskQueuesReady = %t with %v registered, while the worker polls %v", ready, d.TaskQueues, polled)
			}
		}
		stop()
		t.Logf("attempt %d: descriptions until every type registered: %v", attempt, seen)
	}
	if gaps == 0 {
		t.Log("no description fell between the two registrations: the check was not put to the test")
	}
}
