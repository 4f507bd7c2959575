package soak

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/internal/buildid"
	"github.com/rainbow-deploy/rainbow/internal/planner"
	"github.com/rainbow-deploy/rainbow/internal/workload"
	"github.com/rainbow-deploy/rainbow/test/harness"
)

// worker is one TemporalWorkerDeployment of the soak and its rollouts.
type worker struct {
	name, namespace string
	deployment      string // Temporal worker deployment
	taskQueue       string
	n               int  // changes made, to make each new version unique
	revision        int  // in-place changes, in the SOAK_REVISION env var
	gateFailed      bool // the target's gate failed: the next change is a new version
}

// Rollout is one change the soak made to a TWD and how long it took the
// controller to carry it out.
type Rollout struct {
	TWD string `json:"twd"`
	// Kind is "new version" (a new build ID) or "in place" (the same
	// custom build ID, a new template: a rolling update).
	Kind     string `json:"kind"`
	BuildID  string `json:"buildID"`
	Custom   bool   `json:"customBuildID"`
	Strategy string `json:"strategy"`
	Steps    int    `json:"steps,omitempty"`
	// Gate is "", "pass" or "fail".
	Gate string `json:"gate,omitempty"`
	// Outcome is what the soak waited for: "current", "gate failed",
	// "updated in place"; or the failure.
	Outcome            string    `json:"outcome"`
	At                 time.Time `json:"at"`
	ConvergenceSeconds float64   `json:"convergenceSeconds"`
	First              bool      `json:"first,omitempty"`
}

func newWorker(namespace, name string) *worker {
	w := &worker{name: name, namespace: namespace, taskQueue: namespace + "-" + name}
	w.deployment = namespace + "/" + name // the default: spec.workerOptions.deploymentName is unset
	return w
}

// spec is the TWD's first spec: the demo worker with short sunset delays.
// Its rollout is set by apply.
func (w *worker) spec() *v1alpha1.TemporalWorkerDeployment {
	return env.DemoTWD(w.namespace, w.name, harness.DemoImage("s0"), w.taskQueue,
		harness.WithEnv(corev1.EnvVar{Name: "SOAK_REVISION", Value: "0"}),
		harness.WithSunset(5*time.Second, 10*time.Second),
		harness.WithRollout(v1alpha1.RolloutSpec{}))
}

func (w *worker) get(ctx context.Context) (*v1alpha1.TemporalWorkerDeployment, error) {
	var twd v1alpha1.TemporalWorkerDeployment
	err := env.Kube.Get(ctx, crclient.ObjectKey{Namespace: w.namespace, Name: w.name}, &twd)
	return &twd, err
}

// update applies mutate to the latest TWD, retrying on conflicts.
func (w *worker) update(ctx context.Context, mutate func(*v1alpha1.TemporalWorkerDeployment)) error {
	_, err := env.UpdateTWD(ctx, crclient.ObjectKey{Namespace: w.namespace, Name: w.name}, mutate)
	return err
}

// strategies the soak picks from, with their weights.
var strategies = []struct {
	s      v1alpha1.RolloutStrategy
	weight int
}{
	{v1alpha1.StrategyAllAtOnce, 35},
	{v1alpha1.StrategyProgressive, 40},
	{v1alpha1.StrategyManual, 25},
}

// plan picks the next change of the TWD: its strategy, steps, gate and
// whether it is a new version (generated or custom build ID) or, when the
// current version has a custom build ID, an in-place update.
func (w *worker) plan(r *rand.Rand, twd *v1alpha1.TemporalWorkerDeployment, first bool) Rollout {
	w.n++
	ro := Rollout{TWD: w.name, Kind: "new version", First: first}
	custom := twd.Spec.WorkerOptions.CustomBuildID != ""
	switch p := r.IntN(100); {
	case !first && custom && !w.gateFailed && p < 30:
		ro.Kind, ro.Custom = "in place", true
		return ro
	case p < 65:
		ro.Custom = true
	}
	pick := r.IntN(100)
	for _, s := range strategies {
		if pick < s.weight {
			ro.Strategy = string(s.s)
			break
		}
		pick -= s.weight
	}
	if ro.Kind == "new version" && r.IntN(100) < 35 {
		ro.Gate = "pass"
		if !first && r.IntN(100) < 15 {
			ro.Gate = "fail"
		}
	}
	if ro.Strategy == string(v1alpha1.StrategyProgressive) {
		ro.Steps = 1 + r.IntN(3)
	}
	return ro
}

// apply writes the planned change into the TWD's spec.
func (w *worker) apply(r *rand.Rand, ro *Rollout, twd *v1alpha1.TemporalWorkerDeployment) {
	spec := &twd.Spec
	c := &spec.Template.Spec.Containers[0]
	switch {
	case ro.Kind == "in place":
		w.revision++
		for i := range c.Env {
			if c.Env[i].Name == "SOAK_REVISION" {
				c.Env[i].Value = fmt.Sprint(w.revision)
			}
		}
		ro.BuildID = spec.WorkerOptions.CustomBuildID
		return
	case ro.Custom:
		// A workflow change: a new image and a new custom build ID.
		c.Image = harness.DemoImage(fmt.Sprintf("s%d", w.n))
		spec.WorkerOptions.CustomBuildID = fmt.Sprintf("%s-wf-%d", w.name, w.n)
	default:
		c.Image = harness.DemoImage(fmt.Sprintf("s%d", w.n))
		spec.WorkerOptions.CustomBuildID = ""
	}
	ro.BuildID = buildid.Of(spec)
	spec.Rollout = v1alpha1.RolloutSpec{Strategy: v1alpha1.RolloutStrategy(ro.Strategy)}
	if ro.Steps > 0 {
		pcts := []int32{5, 10, 25, 50, 75, 90}
		r.Shuffle(len(pcts), func(i, j int) { pcts[i], pcts[j] = pcts[j], pcts[i] })
		pcts = pcts[:ro.Steps]
		slices.Sort(pcts)
		for _, p := range pcts {
			spec.Rollout.Steps = append(spec.Rollout.Steps, v1alpha1.RolloutStep{
				RampPercentage: p, PauseDuration: metav1.Duration{Duration: between(r, 3*time.Second, 15*time.Second)},
			})
		}
	}
	if ro.Gate != "" {
		input, _ := json.Marshal(map[string]any{"Fail": ro.Gate == "fail", "Message": "soak " + ro.BuildID})
		spec.Rollout.Gate = &v1alpha1.GateWorkflow{
			WorkflowType: "RolloutGate",
			Input:        &apiextensionsv1.JSON{Raw: input},
			Timeout:      &metav1.Duration{Duration: 2 * time.Minute},
		}
	}
}

// rolloutTimeout bounds the wait for one change: generous, since a busy
// machine slows the Temporal dev server down to minutes.
const rolloutTimeout = 10 * time.Minute

// carryOut makes the change and waits until the controller has carried it
// out, promoting Manual targets as a person would.
// The first change creates the TWD.
func (w *worker) carryOut(ctx context.Context, r *rand.Rand, ro *Rollout) error {
	ro.At = time.Now()
	if ro.First {
		twd := w.spec()
		w.apply(r, ro, twd)
		if err := env.Kube.Create(ctx, twd); err != nil {
			return err
		}
	} else if err := w.update(ctx, func(twd *v1alpha1.TemporalWorkerDeployment) { w.apply(r, ro, twd) }); err != nil {
		return err
	}
	gen, err := w.generation(ctx)
	if err != nil {
		return err
	}
	promoted := false
	var last string
	for deadline := time.Now().Add(rolloutTimeout); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		twd, err := w.get(ctx)
		if err != nil {
			last = err.Error()
			continue
		}
		last = harness.DescribeTWD(twd)
		if twd.Status.ObservedGeneration < gen {
			continue
		}
		ready := meta.FindStatusCondition(twd.Status.Conditions, v1alpha1.ConditionReady)
		if ready == nil || ready.ObservedGeneration < gen {
			continue
		}
		current := twd.Status.CurrentVersion != nil && twd.Status.CurrentVersion.BuildID == ro.BuildID
		switch {
		case ro.Gate == "fail":
			if ready.Reason == v1alpha1.ReasonGateFailed && twd.Status.TargetVersion != nil && twd.Status.TargetVersion.BuildID == ro.BuildID {
				ro.Outcome = "gate failed"
			}
		case ro.Kind == "in place":
			if ready.Status == metav1.ConditionTrue && current && w.rolled(ctx, ro.BuildID) {
				ro.Outcome = "updated in place"
			}
		case ready.Status == metav1.ConditionTrue && current:
			ro.Outcome = "current"
		case ro.Strategy == string(v1alpha1.StrategyManual) && !promoted && ready.Reason == v1alpha1.ReasonWaitingForPromotion &&
			twd.Status.TargetVersion != nil && twd.Status.TargetVersion.BuildID == ro.BuildID &&
			(ro.Gate == "" || (twd.Status.Gate != nil && twd.Status.Gate.BuildID == ro.BuildID && twd.Status.Gate.Result == string(planner.GateSucceeded))):
			if err := w.promote(ctx, r, ro.BuildID, ready.Message); err != nil {
				last = "promote: " + err.Error()
				continue
			}
			promoted = true
		}
		if ro.Outcome != "" {
			w.gateFailed = ro.Outcome == "gate failed"
			ro.ConvergenceSeconds = time.Since(ro.At).Seconds()
			return nil
		}
	}
	ro.Outcome = "not carried out within " + rolloutTimeout.String()
	return fmt.Errorf("%s %s (%s, %s, gate %q) not carried out within %s; last seen: %s", w.name, ro.BuildID, ro.Kind, ro.Strategy, ro.Gate, rolloutTimeout, last)
}

func (w *worker) generation(ctx context.Context) (int64, error) {
	twd, err := w.get(ctx)
	if err != nil {
		return 0, err
	}
	return twd.Generation, nil
}

// rolled reports whether the version's Deployment has rolled out the
// latest revision on every replica.
func (w *worker) rolled(ctx context.Context, build string) bool {
	var list appsv1.DeploymentList
	if err := env.Kube.List(ctx, &list, crclient.InNamespace(w.namespace), crclient.MatchingLabels{workload.LabelBuildID: build}); err != nil || len(list.Items) != 1 {
		return false
	}
	d := list.Items[0]
	want := fmt.Sprint(w.revision)
	for _, e := range d.Spec.Template.Spec.Containers[0].Env {
		if e.Name == "SOAK_REVISION" && e.Value != want {
			return false
		}
	}
	return d.Status.ObservedGeneration == d.Generation && d.Status.UpdatedReplicas == ptr.Deref(d.Spec.Replicas, 1) &&
		d.Status.Replicas == d.Status.UpdatedReplicas && d.Status.AvailableReplicas == d.Status.UpdatedReplicas
}

// promote makes build current in Temporal as a person would, sometimes
// through a ramp first. When the controller still holds the manager role
// from an earlier strategy, the person takes it first and releases it
// after, as the Ready message says.
func (w *worker) promote(ctx context.Context, r *rand.Rand, build string, message string) error {
	if !strings.Contains(message, "manager-identity set") {
		return w.route(ctx, r, build)
	}
	if err := w.setManager(ctx, true); err != nil {
		return err
	}
	err := w.route(ctx, r, build)
	if rerr := w.setManager(ctx, false); err == nil {
		err = rerr
	}
	return err
}

// setManager takes (or releases) the manager role as the soak's person.
func (w *worker) setManager(ctx context.Context, take bool) error {
	req := &workflowservice.SetWorkerDeploymentManagerRequest{
		Namespace: env.Info.TemporalNamespace, DeploymentName: w.deployment, Identity: "soak-person",
		NewManagerIdentity: &workflowservice.SetWorkerDeploymentManagerRequest_ManagerIdentity{ManagerIdentity: ""},
	}
	if take {
		req.NewManagerIdentity = &workflowservice.SetWorkerDeploymentManagerRequest_Self{Self: true}
	}
	_, err := env.Temporal.WorkflowService().SetWorkerDeploymentManager(ctx, req)
	return err
}

func (w *worker) route(ctx context.Context, r *rand.Rand, build string) error {
	svc := env.Temporal.WorkflowService()
	if r.IntN(2) == 0 {
		if _, err := svc.SetWorkerDeploymentRampingVersion(ctx, &workflowservice.SetWorkerDeploymentRampingVersionRequest{
			Namespace: env.Info.TemporalNamespace, DeploymentName: w.deployment, BuildId: build, Percentage: 50, Identity: "soak-person",
		}); err != nil {
			return err
		}
		time.Sleep(between(r, time.Second, 5*time.Second))
	}
	_, err := svc.SetWorkerDeploymentCurrentVersion(ctx, &workflowservice.SetWorkerDeploymentCurrentVersionRequest{
		Namespace: env.Info.TemporalNamespace, DeploymentName: w.deployment, BuildId: build, Identity: "soak-person",
	})
	return err
}
