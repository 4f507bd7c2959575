package helm

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	appsv1 "k8s.io/api/apps/v1"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rainbow-deploy/rainbow/internal/controller/workerdeployment"
)

// TestRelease runs `make release` into a temporary folder, as
// docs/release.md says, checks what it wrote against SHA256SUMS, then
// installs the packaged charts from it on the local environment with the
// released image's own binary (the host's platform, taken out of the OCI
// archive): the controller that runs is the release's version, and rolls
// out the examples, writing that version into Temporal. It builds the
// host's platform only: the other is a cold cross-compile of minutes on a
// fresh machine, for a build that differs only in GOARCH.
func TestRelease(t *testing.T) {
	const version, chartVersion = releaseVersion, releaseChartVersion
	releaseBuild.wait(t)
	dist := releaseBuild.dir

	want := []string{
		"SHA256SUMS", "rainbow-" + chartVersion + ".tgz", "rainbow-crds-" + chartVersion + ".tgz", "rainbow-crds-" + version + ".yaml",
		"rainbow-manager-" + version + ".oci.tar",
		"rainbow-manager-" + version + "-linux-" + runtime.GOARCH + ".cdx.json",
	}
	for _, f := range want {
		if _, err := os.Stat(filepath.Join(dist, f)); err != nil {
			t.Errorf("make release wrote no %s: %v", f, err)
		}
	}
	check := exec.Command("sha256sum", "--check", "--strict", "SHA256SUMS")
	check.Dir = dist
	if out, err := check.CombinedOutput(); err != nil || strings.Count(string(out), ": OK") != len(want)-1 {
		t.Errorf("sha256sum --check SHA256SUMS: %v\n%s", err, out)
	}
	checkReleaseSBOM(t, filepath.Join(dist, "rainbow-manager-"+version+"-linux-"+runtime.GOARCH+".cdx.json"), version)
	if objs := decode(t, mustRead(t, filepath.Join(dist, "rainbow-crds-"+version+".yaml"))); len(objs) != len(crdNames(t)) {
		t.Errorf("the CRDs file holds %d objects, want the %d CRDs", len(objs), len(crdNames(t)))
	}

	// The node agent runs the program named like the image's repository:
	// the release's binary, under a name of its own.
	tt := env.NewTest(t)
	program := "manager-release-" + tt.Suffix
	bin := filepath.Join(env.BinDir, program)
	extractManager(t, filepath.Join(dist, "rainbow-manager-"+version+".oci.tar"), bin)
	t.Cleanup(func() { os.Remove(bin) })

	system := namespace(t, "rainbow-"+tt.Suffix)
	deleteHarnessCRDs(tt, crdNames(t))
	mustHelm(t, "install", "rainbow-crds", filepath.Join(dist, "rainbow-crds-"+chartVersion+".tgz"), "--namespace", system, "--wait", "--timeout", "3m")
	mustHelm(t, "install", "rainbow", filepath.Join(dist, "rainbow-"+chartVersion+".tgz"), "--namespace", system, "--wait", "--timeout", "4m",
		"-f", "examples/local-environment/rainbow-values.yaml", "--set", "image.repository=rainbow.local/"+program,
		"--set", "identity=rainbow-release-"+tt.Suffix)
	if out, err := env.Kubectl(nil, "-n", system, "rollout", "status", "deployment/rainbow-controller", "--timeout=4m"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var d appsv1.Deployment
	if err := env.Kube.Get(context.Background(), crclient.ObjectKey{Namespace: system, Name: "rainbow-controller"}, &d); err != nil {
		t.Fatal(err)
	}
	if img := d.Spec.Template.Spec.Containers[0].Image; img != "rainbow.local/"+program+":"+version || d.Labels["app.kubernetes.io/version"] != version {
		t.Errorf("the installed Deployment runs %s, labelled version %q: want the tag and appVersion %s", img, d.Labels["app.kubernetes.io/version"], version)
	}
	logs, err := env.Kubectl(nil, "-n", system, "logs", "deployment/rainbow-controller")
	if err != nil || !strings.Contains(string(logs), `"version":"`+version+`"`) {
		t.Errorf("the controller's log does not start with version %s (%v):\n%s", version, err, logs)
	}
	if err := env.WaitForWebhookIn(context.Background(), tt.Namespace, 2*time.Minute); err != nil {
		t.Fatal(err)
	}

	w := newWorkers(tt)
	w.waitCurrent(4*time.Minute, "v1")
	tt.Eventually(time.Minute, "the version's metadata names the release "+version, func() (bool, string) {
		got, err := versionMetadata(w.twd.WorkerDeploymentName(), w.buildID())
		return err == nil && got[workerdeployment.MetadataControllerVersion] == version, fmt.Sprintf("%v (%v)", got, err)
	})
	w.delete()
	mustHelm(t, "uninstall", "rainbow", "--namespace", system, "--wait", "--timeout", "3m")
	mustHelm(t, "uninstall", "rainbow-crds", "--namespace", system, "--wait", "--timeout", "3m")
}

// checkReleaseSBOM checks the SBOM names the release and the modules the
// manager links, at the versions go.mod requires.
func checkReleaseSBOM(t *testing.T, path, version string) {
	t.Helper()
	var doc struct {
		BOMFormat string `json:"bomFormat"`
		Metadata  struct {
			Component struct{ Version string } `json:"component"`
		} `json:"metadata"`
		Components []struct{ Name, Version string } `json:"components"`
	}
	if err := json.Unmarshal(mustRead(t, path), &doc); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	got := map[string]string{}
	for _, c := range doc.Components {
		got[c.Name] = c.Version
	}
	want := map[string]string{}
	for _, m := range []string{"go.temporal.io/sdk", "k8s.io/client-go", "sigs.k8s.io/controller-runtime"} {
		out, err := exec.Command("go", "list", "-m", "-f", "{{.Version}}", m).Output()
		if err != nil {
			t.Fatal(err)
		}
		want[m] = strings.TrimSpace(string(out))
	}
	sub := map[string]string{}
	for m := range want {
		sub[m] = got[m]
	}
	if doc.BOMFormat != "CycloneDX" || doc.Metadata.Component.Version != version || !maps.Equal(sub, want) || got["stdlib"] == "" {
		t.Errorf("SBOM %s: format %q, version %q, modules %v, stdlib %q: want CycloneDX of %s with %v and the Go version",
			filepath.Base(path), doc.BOMFormat, doc.Metadata.Component.Version, sub, got["stdlib"], version, want)
	}
}

// extractManager unpacks the OCI archive and copies the host platform's
// /manager out of its image to dst.
func extractManager(t *testing.T, archive, dst string) {
	t.Helper()
	dir := t.TempDir()
	untar(t, archive, dir)
	top, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	tm, err := top.IndexManifest()
	if err != nil || len(tm.Manifests) != 1 {
		t.Fatalf("index.json: %v, %+v: want one image index", err, tm)
	}
	idx, err := top.ImageIndex(tm.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	host := hostPlatform
	var platforms []string
	for _, m := range im.Manifests {
		platforms = append(platforms, m.Platform.String())
		if !m.Platform.Equals(host) {
			continue
		}
		img, err := idx.Image(m.Digest)
		if err != nil {
			t.Fatal(err)
		}
		fs := mutate.Extract(img)
		defer fs.Close()
		tr := tar.NewReader(fs)
		for {
			h, err := tr.Next()
			if errors.Is(err, io.EOF) {
				t.Fatalf("the %s image has no /manager", host)
			}
			if err != nil {
				t.Fatal(err)
			}
			if strings.TrimPrefix(h.Name, "/") == "manager" {
				writeFile(t, dst, tr, 0o755)
				break
			}
		}
	}
	if len(platforms) != 1 || platforms[0] != host.String() {
		t.Errorf("the image's platforms are %v, want the one asked for, %s", platforms, host)
	}
}

var hostPlatform = v1.Platform{OS: "linux", Architecture: runtime.GOARCH}

func untar(t *testing.T, archive, dir string) {
	t.Helper()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, filepath.FromSlash(h.Name))
		if h.Typeflag == tar.TypeDir {
			if err := os.MkdirAll(path, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		writeFile(t, path, tr, 0o644)
	}
}

func writeFile(t *testing.T, path string, r io.Reader, mode os.FileMode) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(f, r); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
