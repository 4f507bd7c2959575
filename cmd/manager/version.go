package main

import (
	"fmt"
	"io"
)

// version and revision name the build: --version prints them and the
// manager's first log line carries them. `make bins`, `make image` and
// `make release` set them with -ldflags "-X main.version=... -X main.revision=..."
// (VERSION and `git rev-parse HEAD`).
var (
	version  = "devel"
	revision = "unknown"
)

// printVersion is the output of --version.
func printVersion(w io.Writer) {
	fmt.Fprintf(w, "rainbow-manager %s (revision %s)\n", version, revision)
}
