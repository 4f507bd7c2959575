// Package temporaldev runs a single-process Temporal development server
// (frontend, history, matching and worker services on SQLite) plus the
// Temporal Web UI, for local development and tests.
package temporaldev

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	uiserver "github.com/temporalio/ui-server/v2/server"
	uiconfig "github.com/temporalio/ui-server/v2/server/config"
	uioptions "github.com/temporalio/ui-server/v2/server/server_options"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/server/common/authorization"
	"go.temporal.io/server/common/cluster"
	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/dynamicconfig"
	"go.temporal.io/server/common/log"
	"go.temporal.io/server/common/metrics"
	persistencesql "go.temporal.io/server/common/persistence/sql"
	"go.temporal.io/server/common/persistence/sql/sqlplugin"
	sqliteplugin "go.temporal.io/server/common/persistence/sql/sqlplugin/sqlite"
	"go.temporal.io/server/common/primitives"
	"go.temporal.io/server/common/resolver"
	"go.temporal.io/server/schema/sqlite"
	"go.temporal.io/server/temporal"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Options configures Start. The zero value is a usable ephemeral server on
// free loopback ports.
type Options struct {
	IP            string         // listen address, default "127.0.0.1" (loopback only)
	Port          int            // frontend gRPC port; 0 = pick a free port
	HTTPPort      int            // frontend HTTP API port; 0 = free port
	UIPort        int            // Web UI port; 0 = free port; -1 = UI disabled
	MetricsPort   int            // Prometheus metrics port (/metrics); 0 = free port
	PProfPort     int            // Go pprof on IP:PProfPort; 0 = off (sizing the server: docs/performance.md)
	Namespaces    []string       // registered at start; default ["default"]
	DBFile        string         // sqlite file; "" = in-memory (ephemeral)
	DynamicConfig map[string]any // overrides merged over DefaultDynamicConfig()
	// PropagationHold, if set, is the file whose duration holds back
	// routing changes on their way to the task queues (PropagationHoldFile).
	PropagationHold string
	LogLevel        string    // "warn" default; logs go to LogOutput
	LogOutput       io.Writer // default os.Stderr
	// TLS, if set, makes the frontend serve TLS (and with ClientCAPEM
	// require client certificates); APIKeys makes it refuse requests
	// without a valid API key. With either, the server's own worker
	// service and the UI use an internal frontend on loopback.
	TLS     *TLS
	APIKeys *APIKeys
	// ProbeTLS is how the readiness probe dials a TLS frontend: trusting
	// its CA, with a client certificate if it requires one.
	ProbeTLS *tls.Config
}

// Server is a running development server. Create it with Start.
type Server struct {
	temporal temporal.Server
	logLevel zap.AtomicLevel
	ui       *uiserver.Server
	uiDone   chan struct{}
	address  string
	// internalAddress is the internal frontend's, "" without one.
	internalAddress string
	probeTLS        *tls.Config
	httpAddress     string
	uiURL           string
	metricsURL      string
	namespaces      []string

	stopOnce sync.Once
	stopErr  error
}

// readyTimeout bounds how long Start waits for the frontend to answer.
const readyTimeout = 60 * time.Second

// DefaultDynamicConfig returns the dynamic config the dev server starts with.
// The intervals are shortened from minutes to seconds so that worker
// deployment version drainage and poller changes show up quickly.
func DefaultDynamicConfig() map[string]any {
	return map[string]any{
		"matching.wv.VersionDrainageStatusVisibilityGracePeriod": 5 * time.Second,
		"matching.wv.VersionDrainageStatusRefreshInterval":       2 * time.Second,
		"matching.PollerHistoryTTL":                              10 * time.Second,
		// Idle long polls return well within the poller history TTL, so a
		// worker waiting for tasks never looks absent.
		"matching.longPollExpirationInterval": 5 * time.Second,
		// New search attributes become usable immediately instead of after a cache refresh.
		"system.forceSearchAttributesCacheRefreshOnRead": true,
		// Both are on by default in 1.32; pinned explicitly because the
		// worker deployment APIs are what this dev server exists for.
		"system.enableDeploymentVersions":       true,
		"frontend.workerVersioningWorkflowAPIs": true,
	}
}

// ParseDynamicConfigFlag parses a "key=value" flag value. The value becomes a
// bool ("true"/"false"), an int, a float64, or otherwise a string; a
// double-quoted value is always a string. Durations such as "5s" stay strings
// here and are converted when the server starts.
func ParseDynamicConfigFlag(s string) (key string, value any, err error) {
	key, raw, ok := strings.Cut(s, "=")
	key = strings.TrimSpace(key)
	if !ok || key == "" {
		return "", nil, fmt.Errorf("dynamic config %q: want key=value", s)
	}
	raw = strings.TrimSpace(raw)
	switch {
	case strings.EqualFold(raw, "true"):
		return key, true, nil
	case strings.EqualFold(raw, "false"):
		return key, false, nil
	}
	if i, err := strconv.Atoi(raw); err == nil {
		return key, i, nil
	}
	if f, err := strconv.ParseFloat(raw, 64); err == nil {
		return key, f, nil
	}
	if len(raw) >= 2 && raw[0] == '"' {
		s, err := strconv.Unquote(raw)
		if err != nil {
			return "", nil, fmt.Errorf("dynamic config %q: %w", key, err)
		}
		return key, s, nil
	}
	return key, raw, nil
}

// Start starts the server (and the UI) and returns once the frontend answers
// health checks, the namespaces can be described and the frontend reaches
// matching and history. On error nothing is left running.
func Start(ctx context.Context, opts Options) (*Server, error) {
	o, err := withDefaults(opts)
	if err != nil {
		return nil, err
	}
	if err := checkFixedPorts(o); err != nil {
		return nil, err
	}
	ports, err := freePorts(o)
	if ports.uiHold != nil {
		defer ports.uiHold.Close() // on error paths; startUI closes it first
	}
	if err != nil {
		return nil, err
	}
	logger, logLevel, err := newLogger(o.LogLevel, o.LogOutput)
	if err != nil {
		return nil, err
	}

	host := connectHost(o.IP)
	s := &Server{
		address:     net.JoinHostPort(host, strconv.Itoa(ports.frontend)),
		httpAddress: net.JoinHostPort(host, strconv.Itoa(ports.http)),
		metricsURL:  "http://" + net.JoinHostPort(host, strconv.Itoa(ports.metrics)) + "/metrics",
		namespaces:  o.Namespaces,
		logLevel:    logLevel,
		probeTLS:    o.probeTLS(),
	}
	services := temporal.DefaultServices
	if o.secure() {
		s.internalAddress = net.JoinHostPort(host, strconv.Itoa(ports.internalFrontend.grpc))
		services = append(slices.Clone(services), string(primitives.InternalFrontendService))
	}

	cfg := serverConfig(o, ports)
	sqlCfg := cfg.Persistence.DataStores[sqliteplugin.PluginName].SQL
	if err := prepareDB(o.DBFile, sqlCfg, cfg.ClusterMetadata.CurrentClusterName, o.Namespaces); err != nil {
		return nil, err
	}

	authorizer, claimMapper := authorizationFor(o.APIKeys, logger)
	s.temporal, err = temporal.NewServer(
		temporal.WithConfig(cfg),
		temporal.ForServices(services),
		temporal.WithLogger(logger),
		temporal.WithAuthorizer(authorizer),
		temporal.WithClaimMapper(func(*config.Config) authorization.ClaimMapper { return claimMapper }),
		temporal.WithDynamicConfigClient(staticDynamicConfig(o.DynamicConfig)),
		temporal.WithClientFactoryProvider(newHoldingFactoryProvider(o.PropagationHold)),
	)
	if err != nil {
		return nil, fmt.Errorf("create temporal server: %w", err)
	}
	if err := s.temporal.Start(); err != nil {
		return nil, fmt.Errorf("start temporal server: %w", err)
	}
	if err := s.waitReady(ctx); err != nil {
		_ = s.Stop()
		return nil, err
	}
	// The UI starts last: it dials the frontend as soon as it is created, and
	// a failed first dial puts that connection into gRPC's reconnect backoff
	// (503s from the UI API for seconds).
	if ports.uiHold != nil {
		if err := s.startUI(ctx, o.IP, ports.ui, ports.uiHold); err != nil {
			_ = s.Stop()
			return nil, err
		}
	}
	return s, nil
}

// Address returns the host:port of the frontend gRPC API.
func (s *Server) Address() string { return s.address }

// HTTPAddress returns the host:port of the frontend HTTP API.
func (s *Server) HTTPAddress() string { return s.httpAddress }

// UIURL returns the Web UI base URL, or "" when the UI is disabled.
func (s *Server) UIURL() string { return s.uiURL }

// MetricsURL returns the Prometheus scrape URL.
func (s *Server) MetricsURL() string { return s.metricsURL }

// Namespaces returns the namespaces registered at start.
func (s *Server) Namespaces() []string { return append([]string(nil), s.namespaces...) }

// Stop stops the UI and the server. It is safe to call more than once.
func (s *Server) Stop() error {
	s.stopOnce.Do(func() {
		s.stopUI()
		// While the services go down one by one, the remaining ones log
		// errors about the missing ones ("Not enough hosts", canceled polls).
		// That is expected noise on every Ctrl-C; a failed stop is still
		// reported through the returned error.
		s.logLevel.SetLevel(zapcore.DPanicLevel)
		s.stopErr = s.temporal.Stop()
	})
	return s.stopErr
}

func withDefaults(o Options) (Options, error) {
	if o.IP == "" {
		o.IP = "127.0.0.1"
	}
	if net.ParseIP(o.IP) == nil {
		return o, fmt.Errorf("temporal listen address %q is not an IP address", o.IP)
	}
	if o.LogLevel == "" {
		o.LogLevel = "warn"
	}
	if o.LogOutput == nil {
		o.LogOutput = os.Stderr
	}
	var namespaces []string
	for _, ns := range o.Namespaces {
		if ns = strings.TrimSpace(ns); ns != "" && !contains(namespaces, ns) {
			namespaces = append(namespaces, ns)
		}
	}
	if len(namespaces) == 0 {
		namespaces = []string{"default"}
	}
	o.Namespaces = namespaces
	return o, nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// portSpec names a user-facing port for error messages.
type portSpec struct {
	port int
	what string
	flag string
}

func userPorts(o Options) []portSpec {
	return []portSpec{
		{o.Port, "frontend", "--temporal-port"},
		{o.HTTPPort, "HTTP API", "--temporal-http-port"},
		{o.UIPort, "UI", "--temporal-ui-port"},
		{o.MetricsPort, "metrics", "--temporal-metrics-port"},
	}
}

// checkFixedPorts fails early with an actionable message instead of letting
// a service die deep inside the server (or, for the UI, exit the process).
func checkFixedPorts(o Options) error {
	seen := map[int]string{}
	for _, p := range userPorts(o) {
		if p.port == 0 || (p.port == -1 && p.flag == "--temporal-ui-port") {
			continue
		}
		if p.port < 0 || p.port > 65535 {
			return fmt.Errorf("temporal %s port %d is out of range (choose another with %s)", p.what, p.port, p.flag)
		}
		if other, dup := seen[p.port]; dup {
			return fmt.Errorf("temporal %s port %d is also requested for %s (choose another with %s)", p.what, p.port, other, p.flag)
		}
		seen[p.port] = p.flag
		l, err := net.Listen("tcp", net.JoinHostPort(o.IP, strconv.Itoa(p.port)))
		if err != nil {
			return fmt.Errorf("temporal %s port %d on %s is already in use (choose another with %s)", p.what, p.port, o.IP, p.flag)
		}
		_ = l.Close()
	}
	return nil
}

type service struct{ grpc, membership int }

type portSet struct {
	frontend, http, ui, metrics int
	frontendMembership          int
	history, matching, worker   service
	internalFrontend            service // only with TLS or API keys

	// uiHold keeps the UI port reserved until the UI binds it (see startUI).
	uiHold net.Listener
}

// freePorts resolves every 0 port to a free one. All probe listeners stay
// open until every port is chosen, so no port is handed out twice. The UI
// port stays reserved until the UI starts.
func freePorts(o Options) (portSet, error) {
	var listeners []net.Listener
	defer func() {
		for _, l := range listeners {
			_ = l.Close()
		}
	}()
	pick := func(ip string, fixed int) (int, error) {
		if fixed != 0 {
			return fixed, nil
		}
		l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
		if err != nil {
			return 0, fmt.Errorf("find a free port on %s: %w", ip, err)
		}
		listeners = append(listeners, l)
		return l.Addr().(*net.TCPAddr).Port, nil
	}

	// Internal services bind where the frontend is reachable from this host
	// (127.0.0.1 by default): ringpop advertises a single broadcast address
	// for all services, the frontend's membership port included.
	internal := connectHost(o.IP)
	var ps portSet
	var err error
	for _, p := range []struct {
		dst   *int
		ip    string
		fixed int
	}{
		{&ps.frontend, o.IP, o.Port},
		{&ps.http, o.IP, o.HTTPPort},
		{&ps.metrics, o.IP, o.MetricsPort},
		{&ps.frontendMembership, internal, 0},
		{&ps.history.grpc, internal, 0},
		{&ps.history.membership, internal, 0},
		{&ps.matching.grpc, internal, 0},
		{&ps.matching.membership, internal, 0},
		{&ps.worker.grpc, internal, 0},
		{&ps.worker.membership, internal, 0},
	} {
		if *p.dst, err = pick(p.ip, p.fixed); err != nil {
			return ps, err
		}
	}
	if o.secure() {
		for _, dst := range []*int{&ps.internalFrontend.grpc, &ps.internalFrontend.membership} {
			if *dst, err = pick(internal, 0); err != nil {
				return ps, err
			}
		}
	}
	if o.UIPort >= 0 {
		l, err := net.Listen("tcp", net.JoinHostPort(o.IP, strconv.Itoa(o.UIPort)))
		if err != nil {
			return ps, fmt.Errorf("reserve UI port: %w", err)
		}
		ps.ui, ps.uiHold = l.Addr().(*net.TCPAddr).Port, l
	}
	return ps, nil
}

// connectHost is the host clients (and the other services) use to reach a
// listener bound to ip.
func connectHost(ip string) string {
	if parsed := net.ParseIP(ip); parsed == nil || parsed.IsUnspecified() {
		return "127.0.0.1"
	}
	return ip
}

func serverConfig(o Options, ps portSet) *config.Config {
	sqlCfg := &config.SQL{
		PluginName:        sqliteplugin.PluginName,
		DatabaseName:      o.DBFile,
		ConnectAttributes: map[string]string{"mode": "rwc"},
	}
	if o.DBFile == "" {
		// The sqlite plugin keeps in-memory databases open for the life of
		// the process, keyed by name: a random name keeps several servers in
		// one process (tests) apart.
		sqlCfg.DatabaseName = fmt.Sprintf("temporaldev-%d", rand.Int64())
		sqlCfg.ConnectAttributes = map[string]string{"mode": "memory", "cache": "shared"}
	}

	host := connectHost(o.IP)
	frontendAddr := net.JoinHostPort(host, strconv.Itoa(ps.frontend))
	internal := func(s service) config.Service {
		return config.Service{RPC: config.RPC{GRPCPort: s.grpc, MembershipPort: s.membership, BindOnIP: host}}
	}
	const clusterName = "active"
	cfg := &config.Config{
		Global: config.Global{
			Membership: config.Membership{MaxJoinDuration: 30 * time.Second, BroadcastAddress: host},
			PProf:      config.PProf{Port: o.PProfPort, Host: o.IP},
			Metrics: &metrics.Config{Prometheus: &metrics.PrometheusConfig{
				ListenAddress: net.JoinHostPort(o.IP, strconv.Itoa(ps.metrics)),
				HandlerPath:   "/metrics",
			}},
		},
		Persistence: config.Persistence{
			DefaultStore:     sqliteplugin.PluginName,
			VisibilityStore:  sqliteplugin.PluginName,
			NumHistoryShards: 1,
			DataStores:       map[string]config.DataStore{sqliteplugin.PluginName: {SQL: sqlCfg}},
		},
		ClusterMetadata: &cluster.Config{
			EnableGlobalNamespace:    false,
			FailoverVersionIncrement: 10,
			MasterClusterName:        clusterName,
			CurrentClusterName:       clusterName,
			ClusterInformation: map[string]cluster.ClusterInformation{
				clusterName: {Enabled: true, InitialFailoverVersion: 1, RPCAddress: frontendAddr},
			},
		},
		DCRedirectionPolicy: config.DCRedirectionPolicy{Policy: "noop"},
		Services: map[string]config.Service{
			"frontend": {RPC: config.RPC{
				GRPCPort:       ps.frontend,
				HTTPPort:       ps.http,
				MembershipPort: ps.frontendMembership,
				BindOnIP:       o.IP,
			}},
			"history":  internal(ps.history),
			"matching": internal(ps.matching),
			"worker":   internal(ps.worker),
		},
		Archival: config.Archival{
			History:    config.HistoryArchival{State: "disabled"},
			Visibility: config.VisibilityArchival{State: "disabled"},
		},
		NamespaceDefaults: config.NamespaceDefaults{Archival: config.ArchivalNamespaceDefaults{
			History:    config.HistoryArchivalNamespaceDefaults{State: "disabled"},
			Visibility: config.VisibilityArchivalNamespaceDefaults{State: "disabled"},
		}},
		// The worker service's internal SDK client dials the frontend
		// through this, or the internal frontend if there is one.
		PublicClient: config.PublicClient{HostPort: frontendAddr},
	}
	if o.secure() {
		cfg.Global.TLS.Frontend = frontendTLS(o.TLS)
		cfg.Services[string(primitives.InternalFrontendService)] = internal(ps.internalFrontend)
		// The server then finds the internal frontend itself.
		cfg.PublicClient = config.PublicClient{}
	}
	return cfg
}

// prepareDB creates the schema for a new database file and registers the
// namespaces directly in the database (existing ones are left alone), so they
// exist before the first client connects.
func prepareDB(file string, sqlCfg *config.SQL, clusterName string, namespaces []string) error {
	if file != "" {
		if _, err := os.Stat(filepath.Dir(file)); err != nil {
			return fmt.Errorf("temporal database directory: %w", err)
		}
		if _, err := os.Stat(file); errors.Is(err, os.ErrNotExist) {
			if err := sqlite.SetupSchema(sqlCfg); err != nil {
				return fmt.Errorf("create temporal database %s: %w", file, err)
			}
		} else if err := forgetMembership(sqlCfg); err != nil {
			return fmt.Errorf("temporal database %s: %w", file, err)
		}
	}
	var nsConfigs []*sqlite.NamespaceConfig
	for _, ns := range namespaces {
		c, err := sqlite.NewNamespaceConfig(clusterName, ns, false, nil)
		if err != nil {
			return fmt.Errorf("namespace %q: %w", ns, err)
		}
		nsConfigs = append(nsConfigs, c)
	}
	if err := sqlite.CreateNamespaces(sqlCfg, nsConfigs...); err != nil {
		return fmt.Errorf("register namespaces: %w", err)
	}
	return nil
}

// forgetMembership deletes the membership rows left by the previous run. The
// services bootstrap their ring from hosts that heartbeated in the last 20s,
// so after a quick restart matching would try to join dead members and stay
// unreachable (and shutdown would then stall for ~15s). Only this process
// uses the file, so every row is stale.
func forgetMembership(sqlCfg *config.SQL) error {
	db, err := persistencesql.NewSQLDB(sqlplugin.DbKindMain, sqlCfg, resolver.NewNoopResolver(), log.NewNoopLogger(), metrics.NoopMetricsHandler)
	if err != nil {
		return err
	}
	defer func() { _ = db.Close() }()
	// Rows expire 48h after their last heartbeat, so a cutoff a year ahead matches all.
	filter := &sqlplugin.PruneClusterMembershipFilter{PruneRecordsBefore: time.Now().AddDate(1, 0, 0)}
	if _, err := db.PruneClusterMembership(context.Background(), filter); err != nil {
		return fmt.Errorf("clear stale cluster membership: %w", err)
	}
	return nil
}

// staticDynamicConfig merges overrides over the defaults. Keys are compared
// case-insensitively, as the server does, so an override always wins over a
// default spelled differently.
func staticDynamicConfig(overrides map[string]any) dynamicconfig.StaticClient {
	dc := dynamicconfig.StaticClient{}
	for _, m := range []map[string]any{DefaultDynamicConfig(), overrides} {
		for k, v := range m {
			dc[dynamicconfig.MakeKey(k)] = normalizeValue(v)
		}
	}
	return dc
}

// normalizeValue turns duration strings ("5s") into time.Duration. The server
// would parse them itself for duration settings, but a typed value is
// unambiguous and shows up correctly in its config dumps.
func normalizeValue(v any) any {
	if s, ok := v.(string); ok {
		if d, err := time.ParseDuration(s); err == nil {
			return d
		}
	}
	return v
}

func newLogger(level string, out io.Writer) (log.Logger, zap.AtomicLevel, error) {
	lvl, err := zap.ParseAtomicLevel(level)
	if err != nil {
		return nil, lvl, fmt.Errorf("temporal log level %q: want debug, info, warn or error", level)
	}
	core := zapcore.NewCore(
		zapcore.NewConsoleEncoder(log.DefaultZapEncoderConfig),
		zapcore.Lock(zapcore.AddSync(out)),
		lvl,
	)
	return log.NewZapLogger(zap.New(core)), lvl, nil
}

// startUI serves the Web UI on the port held by hold. The UI server binds
// the port itself and exits the whole process when it cannot, so the port
// is released only right before it binds.
func (s *Server) startUI(ctx context.Context, ip string, port int, hold net.Listener) error {
	addr := s.address
	if s.internalAddress != "" {
		// A browser on this machine needs no credentials.
		addr = s.internalAddress
	}
	cfg := &uiconfig.Config{
		TemporalGRPCAddress: addr,
		Host:                ip,
		Port:                port,
		EnableUI:            true,
		DefaultNamespace:    s.namespaces[0],
		// Plain HTTP on a dev machine: a Secure CSRF cookie would not be sent back.
		CORS:     uiconfig.CORS{CookieInsecure: true},
		HideLogs: true,
	}
	s.ui = uiserver.NewServer(uioptions.WithConfigProvider(cfg))
	_ = hold.Close()
	s.uiDone = make(chan struct{})
	go func() {
		defer close(s.uiDone)
		_ = s.ui.Start()
	}()
	addr = net.JoinHostPort(connectHost(ip), strconv.Itoa(port))
	s.uiURL = "http://" + addr

	// Wait until it listens, so UIURL works as soon as Start returns.
	deadline := time.Now().Add(10 * time.Second)
	for {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			_ = conn.Close()
			return nil
		}
		select {
		case <-s.uiDone:
			return fmt.Errorf("temporal UI server on %s stopped unexpectedly", addr)
		case <-ctx.Done():
			s.stopUI()
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.stopUI()
			return fmt.Errorf("temporal UI server did not listen on %s: %w", addr, err)
		}
	}
}

func (s *Server) stopUI() {
	if s.ui == nil {
		return
	}
	s.ui.Stop()
	<-s.uiDone
	s.ui = nil
}

// waitReady polls until the frontend passes a health check, every namespace
// can be described, and the frontend reaches matching and history, so callers
// can use the server right away. The frontend answers health checks before
// the other services have joined its membership ring.
func (s *Server) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	var lastErr error
	for {
		if lastErr = s.probe(ctx); lastErr == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("temporal server at %s not ready: %w (last error: %v)", s.address, ctx.Err(), lastErr)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (s *Server) probe(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if s.internalAddress == "" {
		return s.probeAt(ctx, s.address)
	}
	if err := s.probeAt(ctx, s.internalAddress); err != nil {
		return fmt.Errorf("internal frontend: %w", err)
	}
	// Health checks need no API key; the rest is the internal frontend's.
	c, err := client.DialContext(ctx, client.Options{
		HostPort:          s.address,
		ConnectionOptions: client.ConnectionOptions{TLS: s.probeTLS},
		Logger:            sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler)),
	})
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = c.CheckHealth(ctx, &client.CheckHealthRequest{})
	return err
}

func (s *Server) probeAt(ctx context.Context, address string) error {
	c, err := client.DialContext(ctx, client.Options{
		HostPort:  address,
		Namespace: s.namespaces[0],
		Logger:    sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler)),
	})
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := c.CheckHealth(ctx, &client.CheckHealthRequest{}); err != nil {
		return err
	}
	svc := c.WorkflowService()
	for _, ns := range s.namespaces {
		req := &workflowservice.DescribeNamespaceRequest{Namespace: ns}
		if _, err := svc.DescribeNamespace(ctx, req); err != nil {
			return fmt.Errorf("describe namespace %q: %w", ns, err)
		}
	}
	const probe = "temporaldev-readiness-probe"
	// Served by matching.
	if _, err := svc.DescribeTaskQueue(ctx, &workflowservice.DescribeTaskQueueRequest{
		Namespace:     s.namespaces[0],
		TaskQueue:     &taskqueuepb.TaskQueue{Name: probe, Kind: enumspb.TASK_QUEUE_KIND_NORMAL},
		TaskQueueType: enumspb.TASK_QUEUE_TYPE_WORKFLOW,
	}); err != nil {
		return fmt.Errorf("matching: %w", err)
	}
	// Served by history; NotFound proves it answered.
	_, err = svc.DescribeWorkflowExecution(ctx, &workflowservice.DescribeWorkflowExecutionRequest{
		Namespace: s.namespaces[0],
		Execution: &commonpb.WorkflowExecution{WorkflowId: probe},
	})
	var notFound *serviceerror.NotFound
	if err != nil && !errors.As(err, &notFound) {
		return fmt.Errorf("history: %w", err)
	}
	return nil
}
