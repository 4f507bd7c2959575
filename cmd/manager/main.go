// Command manager runs the Rainbow controller: the TemporalWorkerDeployment
// and TemporalConnection controllers of internal/manager.
package main

import (
	"cmp"
	"flag"
	"fmt"
	"os"
	"strings"

	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/rainbow-deploy/rainbow/internal/backlog"
	"github.com/rainbow-deploy/rainbow/internal/controller/workerdeployment"
	"github.com/rainbow-deploy/rainbow/internal/externalmetrics"
	"github.com/rainbow-deploy/rainbow/internal/manager"
	"github.com/rainbow-deploy/rainbow/internal/notify"
	"github.com/rainbow-deploy/rainbow/internal/temporal"
)

func main() {
	var opts manager.Options
	var notifyErr error
	flag.StringVar(&opts.Identity, "identity", manager.DefaultIdentity,
		"Temporal identity of the controller; keep it the same across restarts and replicas, Temporal records it as the manager of each worker deployment")
	flag.StringVar(&opts.MetricsAddr, "metrics-bind-address", ":8080", `address of the Prometheus metrics endpoint; "0" disables it`)
	flag.BoolVar(&opts.MetricsSecure, "metrics-secure", false,
		"serve metrics over HTTPS, only to callers with a Kubernetes token allowed to get the non-resource URL /metrics (TokenReview and SubjectAccessReview; the manifests set it)")
	flag.StringVar(&opts.ProbeAddr, "health-probe-bind-address", ":8081", `address of /healthz and /readyz; "0" disables them`)
	flag.StringVar(&opts.PprofAddr, "pprof-bind-address", "0", `address of net/http/pprof's /debug/pprof/ (heap and CPU profiles); "0" (the default) disables it`)
	flag.BoolVar(&opts.LeaderElection, "leader-elect", false, "elect a leader among replicas (Lease "+manager.LeaderElectionID+"); only the leader reconciles")
	flag.StringVar(&opts.LeaderElectionNamespace, "leader-election-namespace", "", "namespace of the leader election Lease; defaults to the pod's namespace")
	flag.IntVar(&opts.MaxVersions, "max-versions", manager.DefaultMaxVersions,
		"Temporal's limit of versions per worker deployment (the server's matching.maxVersionsInDeployment); 0 means no limit")
	flag.Func("watch-namespaces", "comma-separated namespaces the controller watches and acts in; empty (the default) means every namespace", func(v string) error {
		for _, ns := range strings.Split(v, ",") {
			if ns = strings.TrimSpace(ns); ns != "" {
				opts.WatchNamespaces = append(opts.WatchNamespaces, ns)
			}
		}
		return nil
	})
	flag.DurationVar(&opts.BacklogInterval, "backlog-interval", backlog.DefaultInterval,
		"how often the leader reads the task queue backlog of the running versions of autoscaled TemporalWorkerDeployments (or all, --backlog-all) from Temporal, and how long a read is reused; 0 reads only on demand")
	flag.BoolVar(&opts.BacklogAll, "backlog-all", false,
		"read the backlog of every TemporalWorkerDeployment's running versions in the background (Prometheus gauges for all), not only of those whose replicas an autoscaler owns")
	flag.IntVar(&opts.Workers, "max-concurrent-reconciles", 0,
		"how many TemporalWorkerDeployments are reconciled at once; 0 means the default (8)")
	flag.BoolVar(&opts.ExternalMetrics, "external-metrics", false,
		"serve the versions' backlogs through the external metrics API (APIService "+externalmetrics.APIServiceName+") on the webhook server")
	flag.Func("allowed-temporal-hosts", "comma-separated Temporal addresses the controller may connect to and TemporalConnections may name: "+
		"host or host:port, a leading \"*.\" matches any subdomain (e.g. temporal.example.com:7233,*.tmprl.cloud:7233); empty (the default) allows any",
		func(v string) (err error) {
			opts.AllowedTemporalHosts, err = temporal.ParseAllowedHosts(v)
			return err
		})
	flag.Func("notify", "send rollout notifications to a receiver; repeat for several: url=URL or url-file=FILE (a mounted Secret), "+
		"and optionally format=webhook|slack|cloudevents (default webhook), name=NAME (the metrics label), queue=N, attempts=N, timeout=DURATION (docs/notifications.md)",
		func(v string) error {
			// Reported after Parse: flag's own message would print the
			// value, whose URL may hold a token.
			c, err := notify.ParseSink(v)
			if err != nil {
				notifyErr = cmp.Or(notifyErr, fmt.Errorf("--notify: %w", err))
			}
			opts.Notify = append(opts.Notify, c)
			return nil
		})
	flag.StringVar(&opts.AnalysisPrometheus.URL, "analysis-prometheus-url", "",
		"base URL of the Prometheus server that spec.rollout.analysis checks of kind Prometheus query (e.g. http://prometheus.monitoring:9090); empty (the default): such checks are inconclusive")
	flag.StringVar(&opts.AnalysisPrometheus.BearerTokenFile, "analysis-prometheus-bearer-token-file", "",
		"file holding a bearer token for --analysis-prometheus-url, read on each query")
	flag.StringVar(&opts.AnalysisPrometheus.CAFile, "analysis-prometheus-ca-file", "",
		"PEM file of the certificate authorities that verify an https --analysis-prometheus-url; empty uses the system's")
	flag.Float64Var(&opts.AnalysisVisibilityRPS, "analysis-visibility-rps", workerdeployment.DefaultAnalysisRPS,
		"visibility counts (CountWorkflowExecutions) a second that spec.rollout.analysis may make per Temporal namespace, for all TemporalWorkerDeployments together; "+
			"Temporal's default limit is 10 a second per namespace and frontend (frontend.namespaceRPS.visibility): keep room for the namespace's other visibility queries")
	flag.DurationVar(&opts.TemporalSlowCall, "temporal-slow-call", 0,
		"turn on the adaptive limit of Temporal calls in flight: a worker-deployment call answered later than this (or refused for load) cuts the calls the controller keeps in flight to its namespace, "+
			"which grow back while answers come faster; 0 (the default) leaves them unlimited (docs/performance.md#adaptive-calls-in-flight)")
	showVersion := flag.Bool("version", false, "print the version and revision and exit")
	webhook := bindWebhookFlags(flag.CommandLine)
	zapOpts := zap.Options{}
	zapOpts.BindFlags(flag.CommandLine)
	// --kubeconfig is registered by controller-runtime; without it the
	// in-cluster config or $KUBECONFIG is used.
	flag.Parse()
	if *showVersion {
		printVersion(os.Stdout)
		return
	}
	if opts.AnalysisVisibilityRPS <= 0 {
		fmt.Fprintln(os.Stderr, "--analysis-visibility-rps must be above 0")
		os.Exit(2)
	}
	if opts.TemporalSlowCall < 0 {
		fmt.Fprintln(os.Stderr, "--temporal-slow-call must not be negative")
		os.Exit(2)
	}
	if notifyErr != nil {
		fmt.Fprintln(os.Stderr, notifyErr)
		os.Exit(2)
	}
	var err error
	if opts.Webhook, err = webhook.options(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}

	logger := zap.New(zap.UseFlagOptions(&zapOpts))
	ctrl.SetLogger(logger)
	klog.SetLogger(logger) // client-go's logs, structured like ours
	opts.Logger = logger
	opts.Version = version
	logger.Info("starting the Rainbow manager", "version", version, "revision", revision)
	if err := run(opts); err != nil {
		logger.Error(err, "manager stopped")
		os.Exit(1)
	}
}

func run(opts manager.Options) error {
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("kubernetes client config: %w", err)
	}
	mgr, err := manager.New(cfg, opts)
	if err != nil {
		return err
	}
	return mgr.Start(ctrl.SetupSignalHandler())
}
