package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"go.temporal.io/sdk/client"
	"google.golang.org/grpc"

	"github.com/rainbow-deploy/rainbow/dev/localenv"
	"github.com/rainbow-deploy/rainbow/dev/localenv/process"
	"github.com/rainbow-deploy/rainbow/test/harness"
)

// benchEnv is the local environment, the controller running as its own
// process, and the benchmark's own Temporal client.
type benchEnv struct {
	*harness.Env
	dir     string
	devenv  *process.Process
	manager *process.Process
	// metricsURL is the controller's Prometheus endpoint.
	metricsURL string
	// temporal is the benchmark's client; its calls are counted in own so
	// they can be taken out of the server's counters.
	temporal client.Client
	own      *callCounter
}

// startEnv starts devenv with dynamic config fit for n worker deployments,
// attaches the test harness to it (clients, CRDs) and starts the manager
// binary against it.
func startEnv(root, dir string, n int, manager string, managerArgs []string, longPolls bool) (*benchEnv, error) {
	bin := filepath.Join(root, ".cache", "bin")
	if manager == "" {
		manager = filepath.Join(bin, "manager")
	}
	for _, b := range []string{filepath.Join(bin, "devenv"), filepath.Join(bin, "demo-worker"), manager} {
		if _, err := os.Stat(b); err != nil {
			return nil, fmt.Errorf("%s is not built: run `make bench`", b)
		}
	}
	envDir := filepath.Join(dir, "env")
	if err := os.RemoveAll(envDir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(envDir, 0o755); err != nil {
		return nil, err
	}
	args := []string{
		"--dir=" + envDir,
		"--kube-bin-dir=" + filepath.Join(root, ".cache", "kube"),
		"--program-dir=" + bin,
		"--apiserver-port=0", "--temporal-port=0", "--temporal-ui-port=-1",
		// The defaults allow 100 worker deployments per namespace and 1200
		// concurrent long polls per frontend; each demo worker holds about
		// four polls, twice as many while a version replaces another.
		fmt.Sprintf("--temporal-dynamic-config=matching.maxDeployments=%d", n+50),
		fmt.Sprintf("--temporal-dynamic-config=frontend.namespaceCount=%d", max(1200, 12*(n+10))),
	}
	if longPolls {
		// Temporal's default long poll. Its default poller history is 5
		// minutes; 70 s outlasts a poll and keeps retirements short.
		args = append(args,
			"--temporal-dynamic-config=matching.longPollExpirationInterval=1m",
			"--temporal-dynamic-config=matching.PollerHistoryTTL=70s")
	} else {
		// The dev server forgets a poller 10 s after its last poll; idle
		// long polls must return sooner than that, or a waiting worker
		// looks absent and the controller holds its rollout.
		args = append(args, "--temporal-dynamic-config=matching.longPollExpirationInterval=5s")
	}
	e := &benchEnv{dir: dir, own: newCallCounter()}
	var err error
	e.devenv, err = process.Start("devenv", filepath.Join(bin, "devenv"), args, os.Environ(), filepath.Join(dir, "devenv.log"))
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(3 * time.Minute)
	for {
		if err := e.devenv.ExitError(); err != nil {
			return nil, err
		}
		if _, err := localenv.ReadInfo(envDir); err == nil {
			break
		}
		if time.Now().After(deadline) {
			e.stop()
			return nil, fmt.Errorf("devenv was not ready after 3m; its log:\n%s", process.Tail(e.devenv.LogPath, 40))
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The harness attaches to a running environment named by RAINBOW_ENV_DIR.
	os.Setenv("RAINBOW_ENV_DIR", envDir)
	if e.Env, err = harness.Start(); err != nil {
		e.stop()
		return nil, err
	}
	e.temporal, err = client.Dial(client.Options{
		HostPort:  e.Info.TemporalAddress,
		Namespace: e.Info.TemporalNamespace,
		Identity:  "rainbow-bench",
		Logger:    quietLog{},
		ConnectionOptions: client.ConnectionOptions{
			DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(e.own.intercept)},
		},
	})
	if err != nil {
		e.stop()
		return nil, err
	}
	if err := e.startManager(manager, managerArgs); err != nil {
		e.stop()
		return nil, err
	}
	return e, nil
}

// startManager runs cmd/manager as a separate process, so that its RSS and
// CPU time are its own, with the environment's admin kubeconfig.
func (e *benchEnv) startManager(path string, extra []string) error {
	var addrs [2]string
	for i := range addrs {
		port, err := process.FreePort("127.0.0.1")
		if err != nil {
			return err
		}
		addrs[i] = fmt.Sprintf("127.0.0.1:%d", port)
	}
	metricsAddr, probeAddr := addrs[0], addrs[1]
	args := []string{
		"--kubeconfig=" + e.Info.Kubeconfig,
		"--metrics-bind-address=" + metricsAddr,
		"--health-probe-bind-address=" + probeAddr,
		"--webhook-port=0", // no TemporalWorkerOwnedResources here
	}
	args = append(args, extra...)
	var err error
	e.manager, err = process.Start("manager", path, args, os.Environ(), filepath.Join(e.dir, "manager.log"))
	if err != nil {
		return err
	}
	e.metricsURL = "http://" + metricsAddr + "/metrics"
	deadline := time.Now().Add(time.Minute)
	for {
		if err := e.manager.ExitError(); err != nil {
			return err
		}
		if resp, err := http.Get("http://" + probeAddr + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("manager not ready after a minute; log %s:\n%s", e.manager.LogPath, process.Tail(e.manager.LogPath, 20))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// managerAlive fails when the controller process has exited.
func (e *benchEnv) managerAlive() error { return e.manager.ExitError() }

func (e *benchEnv) stop() {
	if e.temporal != nil {
		e.temporal.Close()
	}
	if e.Env != nil {
		e.Env.Stop() // closes clients; the devenv is ours to stop
	}
	if e.manager != nil {
		e.manager.Stop(30 * time.Second)
	}
	if e.devenv != nil {
		e.devenv.Stop(60 * time.Second)
	}
}

// callCounter counts the benchmark's own Temporal calls by method.
type callCounter struct {
	mu sync.Mutex
	n  map[string]float64
}

func newCallCounter() *callCounter { return &callCounter{n: map[string]float64{}} }

func (c *callCounter) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	c.mu.Lock()
	c.n[filepath.Base(method)]++
	c.mu.Unlock()
	return invoker(ctx, method, req, reply, cc, opts...)
}

func (c *callCounter) snapshot() map[string]float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]float64, len(c.n))
	for k, v := range c.n {
		out[k] = v
	}
	return out
}

// quietLog drops the SDK's logs.
type quietLog struct{}

func (quietLog) Debug(string, ...any) {}
func (quietLog) Info(string, ...any)  {}
func (quietLog) Warn(string, ...any)  {}
func (quietLog) Error(string, ...any) {}
