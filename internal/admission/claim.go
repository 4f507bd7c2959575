package admission

import (
	"context"
	"fmt"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	cradmission "sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/internal/claim"
	"github.com/rainbow-deploy/rainbow/internal/planner"
)

// WorkerDeploymentPath is where the manager serves the webhook of
// TemporalWorkerDeployments.
const WorkerDeploymentPath = "/validate-temporal-io-v1alpha1-temporalworkerdeployment"

var twdGroupKind = v1alpha1.GroupVersion.WithKind("TemporalWorkerDeployment").GroupKind()

var deploymentNamePath = field.NewPath("spec", "workerOptions", "deploymentName")

// ClaimValidator refuses a TemporalWorkerDeployment that names a Temporal
// worker deployment (server, Temporal namespace and name) another one
// names already, on create and on an update that changes what it names.
// The refusal names the other TemporalWorkerDeployment, even to a user
// who cannot read its namespace: that is who to talk to, and whoever can
// read the Temporal namespace sees the name in use anyway. Admission is
// racy (two creates at once, a cache a moment behind): the controller
// decides again (planner.ClaimHolder) and the younger one does nothing.
type ClaimValidator struct {
	// Reader lists TemporalWorkerDeployments by claim.Index, and reads
	// their TemporalConnections.
	Reader  client.Reader
	Decoder cradmission.Decoder
}

// NewClaimValidator builds a ClaimValidator decoding with scheme.
func NewClaimValidator(scheme *runtime.Scheme, r client.Reader) *ClaimValidator {
	return &ClaimValidator{Reader: r, Decoder: cradmission.NewDecoder(scheme)}
}

// Handle implements admission.Handler.
func (v *ClaimValidator) Handle(ctx context.Context, req cradmission.Request) cradmission.Response {
	var twd, old v1alpha1.TemporalWorkerDeployment
	if len(req.Object.Raw) > 0 {
		if err := v.Decoder.DecodeRaw(req.Object, &twd); err != nil {
			return cradmission.Errored(http.StatusBadRequest, err)
		}
	}
	switch req.Operation {
	case admissionv1.Create:
	case admissionv1.Update:
		if err := v.Decoder.DecodeRaw(req.OldObject, &old); err != nil {
			return cradmission.Errored(http.StatusBadRequest, err)
		}
		if sameClaim(&twd, &old) {
			return cradmission.Allowed("names the same worker deployment as before")
		}
	default:
		return cradmission.Denied(fmt.Sprintf("unexpected %s of a TemporalWorkerDeployment: this webhook checks creates and updates", req.Operation))
	}
	self, err := claim.Of(ctx, v.Reader, &twd)
	if err == nil {
		var rivals []planner.Claimant
		if rivals, err = claim.Rivals(ctx, v.Reader, &twd); err == nil {
			return claimResponse(req.Name, &twd, self, rivals)
		}
	}
	return cradmission.Errored(http.StatusInternalServerError, err)
}

// claimResponse refuses twd if any rival names its worker deployment on
// its server, whichever is older: on an update, an older TWD taking a
// younger one's name would otherwise take the worker deployment over.
func claimResponse(name string, twd *v1alpha1.TemporalWorkerDeployment, self planner.Claimant, rivals []planner.Claimant) cradmission.Response {
	for _, r := range rivals {
		if !planner.SameServer(self.Address, r.Address) {
			continue
		}
		where := "at " + r.Address
		if r.Address == "" || self.Address == "" {
			where = "(one of the two TemporalConnections cannot be read, so they may be the same server)"
		}
		msg := fmt.Sprintf("Temporal worker deployment %q in namespace %s %s is used by TemporalWorkerDeployment %s; two TemporalWorkerDeployments "+
			"would change each other's routing and workflows: set spec.workerOptions.deploymentName to a name of its own",
			twd.WorkerDeploymentName(), twd.Spec.WorkerOptions.TemporalNamespace, where, r)
		status := apierrors.NewInvalid(twdGroupKind, name, field.ErrorList{field.Invalid(deploymentNamePath, twd.WorkerDeploymentName(), msg)}).ErrStatus
		return cradmission.Response{AdmissionResponse: admissionv1.AdmissionResponse{Allowed: false, Result: &status}}
	}
	return cradmission.Allowed("")
}

// sameClaim: the update leaves the worker deployment, the Temporal
// namespace and the connection as they were.
func sameClaim(a, b *v1alpha1.TemporalWorkerDeployment) bool {
	return claim.Key(a) == claim.Key(b) && a.Spec.WorkerOptions.ConnectionRef == b.Spec.WorkerOptions.ConnectionRef
}

var _ cradmission.Handler = (*ClaimValidator)(nil)
