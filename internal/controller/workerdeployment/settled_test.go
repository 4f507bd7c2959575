package workerdeployment

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/internal/freshness"
	"github.com/rainbow-deploy/rainbow/internal/temporal"
)

// TestListIsSharedAndBacksOff: reconciles that find the list stale at the
// same moment share one call, a fresh list serves everyone, and after a
// failure nobody lists again until the retry time (lists are rate limited
// tightly by Temporal, and a storm of retries keeps them failing).
func TestListIsSharedAndBacksOff(t *testing.T) {
	var c listReads
	var calls atomic.Int32
	release := make(chan struct{})
	fail := false
	fetch := func(context.Context) (map[string]temporal.DeploymentSummary, error) {
		calls.Add(1)
		<-release
		if fail {
			return nil, errors.New("throttled")
		}
		return map[string]temporal.DeploymentSummary{"ns/w": {Name: "ns/w"}}, nil
	}
	ctx := context.Background()

	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if got, err := c.list(ctx, fetch, "conn", t0, freshness.ListMaxAge); err != nil || len(got) != 1 {
				t.Errorf("list = %v, %v", got, err)
			}
		}()
	}
	time.Sleep(50 * time.Millisecond) // let them all find the list stale
	close(release)
	wg.Wait()
	if n := calls.Load(); n != 1 {
		t.Fatalf("8 concurrent reconciles listed %d times, want once", n)
	}
	if _, err := c.list(ctx, fetch, "conn", t0.Add(freshness.ListMaxAge-time.Second), freshness.ListMaxAge); err != nil || calls.Load() != 1 {
		t.Fatalf("a fresh list was fetched again (%d calls, %v)", calls.Load(), err)
	}

	fail = true
	stale := t0.Add(freshness.ListMaxAge + time.Second)
	if _, err := c.list(ctx, fetch, "conn", stale, freshness.ListMaxAge); err == nil {
		t.Fatal("a failed list reported no error")
	}
	if _, err := c.list(ctx, fetch, "conn", stale.Add(listRetry-time.Second), freshness.ListMaxAge); err == nil || calls.Load() != 2 {
		t.Fatalf("listed again before the retry time: %d calls, %v", calls.Load(), err)
	}
	fail = false
	if got, err := c.list(ctx, fetch, "conn", stale.Add(listRetry+time.Second), freshness.ListMaxAge); err != nil || len(got) != 1 || calls.Load() != 3 {
		t.Fatalf("after the retry time: %v, %v, %d calls", got, err, calls.Load())
	}
}

// A new TWD waiting for its first poll is answered from the shared list,
// fetched once for all of them; never when another version's Deployment
// exists, whose registration a lagging list could hide.
func TestNotYetInTemporalFromTheList(t *testing.T) {
	r := &Reconciler{}
	c := &r.lists
	var calls atomic.Int32
	var listed atomic.Value
	listed.Store(map[string]temporal.DeploymentSummary{"ns/old": {Name: "ns/old"}})
	fetch := func(context.Context) (map[string]temporal.DeploymentSummary, error) {
		calls.Add(1)
		return listed.Load().(map[string]temporal.DeploymentSummary), nil
	}
	obs := func(name string, builds ...string) *observation {
		o := &observation{twd: &v1alpha1.TemporalWorkerDeployment{}, deploymentName: name, targetBuildID: "b2", connKey: "conn", deployments: map[string]*appsv1.Deployment{}}
		for _, b := range builds {
			o.deployments[b] = &appsv1.Deployment{}
		}
		return o
	}
	ctx := context.Background()
	absent := func(_ *listReads, ctx context.Context, o *observation, fetch listFunc, now time.Time) bool {
		t.Helper()
		a, err := notYetInTemporal(r, ctx, o, fetch, now)
		if err != nil {
			t.Errorf("notYetInTemporal: %v", err)
		}
		return a
	}
	for i := range 100 {
		if !absent(c, ctx, obs(fmt.Sprintf("ns/new%d", i), "b2"), fetch, t0) {
			t.Fatalf("new TWD %d with only its target's Deployment: not answered from the list", i)
		}
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("100 new TWDs listed %d times, want once", n)
	}
	if !absent(c, ctx, obs("ns/new"), fetch, t0) {
		t.Error("a TWD without Deployments yet: not answered from the list")
	}
	if absent(c, ctx, obs("ns/old", "b2"), fetch, t0) {
		t.Error("a listed worker deployment was taken for absent")
	}
	if absent(c, ctx, obs("ns/new", "b1", "b2"), fetch, t0) {
		t.Error("answered from the list although another version's Deployment exists")
	}
	if absent(c, ctx, obs("ns/new", "b1"), fetch, t0) {
		t.Error("answered from the list for a Deployment that is not the target's")
	}
	listed.Store(map[string]temporal.DeploymentSummary{"ns/new": {Name: "ns/new"}})
	if !absent(c, ctx, obs("ns/new", "b2"), fetch, t0.Add(freshness.AbsentListMaxAge-time.Millisecond)) || calls.Load() != 1 {
		t.Error("the list was fetched again before freshness.AbsentListMaxAge")
	}
	// Older than freshness.AbsentListMaxAge: answered from it at once, while a newer
	// list is fetched in the background for the next pass.
	later := t0.Add(freshness.AbsentListMaxAge)
	if !absent(c, ctx, obs("ns/new", "b2"), fetch, later) {
		t.Error("a pass waited for a newer list although the last one was younger than freshness.AbsentListStaleAge")
	}
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if l, ok := c.freshList("conn", later, freshness.AbsentListMaxAge); ok && l.at.Equal(later) {
			break
		}
	}
	if absent(c, ctx, obs("ns/new", "b2"), fetch, later) || calls.Load() != 2 {
		t.Errorf("a first poll shown by a newer list was missed (%d lists)", calls.Load())
	}
	// Older than freshness.AbsentListStaleAge: the pass waits for a new list.
	listed.Store(map[string]temporal.DeploymentSummary{})
	if !absent(c, ctx, obs("ns/new", "b2"), fetch, later.Add(freshness.AbsentListStaleAge)) || calls.Load() != 3 {
		t.Errorf("a list older than freshness.AbsentListStaleAge was used (%d lists)", calls.Load())
	}
	// A failed refresh keeps the last good list for these passes while it
	// is younger than freshness.AbsentListStaleAge.
	failing := func(context.Context) (map[string]temporal.DeploymentSummary, error) {
		return nil, errors.New("throttled")
	}
	good := later.Add(freshness.AbsentListStaleAge)
	retry := good.Add(freshness.AbsentListMaxAge)
	if !absent(c, ctx, obs("ns/new", "b2"), failing, retry) {
		t.Error("the last good list (empty) was not served while a newer one was fetched")
	}
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if _, err := c.list(ctx, failing, "conn", retry, freshness.AbsentListMaxAge); err != nil {
			break
		}
	}
	if !absent(c, ctx, obs("ns/new", "b2"), failing, retry) {
		t.Error("a failed refresh dropped the last good list")
	}
	if absent(c, ctx, obs("ns/new", "b2"), failing, good.Add(freshness.AbsentListStaleAge)) {
		t.Error("answered from a list older than freshness.AbsentListStaleAge after a failed refresh")
	}
	// A TWD whose status showed its worker deployment is never answered
	// from the list: a list missing it must not make status forget it.
	shown := obs("ns/gone", "b2")
	shown.twd.Status.CurrentVersion = &v1alpha1.WorkerVersion{BuildID: "b2"}
	if absent(c, ctx, shown, fetch, good) {
		t.Error("answered from the list although status shows a current version")
	}

	c.lists = nil
	if absent(c, ctx, obs("ns/other", "b2"), failing, t0) {
		t.Error("answered without a list")
	}
	// A throttled list: the pass waits (an error) rather than describing.
	c.lists = nil
	busy := func(context.Context) (map[string]temporal.DeploymentSummary, error) {
		return nil, fmt.Errorf("list: %w", temporal.ErrBusy)
	}
	if a, err := notYetInTemporal(r, ctx, obs("ns/other", "b2"), busy, t0); a || !errors.Is(err, temporal.ErrBusy) {
		t.Errorf("throttled list = %v, %v; want false and the throttling", a, err)
	}
}

// notYetInTemporal: the pass takes the worker deployment for absent from
// the list (freshness.Unlisted); a throttled list is the error.
func notYetInTemporal(r *Reconciler, ctx context.Context, o *observation, fetch listFunc, now time.Time) (bool, error) {
	b := r.believe(ctx, o, fetch, now)
	return b.Use == freshness.Unlisted, b.listErr
}
