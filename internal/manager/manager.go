// Package manager builds Rainbow's controller manager: both reconcilers,
// the cache indexes they share, the Temporal client pool, metrics, health
// probes and leader election. cmd/manager and the tests start it the same
// way.
package manager

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/go-logr/logr"
	temporallog "go.temporal.io/sdk/log"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	crleaderelection "sigs.k8s.io/controller-runtime/pkg/leaderelection"
	"sigs.k8s.io/controller-runtime/pkg/log"
	ctrlmanager "sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/internal/admission"
	"github.com/rainbow-deploy/rainbow/internal/backlog"
	"github.com/rainbow-deploy/rainbow/internal/claim"
	"github.com/rainbow-deploy/rainbow/internal/connection"
	"github.com/rainbow-deploy/rainbow/internal/controller/temporalconnection"
	"github.com/rainbow-deploy/rainbow/internal/controller/workerdeployment"
	"github.com/rainbow-deploy/rainbow/internal/externalmetrics"
	"github.com/rainbow-deploy/rainbow/internal/inflight"
	"github.com/rainbow-deploy/rainbow/internal/notify"
	"github.com/rainbow-deploy/rainbow/internal/promquery"
	"github.com/rainbow-deploy/rainbow/internal/temporal"
	"github.com/rainbow-deploy/rainbow/internal/workload"
)

const (
	// DefaultIdentity is the Temporal identity of the controller. Temporal
	// records it as a worker deployment's manager, so it must not change
	// across restarts or between replicas: no pod name in it.
	DefaultIdentity = "rainbow-controller"
	// LeaderElectionID names the Lease the replicas compete for.
	LeaderElectionID = "rainbow.temporal.io"
	// DefaultMaxVersions is Temporal's default matching.maxVersionsInDeployment.
	DefaultMaxVersions = 100
	// eventSource is the reporting controller of Events.
	eventSource = "rainbow"
)

// Options configure the manager. The zero value is usable: default
// identity, metrics on :8080, no probes, no leader election, no version
// limit. cmd/manager's flags set each field.
type Options struct {
	// Identity is the Temporal identity; empty means DefaultIdentity.
	Identity string
	// MetricsAddr serves Prometheus metrics; "0" disables, empty is :8080.
	MetricsAddr string
	// MetricsSecure serves metrics over HTTPS (a self-signed certificate)
	// and only to callers whose token the API server accepts and who may
	// get the non-resource URL /metrics; otherwise plain HTTP to anyone.
	MetricsSecure bool
	// ProbeAddr serves /healthz and /readyz; empty or "0" disables.
	ProbeAddr string
	// PprofAddr serves net/http/pprof (heap profiles, for sizing); empty
	// or "0" disables.
	PprofAddr string
	// LeaderElection makes replicas elect one leader that reconciles.
	LeaderElection bool
	// LeaderElectionNamespace holds the Lease; empty means the pod's own
	// namespace (required when running outside a cluster).
	LeaderElectionNamespace string
	// MaxVersions is Temporal's version limit per worker deployment
	// (matching.maxVersionsInDeployment); 0 means no limit.
	MaxVersions int
	// Logger for the manager, the controllers and the Temporal SDK; the
	// zero value means controller-runtime's global logger (log.SetLogger).
	Logger logr.Logger
	// WatchNamespaces restricts the controller, and its caches, to these
	// namespaces; empty means every namespace. Two installations can then
	// split a cluster.
	WatchNamespaces []string
	// Webhook serves the validating webhooks of the three kinds;
	// nil means no webhook server. Without rotation, a certificate
	// directory or a certificate in the default one, there is none either
	// (withoutMissingCert).
	Webhook *WebhookOptions
	// AllowedTemporalHosts are the only addresses the controller connects
	// to, and that the webhook admits in a TemporalConnection; the zero
	// value allows any.
	AllowedTemporalHosts temporal.AllowedHosts
	// BacklogInterval is how often the leader reads the backlog of every
	// running version from Temporal (for the Prometheus gauges), and how
	// long a read is reused; 0 means no reads in the background, and
	// reads on demand reused for backlog.DefaultInterval.
	BacklogInterval time.Duration
	// BacklogAll reads every running version in the background, not only
	// those of TWDs whose replicas an autoscaler owns.
	BacklogAll bool
	// Workers is how many TemporalWorkerDeployments are reconciled at
	// once; 0 means the controller's default (8).
	Workers int
	// Version is the controller's version, which each worker version's
	// metadata in Temporal names; empty means "devel".
	Version string
	// ExternalMetrics serves the versions' backlogs through the external
	// metrics API on the webhook server (which it needs), for the
	// APIService v1beta1.external.metrics.k8s.io; with certificate
	// rotation, the APIService's caBundle is kept up to date too.
	ExternalMetrics bool
	// Notify are the receivers of rollout notifications; none sends none.
	Notify []notify.SinkConfig
	// AnalysisPrometheus is the Prometheus server of the analysis'
	// Prometheus checks; without a URL they are inconclusive.
	AnalysisPrometheus promquery.Config
	// AnalysisVisibilityRPS is the analysis' budget of visibility counts
	// a second per Temporal namespace; 0 means the default.
	AnalysisVisibilityRPS float64
	// TemporalSlowCall, when set, turns on the adaptive limit of calls in
	// flight to each Temporal namespace (package inflight): an answer
	// later than this cuts it. 0 leaves the calls unlimited, the default:
	// measured against the dev server, the limit made large rollouts
	// slower (docs/performance.md#adaptive-calls-in-flight).
	TemporalSlowCall time.Duration
}

// Manager is a controller-runtime manager with Rainbow's controllers and
// the Temporal client pool they share.
type Manager struct {
	ctrlmanager.Manager
	Pool *temporal.Pool
}

// The metrics filter asks the API server who a token is and whether it may
// get /metrics.
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

func metricsOptions(opts Options) metricsserver.Options {
	o := metricsserver.Options{BindAddress: opts.MetricsAddr}
	if opts.MetricsSecure {
		o.SecureServing = true
		o.FilterProvider = filters.WithAuthenticationAndAuthorization
	}
	return o
}

// New builds the manager for the cluster at cfg. Nothing runs until Start.
func New(cfg *rest.Config, opts Options) (*Manager, error) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if opts.Identity == "" {
		opts.Identity = DefaultIdentity
	}
	if opts.Logger.GetSink() == nil {
		opts.Logger = log.Log
	}
	cacheOpts, err := cacheOptions(opts.WatchNamespaces)
	if err != nil {
		return nil, err
	}
	opts.Webhook = withoutMissingCert(opts.Webhook, opts.Logger)
	if opts.ExternalMetrics {
		if opts.Webhook == nil {
			return nil, errors.New("the external metrics API is served by the webhook server, which is disabled")
		}
		w := *opts.Webhook
		w.AskClientCerts = true
		if r := w.Rotation; r != nil {
			rc := *r
			rc.APIServices = append(slices.Clone(rc.APIServices), externalmetrics.APIServiceName)
			w.Rotation = &rc
		}
		opts.Webhook = &w
	}
	if opts.Webhook != nil {
		w := *opts.Webhook
		w.CheckTemporalAddress = opts.AllowedTemporalHosts.Check
		opts.Webhook = &w
	}
	// With leader election, the controllers' writes pass a fence that
	// closes once the Lease may have passed to another replica (fence.go).
	var fence *leaseFence
	var lock resourcelock.Interface
	if opts.LeaderElection {
		fence = newLeaseFence(renewDeadline, opts.Logger.WithName("lease-fence"))
		// No Events of the Lease's own: the elector's "stopped leading"
		// would be a write after the Lease was lost.
		inner, err := crleaderelection.NewResourceLock(cfg, noEvents{}, crleaderelection.Options{
			LeaderElection: true, LeaderElectionID: LeaderElectionID,
			LeaderElectionNamespace: opts.LeaderElectionNamespace, RenewDeadline: renewDeadline,
		})
		if err != nil {
			return nil, fmt.Errorf("leader election lock: %w", err)
		}
		lock = fence.lock(inner)
		cfg = rest.CopyConfig(cfg)
		cfg.Wrap(fence.transport)
	}
	mgr, err := ctrlmanager.New(cfg, ctrlmanager.Options{
		Scheme:                              scheme,
		Logger:                              opts.Logger,
		Metrics:                             metricsOptions(opts),
		HealthProbeBindAddress:              opts.ProbeAddr,
		PprofBindAddress:                    opts.PprofAddr,
		LeaderElection:                      opts.LeaderElection,
		LeaderElectionID:                    LeaderElectionID,
		LeaderElectionNamespace:             opts.LeaderElectionNamespace,
		LeaderElectionResourceLockInterface: lock,
		LeaseDuration:                       ptr.To(leaseDuration),
		RenewDeadline:                       ptr.To(renewDeadline),
		RetryPeriod:                         ptr.To(retryPeriod),
		// Start returns only once reconciling stopped, so the next leader
		// may take over at once.
		LeaderElectionReleaseOnCancel: true,
		Cache:                         cacheOpts,
		NewClient:                     newClient,
		WebhookServer:                 webhookServer(opts.Webhook),
	})
	if err != nil {
		return nil, fmt.Errorf("create manager: %w", err)
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return nil, err
	}
	if err := mgr.AddReadyzCheck("ping", healthz.Ping); err != nil {
		return nil, err
	}
	if opts.Webhook != nil {
		if err := admission.Setup(mgr); err != nil {
			return nil, fmt.Errorf("set up the webhook: %w", err)
		}
	}
	if err := connection.RegisterIndexes(context.Background(), mgr.GetFieldIndexer()); err != nil {
		return nil, fmt.Errorf("register cache indexes: %w", err)
	}
	if err := claim.RegisterIndex(context.Background(), mgr.GetFieldIndexer()); err != nil {
		return nil, fmt.Errorf("register cache indexes: %w", err)
	}
	sdkLog := temporallog.NewStructuredLogger(slog.New(logr.ToSlogHandler(opts.Logger.WithName("temporal-sdk"))))
	pool := temporal.NewPool(opts.Identity, sdkLog).WithAllowedHosts(opts.AllowedTemporalHosts)
	if opts.TemporalSlowCall > 0 {
		cfg := inflight.Defaults
		cfg.SlowAfter = opts.TemporalSlowCall
		pool.WithInFlight(cfg)
	}
	if fence != nil {
		pool.WithInterceptor(fence.temporalWrites)
	}
	recorder := fence.recorder(mgr.GetEventRecorder(eventSource))
	leaderClient := fence.client(mgr.GetClient())
	backlogs := backlog.New(leaderClient, pool, clock.RealClock{}, opts.BacklogInterval, workerdeployment.Fleet{Client: leaderClient})
	backlogs.All = opts.BacklogAll
	if opts.ExternalMetrics {
		srv := externalmetrics.NewServer(backlogs, &externalmetrics.FrontProxyAuth{Reader: mgr.GetAPIReader(), Reviews: mgr.GetClient()})
		for _, p := range srv.Paths() {
			mgr.GetWebhookServer().Register(p, srv)
		}
	}
	prom, err := promquery.New(opts.AnalysisPrometheus)
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("--analysis-prometheus-url: %w", err)
	}
	notifier := notify.New(opts.Notify, opts.Logger)
	if notifier != nil {
		if err := mgr.Add(notifier); err != nil {
			pool.Close()
			return nil, err
		}
	}
	if err := (&workerdeployment.Reconciler{
		Client: leaderClient, APIReader: mgr.GetAPIReader(), Pool: pool, Recorder: recorder, Clock: clock.RealClock{}, MaxVersions: opts.MaxVersions,
		Backlogs: backlogs, Workers: opts.Workers, BannedKinds: bannedKinds(opts.Webhook), ControllerVersion: opts.Version,
		Notifier: notifier, Prometheus: workerdeployment.NewPrometheusReader(prom), AnalysisRPS: opts.AnalysisVisibilityRPS,
	}).SetupWithManager(mgr); err != nil {
		pool.Close()
		return nil, fmt.Errorf("set up the TemporalWorkerDeployment controller: %w", err)
	}
	if err := (&temporalconnection.Reconciler{
		Client: leaderClient, Pool: pool, Recorder: recorder, Clock: clock.RealClock{}, AllowedHosts: opts.AllowedTemporalHosts,
	}).SetupWithManager(mgr); err != nil {
		pool.Close()
		return nil, fmt.Errorf("set up the TemporalConnection controller: %w", err)
	}
	return &Manager{Manager: mgr, Pool: pool}, nil
}

// Start runs the controllers until ctx ends, then closes the Temporal
// clients. It returns after the controllers have stopped.
func (m *Manager) Start(ctx context.Context) error {
	defer m.Pool.Close()
	return m.Manager.Start(ctx)
}

// cacheOptions watches only the namespaces asked for (all when none), and
// keeps only the controller's own Deployments in memory: a
// cluster's other Deployments never concern it. They carry the worker
// label, which is also how the controller lists them. Every cached object
// is trimmed (trim.go).
func cacheOptions(namespaces []string) (cache.Options, error) {
	owned, err := labels.NewRequirement(workload.LabelWorker, selection.Exists, nil)
	if err != nil {
		return cache.Options{}, err
	}
	opts := cache.Options{ByObject: map[client.Object]cache.ByObject{
		&appsv1.Deployment{}: {Label: labels.NewSelector().Add(*owned)},
	}, DefaultTransform: trimObject}
	if len(namespaces) > 0 {
		opts.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range namespaces {
			opts.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	return opts, nil
}
