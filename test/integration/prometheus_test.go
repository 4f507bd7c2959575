package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/test/harness"
)

// promAddr is the Prometheus the in-process controller's Prometheus checks
// query (--analysis-prometheus-url). Nothing listens there until a test
// starts Prometheus (startPrometheus): until then those checks are
// inconclusive, and no other test has any.
var promAddr = harness.FreeAddr()

// startPrometheus makes sure Debian's Prometheus server (make promtool
// installs it) runs on promAddr until the test ends. The tests that need it
// run in parallel and share one server, as they share the controller that
// queries it: the first starts it, the last to end stops it.
func startPrometheus(t *testing.T) {
	t.Helper()
	prom.mu.Lock()
	defer prom.mu.Unlock()
	if prom.users == 0 {
		stop, err := runPrometheus(t.Name())
		if err != nil {
			t.Fatal(err)
		}
		prom.stop = stop
	}
	prom.users++
	t.Cleanup(func() {
		prom.mu.Lock()
		defer prom.mu.Unlock()
		if prom.users--; prom.users == 0 {
			prom.stop()
		}
	})
}

// prom is the shared Prometheus server and how many tests use it.
var prom struct {
	mu    sync.Mutex
	users int
	stop  func()
}

// runPrometheus starts Prometheus on promAddr, storing in a temporary
// directory and scraping every second each running pod, in any namespace,
// with a container port named metrics, at the pod's IP and that port: what
// a pod-role kubernetes_sd_configs job keeping that port name scrapes.
// Debian builds Prometheus without Kubernetes service discovery, so the
// test lists those pods itself and keeps a file_sd file of them up to date.
// It returns once Prometheus is ready; stop stops it and removes its data.
func runPrometheus(name string) (stop func(), err error) {
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		if _, serr := os.Stat("/usr/bin/prometheus"); serr != nil {
			return nil, fmt.Errorf("no Prometheus server (%v): run make promtool, which installs Debian's prometheus package", err)
		}
		bin = "/usr/bin/prometheus"
	}
	dir, err := os.MkdirTemp("", "rainbow-prometheus-")
	if err != nil {
		return nil, err
	}
	targets := filepath.Join(dir, "targets.json")
	config := fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: workers
    file_sd_configs:
      - files: [%q]
        refresh_interval: 1s
`, targets)
	configPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(configPath, []byte(config), 0o644); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	discovered := make(chan struct{})
	go func() {
		defer close(discovered)
		discoverPods(ctx, targets)
	}()
	logPath := filepath.Join(env.Info.Dir, "prometheus-"+strings.ReplaceAll(name, "/", "-")+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		cancel()
		<-discovered
		os.RemoveAll(dir)
		return nil, err
	}
	cmd := exec.Command(bin, "--config.file="+configPath, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+promAddr, "--log.level=info")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	exited := make(chan struct{})
	stop = func() {
		if cmd.Process != nil {
			cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-exited:
			case <-time.After(15 * time.Second):
				cmd.Process.Kill()
				<-exited
			}
		}
		cancel()
		<-discovered
		logFile.Close()
		os.RemoveAll(dir)
	}
	if err := cmd.Start(); err != nil {
		close(exited)
		stop()
		return nil, fmt.Errorf("start %s: %v", bin, err)
	}
	fmt.Fprintf(os.Stderr, "Prometheus %s on %s, log %s\n", bin, promAddr, logPath)
	go func() { cmd.Wait(); close(exited) }()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(250 * time.Millisecond) {
		select {
		case <-exited:
			stop()
			return nil, fmt.Errorf("Prometheus exited at start (log: %s)", logPath)
		default:
		}
		resp, err := http.Get("http://" + promAddr + "/-/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return stop, nil
			}
			err = fmt.Errorf("%s", resp.Status)
		}
		if time.Now().After(deadline) {
			stop()
			return nil, fmt.Errorf("Prometheus not ready on %s after a minute: %v (log: %s)", promAddr, err, logPath)
		}
	}
}

// discoverPods writes the scrape targets of running pods with a metrics
// port to file, as file_sd_configs reads it, whenever they change, until
// ctx ends.
func discoverPods(ctx context.Context, file string) {
	last := ""
	for ctx.Err() == nil {
		var pods corev1.PodList
		if err := env.Kube.List(ctx, &pods); err == nil {
			type group struct {
				Targets []string          `json:"targets"`
				Labels  map[string]string `json:"labels"`
			}
			groups := []group{}
			for _, p := range pods.Items {
				if p.Status.PodIP == "" || p.Status.Phase != corev1.PodRunning {
					continue
				}
				for _, c := range p.Spec.Containers {
					for _, port := range c.Ports {
						if port.Name == "metrics" {
							groups = append(groups, group{Targets: []string{net.JoinHostPort(p.Status.PodIP, strconv.Itoa(int(port.ContainerPort)))},
								Labels: map[string]string{"kubernetes_namespace": p.Namespace, "pod": p.Name}})
						}
					}
				}
			}
			data, _ := json.Marshal(groups)
			if string(data) != last {
				tmp := file + ".tmp"
				if os.WriteFile(tmp, data, 0o644) == nil && os.Rename(tmp, file) == nil {
					last = string(data)
				}
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// usesPrometheus: a check of a has kind Prometheus.
func usesPrometheus(a *v1alpha1.AnalysisSpec) bool {
	for _, c := range a.Checks {
		if c.Kind == v1alpha1.CheckPrometheus {
			return true
		}
	}
	return false
}

// scrapedWorker makes a version's pods serve the SDK's metrics on their
// own IP (DEMO_METRICS_ADDR) at the port named metrics, which
// startPrometheus scrapes; extra env vars follow.
func scrapedWorker(t *v1alpha1.TemporalWorkerDeployment, env ...corev1.EnvVar) {
	c := &t.Spec.Template.Spec.Containers[0]
	c.Ports = append(c.Ports, corev1.ContainerPort{Name: "metrics", ContainerPort: 9090})
	c.Env = append(c.Env,
		corev1.EnvVar{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
		corev1.EnvVar{Name: "DEMO_METRICS_ADDR", Value: "$(POD_IP):9090"})
	c.Env = append(c.Env, env...)
}

// activityFailureRatio is the share of the target's activity attempts
// that failed in the window: 0 while none failed (the SDK's failure
// counter appears with the first failure), and no data until 20 attempts
// ran on it. A share of a few attempts decides nothing: in a CI run the
// first step's first evaluation saw 0 of a handful of a failing version's
// attempts fail (its failure counter's first scrape is not an increase),
// passed, and the version ramped on.
const activityFailureRatio = `(sum(increase(temporal_activity_execution_failed_total{worker_build_id="{{ .BuildID }}"}[{{ .Window }}])) or vector(0))
/ sum(increase(temporal_activity_execution_latency_seconds_count{worker_build_id="{{ .BuildID }}"}[{{ .Window }}]))
and on() sum(increase(temporal_activity_execution_latency_seconds_count{worker_build_id="{{ .BuildID }}"}[{{ .Window }}])) >= 20`

// TestRolloutAnalysisPrometheus judges rollouts by a Prometheus check
// against a real Prometheus server scraping the demo workers' SDK metrics:
// a healthy version passes it and becomes current; a version whose
// activity attempts fail half the time (retried, so its workflows all
// succeed and Temporal's visibility shows nothing wrong) is aborted at its
// first step, routing goes back to the current version, and status names
// the check, the query as sent, the value, the bound and the window; a
// query answering several series holds the first step, inconclusive.
func TestRolloutAnalysisPrometheus(t *testing.T) {
	parallel(t)
	startPrometheus(t)
	r := newRollout(env.NewTest(t), "prom")
	twd := r.Spec("v1")
	scrapedWorker(twd)
	twd.Spec.Rollout = v1alpha1.RolloutSpec{
		Strategy: v1alpha1.StrategyProgressive,
		Steps:    steps([]int32{30, 70}, 5*time.Second),
		Analysis: &v1alpha1.AnalysisSpec{
			Interval: &metav1.Duration{Duration: 5 * time.Second},
			Checks: []v1alpha1.AnalysisCheck{{Name: "activity-failures", Kind: v1alpha1.CheckPrometheus,
				Prometheus: &v1alpha1.PrometheusCheck{Query: activityFailureRatio, Max: ptr.To("0.1")}}},
		},
	}
	v1 := r.Create(twd)
	r.WaitCurrent(5*time.Minute, v1)
	r.helloLoad(t)

	// Healthy: the check passes and the version becomes current.
	v2 := r.SetImage("v2")
	got := r.WaitCurrent(4*time.Minute, v2)
	a := got.Status.Analysis
	if a == nil || a.BuildID != v2 || a.Aborted != "" || len(a.Checks) != 1 || a.Checks[0].Result != v1alpha1.AnalysisPassed ||
		!strings.Contains(a.Checks[0].Message, "within max 0.1") || !strings.Contains(a.Checks[0].Message, `worker_build_id="`+v2+`"`) {
		t.Fatalf("analysis of healthy %s: %+v", v2, a)
	}
	r.Logf("%s current after its Prometheus check passed: %s", v2, a.Checks[0].Message)

	// Bad at the activity level only: aborted at its first step.
	r.Update(func(t *v1alpha1.TemporalWorkerDeployment) {
		t.Spec.Template.Spec.Containers[0].Image = harness.DemoImage("v3")
		t.Spec.Template.Spec.Containers[0].Env = append(t.Spec.Template.Spec.Containers[0].Env,
			corev1.EnvVar{Name: "DEMO_ACTIVITY_FAIL_SHARE", Value: "0.5"})
	})
	v3 := r.BuildID()
	var sawRamp atomic.Int32
	got = r.waitFor(4*time.Minute, "the rollout of "+v3+" aborted by the Prometheus check", func(twd *v1alpha1.TemporalWorkerDeployment) bool {
		if tv := twd.Status.TargetVersion; tv != nil && tv.BuildID == v3 && tv.RampPercentage != nil {
			sawRamp.Store(*tv.RampPercentage)
		}
		return hasCondition(twd, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonRolloutAborted)
	})
	if p := sawRamp.Load(); p != 0 && p != 30 {
		t.Fatalf("%s ramped %d%% before the abort; the failures show at the first step (30%%)", v3, p)
	}
	a = got.Status.Analysis
	if a == nil || a.BuildID != v3 || !strings.Contains(a.Aborted, "check activity-failures") || !strings.Contains(a.Aborted, "above max 0.1") ||
		!strings.Contains(a.Aborted, `worker_build_id="`+v3+`"`) || !strings.Contains(a.Aborted, " since ") {
		t.Fatalf("status.analysis does not name the check, the query as sent, its value, the bound and the window: %+v", a)
	}
	if msg := findCondition(got, v1alpha1.ConditionReady).Message; !strings.Contains(msg, a.Aborted) {
		t.Fatalf("Ready message lacks the evidence: %s", msg)
	}
	r.Logf("%s aborted: %s", v3, a.Aborted)
	r.Eventually(time.Minute, "routing back on "+v2+" alone", func() (bool, string) {
		cur, ramping, _ := r.routing()
		return cur == v2 && ramping == "", fmt.Sprintf("current %s, ramping %q", cur, ramping)
	})
	r.waitEvent(time.Minute, v1alpha1.ReasonAnalysisFailed)

	// A query answering one series per worker is inconclusive: the first
	// step holds past its pause, and status says to aggregate.
	r.Update(func(t *v1alpha1.TemporalWorkerDeployment) {
		c := &t.Spec.Template.Spec.Containers[0]
		c.Image = harness.DemoImage("v4")
		c.Env = c.Env[:len(c.Env)-1]
		t.Spec.Rollout.Analysis.Checks[0].Prometheus.Query = `up{job="workers"}`
	})
	v4 := r.BuildID()
	held := r.waitFor(3*time.Minute, v4+" held at its first step, inconclusive", func(twd *v1alpha1.TemporalWorkerDeployment) bool {
		a := twd.Status.Analysis
		return a != nil && a.BuildID == v4 && len(a.Checks) == 1 && a.Checks[0].Result == v1alpha1.AnalysisInconclusive &&
			strings.Contains(a.Checks[0].Message, "series; it must aggregate to one value") &&
			strings.Contains(findCondition(twd, v1alpha1.ConditionReady).Message, "holding the 30% ramp")
	})
	r.Logf("%s held: %s", v4, held.Status.Analysis.Checks[0].Message)
	if cur, ramping, pct := r.routing(); cur != v2 || ramping != v4 || pct != 30 {
		t.Fatalf("routing while inconclusive: current %s, %s ramping %g%%; want %s current and %s held at 30%%", cur, ramping, pct, v2, v4)
	}
}
