package planner

import (
	"testing"
	"time"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
)

// TestCustomBuildID is the behaviour matrix of a custom build ID. The
// controller passes the build ID (custom or generated) as TargetBuildID,
// the template's hash as TemplateHash and the build ID generated from the
// template as GeneratedBuildID; a generated build ID changes with the
// template, so drift only happens when the user keeps a custom one. An
// invalid custom build ID never reaches the planner: the CRD rejects it
// (TestAdmissionTable).
func TestCustomBuildID(t *testing.T) {
	// v2 is the target and current, its Deployment runs template "h1".
	currentV2 := func(in *Input) {
		in.Spec.TemplateHash = "h1"
		in.Temporal.CurrentBuildID = "v2"
		setVersion(in, version("v2", current))
		setVersion(in, version("v1", draining))
		d := running("v2")
		d.TemplateHash = "h1"
		setDep(in, d)
	}
	changed := func(in *Input) { in.Spec.TemplateHash = "h2" }
	updateV2 := &UpdateDeployment{Name: "worker-v2", BuildID: "v2"}
	runCases(t, cases{
		"no custom build ID: a template change is a new generated build ID, a new version": {
			in: with(base(), currentV2, func(in *Input) {
				in.Spec.TargetBuildID, in.Spec.GeneratedBuildID, in.Spec.TemplateHash = "v3", "v3", "h2"
			}),
			want: expect{Create: &CreateDeployment{BuildID: "v3", Replicas: 3}, Ready: condFalse, Reason: v1alpha1.ReasonWaitingForPollers,
				Progressing: condTrue, Requeue: 30 * time.Second, Events: []string{EventCreateDeployment}},
		},
		"first deploy with a custom build ID: its Deployment is created": {
			in: with(base(), func(in *Input) {
				in.Spec.TargetBuildID, in.Spec.GeneratedBuildID, in.Spec.TemplateHash = "wf-1", "v1-generated", "h1"
				in.Deployments = nil
				in.Temporal = &TemporalState{}
			}),
			want: expect{Create: &CreateDeployment{BuildID: "wf-1", Replicas: 3}, Ready: condFalse, Reason: v1alpha1.ReasonWaitingForPollers,
				Progressing: condTrue, Requeue: 30 * time.Second, Events: []string{EventCreateDeployment}},
		},
		"no drift: nothing to do": {
			in:   with(base(), currentV2),
			want: expect{Ready: condTrue, Reason: v1alpha1.ReasonRolloutComplete, Progressing: condFalse, Requeue: time.Minute},
		},
		"same build ID, changed template: updated in place, Progressing until rolled": {
			in: with(base(), currentV2, changed),
			want: expect{Update: updateV2, Ready: condFalse, Reason: v1alpha1.ReasonWaitingForPollers, Progressing: condTrue,
				Requeue: 30 * time.Second, Events: []string{EventUpdateInPlace}, Message: "in place"},
		},
		"in-place update still rolling: no second update, still Progressing": {
			in: with(base(), currentV2, func(in *Input) {
				d := running("v2")
				d.TemplateHash, d.Rolling = "h1", true
				setDep(in, d)
			}),
			want: expect{Ready: condFalse, Reason: v1alpha1.ReasonWaitingForPollers, Progressing: condTrue, Requeue: 30 * time.Second},
		},
		"Deployment without a recorded hash, build ID generated from this template: hash recorded, no restart": {
			in: with(base(), currentV2, func(in *Input) {
				in.Spec.GeneratedBuildID = "v2"
				setDep(in, running("v2"))
			}),
			want: expect{Update: &UpdateDeployment{Name: "worker-v2", BuildID: "v2", HashOnly: true},
				Ready: condTrue, Reason: v1alpha1.ReasonRolloutComplete, Progressing: condFalse, Requeue: time.Minute},
		},
		"Deployment with only the migrated tool's hash (temporal.io/pod-template-spec-hash): hash recorded, no restart": {
			in: with(base(), currentV2, func(in *Input) {
				in.Spec.GeneratedBuildID = "v7-generated"
				d := running("v2")
				d.MigratedHash = true
				setDep(in, d)
			}),
			want: expect{Update: &UpdateDeployment{Name: "worker-v2", BuildID: "v2", HashOnly: true},
				Ready: condTrue, Reason: v1alpha1.ReasonRolloutComplete, Progressing: condFalse, Requeue: time.Minute},
		},
		"Deployment with our hash and the migrated tool's: ours decides, a changed template is updated in place": {
			in: with(base(), currentV2, changed, func(in *Input) {
				d := running("v2")
				d.TemplateHash, d.MigratedHash = "h1", true
				setDep(in, d)
			}),
			want: expect{Update: updateV2, Ready: condFalse, Reason: v1alpha1.ReasonWaitingForPollers, Progressing: condTrue,
				Requeue: 30 * time.Second, Events: []string{EventUpdateInPlace}, Message: "in place"},
		},
		"Deployment without a recorded hash under a custom build ID: it may run another template, updated in place": {
			in: with(base(), currentV2, func(in *Input) {
				in.Spec.GeneratedBuildID = "v7-generated"
				setDep(in, running("v2"))
			}),
			want: expect{Update: updateV2, Ready: condFalse, Reason: v1alpha1.ReasonWaitingForPollers, Progressing: condTrue,
				Requeue: 30 * time.Second, Events: []string{EventUpdateInPlace}, Message: "in place"},
		},
		"changed build ID: a new version and a normal rollout, old one untouched": {
			in: with(base(), currentV2, changed, func(in *Input) { in.Spec.TargetBuildID = "v3" }),
			want: expect{Create: &CreateDeployment{BuildID: "v3", Replicas: 3}, Ready: condFalse, Reason: v1alpha1.ReasonWaitingForPollers,
				Progressing: condTrue, Requeue: 30 * time.Second, Events: []string{EventCreateDeployment}},
		},
		"target not yet current: updated in place, promoted once rolled": {
			in: with(base(), func(in *Input) {
				in.Spec.TemplateHash = "h2"
				d := running("v2")
				d.TemplateHash = "h1"
				setDep(in, d)
			}),
			want: expect{Update: updateV2, Ready: condFalse, Reason: v1alpha1.ReasonWaitingForPollers,
				Progressing: condTrue, Requeue: 30 * time.Second, Events: []string{EventUpdateInPlace}, Message: "before it gets traffic"},
		},
		"no template hash given: no drift detection": {
			in:   with(base(), currentV2, func(in *Input) { in.Spec.TemplateHash = "" }),
			want: expect{Ready: condTrue, Reason: v1alpha1.ReasonRolloutComplete, Progressing: condFalse, Requeue: time.Minute},
		},
	})
}
