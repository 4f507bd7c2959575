package admission

import (
	"context"
	"fmt"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	cradmission "sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
)

var (
	deployments = appsv1.SchemeGroupVersion.WithResource("deployments")
	configMaps  = corev1.SchemeGroupVersion.WithResource("configmaps")
	// workerVerbs are what the controller does to each version's
	// Deployment on the author's behalf.
	workerVerbs = []string{"create", "update", "delete"}
)

// WorkerDeploymentValidator admits TemporalWorkerDeployments. The
// controller makes, changes and deletes a Deployment per version from
// spec.template, and reads the gate's input, with its own rights: so
// whoever creates a TemporalWorkerDeployment, or changes its spec, must be
// allowed to do that to Deployments in its namespace and to read the
// gate's input themselves. Then Claims refuses a second one naming the
// same Temporal worker deployment.
type WorkerDeploymentValidator struct {
	Access  AccessReviewer
	Claims  *ClaimValidator
	Decoder cradmission.Decoder
}

// NewWorkerDeploymentValidator builds a WorkerDeploymentValidator; r lists
// TemporalWorkerDeployments by claim.Index.
func NewWorkerDeploymentValidator(scheme *runtime.Scheme, access AccessReviewer, r client.Reader) *WorkerDeploymentValidator {
	return &WorkerDeploymentValidator{Access: access, Claims: NewClaimValidator(scheme, r), Decoder: cradmission.NewDecoder(scheme)}
}

// Handle implements admission.Handler.
func (v *WorkerDeploymentValidator) Handle(ctx context.Context, req cradmission.Request) cradmission.Response {
	if why := unexpectedShape(req, "TemporalWorkerDeployment", "temporalworkerdeployments", admissionv1.Create, admissionv1.Update); why != "" {
		return cradmission.Denied(fmt.Sprintf("this webhook checks only the creation and update of temporalworkerdeployments.temporal.io "+
			"(not their subresources), and refuses anything else: %s; route only those requests to it (config/webhook/validating_webhook.yaml)", why))
	}
	if req.Operation == admissionv1.Create || req.Operation == admissionv1.Update {
		var twd, old v1alpha1.TemporalWorkerDeployment
		if err := v.Decoder.DecodeRaw(req.Object, &twd); err != nil {
			return cradmission.Errored(http.StatusBadRequest, err)
		}
		changed := req.Operation == admissionv1.Create
		if !changed {
			if err := v.Decoder.DecodeRaw(req.OldObject, &old); err != nil {
				return cradmission.Errored(http.StatusBadRequest, err)
			}
			// Status, metadata and finalizer changes ask nothing new.
			changed = !equality.Semantic.DeepEqual(twd.Spec, old.Spec)
		}
		if changed {
			if errs := ValidateAnalysis(&twd); len(errs) > 0 {
				return invalidTWD(req.Name, errs)
			}
			if resp, denied := v.authorize(ctx, req, &twd); denied {
				return resp
			}
		}
	}
	return v.Claims.Handle(ctx, req)
}

// authorize checks the requesting user's own rights to what the
// controller will do for twd.
func (v *WorkerDeploymentValidator) authorize(ctx context.Context, req cradmission.Request, twd *v1alpha1.TemporalWorkerDeployment) (cradmission.Response, bool) {
	user := requester(req.UserInfo)
	who := fmt.Sprintf("user %q", user.Username)
	type need struct {
		field    *field.Path
		resource schema.GroupVersionResource
		name     string
		verbs    []string
		why      string
	}
	needs := []need{{field.NewPath("spec", "template"), deployments, "", workerVerbs,
		"the controller creates, changes and deletes a Deployment per version from spec.template on your behalf; " +
			"get those permissions (the built-in edit role has them), or have someone who has them apply it"}}
	// The rollout gate's input, and each step gate's.
	type gate struct {
		path *field.Path
		g    *v1alpha1.GateWorkflow
	}
	gates := []gate{{field.NewPath("spec", "rollout", "gate"), twd.Spec.Rollout.Gate}}
	for i, st := range twd.Spec.Rollout.Steps {
		gates = append(gates, gate{field.NewPath("spec", "rollout", "steps").Index(i).Child("gate"), st.Gate})
	}
	for _, gt := range gates {
		g := gt.g
		if g == nil || g.InputFrom == nil {
			continue
		}
		from := gt.path.Child("inputFrom")
		why := "the controller reads the gate's input on your behalf and passes it to the gate workflow; get that permission, or name one you may read"
		if r := g.InputFrom.SecretKeyRef; r != nil {
			needs = append(needs, need{from.Child("secretKeyRef"), secrets, r.Name, []string{"get"}, why})
		}
		if r := g.InputFrom.ConfigMapKeyRef; r != nil {
			needs = append(needs, need{from.Child("configMapKeyRef"), configMaps, r.Name, []string{"get"}, why})
		}
	}
	for _, n := range needs {
		for _, verb := range n.verbs {
			d, err := allowedOn(ctx, v.Access, user, who, n.resource, req.Namespace, n.name, verb)
			if err != nil {
				log.FromContext(ctx).Error(err, "access review failed")
				return cradmission.Errored(http.StatusInternalServerError, err), true
			}
			if d != nil {
				status := apierrors.NewForbidden(v1alpha1.GroupVersion.WithResource("temporalworkerdeployments").GroupResource(), req.Name,
					fmt.Errorf("%s: %w: %s", n.field, d, n.why)).ErrStatus
				return cradmission.Response{AdmissionResponse: admissionv1.AdmissionResponse{Allowed: false, Result: &status}}, true
			}
		}
	}
	return cradmission.Response{}, false
}

var _ cradmission.Handler = (*WorkerDeploymentValidator)(nil)
