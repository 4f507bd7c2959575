package nodeagent

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// These tests run the agent against a real kube-apiserver and etcd (envtest).
// One shared agent serves the parallel tests; TestRunCancelStopsProcesses runs
// its own agent on another node before the parallel tests resume.

const (
	sharedNode = "rainbow-test"
	shImage    = "example.com/tools/sh:latest" // resolves to /bin/sh via Programs["sh"]
)

var (
	envOnce     sync.Once
	envErr      error
	testEnv     *envtest.Environment
	testClient  kubernetes.Interface
	sharedRoot  string
	sharedAgent *Agent
	stopShared  func()
	testCerts   *kubeletTestCerts
)

func TestMain(m *testing.M) {
	if os.Getenv(testServerEnv) != "" {
		runTestServer() // the test binary is also a program the pods run
		return
	}
	code := m.Run()
	if stopShared != nil {
		stopShared()
	}
	if testEnv != nil {
		_ = testEnv.Stop()
	}
	if sharedRoot != "" {
		_ = os.RemoveAll(sharedRoot)
	}
	os.Exit(code)
}

func testLogger() logr.Logger {
	if os.Getenv("NODEAGENT_TEST_LOG") == "" {
		return logr.Discard()
	}
	return funcr.New(func(prefix, args string) { fmt.Fprintln(os.Stderr, prefix, args) }, funcr.Options{Verbosity: 1})
}

// assetsDir is $KUBEBUILDER_ASSETS or <repo>/.cache/kube.
func assetsDir() (string, error) {
	if d := os.Getenv("KUBEBUILDER_ASSETS"); d != "" {
		return d, nil
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.Contains(string(data), "module github.com/rainbow-deploy/rainbow\n") {
			return filepath.Join(dir, ".cache", "kube"), nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("repository root (go.mod of github.com/rainbow-deploy/rainbow) not found")
		}
		dir = parent
	}
}

func startEnv() error {
	dir, err := assetsDir()
	if err != nil {
		return err
	}
	for _, bin := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(dir, bin)); err != nil {
			return fmt.Errorf("envtest binary %s missing in %s: run `make kube-bins` (or set KUBEBUILDER_ASSETS)", bin, dir)
		}
	}
	testEnv = &envtest.Environment{BinaryAssetsDirectory: dir, ControlPlaneStartTimeout: time.Minute}
	cfg, err := testEnv.Start()
	if err != nil {
		testEnv = nil
		return fmt.Errorf("starting envtest from %s: %w", dir, err)
	}
	testClient, err = kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	sharedRoot, err = os.MkdirTemp("", "nodeagent-test-")
	if err != nil {
		return err
	}
	if testCerts, err = writeKubeletTestCerts(filepath.Join(sharedRoot, "pki")); err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	agent, err := New(testClient, Config{
		NodeName:        sharedNode,
		RootDir:         sharedRoot,
		Programs:        map[string]string{"sh": "/bin/sh", testServerImage: self},
		Images:          map[string]string{runcImage: filepath.Join(sharedRoot, "oci")},
		Log:             testLogger().WithName("shared"),
		APIServer:       cfg.Host,
		KubeletCertFile: testCerts.servingCert, KubeletKeyFile: testCerts.servingKey, ClientCAFile: testCerts.caCert,
	})
	if err != nil {
		return err
	}
	if err := writeShellLayout(filepath.Join(sharedRoot, "oci")); err != nil {
		return err
	}
	sharedAgent = agent
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- agent.Run(ctx) }()
	stopShared = func() {
		cancel()
		<-done
	}
	// Tests look at what Run set up (mount namespaces, pod addresses).
	return waitNodeReady(sharedNode, 30*time.Second)
}

func waitNodeReady(node string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		n, err := testClient.CoreV1().Nodes().Get(context.Background(), node, metav1.GetOptions{})
		if err == nil {
			for _, c := range n.Status.Conditions {
				if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
					return nil
				}
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("node %s not Ready after %s (last error %v)", node, timeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// setup starts the control plane and the shared agent once and returns a fresh namespace.
func setup(t *testing.T) string {
	t.Helper()
	envOnce.Do(func() { envErr = startEnv() })
	if envErr != nil {
		t.Fatal(envErr)
	}
	name := strings.ToLower(strings.TrimPrefix(t.Name(), "Test"))
	name = strings.Map(func(r rune) rune {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			return r
		}
		return '-'
	}, name)
	if len(name) > 40 {
		name = name[:40]
	}
	name = strings.Trim(name, "-") + "-" + rand.String(5)
	_, err := testClient.CoreV1().Namespaces().Create(context.Background(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating namespace %s: %v", name, err)
	}
	return name
}

func shPod(ns, name, script string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"app": name}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "main", Image: shImage, Args: []string{"-c", script},
		}}},
	}
}

func createPod(t *testing.T, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	out, err := testClient.CoreV1().Pods(pod.Namespace).Create(context.Background(), pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating pod %s/%s: %v", pod.Namespace, pod.Name, err)
	}
	return out
}

func podDir(root string, pod *corev1.Pod) string {
	return filepath.Join(root, "pods", pod.Namespace+"_"+pod.Name+"_"+string(pod.UID))
}

// eventually polls f until it reports true; on timeout it fails with what was
// expected and the last thing seen.
func eventually(t *testing.T, timeout time.Duration, want string, f func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, seen := f()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s\n  expected: %s\n  last seen: %s", timeout, want, seen)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func waitPod(t *testing.T, ns, name string, timeout time.Duration, want string, cond func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	eventually(t, timeout, fmt.Sprintf("pod %s/%s: %s", ns, name, want), func() (bool, string) {
		p, err := testClient.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		pod = p
		return cond(p), describePod(p)
	})
	return pod
}

func waitPodGone(t *testing.T, ns, name string, timeout time.Duration) {
	t.Helper()
	eventually(t, timeout, fmt.Sprintf("pod %s/%s deleted", ns, name), func() (bool, string) {
		p, err := testClient.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, ""
		}
		if err != nil {
			return false, err.Error()
		}
		return false, describePod(p)
	})
}

func describePod(p *corev1.Pod) string {
	var b strings.Builder
	fmt.Fprintf(&b, "node=%q phase=%s deleting=%v", p.Spec.NodeName, p.Status.Phase, p.DeletionTimestamp != nil)
	for _, c := range p.Status.Conditions {
		fmt.Fprintf(&b, " %s=%s", c.Type, c.Status)
	}
	for _, cs := range append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
		fmt.Fprintf(&b, " [%s id=%s ready=%v restarts=%d", cs.Name, cs.ContainerID, cs.Ready, cs.RestartCount)
		switch s := cs.State; {
		case s.Running != nil:
			b.WriteString(" running")
		case s.Waiting != nil:
			fmt.Fprintf(&b, " waiting %s: %q", s.Waiting.Reason, s.Waiting.Message)
		case s.Terminated != nil:
			fmt.Fprintf(&b, " terminated %s exit=%d", s.Terminated.Reason, s.Terminated.ExitCode)
		}
		b.WriteString("]")
	}
	return b.String()
}

func condition(p *corev1.Pod, t corev1.PodConditionType) corev1.ConditionStatus {
	for _, c := range p.Status.Conditions {
		if c.Type == t {
			return c.Status
		}
	}
	return ""
}

func isReady(p *corev1.Pod) bool { return condition(p, corev1.PodReady) == corev1.ConditionTrue }

func mainStatus(p *corev1.Pod) corev1.ContainerStatus {
	if len(p.Status.ContainerStatuses) == 0 {
		return corev1.ContainerStatus{}
	}
	return p.Status.ContainerStatuses[0]
}

func pidOf(t *testing.T, p *corev1.Pod) int {
	t.Helper()
	id := mainStatus(p).ContainerID
	pid, err := strconv.Atoi(strings.TrimPrefix(id, "process://"))
	if !strings.HasPrefix(id, "process://") || err != nil || pid <= 0 {
		t.Fatalf("containerID = %q, want process://<pid>", id)
	}
	return pid
}

// alive treats zombies as dead: orphans are reaped by whoever is pid 1.
func alive(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return false
	}
	state := s[i+2]
	return state != 'Z' && state != 'X'
}

func waitDead(t *testing.T, pid int, timeout time.Duration) {
	t.Helper()
	eventually(t, timeout, fmt.Sprintf("pid %d gone", pid), func() (bool, string) {
		return !alive(pid), fmt.Sprintf("pid %d still alive", pid)
	})
}

// readFileEventually returns the file once it exists (tests write via rename).
func readFileEventually(t *testing.T, path string, timeout time.Duration) string {
	t.Helper()
	var data []byte
	eventually(t, timeout, "file "+path+" written", func() (bool, string) {
		var err error
		data, err = os.ReadFile(path)
		if err != nil {
			return false, err.Error()
		}
		return true, ""
	})
	return string(data)
}

func parseEnv(s string) map[string]string {
	out := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok {
			out[k] = v
		}
	}
	return out
}

func TestNodeRegistered(t *testing.T) {
	t.Parallel()
	setup(t)
	var node *corev1.Node
	eventually(t, 10*time.Second, "node "+sharedNode+" Ready=True", func() (bool, string) {
		n, err := testClient.CoreV1().Nodes().Get(context.Background(), sharedNode, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		node = n
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady {
				return c.Status == corev1.ConditionTrue, fmt.Sprintf("Ready=%s", c.Status)
			}
		}
		return false, "no Ready condition"
	})
	if len(node.Spec.Taints) != 0 {
		t.Errorf("taints = %v, want none", node.Spec.Taints)
	}
	if len(node.Status.Addresses) == 0 || node.Status.Addresses[0].Address != "127.0.0.1" ||
		node.Status.Addresses[0].Type != corev1.NodeInternalIP {
		t.Errorf("addresses = %v, want InternalIP 127.0.0.1", node.Status.Addresses)
	}
	if q := node.Status.Allocatable[corev1.ResourcePods]; q.Value() != 2000 {
		t.Errorf("allocatable pods = %s, want 2000", q.String())
	}
	if q := node.Status.Allocatable[corev1.ResourceCPU]; q.Value() != 8 {
		t.Errorf("allocatable cpu = %s, want 8", q.String())
	}
	if q := node.Status.Capacity[corev1.ResourceMemory]; q.String() != "32Gi" {
		t.Errorf("capacity memory = %s, want 32Gi", q.String())
	}
}

func TestBindAndRunReady(t *testing.T) {
	t.Parallel()
	ns := setup(t)
	pod := createPod(t, shPod(ns, "ready", `echo started; exec sleep 300`))
	if pod.Spec.NodeName != "" {
		t.Fatalf("test pod must start unscheduled, has nodeName %q", pod.Spec.NodeName)
	}
	waitPod(t, ns, "ready", 10*time.Second, "bound to "+sharedNode, func(p *corev1.Pod) bool {
		return p.Spec.NodeName == sharedNode
	})
	p := waitPod(t, ns, "ready", 10*time.Second, "Ready=True and Running", func(p *corev1.Pod) bool {
		return isReady(p) && p.Status.Phase == corev1.PodRunning
	})
	cs := mainStatus(p)
	pid := pidOf(t, p)
	if !alive(pid) {
		t.Errorf("pid %d from containerID is not alive", pid)
	}
	if cs.ImageID != "local:///bin/sh" || cs.Image != shImage || cs.State.Running == nil ||
		cs.Started == nil || !*cs.Started || !cs.Ready || cs.RestartCount != 0 {
		t.Errorf("container status = %+v, want running, started, ready, imageID local:///bin/sh", cs)
	}
	if p.Status.PodIP != wantPodIP(t, p.Status.PodIP) || p.Status.HostIP != "127.0.0.1" || len(p.Status.PodIPs) != 1 ||
		p.Status.PodIPs[0].IP != p.Status.PodIP || p.Status.StartTime == nil {
		t.Errorf("podIP=%q hostIP=%q podIPs=%v startTime=%v, want a pod address, host 127.0.0.1 and a start time",
			p.Status.PodIP, p.Status.HostIP, p.Status.PodIPs, p.Status.StartTime)
	}
	for _, ct := range []corev1.PodConditionType{corev1.PodScheduled, corev1.PodInitialized, corev1.ContainersReady} {
		if condition(p, ct) != corev1.ConditionTrue {
			t.Errorf("condition %s = %q, want True", ct, condition(p, ct))
		}
	}
	if log := readFileEventually(t, filepath.Join(podDir(sharedRoot, p), "main.log"), 5*time.Second); log != "started\n" {
		t.Errorf("main.log = %q, want %q", log, "started\n")
	}
	// A steady pod must not cause status writes.
	time.Sleep(1500 * time.Millisecond)
	again, err := testClient.CoreV1().Pods(ns).Get(context.Background(), "ready", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if again.ResourceVersion != p.ResourceVersion {
		t.Errorf("resourceVersion changed from %s to %s on a steady pod:\n  before: %s\n  after:  %s",
			p.ResourceVersion, again.ResourceVersion, describePod(p), describePod(again))
	}
}

func TestEnvResolution(t *testing.T) {
	t.Parallel()
	ns := setup(t)
	ctx := context.Background()
	out := filepath.Join(t.TempDir(), "env.txt")
	if _, err := testClient.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "creds"}, Data: map[string][]byte{"password": []byte("s3cret")},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := testClient.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "settings"}, Data: map[string]string{"mode": "fast", "color": "blue"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	yes := true
	field := func(path string) *corev1.EnvVarSource {
		return &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}
	}
	pod := shPod(ns, "env", `{ env; echo "UNAME_N=$(uname -n)"; echo "$(LIT)"; } > "$OUT.tmp" && mv "$OUT.tmp" "$OUT"; exec sleep 300`)
	pod.Spec.ServiceAccountName = "builder"
	pod.Spec.Containers[0].EnvFrom = []corev1.EnvFromSource{{
		Prefix: "CFG_", ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}},
	}}
	pod.Spec.Containers[0].Env = []corev1.EnvVar{
		{Name: "OUT", Value: out},
		{Name: "LIT", Value: "hello"},
		{Name: "COMBO", Value: "$(LIT)-world-$(CFG_color)"},
		{Name: "ESCAPED", Value: "$$(LIT)"},
		{Name: "UNDEFINED", Value: "$(NOPE)x"},
		{Name: "SEC", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: "creds"}, Key: "password"}}},
		{Name: "CM", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}, Key: "mode"}}},
		{Name: "OPTIONAL", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: "absent"}, Key: "k", Optional: &yes}}},
		{Name: "POD_NAME", ValueFrom: field("metadata.name")},
		{Name: "POD_NS", ValueFrom: field("metadata.namespace")},
		{Name: "POD_UID", ValueFrom: field("metadata.uid")},
		{Name: "APP", ValueFrom: field("metadata.labels['app']")},
		{Name: "NODE", ValueFrom: field("spec.nodeName")},
		{Name: "SA", ValueFrom: field("spec.serviceAccountName")},
		{Name: "POD_IP", ValueFrom: field("status.podIP")},
		{Name: "HOST_IP", ValueFrom: field("status.hostIP")},
	}
	pod = createPod(t, pod)
	text := readFileEventually(t, out, 15*time.Second)
	env := parseEnv(text)
	want := map[string]string{
		"LIT": "hello", "COMBO": "hello-world-blue", "ESCAPED": "$(LIT)", "UNDEFINED": "$(NOPE)x",
		"SEC": "s3cret", "CM": "fast", "CFG_mode": "fast", "CFG_color": "blue",
		"POD_NAME": "env", "POD_NS": ns, "POD_UID": string(pod.UID), "APP": "env", "NODE": sharedNode,
		"SA": "builder", "HOST_IP": "127.0.0.1",
		"RAINBOW_IMAGE": shImage, "PATH": os.Getenv("PATH"),
		// The `kubernetes` Service: the API server itself.
		"KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": testEnv.Config.Host[strings.LastIndexByte(testEnv.Config.Host, ':')+1:],
	}
	want["KUBERNETES_SERVICE_PORT"] = strings.TrimSuffix(want["KUBERNETES_SERVICE_PORT"], "/")
	if sharedAgent.mountNS {
		want["HOSTNAME"] = "env" // its own UTS namespace, named after the pod
	}
	for k, v := range want {
		if got, ok := env[k]; !ok || got != v {
			t.Errorf("env %s = %q (set=%v), want %q", k, got, ok, v)
		}
	}
	if host, _ := os.Hostname(); sharedAgent.mountNS && env["UNAME_N"] != "env" || !sharedAgent.mountNS && env["UNAME_N"] != host {
		t.Errorf("the program's hostname is %q, want the pod's name with mount namespaces, else the node's", env["UNAME_N"])
	}
	if got := env["POD_IP"]; got != wantPodIP(t, got) {
		t.Errorf("env POD_IP = %q, want an address of the agent's block", got)
	}
	if p, err := testClient.CoreV1().Pods(ns).Get(ctx, "env", metav1.GetOptions{}); err != nil || p.Status.PodIP != env["POD_IP"] {
		t.Errorf("env POD_IP = %q, pod status says %q (%v)", env["POD_IP"], p.Status.PodIP, err)
	}
	if _, ok := env["OPTIONAL"]; ok {
		t.Errorf("OPTIONAL must be unset for a missing optional secret, got %q", env["OPTIONAL"])
	}
	if !strings.HasSuffix(text, "\nhello\n") {
		t.Errorf("args $(LIT) expansion: output should end with the line %q; got %q", "hello", text)
	}
}

func TestMissingSecretKeyRetried(t *testing.T) {
	t.Parallel()
	ns := setup(t)
	ctx := context.Background()
	pod := shPod(ns, "cfgerr", `exec sleep 300`)
	pod.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "TOKEN", ValueFrom: &corev1.EnvVarSource{
		SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "later"}, Key: "token"}}}}
	createPod(t, pod)
	waiting := func(reason, msg string) func(*corev1.Pod) bool {
		return func(p *corev1.Pod) bool {
			w := mainStatus(p).State.Waiting
			return w != nil && w.Reason == reason && strings.Contains(w.Message, msg) &&
				p.Status.Phase == corev1.PodPending && !isReady(p)
		}
	}
	waitPod(t, ns, "cfgerr", 10*time.Second, `waiting CreateContainerConfigError naming secret "later"`,
		waiting("CreateContainerConfigError", `secret "later" not found`))

	sec, err := testClient.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "later"}, Data: map[string][]byte{"other": []byte("x")},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitPod(t, ns, "cfgerr", 10*time.Second, "waiting CreateContainerConfigError naming the missing key",
		waiting("CreateContainerConfigError", "couldn't find key token in Secret "+ns+"/later"))

	sec.Data["token"] = []byte("t")
	if _, err := testClient.CoreV1().Secrets(ns).Update(ctx, sec, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPod(t, ns, "cfgerr", 15*time.Second, "Ready after the key appeared", isReady)
}

func TestSecretVolume(t *testing.T) {
	t.Parallel()
	ns := setup(t)
	out := filepath.Join(t.TempDir(), "out.txt")
	if _, err := testClient.CoreV1().Secrets(ns).Create(context.Background(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "files"}, Data: map[string][]byte{"token": []byte("abc123")},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	mode := int32(0o400)
	pod := shPod(ns, "vol", `{ echo "$CREDS_FILE"; echo "$CREDS_DIR"; echo "$OTHER"; echo "$SCRATCH"; cat "$CREDS_FILE"; echo; echo "$1"; } > "$OUT.tmp" && mv "$OUT.tmp" "$OUT"; exec sleep 300`)
	// Mount points on the host's file system stay empty: the mounts are the process's own.
	mnt := t.TempDir()
	credsPath, scratchPath := filepath.Join(mnt, "etc", "creds"), filepath.Join(mnt, "scratch")
	pod.Spec.Containers[0].Args = append(pod.Spec.Containers[0].Args, "sh", "--token="+credsPath+"/token")
	pod.Spec.Volumes = []corev1.Volume{
		{Name: "creds", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "files", DefaultMode: &mode}}},
		{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
	}
	c := &pod.Spec.Containers[0]
	c.VolumeMounts = []corev1.VolumeMount{{Name: "creds", MountPath: credsPath, ReadOnly: true}, {Name: "scratch", MountPath: scratchPath}}
	c.Env = []corev1.EnvVar{
		{Name: "OUT", Value: out},
		{Name: "CREDS_FILE", Value: credsPath + "/token"},
		{Name: "CREDS_DIR", Value: credsPath},
		{Name: "OTHER", Value: credsPath + "X/token"},
		{Name: "SCRATCH", Value: scratchPath},
	}
	pod = createPod(t, pod)
	lines := strings.Split(readFileEventually(t, out, 15*time.Second), "\n")
	vols := filepath.Join(podDir(sharedRoot, pod), "volumes")
	// Without mount namespaces, paths into volumes are rewritten to the host directories.
	want := []string{
		filepath.Join(vols, "creds", "token"),
		filepath.Join(vols, "creds"),
		credsPath + "X/token",
		filepath.Join(vols, "scratch"),
		"abc123",
		"--token=" + filepath.Join(vols, "creds", "token"),
	}
	if sharedAgent.mountNS {
		want = []string{credsPath + "/token", credsPath, credsPath + "X/token", scratchPath, "abc123", "--token=" + credsPath + "/token"}
		for _, dir := range []string{credsPath, scratchPath} {
			if entries, err := os.ReadDir(dir); err != nil || len(entries) > 0 {
				t.Errorf("host mount point %s = %v (%v), want an empty directory: the mount belongs to the pod's namespace", dir, entries, err)
			}
		}
	}
	if len(lines) < len(want) {
		t.Fatalf("program output = %q, want lines %q", lines, want)
	}
	for i, w := range want {
		if lines[i] != w {
			t.Errorf("output line %d = %q, want %q", i, lines[i], w)
		}
	}
	fi, err := os.Stat(filepath.Join(vols, "creds", "token"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o400 {
		t.Errorf("secret file mode = %o, want 400 (defaultMode)", fi.Mode().Perm())
	}
	if fi, err := os.Stat(filepath.Join(vols, "scratch")); err != nil || !fi.IsDir() {
		t.Errorf("emptyDir volume not created: %v", err)
	}
}

func TestCrashLoopBackOff(t *testing.T) {
	t.Parallel()
	ns := setup(t)
	createPod(t, shPod(ns, "crash", `echo crashing; exit 3`))
	p := waitPod(t, ns, "crash", 15*time.Second, "restartCount>=2, waiting CrashLoopBackOff, Ready=False", func(p *corev1.Pod) bool {
		cs := mainStatus(p)
		w := cs.State.Waiting
		return cs.RestartCount >= 2 && w != nil && w.Reason == "CrashLoopBackOff" && !isReady(p)
	})
	cs := mainStatus(p)
	if !strings.HasPrefix(cs.State.Waiting.Message, "back-off ") ||
		!strings.Contains(cs.State.Waiting.Message, "restarting failed container=main pod=crash_"+ns) {
		t.Errorf("waiting message = %q, want back-off Ns restarting failed container=main pod=crash_%s(...)", cs.State.Waiting.Message, ns)
	}
	if lt := cs.LastTerminationState.Terminated; lt == nil || lt.ExitCode != 3 || lt.Reason != "Error" {
		t.Errorf("lastState = %+v, want terminated exitCode 3 reason Error", cs.LastTerminationState)
	}
	if p.Status.Phase != corev1.PodRunning {
		t.Errorf("phase = %s, want Running for a restarting container", p.Status.Phase)
	}
}

func TestRestartPolicyNever(t *testing.T) {
	t.Parallel()
	ns := setup(t)
	for name, code := range map[string]int{"ok": 0, "bad": 2} {
		pod := shPod(ns, name, fmt.Sprintf("exit %d", code))
		pod.Spec.RestartPolicy = corev1.RestartPolicyNever
		createPod(t, pod)
	}
	p := waitPod(t, ns, "ok", 10*time.Second, "phase Succeeded", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodSucceeded })
	if term := mainStatus(p).State.Terminated; term == nil || term.Reason != "Completed" || mainStatus(p).RestartCount != 0 {
		t.Errorf("status = %s, want terminated Completed without restarts", describePod(p))
	}
	p = waitPod(t, ns, "bad", 10*time.Second, "phase Failed", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })
	if term := mainStatus(p).State.Terminated; term == nil || term.ExitCode != 2 || term.Reason != "Error" {
		t.Errorf("status = %s, want terminated Error exit 2", describePod(p))
	}
}

func TestInitContainer(t *testing.T) {
	t.Parallel()
	ns := setup(t)
	out := filepath.Join(t.TempDir(), "order.txt")
	pod := shPod(ns, "init", `echo main >> "$OUT"; exec sleep 300`)
	pod.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "OUT", Value: out}}
	pod.Spec.InitContainers = []corev1.Container{
		{Name: "first", Image: shImage, Args: []string{"-c", `sleep 0.5; echo first >> "$OUT"`}, Env: pod.Spec.Containers[0].Env},
		{Name: "second", Image: shImage, Args: []string{"-c", `echo second >> "$OUT"`}, Env: pod.Spec.Containers[0].Env},
	}
	createPod(t, pod)
	p := waitPod(t, ns, "init", 15*time.Second, "Ready after init containers", isReady)
	if got := readFileEventually(t, out, time.Second); got != "first\nsecond\nmain\n" {
		t.Errorf("run order = %q, want first, second, main", got)
	}
	for _, s := range p.Status.InitContainerStatuses {
		if s.State.Terminated == nil || s.State.Terminated.Reason != "Completed" {
			t.Errorf("init container %s state = %+v, want terminated Completed", s.Name, s.State)
		}
	}
}

func TestUnknownImage(t *testing.T) {
	t.Parallel()
	ns := setup(t)
	pod := shPod(ns, "unknown", "true")
	pod.Spec.Containers[0].Image = "registry.example/rainbow/no-such-thing:v1"
	createPod(t, pod)
	wantMsg := `no local program for image "registry.example/rainbow/no-such-thing:v1": add --program no-such-thing=/path or put an executable named no-such-thing on the search path`
	waitPod(t, ns, "unknown", 10*time.Second, "waiting ImagePullBackOff with message "+wantMsg+", phase Pending, Ready False",
		func(p *corev1.Pod) bool {
			w := mainStatus(p).State.Waiting
			return w != nil && w.Reason == "ImagePullBackOff" && w.Message == wantMsg &&
				p.Status.Phase == corev1.PodPending && condition(p, corev1.PodReady) == corev1.ConditionFalse
		})
}

func TestDeleteSendsSIGTERM(t *testing.T) {
	t.Parallel()
	ns := setup(t)
	mark := filepath.Join(t.TempDir(), "term")
	pod := shPod(ns, "graceful", `trap 'echo got-term > "$MARK"; exit 0' TERM; while :; do sleep 0.1; done`)
	pod.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "MARK", Value: mark}}
	createPod(t, pod)
	p := waitPod(t, ns, "graceful", 10*time.Second, "Ready", isReady)
	pid := pidOf(t, p)
	// A grace period far longer than the wait: the pod can be gone within
	// the wait only because the agent saw the program exit on SIGTERM, not
	// because it waited the grace period out. How soon is not checked.
	grace := int64(600)
	if err := testClient.CoreV1().Pods(ns).Delete(context.Background(), "graceful",
		metav1.DeleteOptions{GracePeriodSeconds: &grace}); err != nil {
		t.Fatal(err)
	}
	waitPodGone(t, ns, "graceful", 2*time.Minute)
	if got, err := os.ReadFile(mark); err != nil || string(got) != "got-term\n" {
		t.Errorf("SIGTERM marker = %q, %v; want %q", got, err, "got-term\n")
	}
	waitDead(t, pid, 2*time.Second)
	dir := podDir(sharedRoot, p)
	if _, err := os.Stat(filepath.Join(dir, "main.log")); err != nil {
		t.Errorf("log must be kept after deletion: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "volumes")); !os.IsNotExist(err) {
		t.Errorf("volumes dir must be removed after deletion, stat err = %v", err)
	}
}

func TestDeleteKillsAfterGrace(t *testing.T) {
	t.Parallel()
	ns := setup(t)
	// Ignoring TERM is inherited by the sleeps, so the whole group ignores it.
	createPod(t, shPod(ns, "stubborn", `trap '' TERM; while :; do sleep 0.1; done`))
	p := waitPod(t, ns, "stubborn", 10*time.Second, "Ready", isReady)
	pid := pidOf(t, p)
	grace := int64(2)
	start := time.Now()
	if err := testClient.CoreV1().Pods(ns).Delete(context.Background(), "stubborn",
		metav1.DeleteOptions{GracePeriodSeconds: &grace}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	if !alive(pid) {
		t.Fatalf("pid %d died within 1s although it ignores SIGTERM and the grace period is %ds", pid, grace)
	}
	waitPodGone(t, ns, "stubborn", 10*time.Second)
	if d := time.Since(start); d < 1500*time.Millisecond {
		t.Errorf("pod gone after %s, want about the %ds grace period", d, grace)
	}
	waitDead(t, pid, 2*time.Second)
}

func TestForceDeletedPodKilled(t *testing.T) {
	t.Parallel()
	ns := setup(t)
	createPod(t, shPod(ns, "forced", `exec sleep 300`))
	p := waitPod(t, ns, "forced", 10*time.Second, "Ready", isReady)
	pid := pidOf(t, p)
	zero := int64(0)
	if err := testClient.CoreV1().Pods(ns).Delete(context.Background(), "forced",
		metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	waitPodGone(t, ns, "forced", 5*time.Second)
	waitDead(t, pid, 5*time.Second)
}

// Not parallel: it runs alone, with its own agent, before the parallel tests resume.
func TestRunCancelStopsProcesses(t *testing.T) {
	ns := setup(t)
	const node = "rainbow-cancel"
	root := t.TempDir()
	agent, err := New(testClient, Config{NodeName: node, RootDir: root,
		Programs: map[string]string{"sh": "/bin/sh"}, Log: testLogger().WithName("cancel")})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- agent.Run(ctx) }()

	childFile := filepath.Join(t.TempDir(), "child")
	// The child ignores SIGTERM and outlives its parent unless the group is killed.
	pod := shPod(ns, "cancel", `(trap '' TERM; exec sleep 300) & echo $! > "$CHILD.tmp" && mv "$CHILD.tmp" "$CHILD"; wait`)
	pod.Spec.NodeName = node
	pod.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "CHILD", Value: childFile}}
	createPod(t, pod)
	p := waitPod(t, ns, "cancel", 10*time.Second, "Ready on "+node, isReady)
	pid := pidOf(t, p)
	child, err := strconv.Atoi(strings.TrimSpace(readFileEventually(t, childFile, 5*time.Second)))
	if err != nil || !alive(child) {
		t.Fatalf("child pid %d (err %v) should be alive", child, err)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run returned %v, want nil after cancellation", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return within 10s after cancel")
	}
	// SIGKILL was sent before Run returned; delivery is asynchronous.
	waitDead(t, pid, time.Second)
	waitDead(t, child, time.Second)
	n, err := testClient.CoreV1().Nodes().Get(context.Background(), node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status != corev1.ConditionFalse {
			t.Errorf("node Ready = %s after shutdown, want False", c.Status)
		}
	}
}
