package integration

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/dev/demoworker"
	"github.com/rainbow-deploy/rainbow/test/harness"
)

// TestDeletionWaitsForPinnedWorkflows: deleting a TWD moves new workflows
// off its versions but keeps the workers of a version that still runs a
// pinned workflow (WaitForDrain, the default), says so in its conditions,
// and lets them go once spec.deletion.maxDrainWait has passed. A
// foreground deletion, which would have the garbage collector delete the
// workers first, is refused by the shipped admission policy.
func TestDeletionWaitsForPinnedWorkflows(t *testing.T) {
	parallel(t)
	r, v1, pinned := pinnedDeletionRollout(t, "deletion-drain")
	err := r.Env.Kube.Delete(context.Background(), r.Get(), crclient.PropagationPolicy(metav1.DeletePropagationForeground))
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "background propagation") {
		t.Fatalf("a foreground deletion of the TWD got %v, want it refused with a message that says to delete in the background", err)
	}
	err = r.Env.Kube.Delete(context.Background(), r.Get(), crclient.PropagationPolicy(metav1.DeletePropagationOrphan))
	if !apierrors.IsForbidden(err) {
		t.Fatalf("an orphaning deletion of the TWD got %v, want it refused", err)
	}
	if !r.Get().DeletionTimestamp.IsZero() {
		t.Fatal("the refused deletion marked the TWD deleted")
	}

	if err := r.Env.Kube.Delete(context.Background(), r.Get()); err != nil {
		t.Fatal(err)
	}
	got := r.waitFor(2*time.Minute, "the deletion waiting for "+v1+" to drain", func(twd *v1alpha1.TemporalWorkerDeployment) bool {
		c := findCondition(twd, v1alpha1.ConditionReady)
		return c.Reason == v1alpha1.ReasonDeleting && strings.Contains(c.Message, "to drain")
	})
	if c := findCondition(got, v1alpha1.ConditionProgressing); c.Status != metav1.ConditionTrue || c.Reason != v1alpha1.ReasonDeleting {
		t.Fatalf("Progressing = %s/%s, want True/Deleting while the deletion waits", c.Status, c.Reason)
	}
	if cur, ramp, _ := r.routing(); cur != "" || ramp != "" {
		t.Fatalf("routing still sends new workflows to %q/%q while the TWD is deleted", cur, ramp)
	}
	// Well past Temporal's drainage refresh: the pinned workflow keeps v1
	// draining, and its workers stay.
	r.holdsWorkers(20*time.Second, v1)
	if st := versionStatus(r.Get(), v1); st != v1alpha1.VersionDraining {
		t.Fatalf("version %s is %q, want Draining while its pinned workflow runs", v1, st)
	}

	r.Update(func(twd *v1alpha1.TemporalWorkerDeployment) {
		twd.Spec.Deletion.MaxDrainWait = &metav1.Duration{Duration: time.Second}
	})
	r.waitGone(drainBound)
	if d := r.deployment(v1); d != nil {
		t.Fatalf("Deployment %s outlived its TWD", d.Name)
	}
	_ = r.Env.Temporal.TerminateWorkflow(context.Background(), pinned.GetID(), "", "test over")
}

// pinnedDeletionRollout is a TWD whose version v1 is current and runs a
// pinned workflow, once the deletion policy is in force: the API server
// loads it a moment after it is applied, so it is probed with dry runs.
func pinnedDeletionRollout(t *testing.T, name string) (*rollout, string, client.WorkflowRun) {
	r := newRollout(env.NewTest(t), name)
	v1 := r.Create(r.Spec("v1"))
	r.WaitCurrent(5*time.Minute, v1)
	pinned := r.startLong(demoworker.LongPinnedWorkflow)
	r.Eventually(30*time.Second, "a foreground deletion refused", func() (bool, string) {
		err := r.Env.Kube.Delete(context.Background(), r.Get(), crclient.PropagationPolicy(metav1.DeletePropagationForeground), crclient.DryRunAll)
		return apierrors.IsForbidden(err), "dry run: " + errString(err)
	})
	return r, v1, pinned
}

func errString(err error) string {
	if err == nil {
		return "accepted"
	}
	return err.Error()
}

// TestDeletionPolicyRefusesGCFinalizers: the foregroundDeletion and orphan
// finalizers choose the propagation of a later deletion that names none, so
// adding one and then deleting with no options would get a foreground (or
// orphan) deletion past the policy. The policy refuses a TWD created with
// them or updated to have them; the controller's own finalizer and a plain
// kubectl delete still work, and the deletion still waits for the pinned
// workflow's version to drain.
func TestDeletionPolicyRefusesGCFinalizers(t *testing.T) {
	parallel(t)
	r, v1, pinned := pinnedDeletionRollout(t, "deletion-gc-finalizers")
	defer func() { _ = r.Env.Temporal.TerminateWorkflow(context.Background(), pinned.GetID(), "", "test over") }()
	ctx := context.Background()

	for _, f := range []string{metav1.FinalizerDeleteDependents, metav1.FinalizerOrphanDependents} {
		created := r.Spec("v1")
		created.Name, created.Finalizers = "created-with-"+strings.ToLower(f), []string{f}
		if err := r.Env.Kube.Create(ctx, created, crclient.DryRunAll); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "metadata.finalizers: "+f) {
			t.Errorf("creating a TWD with the %s finalizer got %v, want it refused naming metadata.finalizers", f, err)
		}
		add := fmt.Sprintf(`[{"op":"add","path":"/metadata/finalizers/-","value":%q}]`, f)
		err := r.Env.Kube.Patch(ctx, r.Get(), crclient.RawPatch(types.JSONPatchType, []byte(add)))
		if err == nil {
			// The bypass went through: show what a DELETE naming no
			// propagation then does to the draining version's workers.
			if err := r.Env.Kube.Delete(ctx, r.Get()); err != nil {
				t.Fatalf("the %s finalizer was accepted, then a DELETE with no options got %v", f, err)
			}
			seen := ""
			harness.Eventually(t, time.Minute, "(reporting the bypass)", func() (bool, string) {
				d := r.deployment(v1)
				seen = deploymentState(d)
				return d == nil || !d.DeletionTimestamp.IsZero() || metav1.GetControllerOf(d) == nil, seen
			})
			t.Fatalf("the %s finalizer was accepted on the TWD, and a DELETE with no options then left %s of %s, whose pinned workflow runs (%s)",
				f, seen, v1, describe(r.Get()))
		}
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "metadata.finalizers: "+f) || !strings.Contains(err.Error(), "remove it") {
			t.Fatalf("adding the %s finalizer got %v, want it refused naming metadata.finalizers and what to do", f, err)
		}
	}

	got := r.Get()
	if !slices.Contains(got.Finalizers, v1alpha1.FinalizerCleanup) || !got.DeletionTimestamp.IsZero() {
		t.Fatalf("finalizers %v, deleting %v: want the controller's own and no deletion", got.Finalizers, !got.DeletionTimestamp.IsZero())
	}
	if out, err := r.kubectl(time.Minute, "delete", "temporalworkerdeployment", r.Name, "-n", r.Namespace, "--wait=false"); err != nil {
		t.Fatalf("kubectl delete: %v: %s", err, out)
	}
	r.waitFor(2*time.Minute, "the deletion waiting for "+v1+" to drain", func(twd *v1alpha1.TemporalWorkerDeployment) bool {
		c := findCondition(twd, v1alpha1.ConditionReady)
		return c.Reason == v1alpha1.ReasonDeleting && strings.Contains(c.Message, "to drain")
	})
	if d := r.deployment(v1); d == nil || !d.DeletionTimestamp.IsZero() {
		t.Fatalf("%s while its pinned workflow runs, want its Deployment kept", deploymentState(d))
	}
	r.Update(func(twd *v1alpha1.TemporalWorkerDeployment) {
		twd.Spec.Deletion.MaxDrainWait = &metav1.Duration{Duration: time.Second}
	})
	r.waitGone(drainBound)
}
