package temporaldev

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/dynamicconfig"
	"go.temporal.io/server/common/log"
	"go.temporal.io/server/common/metrics"
	persistencesql "go.temporal.io/server/common/persistence/sql"
	"go.temporal.io/server/common/persistence/sql/sqlplugin"
	sqliteplugin "go.temporal.io/server/common/persistence/sql/sqlplugin/sqlite"
	"go.temporal.io/server/common/resolver"
)

func TestParseDynamicConfigFlag(t *testing.T) {
	for _, tc := range []struct {
		in    string
		key   string
		value any
	}{
		{"a.b=true", "a.b", true},
		{"a.b=FALSE", "a.b", false},
		{"a.b=42", "a.b", 42},
		{"a.b=-3", "a.b", -3},
		{"a.b=0.5", "a.b", 0.5},
		{"a.b=5s", "a.b", "5s"},
		{"a.b=hello world", "a.b", "hello world"},
		{`a.b="42"`, "a.b", "42"},
		{"a.b=", "a.b", ""},
		{" a.b = x=y ", "a.b", "x=y"},
	} {
		key, value, err := ParseDynamicConfigFlag(tc.in)
		if err != nil {
			t.Errorf("ParseDynamicConfigFlag(%q): %v", tc.in, err)
			continue
		}
		if key != tc.key || value != tc.value {
			t.Errorf("ParseDynamicConfigFlag(%q) = %q, %#v; want %q, %#v", tc.in, key, value, tc.key, tc.value)
		}
	}
	for _, bad := range []string{"", "novalue", "=1", `a="unterminated`} {
		if _, _, err := ParseDynamicConfigFlag(bad); err == nil {
			t.Errorf("ParseDynamicConfigFlag(%q): want error", bad)
		}
	}
}

// The defaults are plain strings; make sure each names a real setting of the
// pinned server version, with a value of the right type.
func TestDefaultDynamicConfigKeysExist(t *testing.T) {
	want := map[dynamicconfig.Key]any{
		dynamicconfig.VersionDrainageStatusVisibilityGracePeriod.Key(): 5 * time.Second,
		dynamicconfig.VersionDrainageStatusRefreshInterval.Key():       2 * time.Second,
		dynamicconfig.PollerHistoryTTL.Key():                           10 * time.Second,
		dynamicconfig.MatchingLongPollExpirationInterval.Key():         5 * time.Second,
		dynamicconfig.ForceSearchAttributesCacheRefreshOnRead.Key():    true,
		dynamicconfig.EnableDeploymentVersions.Key():                   true,
		dynamicconfig.FrontendEnableWorkerVersioningWorkflowAPIs.Key(): true,
	}
	got := staticDynamicConfig(nil)
	if len(got) != len(want) {
		t.Errorf("got %d defaults, want %d", len(got), len(want))
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %#v, want %#v", k, got[k], v)
		}
	}
}

func TestStaticDynamicConfigOverrides(t *testing.T) {
	dc := staticDynamicConfig(map[string]any{
		"MATCHING.PollerHistoryTTL": "30s", // other spelling must still win
		"limit.maxIDLength":         100,
		"some.string":               "not-a-duration",
	})
	if v := dc[dynamicconfig.PollerHistoryTTL.Key()]; v != 30*time.Second {
		t.Errorf("PollerHistoryTTL = %#v, want 30s", v)
	}
	if v := dc[dynamicconfig.MaxIDLengthLimit.Key()]; v != 100 {
		t.Errorf("maxIDLength = %#v, want 100", v)
	}
	if v := dc[dynamicconfig.MakeKey("some.string")]; v != "not-a-duration" {
		t.Errorf("some.string = %#v", v)
	}
}

func TestPortInUse(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port

	for _, tc := range []struct {
		opts Options
		flag string
	}{
		{Options{Port: port}, "--temporal-port"},
		{Options{HTTPPort: port}, "--temporal-http-port"},
		{Options{UIPort: port}, "--temporal-ui-port"},
		{Options{MetricsPort: port}, "--temporal-metrics-port"},
	} {
		_, err := Start(context.Background(), tc.opts)
		if err == nil {
			t.Fatalf("%s: Start succeeded on a busy port", tc.flag)
		}
		want := "port " + strconv.Itoa(port) + " on 127.0.0.1 is already in use (choose another with " + tc.flag + ")"
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
}

// syncBuffer collects server logs; the server writes from many goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func TestServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Temporal server")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	logs := &syncBuffer{}
	srv, err := Start(ctx, Options{
		Namespaces: []string{"default", "other"},
		// Observable below: the default limit is 1000.
		DynamicConfig: map[string]any{"limit.maxIDLength": 200},
		LogOutput:     logs,
	})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	defer func() {
		if err := srv.Stop(); err != nil {
			t.Errorf("Stop: %v", err)
		}
		if err := srv.Stop(); err != nil {
			t.Errorf("second Stop: %v", err)
		}
		if t.Failed() {
			t.Logf("server logs:\n%s", logs.String())
		}
	}()

	c, err := client.DialContext(ctx, client.Options{
		HostPort: srv.Address(),
		Logger:   sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler)),
	})
	if err != nil {
		t.Fatalf("dial %s: %v", srv.Address(), err)
	}
	defer c.Close()

	t.Run("endpoints", func(t *testing.T) {
		if got := srv.Namespaces(); len(got) != 2 || got[0] != "default" || got[1] != "other" {
			t.Errorf("Namespaces() = %v", got)
		}
		for _, url := range []string{srv.UIURL(), srv.MetricsURL()} {
			if !strings.HasPrefix(url, "http://127.0.0.1:") {
				t.Errorf("URL %q is not on loopback", url)
				continue
			}
			resp, err := http.Get(url)
			if err != nil {
				t.Errorf("GET %s: %v", url, err)
				continue
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Errorf("GET %s: %s", url, resp.Status)
			}
		}
		// The UI's API proxy reaches the frontend over gRPC.
		resp, err := http.Get(srv.UIURL() + "/api/v1/namespaces/other")
		if err != nil {
			t.Fatalf("UI API: %v", err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"other"`) {
			t.Errorf("UI API: %s %s", resp.Status, body)
		}

		nc, err := client.NewNamespaceClient(client.Options{HostPort: srv.Address()})
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		for _, ns := range srv.Namespaces() {
			if _, err := nc.Describe(ctx, ns); err != nil {
				t.Errorf("describe namespace %q: %v", ns, err)
			}
		}
	})

	t.Run("dynamic config override", func(t *testing.T) {
		_, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
			ID:        strings.Repeat("x", 300),
			TaskQueue: "unused",
		}, "NoSuchWorkflow")
		if err == nil || !strings.Contains(strings.ToLower(err.Error()), "length") {
			t.Errorf("want an ID length error with limit.maxIDLength=200, got %v", err)
		}
	})

	t.Run("worker versioning", func(t *testing.T) {
		testWorkerVersioning(ctx, t, c)
	})
}

func hello(ctx workflow.Context, name string) (string, error) {
	return "hello " + name, nil
}

// testWorkerVersioning is the smoke test the dev server exists for: a
// versioned worker registers its deployment version, the version can be made
// current, and a pinned workflow runs on it.
func testWorkerVersioning(ctx context.Context, t *testing.T, c client.Client) {
	const taskQueue = "versioning-smoke"
	w := worker.New(c, taskQueue, worker.Options{
		DeploymentOptions: worker.DeploymentOptions{
			UseVersioning:             true,
			Version:                   worker.WorkerDeploymentVersion{DeploymentName: "d", BuildID: "b1"},
			DefaultVersioningBehavior: workflow.VersioningBehaviorPinned,
		},
	})
	w.RegisterWorkflow(hello)
	if err := w.Start(); err != nil {
		t.Fatalf("start worker: %v", err)
	}
	defer w.Stop()

	handle := c.WorkerDeploymentClient().GetHandle("d")
	deadline := time.Now().Add(20 * time.Second)
	for {
		desc, err := handle.Describe(ctx, client.WorkerDeploymentDescribeOptions{})
		if err == nil && hasVersion(desc.Info, "b1") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("version d/b1 not registered in time (last describe: %+v, err %v)", desc.Info, err)
		}
		time.Sleep(200 * time.Millisecond)
	}

	if _, err := handle.SetCurrentVersion(ctx, client.WorkerDeploymentSetCurrentVersionOptions{BuildID: "b1"}); err != nil {
		t.Fatalf("set current version: %v", err)
	}
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{TaskQueue: taskQueue}, hello, "rainbow")
	if err != nil {
		t.Fatalf("start workflow: %v", err)
	}
	runCtx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	var out string
	if err := run.Get(runCtx, &out); err != nil || out != "hello rainbow" {
		t.Fatalf("workflow result %q, %v", out, err)
	}
}

func hasVersion(info client.WorkerDeploymentInfo, buildID string) bool {
	for _, v := range info.VersionSummaries {
		if v.Version.BuildID == buildID {
			return true
		}
	}
	return false
}

// A file database keeps namespaces across restarts, and a restarted server
// is fully usable; this also covers fixed ports and a disabled UI.
func TestServerFileDB(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Temporal server")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()

	opts := Options{
		Port:       port,
		UIPort:     -1,
		Namespaces: []string{"persisted"},
		DBFile:     t.TempDir() + "/temporal.db",
		LogOutput:  &syncBuffer{},
	}
	var firstRun map[string]bool // host IDs of the first run's membership rows
	for i := range 2 {
		srv, err := Start(ctx, opts)
		if err != nil {
			t.Fatalf("start %d: %v", i, err)
		}
		if want := "127.0.0.1:" + strconv.Itoa(port); srv.Address() != want {
			t.Errorf("Address() = %q, want %q", srv.Address(), want)
		}
		if srv.UIURL() != "" {
			t.Errorf("UIURL() = %q with the UI disabled", srv.UIURL())
		}
		if i == 1 {
			nc, err := client.NewNamespaceClient(client.Options{HostPort: srv.Address()})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := nc.Describe(ctx, "persisted"); err != nil {
				t.Errorf("namespace registered by the first start is gone: %v", err)
			}
			nc.Close()
			// A worker registers its version and runs a workflow on the
			// restarted server.
			c, err := client.DialContext(ctx, client.Options{
				HostPort: srv.Address(),
				Logger:   sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler)),
			})
			if err != nil {
				t.Fatalf("dial %s: %v", srv.Address(), err)
			}
			testWorkerVersioning(ctx, t, c)
			c.Close()
		}
		if err := srv.Stop(); err != nil {
			t.Fatalf("stop %d: %v", i, err)
		}
		// The first run's membership rows must be gone after the restart:
		// left in place, they make the restarted services try to join dead
		// members, and the start wait for its ring (about 45 s). Checked in
		// the file, not by timing the start or the stop.
		hosts := membershipHosts(t, opts.DBFile)
		if i == 0 {
			if len(hosts) == 0 {
				t.Fatal("the first run left no membership rows: nothing to check after the restart")
			}
			firstRun = hosts
		} else {
			for h := range firstRun {
				if hosts[h] {
					t.Errorf("a membership row of the first run (host %x) is still in the file after the restart", h)
				}
			}
		}
		// Only the first start registers "persisted"; the second must find it in the file.
		opts.Namespaces = []string{"default"}
	}
}

func TestBadOptions(t *testing.T) {
	for _, opts := range []Options{
		{LogLevel: "loud"},
		{IP: "localhost"},
		{Port: 70000},
	} {
		if _, err := Start(context.Background(), opts); err == nil {
			t.Errorf("Start(%+v) succeeded", opts)
		}
	}
}

// membershipHosts reads the host IDs of the cluster membership rows in the
// database file of a stopped server.
func membershipHosts(t *testing.T, file string) map[string]bool {
	t.Helper()
	cfg := &config.SQL{PluginName: sqliteplugin.PluginName, DatabaseName: file, ConnectAttributes: map[string]string{"mode": "rwc"}}
	db, err := persistencesql.NewSQLDB(sqlplugin.DbKindMain, cfg, resolver.NewNoopResolver(), log.NewNoopLogger(), metrics.NoopMetricsHandler)
	if err != nil {
		t.Fatalf("open %s: %v", file, err)
	}
	defer func() { _ = db.Close() }()
	rows, err := db.GetClusterMembers(context.Background(), &sqlplugin.ClusterMembershipFilter{})
	if err != nil {
		t.Fatalf("read the membership rows of %s: %v", file, err)
	}
	hosts := map[string]bool{}
	for _, r := range rows {
		hosts[string(r.HostID)] = true
	}
	return hosts
}
