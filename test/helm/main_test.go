// Package helm tests the Helm charts under charts/: helm lint, helm template
// with many values (each rendering checked and sent to the real API server
// as a server-side dry run), and installs into the local environment. The
// package has an environment of its own, without the in-process controller
// of test/integration: the installed chart runs the controller.
package helm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/rainbow-deploy/rainbow/test/harness"
)

var env *harness.Env

// TestMain builds the helm binaries this package alone needs before its
// environment starts (make helm: nothing when they are built), so that
// make test builds them while other packages' tests run instead of first,
// then starts the builds of two tests (prebuild_test.go) beside the others.
func TestMain(m *testing.M) {
	root, err := harness.RepoRoot()
	if err == nil {
		cmd := exec.Command("make", "--no-print-directory", "-C", root, "helm")
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		err = cmd.Run()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "test/helm: make helm:", err)
		os.Exit(1)
	}
	stop := startPrebuilds(root)
	harness.Main(m, &env, func(*harness.Env) (func(), error) { return stop, nil })
}

// helmPath is the helm `make helm` builds: .cache/tools/helm-<version>, the
// version hack/tools/go.mod requires.
func helmPath(t testing.TB) string { return builtHelm(t, "hack/tools/go.mod", "helm.sh/helm/v3") }

// helm4Path is the helm 4 `make helm` builds from hack/tools/helm4.
func helm4Path(t testing.TB) string {
	return builtHelm(t, "hack/tools/helm4/go.mod", "helm.sh/helm/v4")
}

// builtHelm is .cache/tools/helm-<version>, the version of module the
// go.mod at gomod requires.
func builtHelm(t testing.TB, gomod, module string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(env.Root, gomod))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*` + regexp.QuoteMeta(module) + ` (v\S+)`).FindSubmatch(data)
	if m == nil {
		t.Fatalf("%s requires no %s", gomod, module)
	}
	path := filepath.Join(env.Root, ".cache", "tools", "helm-"+string(m[1]))
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("%s is not built: run `make helm` (or the tests with `make test`)", path)
	}
	return path
}

// recordInputs reads every file of charts/, config/ and examples/ once, so
// that go test's cache, which knows only the files the test process itself
// opens, reruns these tests when what helm and kubectl read changes.
var recordInputs = sync.OnceValue(func() error {
	for _, dir := range []string{"charts", "config", "examples"} {
		err := filepath.WalkDir(filepath.Join(env.Root, dir), func(path string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				_, err = os.ReadFile(path)
			}
			return err
		})
		if err != nil {
			return err
		}
	}
	return nil
})

// helm runs helm with its own configuration and cache directories (under
// t's temp dir) against the environment's cluster, from the repository
// root, and returns its standard output; the error holds standard error.
func helm(t testing.TB, args ...string) ([]byte, error) {
	t.Helper()
	if err := recordInputs(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, helmPath(t), args...)
	cmd.Dir = env.Root
	home := t.TempDir()
	cmd.Env = append(os.Environ(), "KUBECONFIG="+env.Info.Kubeconfig,
		"HELM_CONFIG_HOME="+filepath.Join(home, "config"), "HELM_CACHE_HOME="+filepath.Join(home, "cache"),
		"HELM_DATA_HOME="+filepath.Join(home, "data"))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.Bytes(), fmt.Errorf("helm %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.Bytes(), nil
}

// mustHelm is helm that fails the test on an error.
func mustHelm(t testing.TB, args ...string) []byte {
	t.Helper()
	out, err := helm(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// decode splits YAML documents into objects, skipping empty ones.
func decode(t testing.TB, data []byte) []unstructured.Unstructured {
	t.Helper()
	var objs []unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var obj unstructured.Unstructured
		if err := dec.Decode(&obj.Object); err != nil {
			if !errors.Is(err, io.EOF) {
				t.Fatalf("decode rendered manifests: %v", err)
			}
			return objs
		}
		if obj.Object != nil {
			objs = append(objs, obj)
		}
	}
}
