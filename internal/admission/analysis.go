package admission

import (
	"strconv"

	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	cradmission "sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/internal/promquery"
)

// ValidateAnalysis refuses what the CRD's schema cannot check in
// spec.rollout.analysis: a Prometheus check's query template that does
// not parse or names a field the controller does not fill in, and a min
// above its max (the check could never pass).
func ValidateAnalysis(twd *v1alpha1.TemporalWorkerDeployment) field.ErrorList {
	a := twd.Spec.Rollout.Analysis
	if a == nil {
		return nil
	}
	var errs field.ErrorList
	for i, c := range a.Checks {
		p := c.Prometheus
		if p == nil {
			continue
		}
		path := field.NewPath("spec", "rollout", "analysis", "checks").Index(i).Child("prometheus")
		if err := promquery.Check(p.Query); err != nil {
			errs = append(errs, field.Invalid(path.Child("query"), p.Query,
				"not a template the controller can render: "+err.Error()+
					"; the fields are .BuildID, .CurrentBuildID, .DeploymentName, .Namespace, .Name and .Window"))
		}
		if p.Min != nil && p.Max != nil {
			lo, err1 := strconv.ParseFloat(*p.Min, 64)
			hi, err2 := strconv.ParseFloat(*p.Max, 64)
			if err1 == nil && err2 == nil && lo > hi {
				errs = append(errs, field.Invalid(path.Child("min"), *p.Min, "above max ("+*p.Max+"): the check could never pass"))
			}
		}
	}
	return errs
}

// invalidTWD is a denial of a TemporalWorkerDeployment carrying errs as
// the API server's own validation would.
func invalidTWD(name string, errs field.ErrorList) cradmission.Response {
	status := apierrors.NewInvalid(twdGroupKind, name, errs).ErrStatus
	return cradmission.Response{AdmissionResponse: admissionv1.AdmissionResponse{Allowed: false, Result: &status}}
}
