package planner

import (
	"testing"
	"time"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
)

// TestCustomBuildID is the behaviour matrix of a custom build ID. The
// controller passes the build ID (custom or generated) as TargetBuildID and
// the template's hash as TemplateHash; a generated build ID changes with
// the template, so drift only happens when the user keeps a custom one.
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
		"Deployment without a recorded hash: hash recorded, no restart": {
			in: with(base(), currentV2, func(in *Input) {
				d := running("v2")
				setDep(in, d)
			}),
			want: expect{Update: &UpdateDeployment{Name: "worker-v2", BuildID: "v2", HashOnly: true},
				Ready: condTrue, Reason: v1alpha1.ReasonRolloutComplete, Progressing: condFalse, Requeue: time.Minute},
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
