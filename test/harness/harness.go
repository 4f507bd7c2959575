// Package harness starts the local environment once per test package and
// gives each test its own Kubernetes namespace and Temporal names.
//
// Use it from TestMain:
//
//	var env *harness.Env
//	func TestMain(m *testing.M) { harness.Main(m, &env) }
//
// Set RAINBOW_ENV_DIR to the state directory of a devenv that is already
// running (for example one started with `make dev-env`) to reuse it.
package harness

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	rainbowv1alpha1 "github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/dev/demoworker"
	"github.com/rainbow-deploy/rainbow/dev/localenv"
	"github.com/rainbow-deploy/rainbow/dev/localenv/process"
	"github.com/rainbow-deploy/rainbow/dev/localenv/temporalauth"
)

// Env is a running local environment and clients for it.
type Env struct {
	Info     localenv.Info
	Root     string // repository root
	BinDir   string // the project's built binaries (devenv, demo-worker, ...)
	REST     *rest.Config
	Kube     crclient.Client
	Clients  kubernetes.Interface
	Temporal client.Client
	Scheme   *runtime.Scheme
	proc     *process.Process
}

// DevenvFlags are added to the flags of the devenv that Start starts; a
// package's TestMain sets them before Main (test/incluster maps the
// manager's image to its OCI layout with --image).
var DevenvFlags []string

// Setup runs once the environment is up, before the tests, to start what
// the package's tests share (the controller, for example). stop runs after
// the tests, before the environment stops.
type Setup func(*Env) (stop func(), err error)

// Main starts the environment and runs setups, the package's tests, the
// setups' stops (in reverse) and stops the environment.
func Main(m *testing.M, env **Env, setups ...Setup) {
	e, err := Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, "harness:", err)
		os.Exit(1)
	}
	*env = e
	var stops []func()
	stopAll := func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
		e.Stop()
	}
	for _, setup := range setups {
		stop, err := setup(e)
		if err != nil {
			fmt.Fprintln(os.Stderr, "harness: setup:", err)
			stopAll()
			os.Exit(1)
		}
		stops = append(stops, stop)
	}
	code := m.Run()
	stopAll()
	os.Exit(code)
}

// DefaultParallel makes n the package's -parallel (how many of its
// parallel tests run at once; Go's default is the cores) unless the command
// line set it. A TestMain calls it before Main, for tests that mostly wait.
func DefaultParallel(n int) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		_ = flag.Set("test.parallel", strconv.Itoa(n))
	}
}

// RepoRoot finds the repository root from the working directory.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if data, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil &&
			strings.Contains(string(data), "module github.com/rainbow-deploy/rainbow\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("repository root (go.mod of github.com/rainbow-deploy/rainbow) not found above the working directory")
		}
		dir = parent
	}
}

// Start starts a devenv on free ports, or attaches to RAINBOW_ENV_DIR.
func Start() (*Env, error) { return start(true) }

// StartWith starts a devenv of its own on free ports with extra flags
// (--temporal-tls=mtls, say), whatever RAINBOW_ENV_DIR says.
func StartWith(args ...string) (*Env, error) { return start(false, args...) }

func start(reuse bool, args ...string) (*Env, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	e := &Env{Root: root, BinDir: filepath.Join(root, ".cache", "bin")}
	if dir := os.Getenv("RAINBOW_ENV_DIR"); dir != "" && reuse {
		if e.Info, err = localenv.ReadInfo(dir); err != nil {
			return nil, fmt.Errorf("RAINBOW_ENV_DIR=%s: no running environment there: %w", dir, err)
		}
		return e, e.connect()
	}
	for _, bin := range []string{"devenv", "demo-worker"} {
		if _, err := os.Stat(filepath.Join(e.BinDir, bin)); err != nil {
			return nil, fmt.Errorf("%s is not built in %s: run the tests with `make test`", bin, e.BinDir)
		}
	}
	// Free ports are picked by devenv; another test package's environment
	// starting at the same moment may take one first. Try again then.
	for attempt := 1; ; attempt++ {
		err := e.startDevenv(root, args)
		if err == nil {
			return e, nil
		}
		if attempt == 3 || !strings.Contains(err.Error(), "address already in use") {
			return nil, err
		}
	}
}

// startDevenv starts one devenv and waits until it is ready.
func (e *Env) startDevenv(root string, extra []string) error {
	dir, err := os.MkdirTemp("", "rainbow-env-")
	if err != nil {
		return err
	}
	args := []string{
		"--dir=" + dir,
		"--kube-bin-dir=" + filepath.Join(root, ".cache", "kube"),
		"--program-dir=" + e.BinDir,
		"--apiserver-port=0", "--temporal-port=0", "--temporal-ui-port=-1",
	}
	args = append(args, extra...)
	args = append(args, DevenvFlags...)
	e.proc, err = process.Start("devenv", filepath.Join(e.BinDir, "devenv"), args, os.Environ(), filepath.Join(dir, "devenv.log"))
	if err != nil {
		return err
	}
	deadline := time.Now().Add(3 * time.Minute)
	for {
		if err := e.proc.ExitError(); err != nil {
			return fmt.Errorf("%w; log:\n%s%s", err, process.Tail(e.proc.LogPath, 20), bindFailure(dir))
		}
		if e.Info, err = localenv.ReadInfo(dir); err == nil {
			break
		}
		if time.Now().After(deadline) {
			e.Stop()
			return fmt.Errorf("devenv was not ready after 3m; its log:\n%s", process.Tail(e.proc.LogPath, 40))
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := e.connect(); err != nil {
		e.Stop()
		return err
	}
	return nil
}

// bindFailure is the first component log line of dir that says a port was
// taken, if any: devenv's own log only says that a component exited.
func bindFailure(dir string) string {
	logs, _ := filepath.Glob(filepath.Join(dir, "logs", "*.log"))
	logs = append(logs, filepath.Join(dir, "temporal.log"))
	for _, l := range logs {
		data, _ := os.ReadFile(l)
		for _, line := range strings.Split(string(data), "\n") {
			if strings.Contains(line, "address already in use") {
				return "\n" + filepath.Base(l) + ": " + line
			}
		}
	}
	return ""
}

func (e *Env) connect() error {
	var err error
	if e.REST, err = clientcmd.BuildConfigFromFlags("", e.Info.Kubeconfig); err != nil {
		return err
	}
	e.REST.QPS, e.REST.Burst = 100, 200
	e.Scheme = runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(e.Scheme); err != nil {
		return err
	}
	if err := apiextensionsv1.AddToScheme(e.Scheme); err != nil {
		return err
	}
	if err := rainbowv1alpha1.AddToScheme(e.Scheme); err != nil {
		return err
	}
	if e.Clients, err = kubernetes.NewForConfig(e.REST); err != nil {
		return err
	}
	if err := e.InstallCRDs(context.Background()); err != nil {
		return err
	}
	// Created after the CRDs are served, so its REST mapper knows them.
	if e.Kube, err = crclient.New(e.REST, crclient.Options{Scheme: e.Scheme}); err != nil {
		return err
	}
	opts, err := e.TemporalOptions()
	if err != nil {
		return err
	}
	e.Temporal, err = client.Dial(opts)
	return err
}

// TemporalOptions dial the environment's Temporal with the credentials
// devenv made, if it asks for any.
func (e *Env) TemporalOptions() (client.Options, error) {
	opts := client.Options{HostPort: e.Info.TemporalAddress, Namespace: e.Info.TemporalNamespace, Logger: quietLogger{}}
	if t := e.Info.TemporalTLS; t != nil {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM([]byte(t.CA)) {
			return opts, errors.New("env.json: temporalTLS.ca holds no PEM certificate")
		}
		cfg := &tls.Config{RootCAs: pool, ServerName: t.ServerName, MinVersion: tls.VersionTLS12}
		if t.ClientAuth {
			pair, err := tls.X509KeyPair([]byte(t.ClientCert), []byte(t.ClientKey))
			if err != nil {
				return opts, fmt.Errorf("env.json: temporalTLS client certificate: %w", err)
			}
			cfg.Certificates = []tls.Certificate{pair}
		}
		opts.ConnectionOptions.TLS = cfg
	}
	if k := e.Info.TemporalAPIKey; k != "" {
		opts.Credentials = client.NewAPIKeyStaticCredentials(k)
	}
	return opts, nil
}

// Authority is what the environment's Temporal trusts, to issue client
// certificates and API keys it accepts.
func (e *Env) Authority() (*temporalauth.Authority, error) {
	if e.Info.TemporalAuthDir == "" {
		return nil, errors.New("this environment's Temporal runs without TLS or API keys (devenv --temporal-tls, --temporal-auth)")
	}
	return temporalauth.Load(e.Info.TemporalAuthDir)
}

// Stop stops the environment if this harness started it.
func (e *Env) Stop() {
	if e.Temporal != nil {
		e.Temporal.Close()
	}
	if e.proc != nil {
		e.proc.Stop(60 * time.Second)
	}
}

// T is one test's slice of the environment.
type T struct {
	*testing.T
	Env *Env
	// Namespace is a fresh Kubernetes namespace, deleted after the test.
	Namespace string
	// Suffix is random and unique to this test, for Temporal names.
	Suffix string
}

// NewTest creates a namespace for t and deletes it when t ends.
func (e *Env) NewTest(t *testing.T) *T {
	t.Helper()
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	suffix := hex.EncodeToString(b)
	ns := sanitize(t.Name(), 63-len(suffix)-1) + "-" + suffix
	obj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{"rainbow.temporal.io/test": "true"}}}
	if err := e.Kube.Create(context.Background(), obj); err != nil {
		t.Fatalf("create namespace %s: %v", ns, err)
	}
	t.Cleanup(func() {
		if err := e.Kube.Delete(context.Background(), obj); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete namespace %s: %v", ns, err)
		}
	})
	return &T{T: t, Env: e, Namespace: ns, Suffix: suffix}
}

// Hello runs the demo worker's short workflow on taskQueue; its answer
// names the build that ran it.
func (t *T) Hello(taskQueue string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run, err := t.Env.Temporal.ExecuteWorkflow(ctx, client.StartWorkflowOptions{TaskQueue: taskQueue}, demoworker.HelloWorkflow, "test")
	if err != nil {
		t.Fatalf("start Hello: %v", err)
	}
	var out string
	if err := run.Get(ctx, &out); err != nil {
		t.Fatalf("Hello: %v", err)
	}
	return out
}

// TaskQueue is a task queue name unique to this test.
func (t *T) TaskQueue(name string) string { return t.Namespace + "-" + name }

// Eventually polls check every 250ms until it reports done, failing the
// test after timeout with what was expected and what was last seen.
func (t *T) Eventually(timeout time.Duration, expected string, check func() (done bool, seen string)) {
	t.Helper()
	Eventually(t.T, timeout, expected, check)
}

// Eventually is the package-level form of T.Eventually.
func Eventually(t testing.TB, timeout time.Duration, expected string, check func() (done bool, seen string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	seen := "(nothing yet)"
	for {
		done, s := check()
		if s != "" {
			seen = s
		}
		if done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s\n  expected: %s\n  last seen: %s", timeout, expected, seen)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// FreeAddr is a local address whose port was free a moment ago.
func FreeAddr() string {
	port, err := process.FreePort("127.0.0.1")
	if err != nil {
		panic(err)
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
}

// ProcessAlive reports whether a pid is running (and not a zombie).
func ProcessAlive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil {
		return false
	}
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return false
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if strings.HasPrefix(s.Text(), "State:") {
			return !strings.Contains(s.Text(), "zombie")
		}
	}
	return true
}

func sanitize(name string, max int) string {
	var b strings.Builder
	for _, r := range strings.ToLower(name) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			b.WriteRune('-')
		}
	}
	s := strings.Trim(b.String(), "-")
	for strings.Contains(s, "--") {
		s = strings.ReplaceAll(s, "--", "-")
	}
	if len(s) > max {
		s = strings.TrimRight(s[:max], "-")
	}
	return s
}

// Descendants lists the pids of every process below the devenv this harness
// started: the control plane and the worker processes.
func (e *Env) Descendants() []int {
	if e.proc == nil {
		return nil
	}
	children := map[int][]int{}
	entries, _ := os.ReadDir("/proc")
	for _, ent := range entries {
		var pid int
		if _, err := fmt.Sscanf(ent.Name(), "%d", &pid); err != nil {
			continue
		}
		data, err := os.ReadFile(filepath.Join("/proc", ent.Name(), "stat"))
		if err != nil {
			continue
		}
		// The command name may hold spaces; fields resume after the last ')'.
		rest := string(data[strings.LastIndexByte(string(data), ')')+1:])
		var state string
		var ppid int
		if _, err := fmt.Sscanf(rest, " %s %d", &state, &ppid); err == nil {
			children[ppid] = append(children[ppid], pid)
		}
	}
	var out []int
	queue := []int{e.proc.Pid()}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out
}
