package integration

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/dev/faultproxy"
	"github.com/rainbow-deploy/rainbow/integrations/argocd"
	"github.com/rainbow-deploy/rainbow/test/harness"
)

// cdWatch judges every version of a TWD's status that a watch delivers as
// kstatus and the shipped Argo CD health check do, and keeps the looks
// that say the rollout failed.
type cdWatch struct {
	mu     sync.Mutex
	looks  int
	failed []string
	stop   context.CancelFunc
	done   chan struct{}
}

func watchCD(t *testing.T, namespace, name string) *cdWatch {
	dyn, err := dynamic.NewForConfig(env.REST)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	w := &cdWatch{stop: cancel, done: make(chan struct{})}
	res := dyn.Resource(v1alpha1.GroupVersion.WithResource("temporalworkerdeployments")).Namespace(namespace)
	watch, err := res.Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(w.done)
		defer watch.Stop()
		for ev := range watch.ResultChan() {
			u, ok := ev.Object.(*unstructured.Unstructured)
			if !ok {
				continue
			}
			w.judge(u)
		}
	}()
	t.Cleanup(w.close)
	return w
}

func (w *cdWatch) judge(u *unstructured.Unstructured) {
	k, kerr := status.Compute(u)
	h, herr := argocd.RunHealth(argocd.HealthScript(), u.Object)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.looks++
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	switch {
	case kerr != nil || herr != nil:
		w.failed = append(w.failed, fmt.Sprintf("generation %d: kstatus %v, health.lua %v", u.GetGeneration(), kerr, herr))
	case k.Status == status.FailedStatus || h.Status == "Degraded":
		w.failed = append(w.failed, fmt.Sprintf("generation %d: kstatus %s (%s), Argo CD %s (%s); conditions %v",
			u.GetGeneration(), k.Status, k.Message, h.Status, h.Message, conds))
	}
}

func (w *cdWatch) close() {
	w.stop()
	<-w.done
}

// result stops the watch and returns how many looks it judged and the
// failed ones.
func (w *cdWatch) result() (int, []string) {
	w.close()
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.looks, w.failed
}

// TestHealthyRolloutsNeverLookFailed: rollouts back to back on two TWDs
// side by side, each spec applied the moment the last rollout completed
// (AllAtOnce, then Progressive), while Temporal throttles a quarter of the controller's reads of
// the worker deployment on top of its own throttling after each routing
// change. Every status a watch sees is judged by kstatus (Flux, Helm 4) and
// by the shipped Argo CD health check: not one may say Failed or Degraded.
// Seen before: Stalled with TemporalStateFetchFailed for 5-7 s after a new
// spec met a throttled read, so `helm upgrade --wait` failed a rollout that
// completed 35 s later.
func TestHealthyRolloutsNeverLookFailed(t *testing.T) {
	t.Parallel()
	// Eight rollouts in all: four on each TWD, which halves the wait (a
	// loaded machine stretched them to 12 minutes back to back).
	for i := range 2 {
		t.Run(fmt.Sprintf("twd-%d", i), func(t *testing.T) {
			parallel(t)
			healthyRolloutsLookHealthy(t, 2)
		})
	}
}

// healthyRolloutsLookHealthy runs rounds of two rollouts each (AllAtOnce,
// then Progressive) under throttled reads, judging every status seen.
func healthyRolloutsLookHealthy(t *testing.T, rounds int) {
	tt := env.NewTest(t)
	proxy, err := faultproxy.NewTemporal(tt.Env.Info.TemporalAddress)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Close)
	r := &rollout{&harness.Rollout{T: tt, Name: "cdwatch", TaskQueue: tt.TaskQueue("cdwatch")}}
	conn := &v1alpha1.TemporalConnection{
		ObjectMeta: metav1.ObjectMeta{Name: "temporal", Namespace: r.Namespace},
		Spec:       v1alpha1.TemporalConnectionSpec{HostPort: proxy.Addr()},
	}
	if err := r.Env.Kube.Create(context.Background(), conn); err != nil {
		t.Fatal(err)
	}
	r.Create(r.Spec("v0"))
	r.WaitCurrent(3*time.Minute, r.BuildID())

	w := watchCD(t, r.Namespace, r.Name)
	// A quarter of the reads, at random: a pass reads up to three times,
	// and each throttle doubles its backoff, so half of them would stall
	// the rollouts for minutes.
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 23))
	var mu sync.Mutex
	proxy.Set(faultproxy.TemporalFault{Exhausted: true, Match: func(method string) bool {
		if !faultproxy.WorkerDeploymentAPIs(method) || !(strings.Contains(method, "/Describe") || strings.Contains(method, "/List")) {
			return false
		}
		mu.Lock()
		defer mu.Unlock()
		return rng.IntN(4) == 0
	}})
	for i := range rounds {
		r.Update(func(t *v1alpha1.TemporalWorkerDeployment) {
			t.Spec.Template.Spec.Containers[0].Image = fmt.Sprintf("rainbow.local/demo-worker:v%d", 2*i+1)
			t.Spec.Rollout = v1alpha1.RolloutSpec{Strategy: v1alpha1.StrategyAllAtOnce}
		})
		// Generous: a quarter of the reads refused, each backing the
		// next pass off further, can stall a pass for minutes on a
		// loaded machine (make test, 2026-11-27: 3 minutes at v5).
		r.WaitCurrent(6*time.Minute, r.BuildID())
		r.Update(func(t *v1alpha1.TemporalWorkerDeployment) {
			t.Spec.Template.Spec.Containers[0].Image = fmt.Sprintf("rainbow.local/demo-worker:v%d", 2*i+2)
			t.Spec.Rollout = v1alpha1.RolloutSpec{Strategy: v1alpha1.StrategyProgressive,
				Steps: []v1alpha1.RolloutStep{{RampPercentage: 50, PauseDuration: metav1.Duration{Duration: 2 * time.Second}}}}
		})
		r.WaitCurrent(6*time.Minute, r.BuildID())
	}
	proxy.Pass()
	looks, failed := w.result()
	var throttled int
	for _, c := range proxy.Calls() {
		if c.Fault == "exhausted" {
			throttled++
		}
	}
	t.Logf("%d rollouts; %d status versions judged; %d reads throttled", 2*rounds, looks, throttled)
	if throttled == 0 {
		t.Fatal("no read was throttled: the test did not test what it names")
	}
	if len(failed) > 0 {
		t.Fatalf("%d of %d looks said Failed or Degraded during healthy rollouts:\n%s", len(failed), looks, strings.Join(failed, "\n"))
	}
}
