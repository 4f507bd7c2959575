// Command demo-worker is a Temporal worker that polls with worker versioning
// on, configured by the controller's environment contract.
package main

import (
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"time"

	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"

	"github.com/rainbow-deploy/rainbow/dev/demoworker"
	"github.com/rainbow-deploy/rainbow/internal/workerenv"
)

func main() {
	taskQueue := flag.String("task-queue", envOr("DEMO_TASK_QUEUE", "rainbow-demo"), "task queue to poll")
	flag.Parse()
	if err := run(*taskQueue); err != nil {
		fmt.Fprintln(os.Stderr, "demo-worker:", err)
		os.Exit(1)
	}
}

func run(taskQueue string) error {
	env, err := workerenv.FromEnv(os.LookupEnv)
	if err != nil {
		return err
	}
	opts, err := env.ClientOptions()
	if err != nil {
		return err
	}
	if v := os.Getenv("DEMO_POLL_DELAY"); v != "" {
		// A worker that polls late (a slow start), for the benchmark.
		d, err := time.ParseDuration(v)
		if err != nil {
			return fmt.Errorf("DEMO_POLL_DELAY=%q: %w", v, err)
		}
		time.Sleep(d)
	}
	if addr := os.Getenv("DEMO_METRICS_ADDR"); addr != "" {
		if opts.MetricsHandler, err = demoworker.ServeMetrics(addr, env.BuildID); err != nil {
			return err
		}
	}
	opts.Logger = sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	c, err := client.Dial(opts)
	if err != nil {
		return fmt.Errorf("connect to %s: %w", env.Address, err)
	}
	defer c.Close()
	slog.Info("polling", "taskQueue", taskQueue, "deployment", env.DeploymentName, "buildID", env.BuildID)
	var wopts demoworker.Options
	if v := os.Getenv("DEMO_MAX_CONCURRENT_ACTIVITIES"); v != "" {
		if wopts.MaxConcurrentActivities, err = strconv.Atoi(v); err != nil {
			return fmt.Errorf("DEMO_MAX_CONCURRENT_ACTIVITIES=%q: %w", v, err)
		}
	}
	for name, share := range map[string]*float64{
		"DEMO_FAIL_SHARE":           &wopts.FailShare,
		"DEMO_NONDETERMINISM_SHARE": &wopts.NondeterminismShare,
		"DEMO_ACTIVITY_FAIL_SHARE":  &wopts.ActivityFailShare,
	} {
		if v := os.Getenv(name); v != "" {
			if *share, err = strconv.ParseFloat(v, 64); err != nil || *share < 0 || *share > 1 {
				return fmt.Errorf("%s=%q: want a share between 0 and 1", name, v)
			}
		}
	}
	return demoworker.NewWithOptions(c, env, taskQueue, wopts).Run(worker.InterruptCh())
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
