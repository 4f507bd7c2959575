// Package integration tests the controller and its local environment with
// real parts: kube-apiserver, etcd, kube-controller-manager, the node agent,
// a Temporal server and Temporal SDK workers.
package integration

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/rainbow-deploy/rainbow/internal/admission"
	"github.com/rainbow-deploy/rainbow/internal/manager"
	"github.com/rainbow-deploy/rainbow/internal/promquery"
	"github.com/rainbow-deploy/rainbow/internal/temporal"
	"github.com/rainbow-deploy/rainbow/test/harness"
)

var env *harness.Env

// The in-process controller's endpoints.
var probeAddr, metricsAddr string

func TestMain(m *testing.M) {
	harness.DefaultParallel(defaultParallel)
	useSlots()
	harness.Main(m, &env, startManager)
}

// managerUser is the service account config/rbac binds: the controller
// runs with exactly the permissions the manifests grant, so a missing
// +kubebuilder:rbac marker (or a stale config/rbac/role.yaml: run `make
// generate`) fails the tests with "forbidden" in manager.log.
const managerUser = "system:serviceaccount:rainbow-system:rainbow-manager"

// testAllowedHosts is the controller's --allowed-temporal-hosts.
const testAllowedHosts = "127.0.0.1,localhost,[::1],temporal,temporal.example.com:7233"

// webhookName names the test's ValidatingWebhookConfiguration and the
// Secret of its certificate: config/rbac's name, the only webhook
// configuration the controller may write.
const webhookName = "rainbow-validating-webhook"

// webhookConfigMu serializes the tests' patches of that configuration
// (each narrows one webhook's selectors): they run in parallel, and a
// merge patch replaces the whole list of webhooks it read.
var webhookConfigMu sync.Mutex

// startManager applies config/rbac and runs the controller in this process
// as managerUser, logging to manager.log in the environment's directory.
func startManager(e *harness.Env) (func(), error) {
	rbac, err := e.Kubectl(nil, "kustomize", "config/rbac")
	if err != nil {
		return nil, err
	}
	ns := []byte("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: rainbow-system\n")
	for _, objs := range [][]byte{ns, rbac} {
		if _, err := e.Kubectl(objs, "apply", "--server-side", "--field-manager=rainbow-test", "-f", "-"); err != nil {
			return nil, err
		}
	}
	logPath := filepath.Join(e.Info.Dir, "manager.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	fmt.Fprintln(os.Stderr, "controller log:", logPath)
	logger := zap.New(zap.WriteTo(logFile), zap.UseDevMode(true))
	log.SetLogger(logger)
	// client-go logs too, such as Events refused by a terminating namespace.
	klog.SetLogger(logger)

	// The webhook as a manager on this machine serves it (dev/webhook),
	// on a free port, its certificate made by the manager's own rotation.
	_, port, _ := net.SplitHostPort(harness.FreeAddr())
	webhookPort, _ := strconv.Atoi(port)
	hook := harness.LocalWebhook{Name: webhookName, Port: webhookPort, CertDir: filepath.Join(e.Info.Dir, "webhook-certs")}
	removeWebhook, err := e.InstallLocalWebhook(hook)
	if err != nil {
		return nil, err
	}
	webhookOpts := hook.Options()
	controllerSA := admission.ServiceAccountIdentity("rainbow-system", "rainbow-manager")
	webhookOpts.ControllerUser, webhookOpts.ControllerGroups = controllerSA.Username, controllerSA.Groups
	// The external metrics API, next to the webhook: the API server calls
	// it at the environment's host address, so the server listens on all.
	metricsAPI := harness.LocalExternalMetrics{Service: "rainbow-test-external-metrics", Port: webhookPort}
	removeMetricsAPI, err := e.InstallLocalExternalMetrics(metricsAPI)
	if err != nil {
		removeWebhook()
		return nil, err
	}
	webhookOpts.Host = ""
	webhookOpts.Rotation.ExtraDNSNames = []string{metricsAPI.DNSName()}
	removeWebhook = func(removeHook func()) func() {
		return func() { removeMetricsAPI(); removeHook() }
	}(removeWebhook)

	// Every address the tests name (their own servers and proxies on this
	// machine, and the made-up ones of validation tests); the security
	// tests use others (127.0.0.2, attacker.test).
	allowedHosts, err := temporal.ParseAllowedHosts(testAllowedHosts)
	if err != nil {
		removeWebhook()
		return nil, err
	}

	// Real HTTP receivers of each notification form (notify_test.go).
	sinks, stopReceivers, err := startReceivers()
	if err != nil {
		removeWebhook()
		return nil, err
	}
	removeWebhook = func(removeHook func()) func() {
		return func() { removeHook(); stopReceivers() }
	}(removeWebhook)

	cfg := rest.CopyConfig(e.REST)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: managerUser}
	probeAddr, metricsAddr = harness.FreeAddr(), harness.FreeAddr()
	mgr, err := manager.New(cfg, manager.Options{
		Identity:    "rainbow-test",
		MetricsAddr: metricsAddr,
		ProbeAddr:   probeAddr,
		MaxVersions: manager.DefaultMaxVersions,
		Logger:      logger,
		Webhook:     webhookOpts,
		// As a cluster administrator would (--allowed-temporal-hosts).
		AllowedTemporalHosts: allowedHosts,
		// Backlogs are read every 3s (15s by default), so that HPAs on
		// them react within seconds.
		BacklogInterval: 3 * time.Second,
		ExternalMetrics: true,
		Notify:          sinks,
		// Prometheus checks query the server startPrometheus runs there.
		AnalysisPrometheus: promquery.Config{URL: "http://" + promAddr},
	})
	if err != nil {
		removeWebhook()
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	stop := func() {
		// First the webhook configuration: without the manager, it would
		// refuse every change to a TemporalWorkerOwnedResource.
		removeWebhook()
		cancel()
		select {
		case err := <-done:
			if err != nil {
				fmt.Fprintln(os.Stderr, "controller:", err)
			}
		case <-time.After(time.Minute):
			fmt.Fprintln(os.Stderr, "controller did not stop within a minute")
		}
		logFile.Close()
	}
	// Tests start once it serves /readyz (which waits for the webhook's
	// certificate) and the API server gets answers from the webhook, or
	// fail at once if it cannot.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		select {
		case err := <-done:
			removeWebhook()
			logFile.Close()
			return nil, fmt.Errorf("controller stopped at start: %v (log: %s)", err, logPath)
		default:
		}
		if resp, err := http.Get("http://" + probeAddr + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			stop()
			return nil, fmt.Errorf("controller not ready after 2 minutes (log: %s)", logPath)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := e.WaitForWebhook(context.Background(), time.Minute); err != nil {
		stop()
		return nil, fmt.Errorf("%v (log: %s)", err, logPath)
	}
	if err := e.WaitForExternalMetrics(context.Background(), time.Minute); err != nil {
		stop()
		return nil, fmt.Errorf("%v (log: %s)", err, logPath)
	}
	return stop, nil
}
