package main

import (
	"fmt"
	"io"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// report prints what was written: the index digest, and each platform's
// manifest digest with its compressed (pushed) and uncompressed sizes.
func report(w io.Writer, dir string, idx v1.ImageIndex, took time.Duration) error {
	digest, err := idx.Digest()
	if err != nil {
		return err
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "wrote %s in %s\nindex %s\n", dir, took.Round(time.Second), digest)
	for _, d := range im.Manifests {
		img, err := idx.Image(d.Digest)
		if err != nil {
			return err
		}
		compressed, uncompressed, err := sizes(img)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "  %s/%s %s  %.1f MiB compressed, %.1f MiB uncompressed\n",
			d.Platform.OS, d.Platform.Architecture, d.Digest, mib(compressed), mib(uncompressed))
	}
	return nil
}

// sizes are the image's layers, compressed and not.
func sizes(img v1.Image) (compressed, uncompressed int64, err error) {
	layers, err := img.Layers()
	if err != nil {
		return 0, 0, err
	}
	for _, l := range layers {
		size, err := l.Size()
		if err != nil {
			return 0, 0, err
		}
		compressed += size
		rc, err := l.Uncompressed()
		if err != nil {
			return 0, 0, err
		}
		n, err := io.Copy(io.Discard, rc)
		rc.Close()
		if err != nil {
			return 0, 0, err
		}
		uncompressed += n
	}
	return compressed, uncompressed, nil
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }
