package integration

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/workflow"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/dev/demoworker"
	"github.com/rainbow-deploy/rainbow/test/harness"
)

// drainBound bounds a wait for a version to drain and be retired. The
// worker deployment's summary can keep a drained version DRAINING, and the
// controller describes the version itself only after five minutes of
// draining (internal/planner/drain/crosscheck.go), so a wait shorter than
// that fails whenever Temporal's summary lags.
const drainBound = 8 * time.Minute

// rollout is one test's TemporalWorkerDeployment and what it talks to.
type rollout struct {
	*harness.Rollout
}

// newRollout creates a TemporalConnection to the environment's Temporal
// and returns a handle for a TWD named name (not created yet).
func newRollout(tt *harness.T, name string) *rollout {
	return &rollout{tt.NewRollout(name)}
}

// describe summarises status for failure messages.
func describe(twd *v1alpha1.TemporalWorkerDeployment) string { return harness.DescribeTWD(twd) }

// waitFor waits until check passes on a status that reflects the latest
// spec (observedGeneration is current).
func (r *rollout) waitFor(timeout time.Duration, expected string, check func(*v1alpha1.TemporalWorkerDeployment) bool) *v1alpha1.TemporalWorkerDeployment {
	r.Helper()
	var last *v1alpha1.TemporalWorkerDeployment
	r.Eventually(timeout, expected, func() (bool, string) {
		last = r.Get()
		return last.Status.ObservedGeneration == last.Generation && check(last), describe(last)
	})
	return last
}

// waitCondition waits for a condition's status and reason.
func (r *rollout) waitCondition(timeout time.Duration, typ string, status metav1.ConditionStatus, reason string) *v1alpha1.TemporalWorkerDeployment {
	r.Helper()
	return r.waitFor(timeout, fmt.Sprintf("%s=%s with reason %s", typ, status, reason), func(t *v1alpha1.TemporalWorkerDeployment) bool {
		c := meta.FindStatusCondition(t.Status.Conditions, typ)
		return c != nil && c.Status == status && c.Reason == reason && c.ObservedGeneration == t.Generation
	})
}

// deployment is the versioned Deployment of build, nil if none.
func (r *rollout) deployment(build string) *appsv1.Deployment {
	r.Helper()
	var list appsv1.DeploymentList
	if err := r.Env.Kube.List(context.Background(), &list, crclient.InNamespace(r.Namespace)); err != nil {
		r.Fatal(err)
	}
	for i := range list.Items {
		if list.Items[i].Labels["temporal.io/build-id"] == build {
			return &list.Items[i]
		}
	}
	return nil
}

func deploymentState(d *appsv1.Deployment) string {
	if d == nil {
		return "no Deployment"
	}
	return fmt.Sprintf("Deployment %s replicas=%d ready=%d", d.Name, ptr.Deref(d.Spec.Replicas, 1), d.Status.ReadyReplicas)
}

// routing reads the worker deployment's routing straight from Temporal,
// waiting while Temporal throttles the read (its workflow is busy).
func (r *rollout) routing() (current, ramping string, pct float32) {
	r.Helper()
	r.Eventually(30*time.Second, "Temporal describes the worker deployment", func() (bool, string) {
		var err error
		if current, ramping, pct, err = r.Routing(context.Background()); err != nil {
			return false, err.Error()
		}
		return true, ""
	})
	return current, ramping, pct
}

// startLong starts a long-running workflow that waits for the finish signal.
func (r *rollout) startLong(workflowType string) client.WorkflowRun {
	r.Helper()
	return r.startLongWith(workflowType, demoworker.LongInput{Tick: time.Second})
}

// startLongWith starts a long-running workflow with the given input.
func (r *rollout) startLongWith(workflowType string, in demoworker.LongInput) client.WorkflowRun {
	r.Helper()
	run, err := r.Env.Temporal.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{
		ID:        fmt.Sprintf("%s-%s-%d", r.Name, workflowType, time.Now().UnixNano()),
		TaskQueue: r.TaskQueue,
	}, workflowType, in)
	if err != nil {
		r.Fatalf("start %s: %v", workflowType, err)
	}
	return run
}

// hello runs the short workflow and returns its greeting, which names the
// build that ran it.
func (r *rollout) hello() string {
	r.Helper()
	return r.Hello(r.TaskQueue)
}

// kubectl runs the environment's kubectl against its cluster.
func (r *rollout) kubectl(timeout time.Duration, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(r.Env.Root, ".cache", "kube", "kubectl"), append([]string{"--kubeconfig", r.Env.Info.Kubeconfig}, args...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func findCondition(twd *v1alpha1.TemporalWorkerDeployment, typ string) metav1.Condition {
	if c := meta.FindStatusCondition(twd.Status.Conditions, typ); c != nil {
		return *c
	}
	return metav1.Condition{}
}

func hasCondition(twd *v1alpha1.TemporalWorkerDeployment, typ string, status metav1.ConditionStatus, reason string) bool {
	c := findCondition(twd, typ)
	return c.Status == status && c.Reason == reason
}

// waitEvent waits for an Event with reason on the TWD.
func (r *rollout) waitEvent(timeout time.Duration, reason string) {
	r.Helper()
	r.Eventually(timeout, "an Event with reason "+reason, func() (bool, string) {
		list, err := r.Env.Clients.EventsV1().Events(r.Namespace).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		var seen []string
		for _, e := range list.Items {
			if e.Regarding.Name != r.Name {
				continue
			}
			if e.Reason == reason {
				return true, ""
			}
			seen = append(seen, e.Reason)
		}
		return false, fmt.Sprintf("reasons %v", seen)
	})
}

func workflowName(name string) workflow.RegisterOptions {
	return workflow.RegisterOptions{Name: name}
}

// holdsWorkers fails if build's Deployment is deleted or scaled to zero
// within d.
func (r *rollout) holdsWorkers(d time.Duration, build string) {
	r.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(500 * time.Millisecond) {
		if dep := r.deployment(build); dep == nil || dep.DeletionTimestamp != nil || ptr.Deref(dep.Spec.Replicas, 1) == 0 {
			r.Fatalf("version %s lost its workers: %s; status: %s", build, deploymentState(dep), describe(r.Get()))
		}
	}
}
