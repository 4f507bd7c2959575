package workerdeployment

import (
	"context"
	appsv1 "k8s.io/api/apps/v1"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	enumspb "go.temporal.io/api/enums/v1"
	sdkclient "go.temporal.io/sdk/client"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/internal/backlog"
	"github.com/rainbow-deploy/rainbow/internal/temporal"
	"github.com/rainbow-deploy/rainbow/internal/workload"
)

// TestZeroedVersionWithBacklogIsRevived: the current version of a TWD
// without spec.replicas, scaled to zero by someone else, gets one replica
// back once tasks wait in its backlog, and not before.
func TestZeroedVersionWithBacklogIsRevived(t *testing.T) {
	for _, waiting := range []int64{0, 3} {
		f := newFixture(t)
		f.backlogs = true
		f.twd.Spec.Replicas = nil
		d := f.runningDeployment()
		d.Spec.Replicas = ptr.To[int32](0)
		d.Status.Replicas, d.Status.ReadyReplicas, d.Status.AvailableReplicas, d.Status.UpdatedReplicas = 0, 0, 0, 0
		f.registered(true, enumspb.WORKER_DEPLOYMENT_VERSION_STATUS_CURRENT)
		f.temporal.backlog = map[string]int64{f.build(): waiting}
		before := value(workersRevived.WithLabelValues("shop", "orders"))
		kube, tmprl, _ := f.reconcile()
		want := []string{"patch status TemporalWorkerDeployment orders"}
		if waiting > 0 {
			want = append([]string{"patch Deployment " + d.Name}, want...)
		}
		if !reflect.DeepEqual(kube, want) || len(tmprl) != 0 {
			t.Errorf("backlog %d: writes %q, %q; want %q and none to Temporal", waiting, kube, tmprl, want)
		}
		if got := value(workersRevived.WithLabelValues("shop", "orders")) - before; got != float64(min(waiting, 1)) {
			t.Errorf("backlog %d: rainbow_workers_revived_total grew by %v", waiting, got)
		}
		if got := backlogSeries()["shop/orders/"+f.build()+"/q/Activity"]; got != float64(waiting) {
			t.Errorf("backlog %d: rainbow_version_backlog_count = %v", waiting, got)
		}
		var twd v1alpha1.TemporalWorkerDeployment
		if err := f.client.Get(context.Background(), crclient.ObjectKeyFromObject(f.twd), &twd); err != nil {
			t.Fatal(err)
		}
		rv := twd.Status.TargetVersion.Revival
		switch {
		case waiting == 0 && rv != nil:
			t.Errorf("backlog 0: status records a revival: %+v", *rv)
		case waiting > 0 && (rv == nil || !rv.At.Time.Equal(f.now) || rv.FromReplicas != 0 || rv.Replicas != 1 || rv.Count != 1 ||
			rv.VersionStatus != v1alpha1.VersionCurrent || ptr.Deref(rv.Backlog, -1) != waiting || !strings.Contains(rv.Message, "3 task(s) wait")):
			t.Errorf("backlog %d: status records the revival as %+v", waiting, rv)
		}
	}
}

// TestBacklogValues: the external metrics API's view, selected by the
// labels of the versions and their task queues; reads are reused within
// the interval; a version that stops running loses its gauges.
func TestBacklogValues(t *testing.T) {
	f := newFixture(t)
	d := f.runningDeployment()
	f.registered(true, enumspb.WORKER_DEPLOYMENT_VERSION_STATUS_CURRENT)
	f.temporal.backlog = map[string]int64{f.build(): 5}
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = v1alpha1.AddToScheme(scheme)
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(append(f.objects, f.twd)...).
		WithIndex(&appsv1.Deployment{}, deploymentsByWorker, indexDeploymentsByWorker).Build()
	dials := 0
	pool := temporal.NewPool(fixtureIdentity, nil).WithDialer(func(context.Context, sdkclient.Options) (sdkclient.Client, error) {
		dials++
		return stubSDK{svc: f.temporal}, nil
	})
	defer pool.Close()
	b := backlog.New(c, pool, clocktesting.NewFakePassiveClock(f.now), 0, Fleet{Client: c})
	ctx := context.Background()
	sel := func(s string) labels.Selector {
		parsed, err := labels.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		return parsed
	}
	all, _, err := b.Values(ctx, "shop", sel(backlog.SampleLabelBuildID+"="+f.build()))
	if err != nil || len(all) != 2 {
		t.Fatalf("Values by build ID = %+v, %v; want the version's two task queues", all, err)
	}
	act, _, _ := b.Values(ctx, "shop", sel(backlog.SampleLabelTaskQueueType+"=Activity,"+backlog.SampleLabelWorker+"="+workload.WorkerLabel("orders")))
	if len(act) != 1 || act[0].Count != 5 || act[0].Labels[backlog.SampleLabelTaskQueue] != "q" || act[0].Labels[backlog.SampleLabelBuildID] != f.build() {
		t.Errorf("Values of the activity queue = %+v, want one sample of 5 tasks", act)
	}
	if none, n, _ := b.Values(ctx, "shop", sel(backlog.SampleLabelBuildID+"=other")); len(none) != 0 || n != 0 {
		t.Errorf("Values of another build = %+v, want none", none)
	}
	if none, _, _ := b.Values(ctx, "elsewhere", labels.Everything()); len(none) != 0 {
		t.Errorf("Values in another namespace = %+v, want none", none)
	}
	if dials != 1 {
		t.Errorf("%d dials, want 1", dials)
	}
	f.temporal.backlog[f.build()] = 9
	if again, _, _ := b.Values(ctx, "shop", sel(backlog.SampleLabelTaskQueueType+"=Activity")); len(again) != 1 || again[0].Count != 5 {
		t.Errorf("Values within the interval = %+v, want the read reused (5)", again)
	}
	if got := backlogSeries()["shop/orders/"+f.build()+"/q/Activity"]; got != 5 {
		t.Errorf("rainbow_version_backlog_count = %v, want 5", got)
	}
	b.Forget(keyOf(f.twd))
	if n := len(backlogSeries()); n != 0 {
		t.Errorf("%d backlog series left after the version stopped running", n)
	}
	_ = d
}

// backlogSeries are the rainbow_version_backlog_count series by
// namespace/name/build_id/task_queue/task_queue_type.
func backlogSeries() map[string]float64 {
	out := map[string]float64{}
	families, _ := metrics.Registry.Gather()
	for _, mf := range families {
		if mf.GetName() != "rainbow_version_backlog_count" {
			continue
		}
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, p := range m.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			out[strings.Join([]string{l["namespace"], l["name"], l["build_id"], l["task_queue"], l["task_queue_type"]}, "/")] = m.GetGauge().GetValue()
		}
	}
	return out
}

// value reads a gauge or counter.
func value(m prometheus.Metric) float64 {
	var out dto.Metric
	_ = m.Write(&out)
	if g := out.GetGauge(); g != nil {
		return g.GetValue()
	}
	return out.GetCounter().GetValue()
}

// TestBackgroundReadsOnlyAutoscaled: in the background, only the versions
// of TWDs whose replicas an autoscaler owns are read, unless All.
func TestBackgroundReadsOnlyAutoscaled(t *testing.T) {
	for _, tc := range []struct {
		name      string
		replicas  *int32
		all, read bool
	}{
		{"spec.replicas set", ptr.To[int32](1), false, false},
		{"no spec.replicas", nil, false, true},
		{"spec.replicas set, All", ptr.To[int32](1), true, true},
	} {
		f := newFixture(t)
		f.twd.Spec.Replicas = tc.replicas
		f.runningDeployment()
		f.registered(true, enumspb.WORKER_DEPLOYMENT_VERSION_STATUS_CURRENT)
		b, pool := f.newBacklogs(backlog.DefaultInterval)
		b.All = tc.all
		if err := b.ReadAll(context.Background()); err != nil {
			t.Fatal(err)
		}
		if _, read := b.Fresh(keyOf(f.twd), f.build(), f.now); read != tc.read {
			t.Errorf("%s: read = %v, want %v", tc.name, read, tc.read)
		}
		pool.Close()
	}
}

// TestBackgroundReadWakesZeroedVersion: once tasks wait for a version
// someone else scaled to zero, the background read wakes its TWD, which an
// idle TWD would otherwise only notice within a minute.
func TestBackgroundReadWakesZeroedVersion(t *testing.T) {
	for _, waiting := range []int64{0, 1} {
		f := newFixture(t)
		f.twd.Spec.Replicas = nil
		d := f.runningDeployment()
		d.Spec.Replicas = ptr.To[int32](0)
		f.registered(true, enumspb.WORKER_DEPLOYMENT_VERSION_STATUS_CURRENT)
		f.temporal.backlog = map[string]int64{f.build(): waiting}
		b, pool := f.newBacklogs(backlog.DefaultInterval)
		if err := b.ReadAll(context.Background()); err != nil {
			t.Fatal(err)
		}
		if woken := len(b.Events()) == 1; woken != (waiting > 0) {
			t.Errorf("backlog %d: TWD woken = %v", waiting, woken)
		}
		pool.Close()
	}
}

// newBacklogs is a Backlogs on the fixture's objects and Temporal stub; close
// the pool when done.
func (f *fixture) newBacklogs(interval time.Duration) (*backlog.Backlogs, *temporal.Pool) {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = v1alpha1.AddToScheme(scheme)
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(append(f.objects, f.twd)...).
		WithIndex(&v1alpha1.TemporalWorkerOwnedResource{}, ownedByWorker, indexOwnedByWorker).
		WithIndex(&appsv1.Deployment{}, deploymentsByWorker, indexDeploymentsByWorker).Build()
	pool := temporal.NewPool(fixtureIdentity, nil).WithDialer(func(context.Context, sdkclient.Options) (sdkclient.Client, error) {
		return stubSDK{svc: f.temporal}, nil
	})
	return backlog.New(c, pool, clocktesting.NewFakePassiveClock(f.now), interval, Fleet{Client: c}), pool
}

// TestUnrefreshedGaugesExpire: without an autoscaler nothing reads a
// version's backlog again after a rollout's describe, so its gauges go
// once that read is two intervals old rather than show it as today's.
func TestUnrefreshedGaugesExpire(t *testing.T) {
	for _, tc := range []struct {
		name string
		age  time.Duration
		kept bool
	}{
		{"read an interval ago", backlog.DefaultInterval, true},
		{"read one and a half intervals ago", 3 * backlog.DefaultInterval / 2, true},
		{"read three intervals ago", 3 * backlog.DefaultInterval, false},
	} {
		f := newFixture(t)
		f.twd.Spec.Replicas = ptr.To[int32](1)
		f.runningDeployment()
		b, pool := f.newBacklogs(backlog.DefaultInterval)
		key, tq := keyOf(f.twd), temporal.TaskQueue{Name: "q", Type: temporal.TaskQueueWorkflow}
		b.Record(key, f.build(), "d", temporal.VersionDetail{Backlog: []temporal.TaskQueueBacklog{{TaskQueue: tq, Count: 3}}}, f.now.Add(-tc.age))
		if err := b.ReadAll(context.Background()); err != nil {
			t.Fatal(err)
		}
		_, kept := b.Fresh(key, f.build(), f.now.Add(-tc.age))
		_, gauge := backlogSeries()[key.Namespace+"/"+key.Name+"/"+f.build()+"/"+tq.Name+"/"+string(tq.Type)]
		b.Forget(key)
		if kept != tc.kept || gauge != tc.kept {
			t.Errorf("%s: read kept = %v, gauge kept = %v, want %v", tc.name, kept, gauge, tc.kept)
		}
		pool.Close()
	}
}
