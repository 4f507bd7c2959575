package integration

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/test/harness"
)

// TestExamplesRollOut applies every TemporalWorkerDeployment under
// examples/rollouts/, after the TemporalConnection example it names, as
// docs/strategies.md tells people to, and checks that each reaches what its
// strategy promises: AllAtOnce and a passing gate end with the version
// current; Progressive does too, and a second version then ramps through the
// example's steps, passing their gates; Manual waits for a person, and a person's
// set-current-version completes it. Only the namespaces, the Temporal address
// and the task queue are changed, so that tests do not share them.
func TestExamplesRollOut(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob(filepath.Join(env.Root, "examples", "rollouts", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples in examples/rollouts: %v", err)
	}
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".yaml")
		t.Run(name, func(t *testing.T) {
			parallel(t)
			r, twd := createExample(t, filepath.Join("rollouts", filepath.Base(file)), nil)
			build := r.BuildID()

			switch twd.Spec.Rollout.Strategy {
			case v1alpha1.StrategyAllAtOnce:
				got := r.WaitCurrent(5*time.Minute, build)
				requireComplete(t, got)
				if twd.Spec.Rollout.Gate != nil {
					if g := got.Status.Gate; g == nil || g.BuildID != build || g.Result != "Succeeded" {
						t.Fatalf("gate of %s: %+v, want Succeeded", build, got.Status.Gate)
					}
				}
			case v1alpha1.StrategyProgressive:
				requireComplete(t, r.WaitCurrent(5*time.Minute, build))
				if twd.Spec.Rollout.Analysis != nil {
					// The analysis needs workflows to count on each version.
					r.helloLoad(t)
					if usesPrometheus(twd.Spec.Rollout.Analysis) {
						startPrometheus(t)
					}
				}
				exampleRampsThroughSteps(r, twd.Spec.Rollout.Steps)
				for _, st := range twd.Spec.Rollout.Steps {
					// A passed step gate: the last one run is in status.
					if st.Gate != nil {
						if g := r.Get().Status.Gate; g == nil || g.Step == 0 || g.Result != "Succeeded" {
							t.Fatalf("step gate: status.gate %+v, want a step's gate Succeeded", g)
						}
					}
				}
			case v1alpha1.StrategyManual:
				got := r.waitCondition(2*time.Minute, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonWaitingForPromotion)
				if c := findCondition(got, v1alpha1.ConditionProgressing); c.Status != metav1.ConditionTrue || c.Reason != v1alpha1.ReasonWaitingForPromotion {
					t.Fatalf("Progressing while waiting for a person: %+v", c)
				}
				if !strings.Contains(findCondition(got, v1alpha1.ConditionReady).Message, "set-current-version") {
					t.Fatalf("the Ready message does not say how to promote: %s", describe(got))
				}
				// What the example's comment tells people to run.
				if _, err := r.Env.Temporal.WorkflowService().SetWorkerDeploymentCurrentVersion(context.Background(), &workflowservice.SetWorkerDeploymentCurrentVersionRequest{
					Namespace: r.Env.Info.TemporalNamespace, DeploymentName: r.DeploymentName(), BuildId: build, Identity: "a-person",
				}); err != nil {
					t.Fatal(err)
				}
				requireComplete(t, r.WaitCurrent(3*time.Minute, build))
			default:
				t.Fatalf("no expectation for strategy %q: add one to this test", twd.Spec.Rollout.Strategy)
			}
		})
	}
}

// createExample applies the TemporalWorkerDeployment of an example after
// the TemporalConnection example it names, with kubectl apply as people do
// (client-side), in a namespace of the test's own: only the namespaces,
// the Temporal address and the task queue are changed, then mutate (if
// any).
func createExample(t *testing.T, file string, mutate func(*v1alpha1.TemporalWorkerDeployment)) (*rollout, v1alpha1.TemporalWorkerDeployment) {
	t.Helper()
	var twd v1alpha1.TemporalWorkerDeployment
	env.ReadExample(t, file, &twd)
	tt := env.NewTest(t)
	applyConnectionExample(tt, twd.Spec.WorkerOptions.ConnectionRef.Name)
	r := &rollout{&harness.Rollout{T: tt, Name: twd.Name, TaskQueue: tt.TaskQueue(twd.Name)}}
	twd.Namespace = r.Namespace
	twd.Spec.WorkerOptions.TemporalNamespace = r.Env.Info.TemporalNamespace
	setTaskQueue(t, &twd, r.TaskQueue)
	if mutate != nil {
		mutate(&twd)
	}
	if err := r.Env.KubectlApply(&twd, harness.ClientSideApply); err != nil {
		t.Fatalf("kubectl apply %s: %v", file, err)
	}
	return r, twd
}

// applyConnectionExample applies (client-side) the TemporalConnection the
// examples' comments tell people to apply first, pointed at this
// environment's Temporal, and checks it is the one the
// TemporalWorkerDeployment names.
func applyConnectionExample(tt *harness.T, want string) {
	tt.Helper()
	var conn v1alpha1.TemporalConnection
	tt.Env.ReadExample(tt, "connection/plaintext.yaml", &conn)
	if conn.Name != want {
		tt.Fatalf("the example names TemporalConnection %q, but examples/connection/plaintext.yaml creates %q", want, conn.Name)
	}
	conn.Namespace = tt.Namespace
	conn.Spec.HostPort = tt.Env.Info.TemporalAddress
	if err := tt.Env.KubectlApply(&conn, harness.ClientSideApply); err != nil {
		tt.Fatal(err)
	}
}

// setTaskQueue points the demo worker at a task queue of this test's own.
func setTaskQueue(t *testing.T, twd *v1alpha1.TemporalWorkerDeployment, queue string) {
	t.Helper()
	vars := twd.Spec.Template.Spec.Containers[0].Env
	for i := range vars {
		if vars[i].Name == "DEMO_TASK_QUEUE" {
			vars[i].Value = queue
			return
		}
	}
	t.Fatal("the example sets no DEMO_TASK_QUEUE")
}

func requireComplete(t *testing.T, twd *v1alpha1.TemporalWorkerDeployment) {
	t.Helper()
	if !hasCondition(twd, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonRolloutComplete) ||
		!hasCondition(twd, v1alpha1.ConditionProgressing, metav1.ConditionFalse, v1alpha1.ReasonRolloutComplete) ||
		!hasCondition(twd, v1alpha1.ConditionReconciling, metav1.ConditionFalse, v1alpha1.ReasonRolloutComplete) ||
		!hasCondition(twd, v1alpha1.ConditionStalled, metav1.ConditionFalse, v1alpha1.ReasonRolloutComplete) {
		t.Fatalf("want Ready=True, and Progressing, Reconciling and Stalled False, with reason RolloutComplete: %s", describe(twd))
	}
}

// exampleRampsThroughSteps rolls out a second version and checks that its
// ramp passes through every step of the example before it becomes current.
func exampleRampsThroughSteps(r *rollout, steps []v1alpha1.RolloutStep) {
	r.Helper()
	var total time.Duration
	for _, s := range steps {
		total += s.PauseDuration.Duration
	}
	if total > time.Minute {
		r.Fatalf("the example's pauses add up to %s; keep the local demo under a minute", total)
	}
	v2 := r.SetImage("v2")
	start := time.Now()
	seen := map[int32]time.Duration{}
	// Each step after the first may wait up to a long poll (about a minute)
	// on the local environment: its 10s poller history TTL hides idle
	// workers between polls, and the controller checks the target's pollers
	// before every routing change.
	r.Eventually(total+time.Duration(len(steps)+2)*time.Minute, "version "+v2+" ramped through every step, then current", func() (bool, string) {
		twd := r.Get()
		if tv := twd.Status.TargetVersion; tv != nil && tv.BuildID == v2 && tv.RampPercentage != nil {
			if _, ok := seen[*tv.RampPercentage]; !ok {
				seen[*tv.RampPercentage] = time.Since(start).Round(time.Second)
			}
		}
		cur := twd.Status.CurrentVersion
		return cur != nil && cur.BuildID == v2 && hasCondition(twd, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonRolloutComplete), describe(twd)
	})
	r.Logf("ramp steps seen after the image change: %v; current after %s", seen, time.Since(start).Round(time.Second))
	for _, s := range steps {
		if _, ok := seen[s.RampPercentage]; !ok {
			r.Fatalf("the ramp never showed %d%% (saw %v)", s.RampPercentage, seen)
		}
	}
}
