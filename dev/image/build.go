package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// Build compiles a main package for images.
type Build struct {
	// Dir is the module's root; Package is relative to it (./cmd/manager).
	Dir, Package string
	// Version and Revision are stamped into main.version and main.revision.
	Version, Revision string
}

// Binary builds the package for platform into dir and returns the binary's
// path. The binary is static (CGO_ENABLED=0), holds no local paths
// (-trimpath), symbol table or DWARF (-s -w) nor VCS stamp (-buildvcs=false:
// Revision says it), and targets each architecture's baseline (GOAMD64=v1,
// GOARM64=v8.0) whatever the environment asks for: the same sources and Go
// version give the same bytes on any machine.
func (b Build) Binary(ctx context.Context, platform v1.Platform, dir string) (string, error) {
	for _, v := range []string{b.Version, b.Revision} {
		if strings.ContainsAny(v, " \t\n'\"") {
			return "", fmt.Errorf("version or revision %q holds a space or quote", v)
		}
	}
	out := filepath.Join(dir, fmt.Sprintf("%s-%s-%s", filepath.Base(b.Package), platform.OS, platform.Architecture))
	ldflags := fmt.Sprintf("-s -w -X main.version=%s -X main.revision=%s", b.Version, b.Revision)
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-buildvcs=false", "-ldflags", ldflags, "-o", out, b.Package)
	cmd.Dir = b.Dir
	cmd.Env = append(os.Environ(),
		"CGO_ENABLED=0", "GOOS="+platform.OS, "GOARCH="+platform.Architecture,
		"GOAMD64=v1", "GOARM64=v8.0")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go build %s for %s/%s: %w", b.Package, platform.OS, platform.Architecture, err)
	}
	return out, nil
}

// Index builds the package for each platform, in order, into binDir (a
// temporary folder when empty) and returns the multi-platform image and the
// binaries' paths, in the same order.
func (b Build) Index(ctx context.Context, platforms []v1.Platform, m Meta, binDir string) (v1.ImageIndex, []string, error) {
	if binDir == "" {
		tmp, err := os.MkdirTemp("", "rainbow-image-")
		if err != nil {
			return nil, nil, err
		}
		defer os.RemoveAll(tmp)
		binDir = tmp
	}
	images := make([]Platform, len(platforms))
	paths := make([]string, len(platforms))
	for i, p := range platforms {
		path, err := b.Binary(ctx, p, binDir)
		if err != nil {
			return nil, nil, err
		}
		paths[i] = path
		binary, err := os.ReadFile(path)
		if err != nil {
			return nil, nil, err
		}
		img, err := Image(binary, p, m)
		if err != nil {
			return nil, nil, fmt.Errorf("image for %s/%s: %w", p.OS, p.Architecture, err)
		}
		images[i] = Platform{Platform: p, Image: img}
	}
	return Index(images, m), paths, nil
}
