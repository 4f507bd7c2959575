// Package ownedtest draws owned resources' recorded copies from fuzz bytes,
// for the fuzz tests of package owned and of the planner. Only tests
// import it.
package ownedtest

import (
	"slices"
	"strings"
	"time"

	"github.com/rainbow-deploy/rainbow/internal/fuzzsrc"
	"github.com/rainbow-deploy/rainbow/internal/ownedresource"
	"github.com/rainbow-deploy/rainbow/internal/planner/owned"
)

// Copies draws the copies status recorded of owned resource name of TWD
// twd: some for builds and for a forged build, of any kind, name and
// state, since anyone who may write status may record anything.
func Copies(s *fuzzsrc.Source, twd, name string, builds []string, now time.Time) []owned.Copy {
	var out []owned.Copy
	for _, b := range append(slices.Clone(builds), "forged") {
		if !s.Bool() {
			continue
		}
		apiVersion, kind, _ := strings.Cut(fuzzsrc.Pick(s, "autoscaling/v2 HorizontalPodAutoscaler", "policy/v1 PodDisruptionBudget",
			"apps/v1 Deployment", "v1 ConfigMap", "rbac.authorization.k8s.io/v1 ClusterRole"), " ")
		out = append(out, owned.Copy{BuildID: b, APIVersion: apiVersion, Kind: kind,
			Name: fuzzsrc.Pick(s, "", ownedresource.Name(twd, name, b), "old"), Applied: s.Bool(), Generation: int64(1 + s.Intn(2)),
			Hash: fuzzsrc.Pick(s, "", "x"), AppliedAt: fuzzsrc.Pick(s, time.Time{}, now.Add(-time.Minute), now.Add(-time.Hour))})
	}
	return out
}

// Hazards are objects a TWOR may hold that the rules must survive: one
// whose template fails for build, and, admitted while the webhook was
// absent, a RoleBinding, a Deployment and one of another namespace.
func Hazards(build string) []map[string]any {
	return []map[string]any{
		{"apiVersion": "v1", "kind": "ConfigMap", "data": map[string]any{"b": `{{ if eq .BuildID "` + build + `" }}{{ .Nope }}{{ end }}`}},
		{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding"},
		{"apiVersion": "apps/v1", "kind": "Deployment"},
		{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"namespace": "other"}},
	}
}
