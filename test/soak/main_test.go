package soak

import (
	"flag"
	"testing"
	"time"

	"github.com/rainbow-deploy/rainbow/test/harness"
)

var env *harness.Env

var (
	seedFlag = flag.Int64("soak.seed", 0, "seed of every random choice of the soak; 0 picks one from the clock (printed at the start)")
	// The default is the smoke that `go test ./...` runs; `make soak` runs
	// the full soak with SOAK_DURATION.
	durationFlag = flag.Duration("soak.duration", 2*time.Minute, "how long rollouts, restarts and new workflows go on, before the soak drains and checks")
	outFlag      = flag.String("soak.out", "", "directory of the JSON result; default <repository>/.cache/soak")
	managerFlag  = flag.String("soak.manager", "", "manager binary to soak; default .cache/bin/manager (make bins)")
)

// The controller runs as its own process (the manager binary), so that it
// can be killed and its memory read from /proc.
func TestMain(m *testing.M) { harness.Main(m, &env) }
