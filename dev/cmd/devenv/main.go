// Command devenv runs the local environment: a real Kubernetes control plane,
// a node agent that runs pods as local processes, and a Temporal dev server
// with its Web UI, all on loopback. Ctrl-C stops everything.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/kubernetes"

	"github.com/rainbow-deploy/rainbow/dev/cmd/devenv/temporaldev"
	"github.com/rainbow-deploy/rainbow/dev/localenv"
	"github.com/rainbow-deploy/rainbow/dev/localenv/controlplane"
	"github.com/rainbow-deploy/rainbow/dev/localenv/nodeagent"
)

type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

func main() {
	var (
		dir, kubeBin, nodeName, ns, db string
		apiPort, etcdPort              int
		tOpts                          temporaldev.Options
		programs, programDirs, dyn     listFlag
		tlsMode                        tlsFlag
		auth                           string
		images                         listFlag
	)
	flag.StringVar(&dir, "dir", ".dev", "state directory: kubeconfig, env.json, logs, pod directories (wiped on start)")
	flag.StringVar(&kubeBin, "kube-bin-dir", ".cache/kube", "directory holding etcd, kube-apiserver and kube-controller-manager")
	flag.StringVar(&nodeName, "node-name", "rainbow-local", "name of the node the node agent registers")
	flag.Var(&programs, "program", "image=path: run path for containers whose image is named image (repeatable)")
	flag.Var(&images, "image", "image=dir: run containers whose image is named image from the OCI image layout dir (such as `make image`'s .cache/image/oci) under runc (repeatable)")
	flag.Var(&programDirs, "program-dir", "directory searched for an executable named like a container's image (repeatable)")
	flag.IntVar(&apiPort, "apiserver-port", 6443, "kube-apiserver port on 127.0.0.1 (0 = any free port)")
	flag.IntVar(&etcdPort, "etcd-port", 0, "etcd client port on 127.0.0.1 (0 = any free port)")
	flag.IntVar(&tOpts.Port, "temporal-port", 7233, "Temporal frontend gRPC port (0 = any free port)")
	flag.IntVar(&tOpts.HTTPPort, "temporal-http-port", 0, "Temporal frontend HTTP port (0 = any free port)")
	flag.IntVar(&tOpts.UIPort, "temporal-ui-port", 8233, "Temporal Web UI port (0 = any free port, -1 = no UI)")
	flag.IntVar(&tOpts.MetricsPort, "temporal-metrics-port", 0, "Temporal Prometheus metrics port (0 = any free port)")
	flag.IntVar(&tOpts.PProfPort, "temporal-pprof-port", 0, "Temporal's Go pprof port (0 = off)")
	flag.StringVar(&ns, "temporal-namespace", "default", "Temporal namespace to create")
	flag.StringVar(&db, "temporal-db", "", "SQLite file for Temporal (empty = in memory)")
	flag.Var(&dyn, "temporal-dynamic-config", "key=value: Temporal dynamic config override (repeatable)")
	flag.Var(&tlsMode, "temporal-tls", "serve Temporal over TLS with a CA devenv makes; =mtls also requires client certificates signed by it")
	flag.StringVar(&auth, "temporal-auth", "none", "none, or api-key: Temporal refuses requests without an API key devenv issued (implies --temporal-tls)")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	tOpts.Namespaces = []string{ns}
	tOpts.DBFile = db
	if err := run(ctx, dir, kubeBin, nodeName, apiPort, etcdPort, tOpts, programs, images, programDirs, dyn, tlsMode, auth); err != nil {
		fmt.Fprintln(os.Stderr, "devenv:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, dir, kubeBin, nodeName string, apiPort, etcdPort int, tOpts temporaldev.Options, programs, images, programDirs, dyn []string, tlsMode tlsFlag, auth string) error {
	log := logr.FromSlogHandler(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	progress := func(format string, args ...any) { fmt.Fprintf(os.Stderr, "devenv: "+format+"\n", args...) }

	dir, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	_ = os.Remove(filepath.Join(dir, localenv.InfoFile))

	agentCfg := nodeagent.Config{NodeName: nodeName, RootDir: dir, Programs: map[string]string{}, Images: map[string]string{}, Log: log.WithName("node-agent")}
	for _, p := range programs {
		image, path, err := nodeagent.ParseProgramFlag(p)
		if err != nil {
			return err
		}
		agentCfg.Programs[image] = path
	}
	for _, m := range images {
		image, layout, err := nodeagent.ParseProgramFlag(m)
		if err != nil {
			return err
		}
		agentCfg.Images[image] = layout
	}
	for _, d := range programDirs {
		abs, err := filepath.Abs(d)
		if err != nil {
			return err
		}
		agentCfg.SearchPath = append(agentCfg.SearchPath, abs)
	}
	tOpts.DynamicConfig = map[string]any{}
	for _, kv := range dyn {
		k, v, err := temporaldev.ParseDynamicConfigFlag(kv)
		if err != nil {
			return err
		}
		tOpts.DynamicConfig[k] = v
	}

	// A test that writes this file holds routing changes back from the
	// task queues' non-root partitions (test/integration/propagation_test.go).
	tOpts.PropagationHold = filepath.Join(dir, temporaldev.PropagationHoldFile)

	sec, err := setupSecurity(dir, tlsMode, auth, tOpts.Namespaces[0], &tOpts)
	if err != nil {
		return err
	}

	start := time.Now()
	progress("starting Temporal dev server")
	tOpts.LogOutput, err = os.OpenFile(filepath.Join(dir, "temporal.log"), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	temporal, err := temporaldev.Start(ctx, tOpts)
	if err != nil {
		return err
	}
	defer func() {
		progress("stopping Temporal")
		_ = temporal.Stop()
	}()

	cp, err := controlplane.Start(ctx, controlplane.Config{
		Dir: dir, BinDir: kubeBin, APIServerPort: apiPort, EtcdPort: etcdPort, Progress: progress,
	})
	if err != nil {
		return err
	}
	defer func() {
		progress("stopping the control plane")
		cp.Stop()
	}()

	client, err := kubernetes.NewForConfig(cp.RESTConfig())
	if err != nil {
		return err
	}
	// Pods get the in-cluster environment; the API server reads their logs.
	agentCfg.APIServer = cp.RESTConfig().Host
	agentCfg.KubeletCertFile, agentCfg.KubeletKeyFile, agentCfg.ClientCAFile = cp.KubeletTLS()
	// The resource metrics API (kubectl top, HPAs on CPU), behind the
	// aggregation layer.
	agentCfg.MetricsCertFile, agentCfg.MetricsKeyFile, agentCfg.MetricsCAFile, agentCfg.FrontProxyCAFile = cp.MetricsTLS()
	agentCfg.FrontProxyName, agentCfg.MetricsService = controlplane.FrontProxyClientName, controlplane.MetricsService
	agent, err := nodeagent.New(client, agentCfg)
	if err != nil {
		return err
	}
	agentCtx, stopAgent := context.WithCancel(context.Background())
	agentDone := make(chan error, 1)
	go func() { agentDone <- agent.Run(agentCtx) }()
	defer func() {
		progress("stopping the node agent and its processes")
		stopAgent()
		<-agentDone
	}()
	select {
	case <-agent.Ready():
	case err := <-agentDone:
		agentDone <- err // let the deferred stop return
		return fmt.Errorf("node agent stopped: %w", errors.Join(err, errors.New("see the log above")))
	}
	if err := sec.createSecrets(ctx, client); err != nil {
		return err
	}
	if err := waitForMetricsAPI(ctx, client); err != nil {
		progress("the resource metrics API is not available (kubectl top, HPAs on CPU): %v", err)
	}

	info := localenv.Info{
		Dir:               dir,
		PID:               os.Getpid(),
		Kubeconfig:        cp.KubeconfigPath(),
		APIServer:         cp.RESTConfig().Host,
		NodeName:          nodeName,
		TemporalAddress:   temporal.Address(),
		TemporalNamespace: tOpts.Namespaces[0],
		TemporalUI:        temporal.UIURL(),
		TemporalMetrics:   temporal.MetricsURL(),
		HostIP:            agent.HostIP(),
	}
	sec.describe(&info)
	if err := info.Write(dir); err != nil {
		return err
	}
	defer os.Remove(filepath.Join(dir, localenv.InfoFile))
	progress("ready in %s", time.Since(start).Round(100*time.Millisecond))
	fmt.Fprintf(os.Stderr, `
  Kubernetes API   %s
  kubectl          export KUBECONFIG=%s
  Temporal         %s (namespace %q)
  Temporal UI      %s
  Logs             %s/logs, %s/temporal.log, %s/pods/<pod>/<container>.log

%s
Press Ctrl-C to stop.
`, info.APIServer, info.Kubeconfig, info.TemporalAddress, info.TemporalNamespace, orNone(info.TemporalUI), dir, dir, dir, sec.summary())

	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			progress("shutting down")
			return nil
		case err := <-agentDone:
			agentDone <- err // let the deferred stop return
			return fmt.Errorf("node agent stopped: %w", errors.Join(err, errors.New("see the log above")))
		case <-tick.C:
			if err := cp.Failed(); err != nil {
				return err
			}
		}
	}
}

// waitForMetricsAPI waits until the API server calls the node agent's
// metrics API (its APIService is Available), for at most 30 seconds.
func waitForMetricsAPI(ctx context.Context, client kubernetes.Interface) error {
	deadline := time.Now().Add(30 * time.Second)
	var last string
	for {
		var svc struct {
			Status struct {
				Conditions []struct{ Type, Status, Message string }
			}
		}
		raw, err := client.Discovery().RESTClient().Get().AbsPath("/apis/apiregistration.k8s.io/v1/apiservices/v1beta1.metrics.k8s.io").DoRaw(ctx)
		if err == nil {
			err = json.Unmarshal(raw, &svc)
		}
		last = fmt.Sprint(err)
		for _, c := range svc.Status.Conditions {
			if c.Type == "Available" {
				if c.Status == "True" {
					return nil
				}
				last = c.Message
			}
		}
		if time.Now().After(deadline) {
			return errors.New(last)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func orNone(s string) string {
	if s == "" {
		return "(disabled)"
	}
	return s
}
