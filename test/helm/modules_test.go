package helm

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// requirement is a line of a go.mod's require block (or a one-line require).
var requirement = regexp.MustCompile(`(?m)^(?:require )?\s*([^\s/]+\.\S+) (v\S+)`)

// TestHelmModulesShareVersions: the modules that helm 3 (hack/tools) and
// helm 4 (hack/tools/helm4) both need are required at the same versions, so
// that a cold build of the second reuses what the first compiled (helm 4
// took 148 CPU-seconds after helm 3 with 21 versions apart, 69 with none).
func TestHelmModulesShareVersions(t *testing.T) {
	read := func(path string) map[string]string {
		data, err := os.ReadFile(filepath.Join(env.Root, path))
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, m := range requirement.FindAllStringSubmatch(string(data), -1) {
			out[m[1]] = m[2]
		}
		if len(out) == 0 {
			t.Fatalf("%s requires nothing that this test can read", path)
		}
		return out
	}
	helm3, helm4 := read("hack/tools/go.mod"), read("hack/tools/helm4/go.mod")
	for m, v4 := range helm4 {
		if v3, ok := helm3[m]; ok && v3 != v4 {
			t.Errorf("%s is at %s in hack/tools/go.mod and %s in hack/tools/helm4/go.mod: run `go get %s@%s` in the older one's folder", m, v3, v4, m, v4)
		}
	}
}
