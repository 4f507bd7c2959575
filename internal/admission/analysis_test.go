package admission

import (
	"strings"
	"testing"

	"k8s.io/utils/ptr"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
)

func TestValidateAnalysisPrometheus(t *testing.T) {
	for name, tc := range map[string]struct {
		query    string
		min, max *string
		field    string // empty: admitted
		says     string
	}{
		"every field":        {query: `sum(rate(x{b="{{ .BuildID }}",c="{{ .CurrentBuildID }}",d="{{ .DeploymentName }}",n="{{ .Namespace }}/{{ .Name }}"}[{{ .Window }}]))`, max: ptr.To("1")},
		"no template":        {query: `vector(1)`, min: ptr.To("0"), max: ptr.To("2")},
		"does not parse":     {query: `x{b="{{ .BuildID }"}`, max: ptr.To("1"), field: "spec.rollout.analysis.checks[0].prometheus.query", says: "not a template"},
		"unknown field":      {query: `x{b="{{ .Build }}"}`, max: ptr.To("1"), field: "spec.rollout.analysis.checks[0].prometheus.query", says: ".BuildID, .CurrentBuildID"},
		"a loop":             {query: `{{ range 100000000 }}{{ end }}`, max: ptr.To("1"), field: "spec.rollout.analysis.checks[0].prometheus.query", says: "only {{ .Field }} substitutions"},
		"min above max":      {query: `vector(1)`, min: ptr.To("2.5"), max: ptr.To("1"), field: "spec.rollout.analysis.checks[0].prometheus.min", says: "never pass"},
		"min equal to max":   {query: `vector(1)`, min: ptr.To("1.0"), max: ptr.To("1")},
		"only a lower bound": {query: `vector(1)`, min: ptr.To("-3")},
	} {
		twd := &v1alpha1.TemporalWorkerDeployment{}
		twd.Spec.Rollout.Analysis = &v1alpha1.AnalysisSpec{Checks: []v1alpha1.AnalysisCheck{{Name: "p", Kind: v1alpha1.CheckPrometheus,
			Prometheus: &v1alpha1.PrometheusCheck{Query: tc.query, Min: tc.min, Max: tc.max}}}}
		errs := ValidateAnalysis(twd)
		switch {
		case tc.field == "" && len(errs) > 0:
			t.Errorf("%s: refused: %v", name, errs)
		case tc.field != "" && (len(errs) != 1 || errs[0].Field != tc.field || !strings.Contains(errs[0].Error(), tc.says)):
			t.Errorf("%s: got %v, want one error on %s saying %q", name, errs, tc.field, tc.says)
		}
	}
}
