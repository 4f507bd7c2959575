// Command image builds the manager's container image without a container
// runtime: cmd/manager compiled statically for each platform, one layer on
// no base, run as the nonroot user 65532, written as an OCI image layout
// holding a multi-platform image index. The same sources, Go version,
// flags and SOURCE_DATE_EPOCH give the same digest.
//
// Run it with `make image`; docs/install.md says how to push the result.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

func main() {
	var (
		b         = Build{Dir: ".", Package: "./cmd/manager"}
		m         = Meta{Title: "rainbow-manager", Description: "Rainbow: a Kubernetes controller for Temporal worker versioning"}
		out       string
		platforms string
		tarFile   string
		sbomDir   string
	)
	flag.StringVar(&out, "out", ".cache/image/oci", "the OCI image layout to write (replaced)")
	flag.StringVar(&platforms, "platforms", "linux/amd64,linux/arm64", "comma-separated os/arch to build")
	flag.StringVar(&b.Version, "version", "devel", "version: main.version, the label and the layout's ref name")
	flag.StringVar(&b.Revision, "revision", "", "VCS revision: main.revision and the label")
	flag.StringVar(&m.Source, "source", "https://github.com/rainbow-deploy/rainbow", "source repository label")
	flag.StringVar(&tarFile, "tar", "", "also write the layout as a tar archive (an oci-archive) to this file")
	flag.StringVar(&sbomDir, "sbom", "", "also write a CycloneDX SBOM of each platform's binary, from its Go build info, into this folder")
	flag.Parse()
	m.Version, m.Revision = b.Version, b.Revision

	var err error
	if m.Created, err = sourceDate(os.Getenv("SOURCE_DATE_EPOCH")); err != nil {
		fail(err)
	}
	plats, err := parsePlatforms(platforms)
	if err != nil {
		fail(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	start := time.Now()
	var binDir string
	if sbomDir != "" {
		// The SBOMs read the binaries once the image is built.
		if binDir, err = os.MkdirTemp("", "rainbow-image-"); err != nil {
			fail(err)
		}
		defer os.RemoveAll(binDir)
	}
	idx, binaries, err := b.Index(ctx, plats, m, binDir)
	if err != nil {
		fail(err)
	}
	if err := WriteLayout(out, idx, b.Version); err != nil {
		fail(err)
	}
	if tarFile != "" {
		if err := TarLayout(out, tarFile, m.Created); err != nil {
			fail(err)
		}
	}
	if sbomDir != "" {
		if err := writeSBOMs(sbomDir, m.Title, binaries, plats, b.Version, b.Revision, m.Created); err != nil {
			fail(err)
		}
	}
	if err := report(os.Stdout, out, idx, time.Since(start)); err != nil {
		fail(err)
	}
}

// sourceDate reads SOURCE_DATE_EPOCH (seconds); unset means 1970-01-01.
func sourceDate(s string) (time.Time, error) {
	if s == "" {
		return time.Unix(0, 0).UTC(), nil
	}
	sec, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH=%q: %w", s, err)
	}
	return time.Unix(sec, 0).UTC(), nil
}

func parsePlatforms(s string) ([]v1.Platform, error) {
	var ps []v1.Platform
	for _, f := range strings.Split(s, ",") {
		osName, arch, ok := strings.Cut(strings.TrimSpace(f), "/")
		if !ok || osName == "" || arch == "" || strings.Contains(arch, "/") {
			return nil, fmt.Errorf("platform %q: want os/arch", f)
		}
		ps = append(ps, v1.Platform{OS: osName, Architecture: arch})
	}
	return ps, nil
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "image:", err)
	os.Exit(1)
}
