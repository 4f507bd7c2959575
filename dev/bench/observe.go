package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/internal/buildid"
	"github.com/rainbow-deploy/rainbow/internal/workload"
)

// observer timestamps, with the local clock, what the benchmark sees
// through watches: Kubernetes timestamps have one-second resolution, too
// coarse for sub-second figures. Temporal runs on the same machine and
// clock, so its timestamps compare with these directly.
type observer struct {
	mu       sync.Mutex
	versions map[versionKey]*versionSeen
	twds     map[types.NamespacedName]*twdSeen
}

// versionKey is one version of one TWD (by its worker label).
type versionKey struct{ namespace, worker, build string }

type versionSeen struct {
	deploymentCreated time.Time // first watch event of the Deployment
	available         time.Time // first seen available, as the controller defines it
	// availableTransition is the Available condition's lastTransitionTime
	// (whole seconds), kept to cross-check available.
	availableTransition time.Time
	podCreated          time.Time // first pod of the version seen
	podRunning          time.Time // its container first seen running
}

type twdSeen struct {
	// ready is when Ready=True was first seen for a generation, with the
	// target current and status observing that generation.
	ready map[int64]time.Time
	last  *v1alpha1.TemporalWorkerDeployment
	// progress is every change of the Ready condition's reason or
	// message, for explaining where a rollout waited.
	progress []progressSeen
	// evals is every analysis evaluation status showed (a new
	// status.analysis.evaluatedAt), in order.
	evals []evalSeen
	// ramps is when each ramp percentage of a target build was first
	// seen in status, by build.
	ramps map[string]map[int32]time.Time
}

// evalSeen is one evaluation of a rollout's analysis, as status showed it.
type evalSeen struct {
	build       string
	evaluatedAt time.Time
	seen        time.Time
	// results counts the checks by result; budget is true when a check
	// was inconclusive because the namespace's read budget was spent,
	// samples when one held for minSamples.
	results         map[v1alpha1.AnalysisResult]int
	budget, samples bool
	// throttled: a read failed because Temporal refused it
	// (ResourceExhausted, its own rate limit).
	throttled bool
}

type progressSeen struct {
	At      time.Time `json:"at"`
	Reason  string    `json:"reason"`
	Message string    `json:"message"`
}

func newObserver() *observer {
	return &observer{versions: map[versionKey]*versionSeen{}, twds: map[types.NamespacedName]*twdSeen{}}
}

// start runs informers on Deployments, pods and TWDs until ctx ends.
func (o *observer) start(ctx context.Context, e *benchEnv) error {
	c, err := cache.New(e.REST, cache.Options{Scheme: e.Scheme})
	if err != nil {
		return err
	}
	handlers := []struct {
		obj client.Object
		fn  func(any)
	}{
		{&appsv1.Deployment{}, o.onDeployment},
		{&corev1.Pod{}, o.onPod},
		{&v1alpha1.TemporalWorkerDeployment{}, o.onTWD},
	}
	for _, h := range handlers {
		inf, err := c.GetInformer(ctx, h.obj)
		if err != nil {
			return err
		}
		fn := h.fn
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { fn(obj) },
			UpdateFunc: func(_, obj any) { fn(obj) },
		}); err != nil {
			return err
		}
	}
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		return fmt.Errorf("watch caches did not sync")
	}
	return nil
}

// record passes what is known of the object's version (by its labels) to
// update, under the lock, with the time the event arrived.
func (o *observer) record(obj client.Object, update func(v *versionSeen, now time.Time)) {
	now := time.Now()
	labels := obj.GetLabels()
	worker, build := labels[workload.LabelWorker], labels[workload.LabelBuildID]
	if worker == "" || build == "" {
		return
	}
	k := versionKey{obj.GetNamespace(), worker, build}
	o.mu.Lock()
	defer o.mu.Unlock()
	v := o.versions[k]
	if v == nil {
		v = &versionSeen{}
		o.versions[k] = v
	}
	update(v, now)
}

func (o *observer) onDeployment(obj any) {
	if d, ok := obj.(*appsv1.Deployment); ok {
		o.record(d, func(v *versionSeen, now time.Time) { deploymentSeen(v, d, now) })
	}
}

func deploymentSeen(v *versionSeen, d *appsv1.Deployment, now time.Time) {
	if v.deploymentCreated.IsZero() {
		v.deploymentCreated = now
	}
	if v.available.IsZero() && rolledOutAndAvailable(d) {
		v.available = now
		for _, c := range d.Status.Conditions {
			if c.Type == appsv1.DeploymentAvailable {
				v.availableTransition = c.LastTransitionTime.Time
			}
		}
	}
}

// rolledOutAndAvailable is the controller's test before it routes to a
// version: the Deployment controller saw the latest spec, all wanted
// replicas are updated and available, and the Available condition is True.
func rolledOutAndAvailable(d *appsv1.Deployment) bool {
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	if d.Status.ObservedGeneration < d.Generation || min(d.Status.UpdatedReplicas, d.Status.AvailableReplicas) < want {
		return false
	}
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentAvailable && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

func (o *observer) onPod(obj any) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	o.record(p, func(v *versionSeen, now time.Time) {
		if v.podCreated.IsZero() {
			v.podCreated = now
		}
		for _, cs := range p.Status.ContainerStatuses {
			if cs.State.Running != nil && v.podRunning.IsZero() {
				v.podRunning = now
			}
		}
	})
}

func (o *observer) onTWD(obj any) {
	t, ok := obj.(*v1alpha1.TemporalWorkerDeployment)
	if !ok {
		return
	}
	now := time.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	key := types.NamespacedName{Namespace: t.Namespace, Name: t.Name}
	s := o.twds[key]
	if s == nil {
		s = &twdSeen{ready: map[int64]time.Time{}}
		o.twds[key] = s
	}
	s.last = t
	o.analysisSeen(s, t, now)
	if c := meta.FindStatusCondition(t.Status.Conditions, v1alpha1.ConditionReady); c != nil {
		if n := len(s.progress); n == 0 || s.progress[n-1].Reason != c.Reason || s.progress[n-1].Message != c.Message {
			s.progress = append(s.progress, progressSeen{At: now, Reason: c.Reason, Message: c.Message})
		}
	}
	if _, seen := s.ready[t.Generation]; !seen && rolledOut(t) {
		s.ready[t.Generation] = now
	}
}

// analysisSeen records a new evaluation and a new ramp of the target.
func (o *observer) analysisSeen(s *twdSeen, t *v1alpha1.TemporalWorkerDeployment, now time.Time) {
	if tv := t.Status.TargetVersion; tv != nil && tv.RampPercentage != nil && *tv.RampPercentage > 0 {
		if s.ramps == nil {
			s.ramps = map[string]map[int32]time.Time{}
		}
		if s.ramps[tv.BuildID] == nil {
			s.ramps[tv.BuildID] = map[int32]time.Time{}
		}
		if _, ok := s.ramps[tv.BuildID][*tv.RampPercentage]; !ok {
			s.ramps[tv.BuildID][*tv.RampPercentage] = now
		}
	}
	a := t.Status.Analysis
	if a == nil || a.EvaluatedAt == nil {
		return
	}
	if n := len(s.evals); n > 0 && s.evals[n-1].build == a.BuildID && s.evals[n-1].evaluatedAt.Equal(a.EvaluatedAt.Time) {
		return
	}
	e := evalSeen{build: a.BuildID, evaluatedAt: a.EvaluatedAt.Time, seen: now, results: map[v1alpha1.AnalysisResult]int{}}
	for _, c := range a.Checks {
		e.results[c.Result]++
		if c.Result == v1alpha1.AnalysisInconclusive {
			e.budget = e.budget || strings.Contains(c.Message, "read budget")
			e.samples = e.samples || strings.Contains(c.Message, "minSamples")
			low := strings.ToLower(c.Message)
			e.throttled = e.throttled || strings.Contains(low, "resourceexhausted") || strings.Contains(low, "resource_exhausted") ||
				strings.Contains(low, "rate limit exceeded")
		}
	}
	s.evals = append(s.evals, e)
}

// evaluations is every evaluation of build's analysis seen for the TWD,
// and when each ramp percentage of build was first seen.
func (o *observer) evaluations(key types.NamespacedName, build string) ([]evalSeen, map[int32]time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	s := o.twds[key]
	if s == nil {
		return nil, nil
	}
	var out []evalSeen
	for _, e := range s.evals {
		if e.build == build {
			out = append(out, e)
		}
	}
	ramps := map[int32]time.Time{}
	for p, at := range s.ramps[build] {
		ramps[p] = at
	}
	return out, ramps
}

// rolledOut: status describes the latest spec, Ready is True and the
// spec's version is current.
func rolledOut(t *v1alpha1.TemporalWorkerDeployment) bool {
	if t.Status.ObservedGeneration != t.Generation {
		return false
	}
	c := meta.FindStatusCondition(t.Status.Conditions, v1alpha1.ConditionReady)
	if c == nil || c.Status != metav1.ConditionTrue || c.ObservedGeneration != t.Generation {
		return false
	}
	cur := t.Status.CurrentVersion
	return cur != nil && cur.BuildID == buildid.Of(&t.Spec)
}

// seen returns a copy of what is known of a version.
func (o *observer) seen(ns, worker, build string) versionSeen {
	o.mu.Lock()
	defer o.mu.Unlock()
	if v := o.versions[versionKey{ns, worker, build}]; v != nil {
		return *v
	}
	return versionSeen{}
}

// readyAt is when generation of the TWD was first seen rolled out.
func (o *observer) readyAt(key types.NamespacedName, generation int64) (time.Time, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if s := o.twds[key]; s != nil {
		t, ok := s.ready[generation]
		return t, ok
	}
	return time.Time{}, false
}

// progressSince is the Ready reasons and messages seen since t.
func (o *observer) progressSince(key types.NamespacedName, t time.Time) []progressSeen {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []progressSeen
	if s := o.twds[key]; s != nil {
		for _, p := range s.progress {
			if !p.At.Before(t) {
				out = append(out, p)
			}
		}
	}
	return out
}

// target is the build ID and ramp percentage of the target version in the
// latest status seen (0 when it does not ramp).
func (o *observer) target(key types.NamespacedName) (string, int32) {
	o.mu.Lock()
	defer o.mu.Unlock()
	s := o.twds[key]
	if s == nil || s.last == nil || s.last.Status.TargetVersion == nil {
		return "", 0
	}
	tv := s.last.Status.TargetVersion
	if tv.RampPercentage == nil {
		return tv.BuildID, 0
	}
	return tv.BuildID, *tv.RampPercentage
}

// readyReason is the Ready condition's reason in the latest status seen.
func (o *observer) readyReason(key types.NamespacedName) string {
	o.mu.Lock()
	defer o.mu.Unlock()
	if s := o.twds[key]; s != nil && s.last != nil {
		if c := meta.FindStatusCondition(s.last.Status.Conditions, v1alpha1.ConditionReady); c != nil {
			return c.Reason
		}
	}
	return ""
}

// lastStatus describes the latest TWD seen, for timeout messages.
func (o *observer) lastStatus(key types.NamespacedName) string {
	o.mu.Lock()
	defer o.mu.Unlock()
	s := o.twds[key]
	if s == nil || s.last == nil {
		return "never seen"
	}
	t := s.last
	msg := fmt.Sprintf("generation=%d observed=%d", t.Generation, t.Status.ObservedGeneration)
	for _, c := range t.Status.Conditions {
		msg += fmt.Sprintf(" %s=%s/%s(%q)", c.Type, c.Status, c.Reason, c.Message)
	}
	return msg
}

// waitFor polls cond every 10ms until it holds, ctx ends or timeout.
func waitFor(ctx context.Context, timeout time.Duration, what string, cond func() bool, detail func() string) error {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			msg := fmt.Sprintf("timed out after %s waiting for %s", timeout, what)
			if detail != nil {
				msg += ": " + detail()
			}
			return fmt.Errorf("%s", msg)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
	return nil
}
