package temporal

import (
	"context"
	"flag"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/rainbow-deploy/rainbow/dev/demoworker"
	"github.com/rainbow-deploy/rainbow/internal/workerenv"
	"github.com/rainbow-deploy/rainbow/test/harness"
)

var env *harness.Env

// TestMain starts the local environment (a real Temporal server) for the
// integration tests. With -short only the unit tests run, without it.
func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		os.Exit(m.Run())
	}
	harness.Main(m, &env)
}

func needEnv(t *testing.T) *harness.T {
	t.Helper()
	if env == nil {
		t.Skip("integration test: needs the local environment (run without -short)")
	}
	t.Parallel()
	return env.NewTest(t)
}

// envParams are the connection parameters of the local Temporal server.
func envParams() ConnectionParams {
	return ConnectionParams{HostPort: env.Info.TemporalAddress, Namespace: env.Info.TemporalNamespace}
}

// newAPI dials through a pool, as the controller does.
func newAPI(t *harness.T, identity string) *API {
	t.Helper()
	pool := NewPool(identity, nil)
	t.Cleanup(pool.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := pool.Get(ctx, t.Name(), envParams())
	if err != nil {
		t.Fatalf("pool.Get: %v", err)
	}
	return NewAPI(c, env.Info.TemporalNamespace, identity)
}

// startWorker runs a real versioned demo worker in-process. The returned
// stop is idempotent and also runs at cleanup.
func startWorker(t *harness.T, deployment, build, taskQueue string) (stop func()) {
	t.Helper()
	w := demoworker.New(env.Temporal, workerenv.Config{
		Address:        env.Info.TemporalAddress,
		Namespace:      env.Info.TemporalNamespace,
		DeploymentName: deployment,
		BuildID:        build,
	}, taskQueue)
	if err := w.Start(); err != nil {
		t.Fatalf("start worker %s: %v", build, err)
	}
	var once sync.Once
	stop = func() { once.Do(w.Stop) }
	t.Cleanup(stop)
	return stop
}
