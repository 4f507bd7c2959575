package admission

import (
	"context"
	"fmt"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/log"
	cradmission "sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
)

// ConnectionPath is where the manager serves the TemporalConnection webhook.
const ConnectionPath = "/validate-temporal-io-v1alpha1-temporalconnection"

var secrets = corev1.SchemeGroupVersion.WithResource("secrets")

// ConnectionValidator admits TemporalConnections. The controller reads the
// Secrets a connection names and sends their credentials to its address,
// with its own rights: so whoever creates a connection, or changes its
// address or Secrets, must be allowed to get each Secret it names, and the
// address must pass CheckAddress. Other updates (labels, the
// controller's finalizer, a server name) are admitted unchecked, so that a
// connection stored before the rules tightened can still be deleted.
type ConnectionValidator struct {
	Access       AccessReviewer
	CheckAddress AddressCheck
	Decoder      cradmission.Decoder
}

// AddressCheck refuses, with the reason, an address a TemporalConnection may
// not name: temporal.AllowedHosts.Check (a func, as internal/temporal's
// tests import this package through test/harness).
type AddressCheck func(hostPort string) error

// NewConnectionValidator builds a ConnectionValidator decoding with scheme;
// a nil check allows any address.
func NewConnectionValidator(scheme *runtime.Scheme, access AccessReviewer, check AddressCheck) *ConnectionValidator {
	return &ConnectionValidator{Access: access, CheckAddress: check, Decoder: cradmission.NewDecoder(scheme)}
}

// Handle implements admission.Handler.
func (v *ConnectionValidator) Handle(ctx context.Context, req cradmission.Request) cradmission.Response {
	if why := unexpectedShape(req, "TemporalConnection", "temporalconnections", admissionv1.Create, admissionv1.Update); why != "" {
		return cradmission.Denied(fmt.Sprintf("this webhook checks only the creation and update of temporalconnections.temporal.io "+
			"(not their subresources), and refuses anything else: %s; route only those requests to it (config/webhook/validating_webhook.yaml)", why))
	}
	var conn, old *v1alpha1.TemporalConnection
	if len(req.Object.Raw) > 0 {
		conn = &v1alpha1.TemporalConnection{}
		if err := v.Decoder.DecodeRaw(req.Object, conn); err != nil {
			return cradmission.Errored(http.StatusBadRequest, err)
		}
	}
	if len(req.OldObject.Raw) > 0 {
		old = &v1alpha1.TemporalConnection{}
		if err := v.Decoder.DecodeRaw(req.OldObject, old); err != nil {
			return cradmission.Errored(http.StatusBadRequest, err)
		}
	}
	if conn == nil || (req.Operation != admissionv1.Create && (req.Operation != admissionv1.Update || old == nil)) {
		// The webhook is registered for CREATE and UPDATE only.
		return cradmission.Denied(fmt.Sprintf("the TemporalConnection webhook checks only CREATE and UPDATE, not this %s request", req.Operation))
	}
	check := connectionChecks(conn, old, v.CheckAddress)
	if !check.needed {
		return cradmission.Allowed("address and Secrets unchanged")
	}
	if len(check.invalid) > 0 {
		status := apierrors.NewInvalid(v1alpha1.GroupVersion.WithKind("TemporalConnection").GroupKind(), req.Name, check.invalid).ErrStatus
		return cradmission.Response{AdmissionResponse: admissionv1.AdmissionResponse{Allowed: false, Result: &status}}
	}
	user := requester(req.UserInfo)
	for _, s := range check.secrets {
		d, err := allowedOn(ctx, v.Access, user, fmt.Sprintf("user %q", user.Username), secrets, req.Namespace, s.name, "get")
		if err != nil {
			log.FromContext(ctx).Error(err, "access review failed")
			return cradmission.Errored(http.StatusInternalServerError, err)
		}
		if d != nil {
			status := apierrors.NewForbidden(v1alpha1.GroupVersion.WithResource("temporalconnections").GroupResource(), req.Name,
				fmt.Errorf("%s: %w: the controller sends the credentials of the Secrets a TemporalConnection names to its spec.hostPort, "+
					"so its author must be allowed to read them; get that permission, or name a Secret you may read", s.field, d)).ErrStatus
			return cradmission.Response{AdmissionResponse: admissionv1.AdmissionResponse{Allowed: false, Result: &status}}
		}
	}
	return cradmission.Allowed("")
}

// connectionCheck is what admitting a TemporalConnection takes.
type connectionCheck struct {
	// needed: a create, or an update of the address or a Secret reference.
	needed bool
	// invalid refuses the connection outright.
	invalid field.ErrorList
	// secrets the requesting user must be allowed to get.
	secrets []secretUse
}

type secretUse struct {
	field *field.Path
	name  string
}

// connectionChecks decides what admitting conn takes; old is nil on a
// create. Once the address or any Secret changes, every Secret named is
// checked again: unchanged ones now go elsewhere, or with other ones.
// A changed key of the same Secret counts as a change.
func connectionChecks(conn, old *v1alpha1.TemporalConnection, checkAddress AddressCheck) connectionCheck {
	spec := field.NewPath("spec")
	if old != nil && old.Spec.HostPort == conn.Spec.HostPort &&
		equality.Semantic.DeepEqual(old.Spec.MutualTLSSecretRef, conn.Spec.MutualTLSSecretRef) &&
		equality.Semantic.DeepEqual(old.Spec.APIKeySecretRef, conn.Spec.APIKeySecretRef) {
		return connectionCheck{}
	}
	c := connectionCheck{needed: true}
	if checkAddress == nil {
		checkAddress = func(string) error { return nil }
	}
	if err := checkAddress(conn.Spec.HostPort); err != nil {
		c.invalid = append(c.invalid, field.Forbidden(spec.Child("hostPort"),
			err.Error()+"; use an allowed address, or ask the controller's administrator to allow this one"))
	}
	if ref := conn.Spec.MutualTLSSecretRef; ref != nil {
		c.secrets = append(c.secrets, secretUse{spec.Child("mutualTLSSecretRef", "name"), ref.Name})
	}
	if ref := conn.Spec.APIKeySecretRef; ref != nil {
		c.secrets = append(c.secrets, secretUse{spec.Child("apiKeySecretRef", "name"), ref.Name})
	}
	return c
}

var _ cradmission.Handler = (*ConnectionValidator)(nil)
