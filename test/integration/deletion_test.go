package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/dev/demoworker"
)

// TestDeletionWaitsForPinnedWorkflows: deleting a TWD moves new workflows
// off its versions but keeps the workers of a version that still runs a
// pinned workflow (WaitForDrain, the default), says so in its conditions,
// and lets them go once spec.deletion.maxDrainWait has passed. A
// foreground deletion, which would have the garbage collector delete the
// workers first, is refused by the shipped admission policy.
func TestDeletionWaitsForPinnedWorkflows(t *testing.T) {
	r := newRollout(env.NewTest(t), "deletion-drain")
	r.create(r.spec("v1"))
	v1 := r.buildID()
	r.waitCurrent(2*time.Minute, v1)
	pinned := r.startLong(demoworker.LongPinnedWorkflow)

	// The policy takes effect once the API server has loaded it: probe it
	// with dry runs, then delete for real.
	r.Eventually(30*time.Second, "a foreground deletion refused", func() (bool, string) {
		err := r.Env.Kube.Delete(context.Background(), r.get(), crclient.PropagationPolicy(metav1.DeletePropagationForeground), crclient.DryRunAll)
		return apierrors.IsForbidden(err), "dry run: " + errString(err)
	})
	err := r.Env.Kube.Delete(context.Background(), r.get(), crclient.PropagationPolicy(metav1.DeletePropagationForeground))
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "background propagation") {
		t.Fatalf("a foreground deletion of the TWD got %v, want it refused with a message that says to delete in the background", err)
	}
	err = r.Env.Kube.Delete(context.Background(), r.get(), crclient.PropagationPolicy(metav1.DeletePropagationOrphan))
	if !apierrors.IsForbidden(err) {
		t.Fatalf("an orphaning deletion of the TWD got %v, want it refused", err)
	}
	if !r.get().DeletionTimestamp.IsZero() {
		t.Fatal("the refused deletion marked the TWD deleted")
	}

	if err := r.Env.Kube.Delete(context.Background(), r.get()); err != nil {
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
	if st := versionStatus(r.get(), v1); st != v1alpha1.VersionDraining {
		t.Fatalf("version %s is %q, want Draining while its pinned workflow runs", v1, st)
	}

	r.update(func(twd *v1alpha1.TemporalWorkerDeployment) {
		twd.Spec.Deletion.MaxDrainWait = &metav1.Duration{Duration: time.Second}
	})
	r.waitGone(3 * time.Minute)
	if d := r.deployment(v1); d != nil {
		t.Fatalf("Deployment %s outlived its TWD", d.Name)
	}
	_ = r.Env.Temporal.TerminateWorkflow(context.Background(), pinned.GetID(), "", "test over")
}

func errString(err error) string {
	if err == nil {
		return "accepted"
	}
	return err.Error()
}
