package buildid

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"sigs.k8s.io/yaml"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
)

func template(image string) *corev1.PodTemplateSpec {
	return &corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "worker"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name:  "worker",
			Image: image,
			Env:   []corev1.EnvVar{{Name: "LOG_LEVEL", Value: "info"}},
		}}},
	}
}

// TestGolden pins build IDs: if this test fails, a controller upgrade would
// start a new version of every worker. Never update these values casually.
func TestGolden(t *testing.T) {
	cases := map[string]struct {
		tpl  *corev1.PodTemplateSpec
		want string
	}{
		"tagged image":  {template("registry.example/team/worker:v1.2.3"), "v1.2.3-24883002bf4a8567"},
		"no tag":        {template("worker"), "latest-e46fb913d1e3ea0f"},
		"registry port": {template("localhost:5000/worker"), "latest-075571f20625fc20"},
		"digest":        {template("worker@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"), "0123456789ab-e3d454d6bc0cee88"},
		"odd tag":       {template("worker:feature+x"), "feature-x-51a119513a7a60be"},
		"empty":         {&corev1.PodTemplateSpec{}, "none-74234e98afe7498f"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := Generate(tc.tpl); got != tc.want {
				t.Errorf("Generate = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestEveryFieldCounts: each kind of template change gives another
// template hash (drift detection under a custom build ID) and so another
// generated build ID.
func TestEveryFieldCounts(t *testing.T) {
	base, baseHash := Generate(template("w:v1")), TemplateHash(template("w:v1"))
	changes := map[string]func(*corev1.PodTemplateSpec){
		"image":   func(p *corev1.PodTemplateSpec) { p.Spec.Containers[0].Image = "w:v2" },
		"env":     func(p *corev1.PodTemplateSpec) { p.Spec.Containers[0].Env[0].Value = "debug" },
		"command": func(p *corev1.PodTemplateSpec) { p.Spec.Containers[0].Command = []string{"run"} },
		"args":    func(p *corev1.PodTemplateSpec) { p.Spec.Containers[0].Args = []string{"--x"} },
		"label":   func(p *corev1.PodTemplateSpec) { p.Labels["team"] = "a" },
		"annotation": func(p *corev1.PodTemplateSpec) {
			p.Annotations = map[string]string{"a": "b"}
		},
		"resources": func(p *corev1.PodTemplateSpec) {
			p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
		},
		"volume": func(p *corev1.PodTemplateSpec) {
			p.Spec.Volumes = []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
		},
		"second container": func(p *corev1.PodTemplateSpec) {
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "sidecar", Image: "s"})
		},
	}
	for name, change := range changes {
		t.Run(name, func(t *testing.T) {
			tpl := template("w:v1")
			change(tpl)
			if got := TemplateHash(tpl); got == baseHash {
				t.Errorf("changing %s kept template hash %s", name, got)
			}
			if got := Generate(tpl); got == base {
				t.Errorf("changing %s kept build ID %s", name, got)
			}
		})
	}
}

// TestOf: a custom build ID is used exactly as written, whatever the
// template; without one the build ID is generated from the template.
func TestOf(t *testing.T) {
	spec := func(custom, image string) *v1alpha1.TemporalWorkerDeploymentSpec {
		return &v1alpha1.TemporalWorkerDeploymentSpec{Template: *template(image),
			WorkerOptions: v1alpha1.WorkerOptions{CustomBuildID: custom}}
	}
	if got := Of(spec("", "w:v1")); got != Generate(template("w:v1")) {
		t.Errorf("no custom build ID: Of = %q, want the generated %q", got, Generate(template("w:v1")))
	}
	for _, image := range []string{"w:v1", "w:v2"} {
		if got := Of(spec("orders-2024.1", image)); got != "orders-2024.1" {
			t.Errorf("custom build ID with image %s: Of = %q, want it unchanged", image, got)
		}
	}
}

func TestDeterministicAndValid(t *testing.T) {
	tpl := template("w:v1")
	tpl.Labels = map[string]string{"z": "1", "a": "2", "m": "3"}
	first := Generate(tpl)
	for i := 0; i < 50; i++ {
		if got := Generate(tpl.DeepCopy()); got != first {
			t.Fatalf("build ID changed between calls: %s then %s", first, got)
		}
	}
	long := template("w:" + strings.Repeat("x", 200))
	for _, id := range []string{first, Generate(long), Generate(template("w:...")), Generate(template("w:-_-"))} {
		if len(id) > MaxLength || !Valid.MatchString(id) {
			t.Errorf("invalid build ID %q (len %d)", id, len(id))
		}
	}
}

func FuzzGenerate(f *testing.F) {
	for _, s := range []string{"w:v1", "a/b:c", "x@sha256:ab", "", ":", "a:.", "ü:ä"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, image string) {
		id := Generate(template(image))
		if len(id) > MaxLength || !Valid.MatchString(id) || strings.HasPrefix(id, "__") {
			t.Fatalf("image %q gave invalid build ID %q", image, id)
		}
	})
}

// TestEncodingOfUnsetFields checks that empty values an encoder may or may
// not write do not change the hash.
func TestEncodingOfUnsetFields(t *testing.T) {
	a := map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"name": "w", "resources": map[string]any{}}}}, "metadata": map[string]any{"creationTimestamp": nil}}
	b := map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"name": "w"}}, "volumes": []any{}}}
	if string(canonicalJSON(a)) != string(canonicalJSON(b)) {
		t.Fatalf("canonical forms differ:\n%s\n%s", canonicalJSON(a), canonicalJSON(b))
	}
}

// TestSchemaDefaultsDoNotCount reads the generated CRD and checks, for
// every `default:` under spec.template, that the hash ignores the value:
// the API server writes it into every stored object, so otherwise a CRD
// regenerated with other defaults would give every worker a new build ID.
// A new default in the CRD fails here until schemaDefaults lists it.
func TestSchemaDefaultsDoNotCount(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "config", "crd", "bases", "temporal.io_temporalworkerdeployments.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(data, &crd); err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, v := range crd.Spec.Versions {
		tpl := v.Schema.OpenAPIV3Schema.Properties["spec"].Properties["template"]
		forEachDefault(t, nil, tpl, func(path []string, value any) {
			found++
			with, without := atPath(path, value), atPath(path, nil)
			if a, b := canonicalJSON(with), canonicalJSON(without); string(a) != string(b) {
				t.Errorf("spec.template.%s defaults to %v in the CRD and that changes the hash (%s vs %s): add it to schemaDefaults",
					strings.Join(path, "."), value, a, b)
			}
		})
	}
	if found == 0 {
		t.Fatal("no defaults found under spec.template: is the CRD path right?")
	}
	t.Logf("%d defaults under spec.template", found)
}

// forEachDefault walks a schema; "[]" marks a list item, "{}" a map value
// (which schemaDefaults cannot express, so such a default fails the test).
func forEachDefault(t *testing.T, path []string, s apiextensionsv1.JSONSchemaProps, f func([]string, any)) {
	if s.Default != nil {
		var value any
		if err := json.Unmarshal(s.Default.Raw, &value); err != nil {
			t.Fatal(err)
		}
		f(path, value)
	}
	for name, child := range s.Properties {
		forEachDefault(t, append(slices.Clone(path), name), child, f)
	}
	last := func(suffix string) []string {
		p := slices.Clone(path)
		if len(p) == 0 {
			return []string{suffix}
		}
		p[len(p)-1] += suffix
		return p
	}
	if s.Items != nil && s.Items.Schema != nil {
		forEachDefault(t, last("[]"), *s.Items.Schema, f)
	}
	if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
		forEachDefault(t, last("{}"), *s.AdditionalProperties.Schema, f)
	}
}

// atPath builds a template holding value at path (nil: only the parents,
// with a sibling field so they are not empty).
func atPath(path []string, value any) any {
	leaf := map[string]any{"sibling": "x"}
	if value != nil {
		leaf[path[len(path)-1]] = value
	}
	var v any = leaf
	for i := len(path) - 2; i >= 0; i-- {
		key, list := strings.CutSuffix(path[i], "[]")
		if list {
			v = []any{v}
		}
		v = map[string]any{key: v}
	}
	return v
}

// TestDefaultedTemplateKeepsItsBuildID: a template as the API server
// stores it, with the schema's defaults filled in, has the build ID of the
// template as written. (The integration test TestBuildIDIgnoresCRDDefaults
// does the same through a real API server.)
func TestDefaultedTemplateKeepsItsBuildID(t *testing.T) {
	written := template("w:v1")
	written.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 8080}}
	written.Spec.Volumes = []corev1.Volume{{Name: "ceph", VolumeSource: corev1.VolumeSource{RBD: &corev1.RBDVolumeSource{
		CephMonitors: []string{"m:6789"}, RBDImage: "img"}}}}
	stored := written.DeepCopy()
	stored.Spec.Containers[0].Ports[0].Protocol = corev1.ProtocolTCP
	rbd := stored.Spec.Volumes[0].RBD
	rbd.RBDPool, rbd.RadosUser, rbd.Keyring = "rbd", "admin", "/etc/ceph/keyring"
	if got, want := Generate(stored), Generate(written); got != want {
		t.Fatalf("build ID with the schema's defaults %s, as written %s", got, want)
	}
	if got, want := Generate(written), "v1-240f6afcc373d633"; got != want {
		t.Errorf("Generate = %q, want %q (pinned)", got, want)
	}
	// A value other than the default still counts.
	stored.Spec.Containers[0].Ports[0].Protocol = corev1.ProtocolUDP
	if Generate(stored) == Generate(written) {
		t.Error("protocol UDP hashed like the default TCP")
	}
}

// TestTarget: an adopted build ID holds exactly while the template is the
// one it was converted from, and a custom build ID always wins.
func TestTarget(t *testing.T) {
	converted := template("worker:v1")
	hash := TemplateHash(converted)
	adopted := map[string]string{v1alpha1.AnnotationAdoptedBuildID: "v1-b7c4", v1alpha1.AnnotationAdoptedTemplateHash: hash}
	for _, tc := range []struct {
		name        string
		annotations map[string]string
		image       string
		custom      string
		want        string
	}{
		{"not adopted", nil, "worker:v1", "", Generate(template("worker:v1"))},
		{"adopted, same template", adopted, "worker:v1", "", "v1-b7c4"},
		{"adopted, template changed", adopted, "worker:v2", "", Generate(template("worker:v2"))},
		{"adopted, custom build ID", adopted, "worker:v1", "mine", "mine"},
		{"adopted build ID without its hash", map[string]string{v1alpha1.AnnotationAdoptedBuildID: "v1-b7c4"}, "worker:v1", "", Generate(template("worker:v1"))},
		{"hash without a build ID", map[string]string{v1alpha1.AnnotationAdoptedTemplateHash: hash}, "worker:v1", "", Generate(template("worker:v1"))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			twd := &v1alpha1.TemporalWorkerDeployment{ObjectMeta: metav1.ObjectMeta{Annotations: tc.annotations}}
			twd.Spec.Template = *template(tc.image)
			twd.Spec.WorkerOptions.CustomBuildID = tc.custom
			if got := Target(twd); got != tc.want {
				t.Errorf("Target = %q, want %q", got, tc.want)
			}
		})
	}
}
