package integration

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/test/harness"
)

// TestOwnedStatusIsNoDeleteList: whoever may write a
// TemporalWorkerOwnedResource's status lists, as copies to delete, a
// draining version's Deployment, a ConfigMap of the namespace and a
// ClusterRole, which the controller is allowed to delete (as with the
// any-kind component). None is deleted: the draining version keeps its
// workers and its pinned workflow keeps running there, and status forgets
// the entries. The real copies are still managed: each version has its
// HPA, and deleting the owned resource deletes them.
func TestOwnedStatusIsNoDeleteList(t *testing.T) {
	parallel(t)
	tt := env.NewTest(t)
	r := newRollout(tt, "ownedsec")
	ctx := context.Background()
	v1 := r.Create(r.Spec("v1"))
	r.WaitCurrent(5*time.Minute, v1)
	hpa := r.ownedExample("twor-hpa.yaml")
	r.applyOwned(hpa, harness.ServerSideApply)
	pinned, v2 := r.rollOutV2WithPinned(1)
	r.waitFor(time.Minute, v1+" draining", func(twd *v1alpha1.TemporalWorkerDeployment) bool {
		return versionStatus(twd, v1) == v1alpha1.VersionDraining
	})
	for _, b := range []string{v1, v2} {
		r.Eventually(time.Minute, "the HPA of "+b, func() (bool, string) { return r.hpaOf(hpa.Name, b) != nil, "none" })
	}

	// Bystanders, and the rights to delete them.
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: r.Namespace, Name: "bystander"}, Data: map[string]string{"a": "b"}}
	cr := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "rainbow-test-bystander-" + r.Namespace}}
	for _, o := range []crclient.Object{cm, cr} {
		if err := env.Kube.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	grantClusterRoleDelete(t, tt, cr.Name)
	grant(t, tt, managerUser, "bystander-delete", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"delete", "get"}})
	victim := r.deployment(v1)

	// The attack: status names them as copies to delete.
	or := r.owned(hpa.Name)
	patched := or.DeepCopy()
	patched.Status.Versions = append(patched.Status.Versions,
		v1alpha1.OwnedResourceVersion{BuildID: "zz-1", APIVersion: "apps/v1", Kind: "Deployment", ResourceName: victim.Name},
		v1alpha1.OwnedResourceVersion{BuildID: "zz-2", APIVersion: "v1", Kind: "ConfigMap", ResourceName: cm.Name},
		v1alpha1.OwnedResourceVersion{BuildID: "zz-3", APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole", ResourceName: cr.Name},
	)
	if err := env.Kube.Status().Patch(ctx, patched, crclient.MergeFrom(or)); err != nil {
		t.Fatalf("patch status: %v", err)
	}
	// A pass of the TWD looks at them (its status write forgets them);
	// meanwhile and for a while after, nothing is deleted.
	survive := func() string {
		if d := r.deployment(v1); d == nil || d.UID != victim.UID || d.DeletionTimestamp != nil {
			return "the draining version's Deployment was deleted: " + deploymentState(d)
		}
		for _, o := range []crclient.Object{&corev1.ConfigMap{}, &rbacv1.ClusterRole{}} {
			key := crclient.ObjectKey{Name: cr.Name}
			if _, ok := o.(*corev1.ConfigMap); ok {
				key = crclient.ObjectKeyFromObject(cm)
			}
			if err := env.Kube.Get(ctx, key, o); err != nil || o.GetDeletionTimestamp() != nil {
				return fmt.Sprintf("%T %s: %v (deleting %v)", o, key, err, o.GetDeletionTimestamp())
			}
		}
		return ""
	}
	r.Eventually(2*time.Minute, "status forgets the listed objects", func() (bool, string) {
		if s := survive(); s != "" {
			t.Fatal(s)
		}
		vs := r.owned(hpa.Name).Status.Versions
		return !slices.ContainsFunc(vs, func(v v1alpha1.OwnedResourceVersion) bool { return v.BuildID >= "zz" }), fmt.Sprintf("%+v", vs)
	})
	for end := time.Now().Add(20 * time.Second); time.Now().Before(end); time.Sleep(500 * time.Millisecond) {
		if s := survive(); s != "" {
			t.Fatal(s)
		}
	}
	r.holdsWorkers(time.Second, v1)
	if on := r.queryBuild(pinned[0]); on != v1 {
		t.Errorf("the pinned workflow answers from %q, want %s", on, v1)
	}
	r.waitOwnedReady(hpa.Name, metav1.ConditionTrue, v1alpha1.ReasonApplied)

	// The real copies are the controller's to delete.
	if err := env.Kube.Delete(ctx, or); err != nil {
		t.Fatal(err)
	}
	r.Eventually(time.Minute, "the owned resource and its copies are gone", func() (bool, string) {
		err := env.Kube.Get(ctx, crclient.ObjectKeyFromObject(or), &v1alpha1.TemporalWorkerOwnedResource{})
		return apierrors.IsNotFound(err) && r.hpaOf(hpa.Name, v1) == nil && r.hpaOf(hpa.Name, v2) == nil, fmt.Sprintf("get: %v", err)
	})
	if s := survive(); s != "" {
		t.Fatal(s)
	}
}

// grantClusterRoleDelete lets the controller delete the ClusterRole name,
// as the any-kind component would, until the test ends.
func grantClusterRoleDelete(t *testing.T, tt *harness.T, name string) {
	t.Helper()
	ctx := context.Background()
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name + "-deleter"}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{rbacv1.GroupName}, Resources: []string{"clusterroles"}, ResourceNames: []string{name}, Verbs: []string{"get", "delete"},
	}}}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-deleter"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: managerUser}},
	}
	for _, o := range []crclient.Object{role, binding} {
		if err := env.Kube.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Kube.Delete(context.Background(), o) })
	}
	t.Cleanup(func() {
		_ = env.Kube.Delete(context.Background(), &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}})
	})
}

// bombTemplate doubles a string in a variable forty times (a TiB) and
// writes only its length, which fits any bound on output.
var bombTemplate = `{{ $x := "ab" }}` + strings.Repeat(`{{ $x = printf "%s%s" $x $x }}`, 40) + `{{ len $x }}`

// TestOwnedTemplateCannotExhaustMemory: a template that doubles a string
// forty times, stored while the webhook is skipped for the namespace (as if
// it were absent) over a TemporalWorkerOwnedResource whose copy exists,
// and one the webhook admits because it does so only for the running
// build ID, fail to render: each reports Ready False, ApplyFailed, naming
// the field and the bound, and keeps its earlier copy. The controller
// (running in this process: it would have died with it) keeps working:
// another TWD rolls out. The webhook refusing the template outright is a
// row of TestAdmissionTable.
func TestOwnedTemplateCannotExhaustMemory(t *testing.T) {
	parallel(t)
	tt := env.NewTest(t)
	ctx := context.Background()
	r := newRollout(tt, "bomb")
	v1 := r.Create(r.Spec("v1"))
	r.WaitCurrent(5*time.Minute, v1)

	pdb := func(name, note string) *v1alpha1.TemporalWorkerOwnedResource {
		return r.ownedPDB(name, map[string]any{"annotations": map[string]any{"example.com/note": note}})
	}
	stored, branchy := pdb("stored", "{{ .BuildID }}"), pdb("branchy", fmt.Sprintf(`{{ if eq .BuildID %q }}%s{{ end }}`, v1, bombTemplate))
	for _, or := range []*v1alpha1.TemporalWorkerOwnedResource{stored, branchy} {
		if err := env.Kube.Create(ctx, or); err != nil {
			t.Fatalf("create %s: %v", or.Name, err)
		}
	}
	r.waitOwnedReady(stored.Name, metav1.ConditionTrue, v1alpha1.ReasonApplied)
	if p := r.pdbOf(stored.Name, v1); p == nil || p.Annotations["example.com/note"] != v1 {
		t.Fatalf("the copy of %s: %+v, want its note %s", stored.Name, p, v1)
	}

	// The attack: the bomb stored past the webhook.
	restore := skipWebhook(t, r.Namespace)
	r.Eventually(time.Minute, "the bomb is stored past the webhook", func() (bool, string) {
		err := retryOnConflict(ctx, stored, func() {
			stored.Spec.Object = pdb(stored.Name, bombTemplate).Spec.Object
		})
		return err == nil, errString(err)
	})
	restore()

	for _, name := range []string{stored.Name, branchy.Name} {
		got := r.waitOwnedReady(name, metav1.ConditionFalse, v1alpha1.ReasonApplyFailed)
		c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionReady)
		for _, want := range []string{v1, `spec.object.metadata.annotations["example.com/note"]`, "template breaks a bound", "at most 1048576 bytes"} {
			if !strings.Contains(c.Message, want) {
				t.Errorf("%s: Ready message %q does not say %q", name, c.Message, want)
			}
		}
	}
	// The earlier copy stays as it was.
	if p := r.pdbOf(stored.Name, v1); p == nil || p.Annotations["example.com/note"] != v1 {
		t.Errorf("the copy of %s: %+v, want it kept with its note %s", stored.Name, p, v1)
	}

	// The controller works for everyone else.
	other := &rollout{&harness.Rollout{T: tt, Name: "bystander", TaskQueue: tt.TaskQueue("bystander")}}
	other.Create(other.Spec("v1"))
	other.WaitCurrent(5*time.Minute, other.BuildID())
}

// skipWebhook makes the API server skip the TemporalWorkerOwnedResource
// webhook in namespace ns, as if it were absent there, until restore runs
// (at the latest when the test ends). Other namespaces keep it.
func skipWebhook(t *testing.T, ns string) (restore func()) {
	t.Helper()
	patch := func(selector string) error {
		webhookConfigMu.Lock()
		defer webhookConfigMu.Unlock()
		vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: webhookName}}
		return env.Kube.Patch(context.Background(), vwc, crclient.RawPatch(types.StrategicMergePatchType, fmt.Appendf(nil,
			`{"webhooks":[{"name":"temporalworkerownedresources.validate.temporal.io","namespaceSelector":%s}]}`, selector)))
	}
	if err := patch(fmt.Sprintf(`{"matchExpressions":[{"key":"kubernetes.io/metadata.name","operator":"NotIn","values":[%q]}]}`, ns)); err != nil {
		t.Fatalf("skip the webhook in %s: %v", ns, err)
	}
	var once sync.Once
	restore = func() {
		once.Do(func() {
			if err := patch(`{"matchExpressions":null}`); err != nil {
				t.Errorf("restore the webhook: %v", err)
			}
		})
	}
	t.Cleanup(restore)
	return restore
}

// TestOwnedHugeErrorKeepsStatusWritable: a copy whose apply error quotes a
// 40000-character label value (the API server echoes it in full) would make
// the Ready message longer than the schema allows, and the whole status
// patch, the record of the copies, would be refused. The messages are
// bounded instead: Ready says what failed, the version's message ends in a
// note of what was left out, and the other version's copy is on record.
func TestOwnedHugeErrorKeepsStatusWritable(t *testing.T) {
	parallel(t)
	r := newRollout(env.NewTest(t), "ownedhuge")
	// v1 and its copy stay for the checks: the default delays would delete
	// it seconds after it drains, and a slow machine reaches the checks later.
	spec := r.Spec("v1")
	spec.Spec.Sunset.ScaledownDelay = &metav1.Duration{Duration: time.Hour}
	spec.Spec.Sunset.DeleteDelay = &metav1.Duration{Duration: time.Hour}
	v1 := r.Create(spec)
	r.WaitCurrent(5*time.Minute, v1)
	v2 := r.BuildIDOf("v2")
	loud := r.ownedPDB("loud", map[string]any{"labels": map[string]any{
		// Only v2's copy gets the value, too long for a label.
		"example.com/loud": fmt.Sprintf(`{{ if eq .BuildID %q }}%s{{ else }}ok{{ end }}`, v2, strings.Repeat("x", 40000)),
	}})
	if err := r.Env.Kube.Create(context.Background(), loud); err != nil {
		t.Fatal(err)
	}
	r.waitOwnedReady(loud.Name, metav1.ConditionTrue, v1alpha1.ReasonApplied)

	r.SetImage("v2")
	r.WaitCurrent(3*time.Minute, v2)
	var got *v1alpha1.TemporalWorkerOwnedResource
	r.Eventually(2*time.Minute, "loud Ready=False (ApplyFailed) naming "+v2, func() (bool, string) {
		got = r.owned(loud.Name)
		c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionReady)
		if c == nil {
			return false, "no Ready condition"
		}
		return c.Status == metav1.ConditionFalse && c.Reason == v1alpha1.ReasonApplyFailed && strings.Contains(c.Message, v2),
			fmt.Sprintf("Ready %s/%s, message of %d bytes starting %.200q", c.Status, c.Reason, len(c.Message), c.Message)
	})
	if c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionReady); len(c.Message) > v1alpha1.MaxConditionMessage {
		t.Errorf("Ready message of %d bytes", len(c.Message))
	}
	versions := map[string]v1alpha1.OwnedResourceVersion{}
	for _, v := range got.Status.Versions {
		versions[v.BuildID] = v
	}
	if v := versions[v1]; !v.Applied || v.ResourceName == "" || r.pdbOf(loud.Name, v1) == nil {
		t.Errorf("the copy of %s: %+v, want applied, on record and present", v1, v)
	}
	if v := versions[v2]; v.Applied || len(v.Message) > v1alpha1.MaxVersionMessage || !strings.Contains(v.Message, "more bytes)") {
		t.Errorf("the copy of %s: applied %v, message of %d bytes ending %q; want not applied, the message bounded with a note",
			v2, v.Applied, len(v.Message), v.Message[max(0, len(v.Message)-40):])
	}
}
