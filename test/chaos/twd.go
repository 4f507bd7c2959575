package chaos

import (
	"context"
	"fmt"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/internal/buildid"
)

// TWD is a TemporalWorkerDeployment of the demo worker in the scenario's
// namespace.
type TWD struct {
	s         *Scenario
	Name      string
	TaskQueue string
	mutate    func(*v1alpha1.TemporalWorkerDeployment)
}

// NewTWD creates the TemporalConnection "temporal" (once per namespace is
// enough; a second call finds it) and returns a handle for a TWD named
// name, not created yet. mutate, if not nil, edits the spec Create writes.
func (s *Scenario) NewTWD(name string, mutate func(*v1alpha1.TemporalWorkerDeployment)) *TWD {
	s.Helper()
	conn := &v1alpha1.TemporalConnection{
		ObjectMeta: metav1.ObjectMeta{Name: "temporal", Namespace: s.Namespace},
		Spec:       v1alpha1.TemporalConnectionSpec{HostPort: s.Env.Info.TemporalAddress},
	}
	if err := s.Env.Kube.Create(context.Background(), conn); err != nil && !isAlreadyExists(err) {
		s.Fatal(err)
	}
	return &TWD{s: s, Name: name, TaskQueue: s.TaskQueue(name), mutate: mutate}
}

// ProgressiveWithGate is a Progressive rollout through two short ramp
// steps behind the demo worker's RolloutGate, with short sunset delays:
// what the kill scenarios drive.
func ProgressiveWithGate(twd *v1alpha1.TemporalWorkerDeployment) {
	twd.Spec.Rollout = v1alpha1.RolloutSpec{
		Strategy: v1alpha1.StrategyProgressive,
		Steps: []v1alpha1.RolloutStep{
			{RampPercentage: 25, PauseDuration: metav1.Duration{Duration: 3 * time.Second}},
			{RampPercentage: 75, PauseDuration: metav1.Duration{Duration: 3 * time.Second}},
		},
		Gate: &v1alpha1.GateWorkflow{WorkflowType: "RolloutGate", Timeout: &metav1.Duration{Duration: 2 * time.Minute}},
	}
}

// Spec is the TWD running the demo worker at tag.
func (w *TWD) Spec(tag string) *v1alpha1.TemporalWorkerDeployment {
	twd := &v1alpha1.TemporalWorkerDeployment{
		ObjectMeta: metav1.ObjectMeta{Name: w.Name, Namespace: w.s.Namespace},
		Spec: v1alpha1.TemporalWorkerDeploymentSpec{
			Replicas: ptr.To[int32](1),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				TerminationGracePeriodSeconds: ptr.To[int64](5),
				Containers: []corev1.Container{{
					Name: "worker", Image: "rainbow.local/demo-worker:" + tag,
					Env: []corev1.EnvVar{{Name: "DEMO_TASK_QUEUE", Value: w.TaskQueue}},
				}},
			}},
			WorkerOptions: v1alpha1.WorkerOptions{
				ConnectionRef:     v1alpha1.ConnectionReference{Name: "temporal"},
				TemporalNamespace: w.s.Env.Info.TemporalNamespace,
			},
			Rollout: v1alpha1.RolloutSpec{Strategy: v1alpha1.StrategyAllAtOnce},
			Sunset: v1alpha1.SunsetSpec{
				ScaledownDelay: &metav1.Duration{Duration: 2 * time.Second},
				DeleteDelay:    &metav1.Duration{Duration: 3 * time.Second},
			},
		},
	}
	if w.mutate != nil {
		w.mutate(twd)
	}
	return twd
}

// Create creates the TWD at tag.
func (w *TWD) Create(tag string) {
	w.s.Helper()
	if err := w.s.Env.Kube.Create(context.Background(), w.Spec(tag)); err != nil {
		w.s.Fatalf("create TemporalWorkerDeployment: %v", err)
	}
}

// Get reads the TWD.
func (w *TWD) Get() (*v1alpha1.TemporalWorkerDeployment, error) {
	var twd v1alpha1.TemporalWorkerDeployment
	err := w.s.Env.Kube.Get(context.Background(), crclient.ObjectKey{Namespace: w.s.Namespace, Name: w.Name}, &twd)
	return &twd, err
}

// SetImage moves the TWD to tag (a new version), retrying conflicts, and
// returns the new build ID.
func (w *TWD) SetImage(tag string) string {
	w.s.Helper()
	for i := 0; ; i++ {
		twd, err := w.Get()
		if err == nil {
			twd.Spec.Template.Spec.Containers[0].Image = "rainbow.local/demo-worker:" + tag
			if err = w.s.Env.Kube.Update(context.Background(), twd); err == nil {
				return buildid.Of(&twd.Spec)
			}
		}
		if i > 20 {
			w.s.Fatalf("update TemporalWorkerDeployment: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// BuildID is the build ID of tag's version.
func (w *TWD) BuildID(tag string) string { return buildid.Of(&w.Spec(tag).Spec) }

// DeploymentName is the Temporal worker deployment the TWD registers with.
func (w *TWD) DeploymentName() string { return w.Spec("x").WorkerDeploymentName() }

// IsCurrent reports whether build is current, the rollout complete
// (Ready=True for the latest generation), and says what it saw.
func (w *TWD) IsCurrent(build string) (bool, string) {
	twd, err := w.Get()
	if err != nil {
		return false, err.Error()
	}
	c := meta.FindStatusCondition(twd.Status.Conditions, v1alpha1.ConditionReady)
	seen := fmt.Sprintf("observed=%d/%d", twd.Status.ObservedGeneration, twd.Generation)
	if c != nil {
		seen += fmt.Sprintf(" Ready=%s/%s(%q)", c.Status, c.Reason, c.Message)
	}
	if v := twd.Status.CurrentVersion; v != nil {
		seen += " current=" + v.BuildID
	}
	return twd.Status.ObservedGeneration == twd.Generation && c != nil && c.Status == metav1.ConditionTrue &&
		twd.Status.CurrentVersion != nil && twd.Status.CurrentVersion.BuildID == build, seen
}

// WaitCurrent waits until build is current and the rollout complete.
func (w *TWD) WaitCurrent(timeout time.Duration, build string) {
	w.s.Helper()
	w.s.Eventually(timeout, "version "+build+" current and Ready=True", func() (bool, string) { return w.IsCurrent(build) })
}

// Routing reads the worker deployment's routing from Temporal: the current
// and ramping build IDs and the ramp.
func (w *TWD) Routing(ctx context.Context) (current, ramping string, pct float32, err error) {
	resp, err := w.s.Env.Temporal.WorkflowService().DescribeWorkerDeployment(ctx, &workflowservice.DescribeWorkerDeploymentRequest{
		Namespace: w.s.Env.Info.TemporalNamespace, DeploymentName: w.DeploymentName(),
	})
	if err != nil {
		return "", "", 0, err
	}
	rc := resp.GetWorkerDeploymentInfo().GetRoutingConfig()
	return rc.GetCurrentDeploymentVersion().GetBuildId(), rc.GetRampingDeploymentVersion().GetBuildId(), rc.GetRampingVersionPercentage(), nil
}

func isAlreadyExists(err error) bool { return apierrors.IsAlreadyExists(err) }
