package harness

import (
	"context"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/internal/buildid"
)

// ConnectionName is the TemporalConnection every DemoTWD uses.
const ConnectionName = "temporal"

// DemoImage is the demo worker's image at tag: the node agent runs
// .cache/bin/demo-worker for any tag, so the tag only makes a new version.
func DemoImage(tag string) string { return "rainbow.local/demo-worker:" + tag }

// CreateConnection creates the TemporalConnection ConnectionName in
// namespace to the environment's Temporal; one already there is kept.
func (e *Env) CreateConnection(ctx context.Context, namespace string) error {
	err := e.Kube.Create(ctx, &v1alpha1.TemporalConnection{
		ObjectMeta: metav1.ObjectMeta{Name: ConnectionName, Namespace: namespace},
		Spec:       v1alpha1.TemporalConnectionSpec{HostPort: e.Info.TemporalAddress},
	})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// TWDOption edits the spec DemoTWD builds.
type TWDOption func(*v1alpha1.TemporalWorkerDeployment)

// WithRollout sets the rollout strategy.
func WithRollout(r v1alpha1.RolloutSpec) TWDOption {
	return func(t *v1alpha1.TemporalWorkerDeployment) { t.Spec.Rollout = r }
}

// WithSunset sets the sunset delays; zero durations leave the API's
// defaults.
func WithSunset(scaledown, delete time.Duration) TWDOption {
	return func(t *v1alpha1.TemporalWorkerDeployment) {
		t.Spec.Sunset = v1alpha1.SunsetSpec{}
		if scaledown > 0 {
			t.Spec.Sunset.ScaledownDelay = &metav1.Duration{Duration: scaledown}
		}
		if delete > 0 {
			t.Spec.Sunset.DeleteDelay = &metav1.Duration{Duration: delete}
		}
	}
}

// WithEnv adds variables to the worker container's env.
func WithEnv(vars ...corev1.EnvVar) TWDOption {
	return func(t *v1alpha1.TemporalWorkerDeployment) {
		c := &t.Spec.Template.Spec.Containers[0]
		c.Env = append(c.Env, vars...)
	}
}

// DemoTWD is a TemporalWorkerDeployment of one demo worker replica at
// image, polling taskQueue through the connection ConnectionName, rolled
// out AllAtOnce. Old versions are scaled down after 2s and deleted after
// 3s, so that a test sees them go within seconds.
func (e *Env) DemoTWD(namespace, name, image, taskQueue string, opts ...TWDOption) *v1alpha1.TemporalWorkerDeployment {
	twd := &v1alpha1.TemporalWorkerDeployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: v1alpha1.TemporalWorkerDeploymentSpec{
			Replicas: ptr.To[int32](1),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				TerminationGracePeriodSeconds: ptr.To[int64](5),
				Containers: []corev1.Container{{
					Name: "worker", Image: image,
					Env: []corev1.EnvVar{{Name: "DEMO_TASK_QUEUE", Value: taskQueue}},
				}},
			}},
			WorkerOptions: v1alpha1.WorkerOptions{
				ConnectionRef:     v1alpha1.ConnectionReference{Name: ConnectionName},
				TemporalNamespace: e.Info.TemporalNamespace,
			},
			Rollout: v1alpha1.RolloutSpec{Strategy: v1alpha1.StrategyAllAtOnce},
			Sunset: v1alpha1.SunsetSpec{
				ScaledownDelay: &metav1.Duration{Duration: 2 * time.Second},
				DeleteDelay:    &metav1.Duration{Duration: 3 * time.Second},
			},
		},
	}
	for _, o := range opts {
		o(twd)
	}
	return twd
}

// Rollout is a handle on one test's TemporalWorkerDeployment of the demo
// worker, in the test's namespace with a task queue of its own.
type Rollout struct {
	*T
	Name      string
	TaskQueue string
	// Options apply to every spec Spec builds.
	Options []TWDOption
}

// NewRollout creates the test namespace's TemporalConnection and returns
// a handle for a TWD named name, not created yet.
func (t *T) NewRollout(name string, opts ...TWDOption) *Rollout {
	t.Helper()
	if err := t.Env.CreateConnection(context.Background(), t.Namespace); err != nil {
		t.Fatalf("create TemporalConnection: %v", err)
	}
	return &Rollout{T: t, Name: name, TaskQueue: t.TaskQueue(name), Options: opts}
}

// Spec is the TWD running the demo worker at tag.
func (r *Rollout) Spec(tag string) *v1alpha1.TemporalWorkerDeployment {
	return r.Env.DemoTWD(r.Namespace, r.Name, DemoImage(tag), r.TaskQueue, r.Options...)
}

// Create creates twd, failing the test on an error, and returns the build
// ID of its spec as stored.
func (r *Rollout) Create(twd *v1alpha1.TemporalWorkerDeployment) string {
	r.Helper()
	if err := r.Env.Kube.Create(context.Background(), twd); err != nil {
		r.Fatalf("create TemporalWorkerDeployment: %v", err)
	}
	return buildid.Of(&twd.Spec)
}

// Read reads the TWD; it does not fail the test, so other goroutines may
// call it.
func (r *Rollout) Read() (*v1alpha1.TemporalWorkerDeployment, error) {
	var twd v1alpha1.TemporalWorkerDeployment
	err := r.Env.Kube.Get(context.Background(), crclient.ObjectKey{Namespace: r.Namespace, Name: r.Name}, &twd)
	return &twd, err
}

// Get reads the TWD, failing the test on an error.
func (r *Rollout) Get() *v1alpha1.TemporalWorkerDeployment {
	r.Helper()
	twd, err := r.Read()
	if err != nil {
		r.Fatalf("get TemporalWorkerDeployment: %v", err)
	}
	return twd
}

// Update applies mutate to the latest TWD and writes it (UpdateTWD),
// failing the test if it cannot.
func (r *Rollout) Update(mutate func(*v1alpha1.TemporalWorkerDeployment)) *v1alpha1.TemporalWorkerDeployment {
	r.Helper()
	twd, err := r.Env.UpdateTWD(context.Background(), types.NamespacedName{Namespace: r.Namespace, Name: r.Name}, mutate)
	if err != nil {
		r.Fatalf("update TemporalWorkerDeployment: %v", err)
	}
	return twd
}

// UpdateTWD applies mutate to the latest TWD key and writes it. A
// conflict with the controller is retried at once, another error after
// 100ms, 20 times at most.
func (e *Env) UpdateTWD(ctx context.Context, key types.NamespacedName, mutate func(*v1alpha1.TemporalWorkerDeployment)) (*v1alpha1.TemporalWorkerDeployment, error) {
	var err error
	for range 21 {
		var twd v1alpha1.TemporalWorkerDeployment
		if err = e.Kube.Get(ctx, key, &twd); err == nil {
			mutate(&twd)
			if err = e.Kube.Update(ctx, &twd); err == nil {
				return &twd, nil
			}
		}
		if !apierrors.IsConflict(err) {
			time.Sleep(100 * time.Millisecond)
		}
	}
	return nil, err
}

// SetImage moves the TWD to tag (a new version) and returns its build ID.
func (r *Rollout) SetImage(tag string) string {
	r.Helper()
	twd := r.Update(func(t *v1alpha1.TemporalWorkerDeployment) { t.Spec.Template.Spec.Containers[0].Image = DemoImage(tag) })
	return buildid.Of(&twd.Spec)
}

// BuildID is the build ID of the TWD's spec as stored.
func (r *Rollout) BuildID() string {
	r.Helper()
	return buildid.Of(&r.Get().Spec)
}

// BuildIDOf is the build ID Spec(tag) has.
func (r *Rollout) BuildIDOf(tag string) string { return buildid.Of(&r.Spec(tag).Spec) }

// DeploymentName is the Temporal worker deployment the TWD registers with.
func (r *Rollout) DeploymentName() string { return r.Spec("x").WorkerDeploymentName() }

// IsCurrent reports whether build is current with the rollout complete
// (Ready=True for the latest generation), and what it saw.
func (r *Rollout) IsCurrent(build string) (bool, string) {
	twd, err := r.Read()
	if err != nil {
		return false, err.Error()
	}
	return IsCurrent(twd, build), DescribeTWD(twd)
}

// IsCurrent reports whether twd's status, for its latest generation, has
// build current and Ready=True.
func IsCurrent(twd *v1alpha1.TemporalWorkerDeployment, build string) bool {
	c := meta.FindStatusCondition(twd.Status.Conditions, v1alpha1.ConditionReady)
	return twd.Status.ObservedGeneration == twd.Generation && c != nil && c.Status == metav1.ConditionTrue &&
		twd.Status.CurrentVersion != nil && twd.Status.CurrentVersion.BuildID == build
}

// WaitCurrent waits until build is current and the rollout complete, and
// returns the TWD as last read.
func (r *Rollout) WaitCurrent(timeout time.Duration, build string) *v1alpha1.TemporalWorkerDeployment {
	r.Helper()
	var last *v1alpha1.TemporalWorkerDeployment
	r.Eventually(timeout, "version "+build+" current and Ready=True", func() (bool, string) {
		twd, err := r.Read()
		if err != nil {
			return false, err.Error()
		}
		last = twd
		return IsCurrent(twd, build), DescribeTWD(twd)
	})
	return last
}

// Routing reads the worker deployment's routing from Temporal: the
// current and ramping build IDs and the ramp.
func (r *Rollout) Routing(ctx context.Context) (current, ramping string, pct float32, err error) {
	return r.Env.Routing(ctx, r.DeploymentName())
}

// Routing reads a worker deployment's routing from Temporal.
func (e *Env) Routing(ctx context.Context, deployment string) (current, ramping string, pct float32, err error) {
	resp, err := e.Temporal.WorkflowService().DescribeWorkerDeployment(ctx, &workflowservice.DescribeWorkerDeploymentRequest{
		Namespace: e.Info.TemporalNamespace, DeploymentName: deployment,
	})
	if err != nil {
		return "", "", 0, err
	}
	rc := resp.GetWorkerDeploymentInfo().GetRoutingConfig()
	return rc.GetCurrentDeploymentVersion().GetBuildId(), rc.GetRampingDeploymentVersion().GetBuildId(), rc.GetRampingVersionPercentage(), nil
}
