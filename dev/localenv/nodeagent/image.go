package nodeagent

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"runtime"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// imageError is an image the agent cannot read; shown as ErrImagePull.
type imageError struct{ msg string }

func (e *imageError) Error() string { return e.msg }

// lookupImage finds image in m by full reference, by repository (without
// tag or digest), then by short name.
func lookupImage(m map[string]string, image string) (string, bool) {
	for _, k := range []string{image, imageRepository(image), imageShortName(image)} {
		if v, ok := m[k]; ok {
			return v, true
		}
	}
	return "", false
}

// imageRepository is a reference without tag or digest.
func imageRepository(image string) string {
	if i := strings.IndexByte(image, '@'); i >= 0 {
		image = image[:i]
	}
	if i := strings.LastIndexByte(image, ':'); i > strings.LastIndexByte(image, '/') {
		image = image[:i]
	}
	return image
}

// imageTag is the tag of a reference ("" without one): what an OCI
// layout's org.opencontainers.image.ref.name holds.
func imageTag(image string) string {
	if i := strings.IndexByte(image, '@'); i >= 0 {
		image = image[:i]
	}
	if i := strings.LastIndexByte(image, '/'); i >= 0 {
		image = image[i+1:]
	}
	_, tag, _ := strings.Cut(image, ":")
	return tag
}

// layoutImage reads the image for this machine's platform from the OCI image
// layout dir: the entry whose ref name is the reference's tag, or the only
// entry; an image index in it is resolved to the linux/GOARCH manifest.
func layoutImage(dir, image string) (v1.Image, error) {
	p, err := layout.FromPath(dir)
	if err != nil {
		return nil, &imageError{fmt.Sprintf("image %s: the OCI image layout %s cannot be read (build it with `make image`): %v", image, dir, err)}
	}
	idx, err := p.ImageIndex()
	if err != nil {
		return nil, &imageError{fmt.Sprintf("image %s: %s: %v", image, dir, err)}
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, &imageError{fmt.Sprintf("image %s: %s: %v", image, dir, err)}
	}
	var desc *v1.Descriptor
	tag := imageTag(image)
	for i, d := range m.Manifests {
		if d.Annotations["org.opencontainers.image.ref.name"] == tag {
			desc = &m.Manifests[i]
		}
	}
	if desc == nil && len(m.Manifests) == 1 {
		desc = &m.Manifests[0]
	}
	if desc == nil {
		return nil, &imageError{fmt.Sprintf("image %s: the OCI image layout %s holds %d images and none is named %q", image, dir, len(m.Manifests), tag)}
	}
	if !desc.MediaType.IsIndex() {
		img, err := idx.Image(desc.Digest)
		if err != nil {
			return nil, &imageError{fmt.Sprintf("image %s: %s: %v", image, dir, err)}
		}
		return img, nil
	}
	child, err := idx.ImageIndex(desc.Digest)
	if err != nil {
		return nil, &imageError{fmt.Sprintf("image %s: %s: %v", image, dir, err)}
	}
	cm, err := child.IndexManifest()
	if err != nil {
		return nil, &imageError{fmt.Sprintf("image %s: %s: %v", image, dir, err)}
	}
	var have []string
	for _, d := range cm.Manifests {
		if d.Platform == nil {
			continue
		}
		if d.Platform.OS == "linux" && d.Platform.Architecture == runtime.GOARCH {
			img, err := child.Image(d.Digest)
			if err != nil {
				return nil, &imageError{fmt.Sprintf("image %s: %s: %v", image, dir, err)}
			}
			return img, nil
		}
		have = append(have, d.Platform.OS+"/"+d.Platform.Architecture)
	}
	return nil, &imageError{fmt.Sprintf("image %s: no linux/%s image in %s (it has %v)", image, runtime.GOARCH, dir, have)}
}

// unpack writes img's file system, its layers applied in order, into the new
// directory dir, with the owners and modes the layers give. Every path is
// resolved inside dir (os.Root), so an entry cannot write outside it,
// whatever symbolic links the image holds. Device nodes and FIFOs are
// skipped: the runtime provides /dev.
func unpack(img v1.Image, dir string) error {
	rc := mutate.Extract(img)
	defer rc.Close()
	return extractTar(rc, dir)
}

// extractTar writes the file system in the tar stream r into the new
// directory dir; see unpack.
func extractTar(r io.Reader, dir string) error {
	if err := os.Mkdir(dir, 0o755); err != nil {
		return err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading the image's layers: %w", err)
		}
		name := path.Clean(strings.TrimPrefix(h.Name, "/"))
		if name == "." {
			continue
		}
		if err := root.MkdirAll(path.Dir(name), 0o755); err != nil {
			return err
		}
		mode := h.FileInfo().Mode()
		switch h.Typeflag {
		case tar.TypeDir:
			if err := root.Mkdir(name, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
				return err
			}
		case tar.TypeReg:
			f, err := root.OpenFile(name, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
			if err != nil {
				return err
			}
			_, err = io.Copy(f, tr)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
		case tar.TypeSymlink:
			if err := root.Symlink(h.Linkname, name); err != nil {
				return err
			}
		case tar.TypeLink:
			if err := root.Link(path.Clean(strings.TrimPrefix(h.Linkname, "/")), name); err != nil {
				return err
			}
			continue
		default:
			continue
		}
		if err := root.Lchown(name, h.Uid, h.Gid); err != nil {
			return err
		}
		if h.Typeflag != tar.TypeSymlink {
			// After the owner: chown clears the setuid and setgid bits.
			if err := root.Chmod(name, mode&(os.ModePerm|os.ModeSetuid|os.ModeSetgid|os.ModeSticky)); err != nil {
				return err
			}
		}
	}
}
