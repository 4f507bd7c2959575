package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/dev/demoworker"
)

// TestSecondTWDCannotClaimWorkerDeployment: team B's TemporalWorkerDeployment,
// in another namespace, names team A's Temporal worker deployment
// (spec.workerOptions.deploymentName set to A's default name). The webhook
// refuses it, naming A and the field. Stored past the webhook, it says so
// in its Ready condition and changes nothing in Temporal: A's current
// version and routing stay, no version of B's registers, and A's pinned
// workflow runs on to the end on A's version. Once A is deleted, B takes
// the name over.
func TestSecondTWDCannotClaimWorkerDeployment(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	a := newRollout(env.NewTest(t), "claim-a")
	v1 := a.Create(a.Spec("v1"))
	a.WaitCurrent(5*time.Minute, v1)
	pinned := a.startLong(demoworker.LongPinnedWorkflow)
	a.Eventually(30*time.Second, "the pinned workflow running on "+v1, func() (bool, string) {
		on := a.queryBuild(pinned)
		return on == v1, on
	})

	b := newRollout(env.NewTest(t), "claim-b")
	twdB := b.Spec("v2")
	twdB.Spec.WorkerOptions.DeploymentName = a.DeploymentName()
	// Its workers serve A's task queue, so Temporal would take its version.
	twdB.Spec.Template.Spec.Containers[0].Env[0].Value = a.TaskQueue
	twdB.Spec.Deletion.Policy = v1alpha1.DeletionImmediate
	err := env.Kube.Create(ctx, twdB.DeepCopy())
	if !apierrors.IsInvalid(err) {
		t.Fatalf("creating B got %v, want it refused by the webhook", err)
	}
	for _, w := range []string{"spec.workerOptions.deploymentName", a.Namespace + "/" + a.Name, "a name of its own"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("the refusal %q does not say %q", err, w)
		}
	}

	// Stored past the webhook, as while it was down (failurePolicy Ignore)
	// or in a race with A's creation.
	skipClaimWebhook(t, twdB)
	b.Eventually(30*time.Second, "B stored past the webhook", func() (bool, string) {
		err := env.Kube.Create(ctx, twdB.DeepCopy())
		return err == nil, errString(err)
	})
	unchanged := func() string {
		if cur, ramp, _ := a.routing(); cur != v1 || ramp != "" {
			return fmt.Sprintf("A's routing is current %q, ramping %q; want %s and no ramp", cur, ramp, v1)
		}
		var deps appsv1.DeploymentList
		if err := env.Kube.List(ctx, &deps, crclient.InNamespace(b.Namespace)); err != nil || len(deps.Items) > 0 {
			return fmt.Sprintf("B has %d Deployments (%v): its workers would poll A's worker deployment", len(deps.Items), err)
		}
		if on := a.queryBuild(pinned); on != v1 {
			return "A's pinned workflow answers from " + on
		}
		return ""
	}
	b.Eventually(2*time.Minute, "B reported as claimed, A unchanged meanwhile", func() (bool, string) {
		if s := unchanged(); s != "" {
			t.Fatal(s)
		}
		twd := b.Get()
		return twd.Status.ObservedGeneration == twd.Generation &&
			hasCondition(twd, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonWorkerDeploymentClaimed), describe(twd)
	})
	msg := findCondition(b.Get(), v1alpha1.ConditionReady).Message
	for _, w := range []string{a.Namespace + "/" + a.Name, "spec.workerOptions.deploymentName", "changes nothing in Temporal"} {
		if !strings.Contains(msg, w) {
			t.Errorf("B's Ready message %q does not say %q", msg, w)
		}
	}
	for end := time.Now().Add(20 * time.Second); time.Now().Before(end); time.Sleep(time.Second) {
		if s := unchanged(); s != "" {
			t.Fatal(s)
		}
	}
	resp, err := env.Temporal.WorkflowService().DescribeWorkerDeployment(ctx, &workflowservice.DescribeWorkerDeploymentRequest{
		Namespace: env.Info.TemporalNamespace, DeploymentName: a.DeploymentName()})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range resp.GetWorkerDeploymentInfo().GetVersionSummaries() {
		if build := v.GetDeploymentVersion().GetBuildId(); build != v1 {
			t.Errorf("version %s registered in A's worker deployment", build)
		}
	}
	a.WaitCurrent(3*time.Minute, v1)

	// A's pinned workflow ends where it started.
	if err := env.Temporal.SignalWorkflow(ctx, pinned.GetID(), pinned.GetRunID(), demoworker.FinishSignal, nil); err != nil {
		t.Fatal(err)
	}
	var res demoworker.LongResult
	if err := pinned.Get(ctx, &res); err != nil || res.FinishedOn != v1 {
		t.Fatalf("A's pinned workflow: %v, finished on %q, want %s", err, res.FinishedOn, v1)
	}

	// A goes: B, waiting, is woken and takes the name over.
	if err := env.Kube.Delete(ctx, a.Get()); err != nil {
		t.Fatal(err)
	}
	b.Eventually(5*time.Minute, "B's version current in the worker deployment A left", func() (bool, string) {
		twd := b.Get()
		c := findCondition(twd, v1alpha1.ConditionReady)
		return c.Status == metav1.ConditionTrue && twd.Status.CurrentVersion != nil, describe(twd)
	})
}

// skipClaimWebhook has the API server skip the TemporalWorkerDeployment
// webhook for objects labelled as twd is, until the test ends.
func skipClaimWebhook(t *testing.T, twd *v1alpha1.TemporalWorkerDeployment) {
	t.Helper()
	const label = "rainbow-test/skip-claim-webhook"
	if twd.Labels == nil {
		twd.Labels = map[string]string{}
	}
	twd.Labels[label] = "true"
	patch := func(sel *metav1.LabelSelector) {
		t.Helper()
		webhookConfigMu.Lock()
		defer webhookConfigMu.Unlock()
		ctx := context.Background()
		var vwc admissionregistrationv1.ValidatingWebhookConfiguration
		if err := env.Kube.Get(ctx, types.NamespacedName{Name: webhookName}, &vwc); err != nil {
			t.Fatal(err)
		}
		before := vwc.DeepCopy()
		for i := range vwc.Webhooks {
			if vwc.Webhooks[i].Name == "temporalworkerdeployments.validate.temporal.io" {
				vwc.Webhooks[i].ObjectSelector = sel
			}
		}
		if err := env.Kube.Patch(ctx, &vwc, crclient.MergeFrom(before)); err != nil {
			t.Fatal(err)
		}
	}
	patch(&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: label, Operator: metav1.LabelSelectorOpDoesNotExist}}})
	t.Cleanup(func() { patch(nil) })
}
