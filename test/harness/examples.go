package harness

import (
	"os"
	"path/filepath"
	"testing"

	"sigs.k8s.io/yaml"
)

// ReadExample decodes a single-object YAML file under examples/ into obj, so
// that tests apply the examples the docs point to.
func (e *Env) ReadExample(t testing.TB, rel string, obj any) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(e.Root, "examples", rel))
	if err != nil {
		t.Fatalf("read example: %v", err)
	}
	if err := yaml.UnmarshalStrict(data, obj); err != nil {
		t.Fatalf("decode example %s: %v", rel, err)
	}
}
