package buildid

import (
	"encoding/json"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
)

// FuzzTemplate derives build IDs from arbitrary pod templates (any JSON
// that decodes as one) and checks: a valid build ID of at most 63
// characters; the same ID for a deep copy and for the template after an
// encode and decode (what the API server and the informer cache do to it
// between reconciles, so a difference would start a new version of every
// worker); and Of gives a custom build ID precedence.
func FuzzTemplate(f *testing.F) {
	for _, s := range []string{
		`{"spec":{"containers":[{"name":"w","image":"r/w:v1.2.3","env":[{"name":"A","value":"b"}]}]}}`,
		`{"metadata":{"labels":{"a":"b"},"annotations":{}},"spec":{"containers":[{"name":"w","image":"w@sha256:0123456789abcdef","resources":{"limits":{"cpu":"500m","memory":"1Gi"}},"ports":[{"containerPort":80}]}]}}`,
		`{"spec":{"containers":[],"volumes":[{"name":"v","emptyDir":{}}],"initContainers":[{"name":"i","image":":"}]}}`,
		`{"spec":{"containers":[{"name":"w","image":"ü:…","args":["",""],"resources":{"requests":{"cpu":"0.1","memory":"1e3"}}}],"nodeSelector":{"":""}}}`,
		`{}`,
	} {
		f.Add(s, "")
	}
	f.Add(`{"spec":{"containers":[{"image":"x:y"}]}}`, "my-build.1")
	f.Fuzz(func(t *testing.T, template, custom string) {
		var tpl corev1.PodTemplateSpec
		if json.Unmarshal([]byte(template), &tpl) != nil {
			return
		}
		id := Generate(&tpl)
		if len(id) > MaxLength || !Valid.MatchString(id) || strings.HasPrefix(id, "__") {
			t.Fatalf("invalid build ID %q", id)
		}
		if again := Generate(tpl.DeepCopy()); again != id {
			t.Fatalf("a deep copy has build ID %s, the template %s", again, id)
		}
		data, err := json.Marshal(&tpl)
		if err != nil {
			t.Fatalf("encode: %v", err)
		}
		var back corev1.PodTemplateSpec
		if err := json.Unmarshal(data, &back); err != nil {
			t.Fatalf("decode %s: %v", data, err)
		}
		if again := Generate(&back); again != id {
			t.Fatalf("after an encode and decode the build ID is %s, before %s (%s)", again, id, data)
		}
		spec := &v1alpha1.TemporalWorkerDeploymentSpec{Template: tpl}
		spec.WorkerOptions.CustomBuildID = custom
		if want := map[bool]string{true: custom, false: id}[custom != ""]; Of(spec) != want {
			t.Fatalf("Of = %q, want %q", Of(spec), want)
		}
	})
}
