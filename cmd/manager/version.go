package main

// version and revision name the build in the manager's first log line. The
// image build (dev/image, `make image`) sets them with
// -ldflags "-X main.version=... -X main.revision=...".
var (
	version  = "devel"
	revision = "unknown"
)
