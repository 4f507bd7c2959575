package nodeagent

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// The test binary doubles as a small HTTP server that pods run (image
// testServerImage), for probes and pod addresses.
const (
	testServerEnv   = "NODEAGENT_TEST_SERVER"
	testServerImage = "example.com/tools/probe-server:latest"
)

// runTestServer serves on $POD_IP:$PORT: /ready answers 200 while the file
// $READY exists, /live 500 while $DEAD exists.
func runTestServer() {
	addr := net.JoinHostPort(os.Getenv("POD_IP"), os.Getenv("PORT"))
	exists := func(env string) bool { _, err := os.Stat(os.Getenv(env)); return err == nil }
	mux := http.NewServeMux()
	mux.HandleFunc("/ready", func(w http.ResponseWriter, _ *http.Request) {
		if !exists("READY") {
			http.Error(w, "not ready", http.StatusServiceUnavailable)
		}
	})
	mux.HandleFunc("/live", func(w http.ResponseWriter, _ *http.Request) {
		if exists("DEAD") {
			http.Error(w, "dead", http.StatusInternalServerError)
		}
	})
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Println("listen:", err)
		os.Exit(1)
	}
	fmt.Println("serving on", addr)
	signal.Ignore(syscall.SIGHUP)
	_ = http.Serve(ln, mux)
}

// needs fails the test when a feature that root has is missing, and skips
// it for other users.
func needs(t *testing.T, ok bool, what string) {
	t.Helper()
	if ok {
		return
	}
	if os.Geteuid() == 0 {
		t.Fatalf("running as root, but the agent has no %s (see its log with NODEAGENT_TEST_LOG=1)", what)
	}
	t.Skipf("needs %s, which needs root", what)
}

// wantPodIP is ip if it is what the shared agent hands out, for comparisons.
func wantPodIP(t *testing.T, ip string) string {
	t.Helper()
	if !sharedAgent.ips.block.IsValid() {
		return localIP
	}
	if a, err := netip.ParseAddr(ip); err == nil && sharedAgent.ips.block.Contains(a) && podNetwork.Contains(a) {
		return ip
	}
	return "an address in " + sharedAgent.ips.block.String()
}

func TestServiceAccountTokenMounted(t *testing.T) {
	t.Parallel()
	ns := setup(t)
	needs(t, sharedAgent.mountNS, "mount namespaces")
	ctx := context.Background()
	if _, err := testClient.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "robot"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	caPEM, err := os.ReadFile(testCerts.caCert)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := testClient.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "kube-root-ca.crt"}, Data: map[string]string{"ca.crt": string(caPEM)},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	const sa = "/var/run/secrets/kubernetes.io/serviceaccount"
	out := filepath.Join(t.TempDir(), "out.txt")
	// What the ServiceAccount admission plugin adds to every pod (envtest turns it off).
	pod := shPod(ns, "token", `d=`+sa+`; { cat $d/token; echo; cat $d/namespace; echo; cmp -s $d/ca.crt "$CA" && echo ca-ok; `+
		`echo "$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT"; touch $d/x 2>/dev/null && echo writable || echo read-only; } > "$OUT.tmp" && mv "$OUT.tmp" "$OUT"; exec sleep 300`)
	pod.Spec.ServiceAccountName = "robot"
	pod.Spec.Volumes = []corev1.Volume{{Name: "kube-api-access-test", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
		DefaultMode: ptr.To[int32](0o644),
		Sources: []corev1.VolumeProjection{
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{ExpirationSeconds: ptr.To[int64](3607), Path: "token"}},
			{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"},
				Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
			{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{
				{Path: "namespace", FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}}}},
		},
	}}}}
	pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "kube-api-access-test", MountPath: sa, ReadOnly: true}}
	pod.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "OUT", Value: out}, {Name: "CA", Value: testCerts.caCert}}
	pod = createPod(t, pod)

	lines := strings.Split(readFileEventually(t, out, 15*time.Second), "\n")
	if len(lines) < 5 {
		t.Fatalf("output %q: want token, namespace, ca-ok, API server, read-only", lines)
	}
	host := strings.TrimSuffix(strings.TrimPrefix(testEnv.Config.Host, "https://"), "/")
	if want := []string{ns, "ca-ok", host, "read-only"}; strings.Join(lines[1:5], ",") != strings.Join(want, ",") {
		t.Errorf("namespace, ca.crt, KUBERNETES_SERVICE_HOST:PORT, write = %q, want %q", lines[1:5], want)
	}
	review, err := testClient.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{
		Spec: authenticationv1.TokenReviewSpec{Token: lines[0]}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	u := review.Status.User
	if !review.Status.Authenticated || u.Username != "system:serviceaccount:"+ns+":robot" ||
		fmt.Sprint(u.Extra["authentication.kubernetes.io/pod-name"]) != "[token]" ||
		fmt.Sprint(u.Extra["authentication.kubernetes.io/pod-uid"]) != "["+string(pod.UID)+"]" {
		t.Errorf("the mounted token authenticates as %+v (authenticated=%v, error %q), want the service account robot, bound to the pod",
			u, review.Status.Authenticated, review.Status.Error)
	}
	// Nobody else sees it: not the host, not another pod.
	if data, err := os.ReadFile(sa + "/token"); err == nil && strings.TrimSpace(string(data)) == lines[0] {
		t.Errorf("the host sees the pod's token at %s", sa)
	}
	other := filepath.Join(t.TempDir(), "other.txt")
	peek := shPod(ns, "peek", `cat `+sa+`/token > "$OUT.tmp" 2>&1; mv "$OUT.tmp" "$OUT"; exec sleep 300`)
	peek.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "OUT", Value: other}}
	createPod(t, peek)
	if got := readFileEventually(t, other, 15*time.Second); strings.Contains(got, lines[0]) {
		t.Errorf("a pod without the volume reads the other pod's token")
	}
}

func TestVolumeUpdatedInPlace(t *testing.T) {
	t.Parallel()
	ns := setup(t)
	ctx := context.Background()
	sec, err := testClient.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "live"}, Data: map[string][]byte{"v": []byte("one")},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "out.txt")
	mnt := filepath.Join(t.TempDir(), "live")
	pod := shPod(ns, "live", `while :; do cat "$MNT/v" > "$OUT.tmp" && mv "$OUT.tmp" "$OUT"; sleep 0.2; done`)
	pod.Spec.Volumes = []corev1.Volume{{Name: "live", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "live"}}}}
	pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "live", MountPath: mnt}}
	pod.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "OUT", Value: out}, {Name: "MNT", Value: mnt}}
	createPod(t, pod)
	eventually(t, 15*time.Second, "the program reads one", func() (bool, string) {
		data, _ := os.ReadFile(out)
		return string(data) == "one", string(data)
	})
	sec.Data["v"] = []byte("two")
	if _, err := testClient.CoreV1().Secrets(ns).Update(ctx, sec, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the running program reads the updated Secret: two", func() (bool, string) {
		data, _ := os.ReadFile(out)
		return string(data) == "two", string(data)
	})
}

func serverPod(ns, name, dir string) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptr.To[int64](2),
			Containers: []corev1.Container{{
				Name: "server", Image: testServerImage,
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8089}},
				Env: []corev1.EnvVar{
					{Name: testServerEnv, Value: "1"},
					{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
					{Name: "PORT", Value: "8089"},
					{Name: "READY", Value: filepath.Join(dir, "ready")},
					{Name: "DEAD", Value: filepath.Join(dir, "dead")},
				},
				ReadinessProbe: &corev1.Probe{
					ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/ready", Port: intstr.FromString("http")}},
					PeriodSeconds: 1, FailureThreshold: 1,
				},
				LivenessProbe: &corev1.Probe{
					ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/live", Port: intstr.FromInt32(8089)}},
					PeriodSeconds: 1, FailureThreshold: 2,
				},
			}},
		},
	}
	return pod
}

func TestProbesOnPodAddresses(t *testing.T) {
	t.Parallel()
	ns := setup(t)
	needs(t, sharedAgent.ips.block.IsValid(), "pod addresses")
	ctx := context.Background()
	dirA, dirB := t.TempDir(), t.TempDir()
	// Both listen on port 8089, each on its own pod address.
	createPod(t, serverPod(ns, "a", dirA))
	createPod(t, serverPod(ns, "b", dirB))
	p := waitPod(t, ns, "a", 15*time.Second, "running, started, not ready: /ready fails", func(p *corev1.Pod) bool {
		cs := mainStatus(p)
		return cs.State.Running != nil && !isReady(p) && cs.Started != nil && *cs.Started
	})
	eventually(t, 10*time.Second, "a Warning event Unhealthy for the readiness probe", func() (bool, string) {
		evs, err := testClient.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=a,reason=Unhealthy"})
		if err != nil {
			return false, err.Error()
		}
		for _, e := range evs.Items {
			if e.Type == corev1.EventTypeWarning && strings.HasPrefix(e.Message, "Readiness probe failed: HTTP probe failed with statuscode: 503") {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d events", len(evs.Items))
	})
	if err := os.WriteFile(filepath.Join(dirA, "ready"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	waitPod(t, ns, "a", 10*time.Second, "Ready once /ready answers 200", isReady)
	b := waitPod(t, ns, "b", 5*time.Second, "running, not ready: its own /ready still fails", func(p *corev1.Pod) bool {
		return mainStatus(p).State.Running != nil && !isReady(p)
	})
	if b.Status.PodIP == p.Status.PodIP {
		t.Errorf("both pods have the address %s", p.Status.PodIP)
	}

	// Liveness: two failures in a row restart the container.
	if err := os.WriteFile(filepath.Join(dirA, "dead"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	waitPod(t, ns, "a", 20*time.Second, "restarted after failing its liveness probe", func(p *corev1.Pod) bool {
		return mainStatus(p).RestartCount >= 1
	})
	_ = os.Remove(filepath.Join(dirA, "dead"))
	waitPod(t, ns, "a", 20*time.Second, "Ready again after the restart", isReady)
	evs, err := testClient.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=a,reason=Killing"})
	if err != nil || len(evs.Items) == 0 || !strings.Contains(evs.Items[0].Message, "failed liveness probe, will be restarted") {
		t.Errorf("Killing events = %v (%v), want one about the liveness probe", evs, err)
	}
}

func TestContainerLogs(t *testing.T) {
	t.Parallel()
	ns := setup(t)
	count := filepath.Join(t.TempDir(), "count")
	// The first run fails, the second stays.
	pod := shPod(ns, "logs", `n=$(cat "$COUNT" 2>/dev/null || echo 0); n=$((n+1)); echo $n > "$COUNT"; `+
		`for i in 1 2 3; do echo "run $n line $i"; done; [ $n = 1 ] && exit 1; sleep 2; echo late; exec sleep 300`)
	pod.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "COUNT", Value: count}}
	createPod(t, pod)
	waitPod(t, ns, "logs", 15*time.Second, "running again after one restart", func(p *corev1.Pod) bool {
		return mainStatus(p).RestartCount == 1 && mainStatus(p).State.Running != nil
	})
	node, err := testClient.CoreV1().Nodes().Get(context.Background(), sharedNode, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	base := fmt.Sprintf("https://127.0.0.1:%d", node.Status.DaemonEndpoints.KubeletEndpoint.Port)
	admin := testCerts.client(t, testCerts.admin)
	get := func(c *http.Client, query string) (int, string) {
		t.Helper()
		resp, err := c.Get(base + "/containerLogs/" + ns + "/logs/main" + query)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	// follow streams until the line that comes later.
	resp, err := admin.Get(base + "/containerLogs/" + ns + "/logs/main?follow=true")
	if err != nil {
		t.Fatal(err)
	}
	lines := make(chan string)
	go func() {
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var seen []string
	deadline := time.After(10 * time.Second)
follow:
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				break follow
			}
			if seen = append(seen, l); l == "late" {
				break follow
			}
		case <-deadline:
			break follow
		}
	}
	if want := "run 2 line 1,run 2 line 2,run 2 line 3,late"; strings.Join(seen, ",") != want {
		t.Errorf("followed log = %q, want %q", seen, want)
	}

	for query, want := range map[string]string{
		"?previous=true":             "run 1 line 1\nrun 1 line 2\nrun 1 line 3\n",
		"":                           "run 2 line 1\nrun 2 line 2\nrun 2 line 3\nlate\n",
		"?tailLines=2":               "run 2 line 3\nlate\n",
		"?limitBytes=5":              "run 2",
		"?previous=true&tailLines=1": "run 1 line 3\n",
	} {
		if code, body := get(admin, query); code != http.StatusOK || body != want {
			t.Errorf("GET %s: %d %q, want 200 %q", query, code, body, want)
		}
	}
	if code, body := get(admin, "?timestamps=true"); code != http.StatusBadRequest {
		t.Errorf("timestamps: %d %q, want 400", code, body)
	}
	if code, _ := get(admin, "x"); code != http.StatusNotFound {
		t.Errorf("unknown container: %d, want 404", code)
	}
	// Only the CA's clients, and only those the API server lets use nodes/proxy.
	if code, body := get(testCerts.client(t, testCerts.nobody), ""); code != http.StatusForbidden {
		t.Errorf("a user without nodes/proxy: %d %q, want 403", code, body)
	}
	if resp, err := http.Get(strings.Replace(base, "https", "http", 1) + "/healthz"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Error("plain HTTP answered")
		}
	}
	anon := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: testCerts.pool(t)}}}
	if code, body := get(anon, ""); code != 0 {
		t.Errorf("no client certificate: %d %q, want the handshake to fail", code, body)
	}
}

func TestTokenRefreshTime(t *testing.T) {
	issued := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name      string
		exp       time.Duration
		requested int64
		want      time.Duration
	}{
		{"80% of an hour", time.Hour, 3600, 48 * time.Minute},
		{"extended to a year: per the requested hour", 365 * 24 * time.Hour, 3607, 3607 * time.Second * 8 / 10},
		{"two days: after 24h at the latest", 48 * time.Hour, 48 * 3600, 24 * time.Hour},
	} {
		if got := tokenRefreshAt(issued, issued.Add(tc.exp), &tc.requested).Sub(issued); got != tc.want {
			t.Errorf("%s: refresh after %s, want %s", tc.name, got, tc.want)
		}
	}
}

func TestAtomicWrite(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "vol")
	if err := atomicWrite(dir, map[string]volumeFile{"a": {[]byte("1"), 0o600}, "sub/b": {[]byte("2"), 0o644}}); err != nil {
		t.Fatal(err)
	}
	// A handle on the directory, as a bind mount has, sees the update.
	before, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := atomicWrite(dir, map[string]volumeFile{"a": {[]byte("3"), 0o600}}); err != nil {
		t.Fatal(err)
	}
	after, _ := os.Stat(dir)
	if !os.SameFile(before, after) {
		t.Error("the volume directory was replaced: a bind mount of it would keep the old content")
	}
	if data, err := os.ReadFile(filepath.Join(dir, "a")); err != nil || string(data) != "3" {
		t.Errorf("a = %q, %v; want 3", data, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "sub")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("sub still there after it left the volume: %v", err)
	}
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if len(names) != 3 { // a, ..data, ..<timestamp>
		t.Errorf("volume holds %q, want a, ..data and one timestamped directory", names)
	}
	if fi, err := os.Stat(filepath.Join(dir, "a")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("mode of a = %v, %v; want 600", fi, err)
	}
	if err := atomicWrite(dir, map[string]volumeFile{"..x": {nil, 0o644}}); err == nil {
		t.Error("a path starting with .. must be refused")
	}
}

func TestPodIPAllocation(t *testing.T) {
	block := netip.MustParsePrefix("198.18.16.0/20")
	ips := &podIPs{block: block, next: netip.MustParseAddr("198.18.31.253"), inUse: map[netip.Addr]string{}}
	got := []string{ips.allocate("a", ""), ips.allocate("b", ""), ips.allocate("c", "198.18.16.9"), ips.allocate("d", "198.18.16.9")}
	want := []string{"198.18.31.253", "198.18.31.254", "198.18.16.9", "198.18.16.2"} // wraps past the broadcast address, skips network and gateway
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("allocated %q, want %q", got, want)
	}
	ips.release("198.18.16.9")
	if got := ips.allocate("e", "198.18.16.9"); got != "198.18.16.9" {
		t.Errorf("a released address is free again: got %s", got)
	}
	none := &podIPs{inUse: map[netip.Addr]string{}}
	if got := none.allocate("x", ""); got != localIP {
		t.Errorf("without a block: %s, want %s", got, localIP)
	}
}

// kubeletTestCerts are a CA, the agent's serving certificate and client
// certificates, as devenv's control plane makes them.
type kubeletTestCerts struct {
	caCert, servingCert, servingKey string
	admin, nobody                   tls.Certificate
}

func writeKubeletTestCerts(dir string) (*kubeletTestCerts, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now().Add(-time.Hour)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test-ca"}, NotBefore: now, NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, caKey.Public(), caKey)
	if err != nil {
		return nil, err
	}
	ca, _ := x509.ParseCertificate(caDER)
	issue := func(serial int64, subject pkix.Name, usage x509.ExtKeyUsage) (certPEM, keyPEM []byte, err error) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, nil, err
		}
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: subject, NotBefore: now, NotAfter: now.Add(24 * time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}, IPAddresses: []net.IP{net.ParseIP(localIP)}}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, key.Public(), caKey)
		if err != nil {
			return nil, nil, err
		}
		keyDER, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			return nil, nil, err
		}
		return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), nil
	}
	c := &kubeletTestCerts{caCert: filepath.Join(dir, "ca.crt"), servingCert: filepath.Join(dir, "kubelet.crt"), servingKey: filepath.Join(dir, "kubelet.key")}
	if err := os.WriteFile(c.caCert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o600); err != nil {
		return nil, err
	}
	certPEM, keyPEM, err := issue(2, pkix.Name{CommonName: "kubelet"}, x509.ExtKeyUsageServerAuth)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(c.servingCert, certPEM, 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(c.servingKey, keyPEM, 0o600); err != nil {
		return nil, err
	}
	for i, who := range []struct {
		subject pkix.Name
		dst     *tls.Certificate
	}{
		{pkix.Name{CommonName: "kube-apiserver-kubelet-client", Organization: []string{"system:masters"}}, &c.admin},
		{pkix.Name{CommonName: "nobody"}, &c.nobody},
	} {
		certPEM, keyPEM, err := issue(int64(3+i), who.subject, x509.ExtKeyUsageClientAuth)
		if err != nil {
			return nil, err
		}
		if *who.dst, err = tls.X509KeyPair(certPEM, keyPEM); err != nil {
			return nil, err
		}
	}
	return c, nil
}

func (c *kubeletTestCerts) pool(t *testing.T) *x509.CertPool {
	t.Helper()
	data, err := os.ReadFile(c.caCert)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(data)
	return pool
}

func (c *kubeletTestCerts) client(t *testing.T, cert tls.Certificate) *http.Client {
	return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: c.pool(t), Certificates: []tls.Certificate{cert}}}}
}
