package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The image runs the binary as this user and group, distroless' "nonroot".
const nonroot = 65532

// Entrypoint is where the binary lies in the image, and what it runs.
const Entrypoint = "/manager"

// Keys of the OCI annotations the image sets as labels, and of the name of
// the image's entry in the layout.
const (
	keyTitle       = "org.opencontainers.image.title"
	keyDescription = "org.opencontainers.image.description"
	keySource      = "org.opencontainers.image.source"
	keyVersion     = "org.opencontainers.image.version"
	keyRevision    = "org.opencontainers.image.revision"
	keyCreated     = "org.opencontainers.image.created"
	keyRefName     = "org.opencontainers.image.ref.name"
)

// Meta is what the image says about itself.
type Meta struct {
	Title, Description, Source string
	Version, Revision          string
	// Created stamps the config, the history and every file in the layer, so
	// that the same inputs give the same digest (SOURCE_DATE_EPOCH).
	Created time.Time
}

func (m Meta) labels() map[string]string {
	l := map[string]string{
		keyTitle:       m.Title,
		keyDescription: m.Description,
		keySource:      m.Source,
		keyVersion:     m.Version,
		keyRevision:    m.Revision,
		keyCreated:     m.Created.UTC().Format(time.RFC3339),
	}
	for k, v := range l {
		if v == "" {
			delete(l, k)
		}
	}
	return l
}

// entry is one file or directory of the layer.
type entry struct {
	name     string // without a leading slash; directories end in a slash
	mode     int64
	uid, gid int
	data     []byte
}

// files is everything in the image besides the binary: a user database
// that names the nonroot user, its home and a /tmp. No shell, no libc, no
// CA bundle: the binary is static and embeds its fallback roots.
func files() []entry {
	root := func(name string, mode int64, data string) entry {
		return entry{name: name, mode: mode, data: []byte(data)}
	}
	id := strconv.Itoa(nonroot)
	return []entry{
		root("etc/", 0o755, ""),
		root("etc/passwd", 0o644, "root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:"+id+":"+id+":nonroot:/home/nonroot:/sbin/nologin\n"),
		root("etc/group", 0o644, "root:x:0:\nnonroot:x:"+id+":\n"),
		root("home/", 0o755, ""),
		{name: "home/nonroot/", mode: 0o700, uid: nonroot, gid: nonroot},
		root("tmp/", 0o1777, ""),
	}
}

// Layer is the image's only layer, gzipped: files() and the binary at
// Entrypoint, in name order, owned by root, stamped with mtime.
func Layer(binary []byte, mtime time.Time) (v1.Layer, error) {
	entries := append(files(), entry{name: Entrypoint[1:], mode: 0o755, data: binary})
	sort.Slice(entries, func(i, j int) bool { return entries[i].name < entries[j].name })

	var raw bytes.Buffer
	tw := tar.NewWriter(&raw)
	for _, e := range entries {
		h := &tar.Header{
			Name:     e.name,
			Mode:     e.mode,
			Uid:      e.uid,
			Gid:      e.gid,
			ModTime:  mtime.UTC().Truncate(time.Second),
			Typeflag: tar.TypeReg,
			Size:     int64(len(e.data)),
			Format:   tar.FormatPAX,
		}
		if e.name[len(e.name)-1] == '/' {
			h.Typeflag, h.Size = tar.TypeDir, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}

	// Compressed once, here: Go's gzip writes the same bytes for the same
	// input (no name, no time in the header). The default level: the best
	// one saves 0.5% of the manager's layer and takes four times as long.
	var gz bytes.Buffer
	zw, err := gzip.NewWriterLevel(&gz, gzip.DefaultCompression)
	if err != nil {
		return nil, err
	}
	if _, err := zw.Write(raw.Bytes()); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	blob := gz.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(blob)), nil
	}, tarball.WithMediaType(types.OCILayer))
}

// Image is the single-platform image around a static binary built for
// platform: no base, one layer, run as nonroot.
func Image(binary []byte, platform v1.Platform, m Meta) (v1.Image, error) {
	layer, err := Layer(binary, m.Created)
	if err != nil {
		return nil, err
	}
	created := v1.Time{Time: m.Created.UTC()}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img, mutate.Addendum{
		Layer: layer,
		History: v1.History{
			Created:   created,
			CreatedBy: "dev/image: " + Entrypoint + " (static), /etc/passwd, /etc/group, /home/nonroot, /tmp",
		},
	})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Variant = platform.OS, platform.Architecture, platform.Variant
	cf.Created = created
	cf.Config = v1.Config{
		User:       fmt.Sprintf("%d:%d", nonroot, nonroot),
		Entrypoint: []string{Entrypoint},
		WorkingDir: "/",
		Labels:     m.labels(),
	}
	return mutate.ConfigFile(img, cf)
}

// Platform is one image of an index.
type Platform struct {
	Platform v1.Platform
	Image    v1.Image
}

// Index is the multi-platform image: an OCI image index of one manifest per
// platform, in the order given, annotated like the images' labels.
func Index(images []Platform, m Meta) v1.ImageIndex {
	adds := make([]mutate.IndexAddendum, len(images))
	for i, p := range images {
		platform := p.Platform
		adds[i] = mutate.IndexAddendum{Add: plainImage{p.Image}, Descriptor: v1.Descriptor{Platform: &platform}}
	}
	idx := mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex), adds...)
	return mutate.Annotations(idx, m.labels()).(v1.ImageIndex)
}

// plainImage is described in an index by media type, digest and size only:
// go-containerregistry would also write the config's media type as the
// descriptor's artifactType, a field OCI 1.1 added for artifacts.
type plainImage struct{ v1.Image }

func (i plainImage) Descriptor() (*v1.Descriptor, error) {
	mt, err := i.MediaType()
	if err != nil {
		return nil, err
	}
	size, err := i.Size()
	if err != nil {
		return nil, err
	}
	digest, err := i.Digest()
	if err != nil {
		return nil, err
	}
	return &v1.Descriptor{MediaType: mt, Size: size, Digest: digest}, nil
}

// WriteLayout replaces dir with an OCI image layout whose index.json names
// idx as refName (org.opencontainers.image.ref.name, the tag that skopeo's
// oci:dir:tag reads). It writes a sibling folder first and renames it, so
// dir never holds a half-written layout or blobs of an earlier image.
func WriteLayout(dir string, idx v1.ImageIndex, refName string) error {
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), filepath.Base(dir)+".tmp-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	p, err := layout.Write(tmp, empty.Index)
	if err != nil {
		return err
	}
	if err := p.AppendIndex(idx, layout.WithAnnotations(map[string]string{keyRefName: refName})); err != nil {
		return err
	}
	// MkdirTemp makes 0700; the layout is no secret.
	if err := os.Chmod(tmp, 0o755); err != nil {
		return err
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	return os.Rename(tmp, dir)
}
