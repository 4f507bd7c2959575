// Package incluster installs the controller into the local environment the
// way users install it, `kubectl apply --server-side -k config/default`,
// and tests it running as pods of its image, the OCI layout `make image`
// builds, which the node agent runs under runc: as the image's non-root
// user with a read-only root file system, under its own service account and RBAC,
// with the in-cluster configuration the node agent gives pods (projected
// service-account token, CA, KUBERNETES_SERVICE_HOST/PORT), leader election
// between two replicas, `kubectl logs`, the probes and the webhook behind
// its Service. Its environment runs no other controller (unlike
// test/integration's, which runs one in the test process).
package incluster

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/utils/ptr"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rainbow-deploy/rainbow/dev/localenv/nodeagent"
	"github.com/rainbow-deploy/rainbow/internal/manager"
	"github.com/rainbow-deploy/rainbow/test/harness"
)

var env *harness.Env

// imageLayout is where `make image` writes the manager's image.
const imageLayout = ".cache/image/oci"

func TestMain(m *testing.M) {
	if root, err := harness.RepoRoot(); err == nil {
		// The node agent runs the manifests' image from the layout, under runc.
		harness.DevenvFlags = []string{"--image=rainbow.local/manager=" + filepath.Join(root, imageLayout)}
	}
	harness.Main(m, &env)
}

const (
	systemNS   = "rainbow-system"
	deployName = "rainbow-controller"
	managerSA  = "system:serviceaccount:rainbow-system:rainbow-manager"
)

// podNetwork holds the addresses the node agent gives pods.
var podNetwork = netip.MustParsePrefix("198.18.0.0/15")

func TestControllerRunsInCluster(t *testing.T) {
	// Without the image or the runtime this test cannot say anything:
	// it fails and says why, it never skips.
	if _, err := os.Stat(filepath.Join(env.Root, imageLayout, "index.json")); err != nil {
		t.Fatalf("the manager's image is not built (the node agent runs rainbow.local/manager from %s): run `make image`: %v", imageLayout, err)
	}
	runc, err := nodeagent.FindRunc("")
	if err == nil {
		var out []byte
		if out, err = exec.Command(runc, "--version").CombinedOutput(); err != nil {
			err = fmt.Errorf("%s --version: %w: %s", runc, err, out)
		}
	}
	if err != nil {
		t.Fatalf("the OCI runtime cannot run here, so the image cannot: %v", err)
	}
	ctx := context.Background()
	install(t)
	pods := waitReplicasReady(t, 2, nil)

	t.Run("the image runs as its non-root user with a read-only root", func(t *testing.T) {
		for _, p := range pods {
			checkImageContainer(t, runc, p)
		}
	})

	t.Run("kubectl top reads the containers", func(t *testing.T) {
		harness.Eventually(t, time.Minute, "kubectl top pods shows memory for both replicas", func() (bool, string) {
			out, err := env.Kubectl(nil, "top", "pods", "-n", systemNS, "--no-headers")
			if err != nil {
				return false, err.Error()
			}
			for _, p := range pods {
				found := false
				for _, line := range strings.Split(string(out), "\n") {
					f := strings.Fields(line)
					found = found || len(f) == 3 && f[0] == p.Name && f[2] != "0Mi"
				}
				if !found {
					return false, string(out)
				}
			}
			return true, string(out)
		})
	})

	t.Run("probes on the pod addresses", func(t *testing.T) {
		for _, p := range pods {
			// The readiness probe waits initialDelaySeconds (5) before its first
			// try; a container without one would be ready after a second.
			var readyAt time.Time
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodReady {
					readyAt = c.LastTransitionTime.Time
				}
			}
			if cs := p.Status.ContainerStatuses; len(cs) == 1 && cs[0].State.Running != nil {
				if d := readyAt.Sub(cs[0].State.Running.StartedAt.Time); d < 4*time.Second {
					t.Errorf("pod %s was Ready %s after its container started, before the readiness probe's initial delay", p.Name, d)
				}
			}
			if a, err := netip.ParseAddr(p.Status.PodIP); err != nil || !podNetwork.Contains(a) {
				t.Errorf("pod %s has address %q, want one of %s", p.Name, p.Status.PodIP, podNetwork)
			}
			// The readiness probe's target, as the node agent calls it.
			resp, err := http.Get("http://" + net.JoinHostPort(p.Status.PodIP, "8081") + "/readyz")
			if err != nil {
				t.Errorf("pod %s: /readyz: %v", p.Name, err)
				continue
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Errorf("pod %s: /readyz answered %d", p.Name, resp.StatusCode)
			}
		}
		if pods[0].Status.PodIP == pods[1].Status.PodIP {
			t.Errorf("both replicas have the address %s", pods[0].Status.PodIP)
		}
	})

	leader := waitLeader(t, podNames(pods), "")
	t.Run("one leader", func(t *testing.T) {
		harness.Eventually(t, 30*time.Second, "only "+leader+" reports leader_election_master_status 1", func() (bool, string) {
			var leaders []string
			for _, p := range pods {
				if isLeader(p) {
					leaders = append(leaders, p.Name)
				}
			}
			return slices.Equal(leaders, []string{leader}), fmt.Sprintf("leaders by their metrics: %v", leaders)
		})
	})
	t.Run("runs as its service account, with a token bound to its pod", func(t *testing.T) {
		harness.Eventually(t, time.Minute, "the audit log shows the leader renewing the Lease as "+managerSA+" with a token of pod "+leader,
			func() (bool, string) { return leaseWrittenBy(t, leader) })
	})
	t.Run("the webhook answers behind its Service", func(t *testing.T) {
		if err := env.WaitForWebhook(ctx, 2*time.Minute); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("kubectl logs", func(t *testing.T) {
		harness.Eventually(t, 30*time.Second, "kubectl logs of the leader shows it acquired the Lease", func() (bool, string) {
			out, err := env.Kubectl(nil, "logs", "-n", systemNS, leader)
			if err != nil {
				return false, err.Error()
			}
			return strings.Contains(string(out), `"msg":"Successfully acquired lease","lock":"`+systemNS+"/"+manager.LeaderElectionID), lastLine(out)
		})
		out, err := env.Kubectl(nil, "logs", "-n", systemNS, leader, "--tail=1")
		if err != nil || strings.Count(string(out), "\n") != 1 || !json.Valid(bytes.TrimSpace(out)) {
			t.Errorf("kubectl logs --tail=1: %q, %v; want one JSON log line", out, err)
		}
	})

	tt := env.NewTest(t)
	r := tt.NewRollout("orders")
	t.Run("a rollout through the in-cluster controller", func(t *testing.T) {
		r.Create(r.Spec("v1"))
		r.WaitCurrent(4*time.Minute, r.BuildID())
	})

	t.Run("another replica takes over when the leader goes", func(t *testing.T) {
		if err := env.Clients.CoreV1().Pods(systemNS).Delete(ctx, leader, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		// The leader releases the Lease as it stops. The standby retries every
		// 2s; the pod replacing the deleted one may get there first, as in any
		// cluster: either will do, as long as it is not the old leader.
		next := waitLeader(t, nil, leader)
		t.Logf("the leader was %s, now %s (the standby was %v)", leader, next, slices.DeleteFunc(podNames(pods), func(n string) bool { return n == leader }))
		harness.Eventually(t, time.Minute, "the new leader writes as "+managerSA+" with a token of pod "+next,
			func() (bool, string) { return leaseWrittenBy(t, next) })
		// The Deployment replaces the deleted pod; both replicas become ready again.
		waitReplicasReady(t, 2, []string{leader})
		build := r.SetImage("v2")
		r.WaitCurrent(4*time.Minute, build)
		if got := r.Hello(r.TaskQueue); !strings.Contains(got, build) {
			t.Errorf("Hello answered %q, want the new version %s to run it", got, build)
		}
		leader = next
	})

	t.Run("the standby takes over when the leader is scaled away", func(t *testing.T) {
		standby := slices.DeleteFunc(podNames(waitReplicasReady(t, 2, nil)), func(n string) bool { return n == leader })
		if len(standby) != 1 {
			t.Fatalf("want one standby besides %s, have %v", leader, standby)
		}
		// The ReplicaSet removes the pod with the lowest deletion cost first.
		if _, err := env.Kubectl(nil, "annotate", "-n", systemNS, "pod/"+leader, "controller.kubernetes.io/pod-deletion-cost=-100"); err != nil {
			t.Fatal(err)
		}
		if _, err := env.Kubectl(nil, "scale", "-n", systemNS, "deployment/"+deployName, "--replicas=1"); err != nil {
			t.Fatal(err)
		}
		waitLeader(t, standby, leader)
		harness.Eventually(t, time.Minute, "the standby writes as "+managerSA+" with a token of pod "+standby[0],
			func() (bool, string) { return leaseWrittenBy(t, standby[0]) })
	})
}

// isLeader reads controller-runtime's leader_election_master_status from
// the pod's metrics endpoint, which config/manager serves only to tokens
// allowed to get /metrics.
func isLeader(p corev1.Pod) bool {
	return harness.IsLeaderSecure(net.JoinHostPort(p.Status.PodIP, "8080"), metricsToken, manager.LeaderElectionID)
}

// metricsToken is the token of a service account bound to
// rainbow-metrics-reader, as Prometheus' would be; install makes it.
var metricsToken string

// newMetricsToken makes a service account in rainbow-system, binds it to
// config/rbac's rainbow-metrics-reader and returns a token of it.
func newMetricsToken(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	const sa = "metrics-scraper"
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "incluster-metrics-scraper"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "rainbow-metrics-reader"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: systemNS, Name: sa}},
	}
	for _, o := range []crclient.Object{&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: systemNS, Name: sa}}, binding} {
		if err := env.Kube.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}
	req, err := env.Clients.CoreV1().ServiceAccounts(systemNS).CreateToken(ctx, sa, req, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return req.Status.Token
}

// install applies config/default, with two replicas that bind their
// endpoints to their pod's address: pods share the node's network here,
// so two replicas listening on all addresses would take each other's ports.
func install(t *testing.T) {
	t.Helper()
	out, err := env.Kubectl(nil, "kustomize", "config/default")
	if err != nil {
		t.Fatal(err)
	}
	var items []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(out), 4096)
	patched := false
	for {
		obj := &unstructured.Unstructured{}
		if err := dec.Decode(&obj.Object); err != nil {
			break
		}
		if obj.GetKind() == "Deployment" && obj.GetName() == deployName {
			patchReplicas(t, obj)
			patched = true
		}
		items = append(items, obj)
	}
	if !patched {
		t.Fatalf("config/default has no Deployment %s", deployName)
	}
	list, err := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "List", "items": items})
	if err != nil {
		t.Fatal(err)
	}
	// The harness installed the CRDs and their admission policy already,
	// under its own field manager: take them over.
	if _, err := env.Kubectl(list, "apply", "--server-side", "--force-conflicts", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	metricsToken = newMetricsToken(t)
}

// patchReplicas sets two replicas and binds the metrics, probe and webhook
// servers to $(POD_IP), the pod's own address.
func patchReplicas(t *testing.T, obj *unstructured.Unstructured) {
	t.Helper()
	var d appsv1.Deployment
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &d); err != nil {
		t.Fatal(err)
	}
	d.Spec.Replicas = ptr.To[int32](2)
	c := &d.Spec.Template.Spec.Containers[0]
	c.Env = append([]corev1.EnvVar{{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}}}, c.Env...)
	want := map[string]string{
		"--metrics-bind-address=:8080":      "--metrics-bind-address=$(POD_IP):8080",
		"--health-probe-bind-address=:8081": "--health-probe-bind-address=$(POD_IP):8081",
	}
	for i, a := range c.Args {
		if to, ok := want[a]; ok {
			c.Args[i] = to
			delete(want, a)
		}
	}
	if len(want) > 0 {
		t.Fatalf("config/manager/manager.yaml no longer has the args %v: update this test", want)
	}
	c.Args = append(c.Args, "--webhook-host=$(POD_IP)")
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&d)
	if err != nil {
		t.Fatal(err)
	}
	delete(u, "status")
	obj.Object = u
}

// waitReplicasReady waits until the Deployment has want ready pods (none of
// them named in gone) and returns them.
func waitReplicasReady(t *testing.T, want int, gone []string) []corev1.Pod {
	t.Helper()
	var ready []corev1.Pod
	harness.Eventually(t, 4*time.Minute, fmt.Sprintf("%d pods of %s Ready (readiness probe /readyz)", want, deployName), func() (bool, string) {
		list, err := env.Clients.CoreV1().Pods(systemNS).List(context.Background(), metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=controller"})
		if err != nil {
			return false, err.Error()
		}
		ready = ready[:0]
		var seen []string
		for _, p := range list.Items {
			if why := runtimeFailure(&p); why != "" {
				t.Fatalf("the node agent could not run the image of pod %s: %s", p.Name, why)
			}
			ok := p.DeletionTimestamp == nil && !slices.Contains(gone, p.Name) && harness.PodReady(&p)
			if ok {
				ready = append(ready, p)
			}
			seen = append(seen, describePod(&p))
		}
		return len(ready) == want, strings.Join(seen, "; ")
	})
	return ready
}

func describePod(p *corev1.Pod) string {
	s := fmt.Sprintf("%s %s ip=%s ready=%v", p.Name, p.Status.Phase, p.Status.PodIP, harness.PodReady(p))
	for _, cs := range p.Status.ContainerStatuses {
		s += fmt.Sprintf(" restarts=%d", cs.RestartCount)
		if w := cs.State.Waiting; w != nil {
			s += fmt.Sprintf(" waiting %s: %s", w.Reason, w.Message)
		}
		if l := cs.LastTerminationState.Terminated; l != nil {
			s += fmt.Sprintf(" last exit %d %s %s", l.ExitCode, l.Reason, l.Message)
		}
	}
	return s
}

// runtimeFailure says why the pod's image cannot run, if the node agent
// reported that: the image or the runtime, not the manager, failed.
func runtimeFailure(p *corev1.Pod) string {
	for _, cs := range p.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil && (w.Reason == "ErrImagePull" || w.Reason == "CreateContainerConfigError") {
			return w.Reason + ": " + w.Message
		}
		for _, term := range []*corev1.ContainerStateTerminated{cs.State.Terminated, cs.LastTerminationState.Terminated} {
			if term != nil && term.Reason == "StartError" {
				return "StartError: " + term.Message
			}
		}
	}
	return ""
}

// checkImageContainer checks from the host what the kernel says about the
// pod's container: runc runs it (runc state has its first process), that
// process is the image's entrypoint, runs as 65532:65532 (the image's user
// and config/manager's runAsUser) with no capabilities and no_new_privs,
// and its root file system refuses a write, even one by root on the host.
func checkImageContainer(t *testing.T, runc string, p corev1.Pod) {
	t.Helper()
	if len(p.Status.ContainerStatuses) != 1 {
		t.Fatalf("pod %s has %d container statuses, want 1", p.Name, len(p.Status.ContainerStatuses))
	}
	cs := p.Status.ContainerStatuses[0]
	id, ok := strings.CutPrefix(cs.ContainerID, nodeagent.ContainerIDPrefix)
	if !ok {
		t.Fatalf("pod %s: containerID %q, want %s<id>: the node agent did not run the image under runc", p.Name, cs.ContainerID, nodeagent.ContainerIDPrefix)
	}
	if !strings.HasPrefix(cs.ImageID, "rainbow.local/manager@sha256:") {
		t.Errorf("pod %s: imageID %q, want rainbow.local/manager@sha256:<digest of the layout's image>", p.Name, cs.ImageID)
	}
	out, err := exec.Command(runc, "--root", nodeagent.RuncRoot(env.Info.Dir), "state", id).Output()
	if err != nil {
		t.Fatalf("pod %s: runc state %s: %v", p.Name, id, err)
	}
	var state struct {
		Status string `json:"status"`
		Pid    int    `json:"pid"`
	}
	if err := json.Unmarshal(out, &state); err != nil || state.Status != "running" || state.Pid <= 0 {
		t.Fatalf("pod %s: runc state %s = %s (%v), want running with a pid", p.Name, id, out, err)
	}
	proc := fmt.Sprintf("/proc/%d", state.Pid)
	cmdline, err := os.ReadFile(proc + "/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	if argv0, _, _ := strings.Cut(string(cmdline), "\x00"); argv0 != "/manager" {
		t.Errorf("pod %s: the container runs %q, want the image's entrypoint /manager", p.Name, argv0)
	}
	status, err := os.ReadFile(proc + "/status")
	if err != nil {
		t.Fatal(err)
	}
	fields := map[string]string{}
	for _, line := range strings.Split(string(status), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			fields[k] = strings.Join(strings.Fields(v), " ")
		}
	}
	want := map[string]string{
		"Uid":        "65532 65532 65532 65532", // real, effective, saved, file system
		"Gid":        "65532 65532 65532 65532",
		"CapEff":     "0000000000000000", // capabilities: drop: [ALL]
		"CapBnd":     "0000000000000000",
		"NoNewPrivs": "1", // allowPrivilegeEscalation: false
	}
	for k, v := range want {
		if fields[k] != v {
			t.Errorf("pod %s: %s/status %s: %q, want %q", p.Name, proc, k, fields[k], v)
		}
	}
	// Through the process's own root: the write meets its mount, read-only.
	probe := filepath.Join(proc, "root", "incluster-write-probe")
	err = os.WriteFile(probe, []byte("x"), 0o644)
	if err == nil {
		_ = os.Remove(probe)
	}
	if !errors.Is(err, syscall.EROFS) {
		t.Errorf("pod %s: writing / of the container as root gave %v, want %v (readOnlyRootFilesystem)", p.Name, err, syscall.EROFS)
	}
	t.Logf("pod %s: runc container %s, pid %d, Uid %s, write to /: %v", p.Name, id, state.Pid, fields["Uid"], err)
}

func podNames(pods []corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name)
	}
	return out
}

// waitLeader waits until one of candidates (any pod of the Deployment if
// nil), not old, holds the Lease and returns its name. The holder identity
// is "<hostname>_<uuid>", and each pod's hostname is its name.
func waitLeader(t *testing.T, candidates []string, old string) string {
	t.Helper()
	var leader string
	harness.Eventually(t, 2*time.Minute, fmt.Sprintf("one of %v holds the Lease %s", candidates, manager.LeaderElectionID), func() (bool, string) {
		var lease coordinationv1.Lease
		if err := env.Kube.Get(context.Background(), crclient.ObjectKey{Namespace: systemNS, Name: manager.LeaderElectionID}, &lease); err != nil {
			return false, err.Error()
		}
		holder := ptr.Deref(lease.Spec.HolderIdentity, "")
		pod, _, _ := strings.Cut(holder, "_")
		leader = pod
		ok := pod != "" && pod != old && (candidates == nil && strings.HasPrefix(pod, deployName+"-") || slices.Contains(candidates, pod))
		return ok, "holder " + holder
	})
	return leader
}

// auditEvent is what the test reads of the API server's audit log.
type auditEvent struct {
	Verb       string `json:"verb"`
	RequestURI string `json:"requestURI"`
	User       struct {
		Username string              `json:"username"`
		Extra    map[string][]string `json:"extra"`
	} `json:"user"`
	ResponseStatus struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
}

// leaseWrittenBy reports whether the audit log holds a successful write of
// the Lease by the controller's service account with a token bound to pod.
func leaseWrittenBy(t *testing.T, pod string) (bool, string) {
	t.Helper()
	f, err := os.Open(filepath.Join(env.Info.Dir, "logs", "audit.log"))
	if err != nil {
		return false, err.Error()
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	seen := "no write of the Lease"
	for sc.Scan() {
		var e auditEvent
		if json.Unmarshal(sc.Bytes(), &e) != nil || !strings.Contains(e.RequestURI, "/leases/"+manager.LeaderElectionID) {
			continue
		}
		seen = fmt.Sprintf("%s by %s of pod %v: %d", e.Verb, e.User.Username, e.User.Extra["authentication.kubernetes.io/pod-name"], e.ResponseStatus.Code)
		if e.User.Username == managerSA && slices.Equal(e.User.Extra["authentication.kubernetes.io/pod-name"], []string{pod}) &&
			e.ResponseStatus.Code < 300 {
			return true, seen
		}
	}
	return false, seen
}

func lastLine(out []byte) string {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return lines[len(lines)-1]
}
