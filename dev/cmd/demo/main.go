// Command demo tells `make demo`'s story against a running local
// environment and controller: it applies examples/demo, keeps workflows
// running, rolls out two versions and prints the status as it changes
// (see dev/demo); --story abort and autoscaling tell `make demo-abort`'s
// and `make demo-autoscaling`'s. hack/demo.sh starts the environment and the
// controller, then runs it.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	sdkclient "go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/dev/demo"
	"github.com/rainbow-deploy/rainbow/dev/localenv"
)

func main() {
	var (
		envDir, story string
		exit          bool
		o             demo.Options
		a             demo.AutoscalingOptions
		failShare     float64
	)
	flag.StringVar(&story, "story", "rollout", "`name` of the story: rollout (two rollouts, make demo), abort (a bad version aborted by the analysis, make demo-abort) or autoscaling (an HPA per version on its backlog, make demo-autoscaling)")
	flag.Float64Var(&failShare, "fail-share", 0.5, "share of workflows the bad version fails (abort story)")
	flag.StringVar(&a.Dir, "autoscaling-examples", "examples/autoscaling", "directory holding "+demo.AutoscalingWorkerFile+" and "+demo.AutoscalingHPAFile+" (autoscaling story)")
	flag.IntVar(&a.Burst, "burst", 24, "Work workflows started at once (autoscaling story)")
	flag.StringVar(&envDir, "env-dir", ".dev", "state directory of the running local environment (holds env.json)")
	flag.StringVar(&o.Dir, "examples", "examples/demo", "directory holding "+demo.ConnectionFile+", "+demo.WorkerFile+" and "+demo.AbortFile)
	owned := "examples/twor-hpa.yaml"
	flag.StringVar(&owned, "owned", owned, "comma-separated TemporalWorkerOwnedResource files applied with the TemporalWorkerDeployment; empty for none")
	flag.StringVar(&o.SecondTag, "second-tag", "v2", "image tag of the second version")
	flag.DurationVar(&o.HelloEvery, "hello-every", 0, "start a Hello workflow this often (default 1s; 250ms in the abort story)")
	flag.DurationVar(&o.Look, "look", 5*time.Second, "how long the first version runs alone before the second is rolled out")
	flag.DurationVar(&o.DrainHold, "drain-hold", 20*time.Second, "how long the pinned workflow keeps the first version Draining before it is told to finish")
	flag.BoolVar(&exit, "exit", false, "exit after the story instead of running until interrupted")
	flag.Parse()
	o.Linger, a.Linger = !exit, !exit
	a.ConnectionDir = o.Dir
	if owned != "" {
		o.OwnedFiles = strings.Split(owned, ",")
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, envDir, story, o, a, failShare); err != nil {
		if ctx.Err() != nil {
			fmt.Fprintln(os.Stderr, "demo: stopped")
			return
		}
		fmt.Fprintln(os.Stderr, "\ndemo failed:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, envDir, story string, o demo.Options, a demo.AutoscalingOptions, failShare float64) error {
	info, err := localenv.ReadInfo(envDir)
	if err != nil {
		return fmt.Errorf("no running local environment in %s (start it with `make dev-env`): %w", envDir, err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", info.Kubeconfig)
	if err != nil {
		return err
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return err
	}
	o.Kube, err = client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	// The SDK's own warnings (retries while a version gets its pollers)
	// would interleave with the story.
	logger := sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})))
	o.Temporal, err = sdkclient.DialContext(ctx, sdkclient.Options{HostPort: info.TemporalAddress, Namespace: info.TemporalNamespace, Logger: logger})
	if err != nil {
		return fmt.Errorf("connect to Temporal at %s: %w", info.TemporalAddress, err)
	}
	defer o.Temporal.Close()
	o.Out = os.Stdout
	o.TemporalAddress, o.TemporalNamespace = info.TemporalAddress, info.TemporalNamespace
	o.TemporalUI, o.Kubeconfig = info.TemporalUI, info.Kubeconfig
	switch story {
	case "rollout":
		_, err = demo.Run(ctx, o)
	case "abort":
		_, err = demo.RunAbort(ctx, o, failShare)
	case "autoscaling":
		a.Kube, a.Temporal, a.Out = o.Kube, o.Temporal, o.Out
		a.TemporalAddress, a.TemporalNamespace = info.TemporalAddress, info.TemporalNamespace
		_, err = demo.RunAutoscaling(ctx, a)
	default:
		return fmt.Errorf("--story=%q: want rollout, abort or autoscaling", story)
	}
	if err == nil && ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}
