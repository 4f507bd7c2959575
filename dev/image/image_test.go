package main

import (
	"archive/tar"
	"bytes"
	"debug/buildinfo"
	"debug/elf"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

var testMeta = Meta{
	Title: "rainbow-manager", Description: "test", Source: "https://example.com/rainbow",
	Version: "v0.0.0-imagetest", Revision: "0123456789abcdef0123456789abcdef01234567",
	Created: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
}

// TestManagerImage builds the manager's image for the host's architecture
// twice, the way `make image` does, and checks what the layout holds: the
// same digest both times, one manifest for the platform, the config (user,
// entrypoint, labels, no shell) and a static binary that runs.
func TestManagerImage(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the image's binary runs on Linux only")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	host := v1.Platform{OS: "linux", Architecture: runtime.GOARCH}
	b := Build{Dir: root, Package: "./cmd/manager", Version: testMeta.Version, Revision: testMeta.Revision}
	var binaries []string
	build := func(dir string) v1.ImageIndex {
		t.Helper()
		start := time.Now()
		idx, bins, err := b.Index(t.Context(), []v1.Platform{host}, testMeta, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		binaries = bins
		if err := WriteLayout(dir, idx, testMeta.Version); err != nil {
			t.Fatal(err)
		}
		t.Logf("built and wrote %s in %s", dir, time.Since(start).Round(time.Millisecond))
		idx, err = layout.ImageIndexFromPath(dir)
		if err != nil {
			t.Fatal(err)
		}
		return onlyEntry(t, idx, testMeta.Version)
	}
	tmp := t.TempDir()
	idx := build(filepath.Join(tmp, "first"))
	again := build(filepath.Join(tmp, "second"))
	if d1, d2 := digest(t, idx), digest(t, again); d1 != d2 {
		t.Errorf("two builds of the same sources gave two digests: %s and %s", d1, d2)
	}

	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != 1 || im.Manifests[0].Platform == nil || !im.Manifests[0].Platform.Equals(host) {
		t.Fatalf("index manifests = %+v, want one for %v", im.Manifests, host)
	}
	img, err := idx.Image(im.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	checkConfig(t, img, host)

	layer := layerFiles(t, img)
	binary := layer[Entrypoint[1:]]
	checkStatic(t, binary)
	out := runHelp(t, binary)
	for _, flag := range []string{"-leader-elect", "-metrics-bind-address", "-health-probe-bind-address", "-identity", "-max-versions", "-kubeconfig", "-webhook-port", "-zap-log-level"} {
		if !strings.Contains(out, flag) {
			t.Errorf("/manager --help does not list %s:\n%s", flag, out)
		}
	}
	if len(binaries) != 1 {
		t.Fatalf("Index returned the binaries %v, want one", binaries)
	}
	checkSBOM(t, binaries[0], host)
	checkTar(t, filepath.Join(tmp, "first"))
}

// checkSBOM makes the SBOM of a binary and checks it against what
// `go version -m` reads from the binary: each module, at its version (its
// replacement's where replaced), and the Go version.
func checkSBOM(t *testing.T, binary string, platform v1.Platform) {
	t.Helper()
	data, err := SBOM(binary, platform, testMeta.Version, testMeta.Revision, testMeta.Created)
	if err != nil {
		t.Fatal(err)
	}
	var doc bom
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.BOMFormat != "CycloneDX" || doc.SpecVersion != "1.5" || !strings.HasPrefix(doc.SerialNumber, "urn:uuid:") ||
		doc.Metadata.Component.Version != testMeta.Version || doc.Metadata.Timestamp != "2026-01-02T03:04:05Z" ||
		!strings.HasPrefix(doc.Metadata.Component.PURL, "pkg:golang/github.com/rainbow-deploy/rainbow@"+testMeta.Version+"?") {
		t.Errorf("SBOM header: %s", data[:min(len(data), 1200)])
	}
	got := map[string]string{}
	for _, c := range doc.Components {
		got[c.Name] = c.Version
	}
	out, err := exec.Command("go", "version", "-m", binary).Output()
	if err != nil {
		t.Fatalf("go version -m: %v", err)
	}
	want := map[string]string{}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) >= 2 && strings.HasSuffix(f[0], ":"): // "<binary>: go1.26.x"
			want["stdlib"] = f[1]
		case len(f) >= 3 && f[0] == "dep":
			want[f[1]] = f[2]
		case len(f) >= 3 && f[0] == "=>": // the dep above is replaced
			want[f[1]] = f[2]
		}
	}
	if len(want) < 50 || !cmp.Equal(pruneReplaced(want, got), got) {
		t.Errorf("SBOM components differ from go version -m (-go +sbom):\n%s", cmp.Diff(pruneReplaced(want, got), got))
	}
}

// pruneReplaced drops the modules go version -m lists as replaced (the
// SBOM names their replacement instead).
func pruneReplaced(want, got map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range want {
		if _, ok := got[k]; ok {
			out[k] = v
		}
	}
	return out
}

// checkTar archives the layout twice: the same bytes, and the layout's
// files in it.
func checkTar(t *testing.T, dir string) {
	t.Helper()
	a, b := filepath.Join(t.TempDir(), "a.tar"), filepath.Join(t.TempDir(), "b.tar")
	for _, f := range []string{a, b} {
		if err := TarLayout(dir, f, testMeta.Created); err != nil {
			t.Fatal(err)
		}
	}
	da, _ := os.ReadFile(a)
	db, _ := os.ReadFile(b)
	if !bytes.Equal(da, db) {
		t.Error("two archives of the same layout differ")
	}
	names := map[string]bool{}
	tr := tar.NewReader(bytes.NewReader(da))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names[h.Name] = true
		if !h.ModTime.Equal(testMeta.Created) || h.Uid != 0 {
			t.Errorf("%s: time %s, uid %d; want SOURCE_DATE_EPOCH and root", h.Name, h.ModTime, h.Uid)
		}
	}
	for _, n := range []string{"oci-layout", "index.json", "blobs/sha256/"} {
		if !names[n] {
			t.Errorf("the archive has no %s: %v", n, names)
		}
	}
}

// checkConfig checks the config of one platform's image.
func checkConfig(t *testing.T, img v1.Image, platform v1.Platform) {
	t.Helper()
	mt, err := img.MediaType()
	if err != nil || mt != types.OCIManifestSchema1 {
		t.Errorf("manifest media type = %q, %v; want %q", mt, err, types.OCIManifestSchema1)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.OS != platform.OS || cf.Architecture != platform.Architecture {
		t.Errorf("config platform = %s/%s, want %s/%s", cf.OS, cf.Architecture, platform.OS, platform.Architecture)
	}
	if !cf.Created.Time.Equal(testMeta.Created) {
		t.Errorf("created = %s, want SOURCE_DATE_EPOCH's %s", cf.Created.Time, testMeta.Created)
	}
	want := v1.Config{
		User:       "65532:65532",
		Entrypoint: []string{"/manager"},
		WorkingDir: "/",
		Labels: map[string]string{
			"org.opencontainers.image.title":       testMeta.Title,
			"org.opencontainers.image.description": testMeta.Description,
			"org.opencontainers.image.source":      testMeta.Source,
			"org.opencontainers.image.version":     testMeta.Version,
			"org.opencontainers.image.revision":    testMeta.Revision,
			"org.opencontainers.image.created":     "2026-01-02T03:04:05Z",
		},
	}
	if diff := cmp.Diff(want, cf.Config); diff != "" {
		t.Errorf("config (-want +got):\n%s", diff)
	}
	if len(cf.RootFS.DiffIDs) != 1 || len(cf.History) != 1 {
		t.Errorf("config has %d layers and %d history entries, want one of each", len(cf.RootFS.DiffIDs), len(cf.History))
	}
}

// layerFiles reads the image's only layer and checks its entries: exactly
// the binary, the user database, the nonroot home and /tmp, in name order,
// with fixed times. It returns each file's content by name.
func layerFiles(t *testing.T, img v1.Image) map[string][]byte {
	t.Helper()
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers = %d, %v; want one", len(layers), err)
	}
	mt, err := layers[0].MediaType()
	if err != nil || mt != types.OCILayer {
		t.Errorf("layer media type = %q, %v; want %q", mt, err, types.OCILayer)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	type header struct {
		Name     string
		Mode     int64
		UID, GID int
	}
	var got []header
	content := map[string][]byte{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if !h.ModTime.Equal(testMeta.Created) {
			t.Errorf("%s: mtime %s, want %s", h.Name, h.ModTime, testMeta.Created)
		}
		got = append(got, header{h.Name, h.Mode, h.Uid, h.Gid})
		if content[h.Name], err = io.ReadAll(tr); err != nil {
			t.Fatal(err)
		}
	}
	want := []header{
		{"etc/", 0o755, 0, 0},
		{"etc/group", 0o644, 0, 0},
		{"etc/passwd", 0o644, 0, 0},
		{"home/", 0o755, 0, 0},
		{"home/nonroot/", 0o700, 65532, 65532},
		{"manager", 0o755, 0, 0},
		{"tmp/", 0o1777, 0, 0},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("layer entries (-want +got):\n%s", diff)
	}
	if p := string(content["etc/passwd"]); !strings.Contains(p, "\nnonroot:x:65532:65532:") {
		t.Errorf("/etc/passwd names no nonroot user 65532:\n%s", p)
	}
	return content
}

// checkStatic checks that the binary needs no loader or shared library, and
// was built the way dev/image says.
func checkStatic(t *testing.T, binary []byte) {
	t.Helper()
	f, err := elf.NewFile(bytes.NewReader(binary))
	if err != nil {
		t.Fatalf("/manager is no ELF file: %v", err)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Errorf("/manager has a %s program header: it is not static", p.Type)
		}
	}
	if f.Section(".symtab") != nil {
		t.Error("/manager has a symbol table: built without -s")
	}
	info, err := buildinfo.Read(bytes.NewReader(binary))
	if err != nil {
		t.Fatal(err)
	}
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	for k, v := range map[string]string{"CGO_ENABLED": "0", "-trimpath": "true"} {
		if settings[k] != v {
			t.Errorf("build setting %s = %q, want %q", k, settings[k], v)
		}
	}
	// -trimpath leaves -ldflags out of the build info: look for the values.
	for _, v := range []string{testMeta.Version, testMeta.Revision} {
		if !bytes.Contains(binary, []byte(v)) {
			t.Errorf("/manager does not hold %q: -X main.version or main.revision was not stamped", v)
		}
	}
	roots := false
	for _, d := range info.Deps {
		roots = roots || d.Path == "golang.org/x/crypto/x509roots/fallback"
	}
	if !roots {
		t.Error("/manager does not link golang.org/x/crypto/x509roots/fallback: TLS to Temporal with system roots would fail in the image, which has no CA bundle")
	}
}

// runHelp runs the binary on the host with --help and returns what it
// printed; it must exit 0.
func runHelp(t *testing.T, binary []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "manager")
	if err := os.WriteFile(path, binary, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(path, "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("/manager --help: %v\n%s", err, out)
	}
	return string(out)
}

// TestIndexIsMultiArch assembles an image for two platforms from stand-in
// binaries, writes the layout and reads it back: one entry named by the
// version, pointing to an OCI image index with a manifest per platform,
// each carrying its own binary and the same config otherwise.
func TestIndexIsMultiArch(t *testing.T) {
	platforms := []v1.Platform{{OS: "linux", Architecture: "amd64"}, {OS: "linux", Architecture: "arm64"}}
	var images []Platform
	for _, p := range platforms {
		img, err := Image([]byte("binary for "+p.Architecture), p, testMeta)
		if err != nil {
			t.Fatal(err)
		}
		images = append(images, Platform{Platform: p, Image: img})
	}
	dir := filepath.Join(t.TempDir(), "oci")
	if err := WriteLayout(dir, Index(images, testMeta), testMeta.Version); err != nil {
		t.Fatal(err)
	}
	// Writing again replaces the layout rather than adding to it.
	if err := WriteLayout(dir, Index(images, testMeta), testMeta.Version); err != nil {
		t.Fatal(err)
	}
	top, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	idx := onlyEntry(t, top, testMeta.Version)
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if im.MediaType != types.OCIImageIndex {
		t.Errorf("index media type = %q, want %q", im.MediaType, types.OCIImageIndex)
	}
	if im.Annotations["org.opencontainers.image.source"] != testMeta.Source || im.Annotations["org.opencontainers.image.revision"] != testMeta.Revision {
		t.Errorf("index annotations = %v, want the source and revision", im.Annotations)
	}
	if len(im.Manifests) != len(platforms) {
		t.Fatalf("index has %d manifests, want %d", len(im.Manifests), len(platforms))
	}
	for i, d := range im.Manifests {
		p := platforms[i]
		if d.Platform == nil || !d.Platform.Equals(p) {
			t.Errorf("manifest %d is for %v, want %v", i, d.Platform, p)
		}
		if d.MediaType != types.OCIManifestSchema1 || d.ArtifactType != "" {
			t.Errorf("manifest %d: media type %q, artifact type %q; want an image manifest, no artifact", i, d.MediaType, d.ArtifactType)
		}
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		checkConfig(t, img, p)
		if got := string(layerFiles(t, img)["manager"]); got != "binary for "+p.Architecture {
			t.Errorf("%s image holds /manager %q", p.Architecture, got)
		}
	}
	blobs, err := os.ReadDir(filepath.Join(dir, "blobs", "sha256"))
	if err != nil {
		t.Fatal(err)
	}
	// The index, and per platform a manifest, a config and a layer.
	if len(blobs) != 1+3*len(platforms) {
		t.Errorf("layout holds %d blobs, want %d", len(blobs), 1+3*len(platforms))
	}
}

// onlyEntry returns the image index that a layout's index.json names as
// its only entry.
func onlyEntry(t *testing.T, top v1.ImageIndex, refName string) v1.ImageIndex {
	t.Helper()
	m, err := top.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Manifests) != 1 {
		t.Fatalf("index.json has %d entries, want 1", len(m.Manifests))
	}
	d := m.Manifests[0]
	if d.MediaType != types.OCIImageIndex || d.Annotations["org.opencontainers.image.ref.name"] != refName {
		t.Errorf("index.json entry = %s %v, want an image index named %q", d.MediaType, d.Annotations, refName)
	}
	idx, err := top.ImageIndex(d.Digest)
	if err != nil {
		t.Fatal(err)
	}
	return idx
}

func digest(t *testing.T, idx v1.ImageIndex) v1.Hash {
	t.Helper()
	d, err := idx.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d
}
