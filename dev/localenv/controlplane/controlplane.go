// Package controlplane runs a real Kubernetes control plane on loopback:
// etcd, kube-apiserver and kube-controller-manager, built from Go modules by
// hack/kube. It writes a kubeconfig with an admin client certificate.
package controlplane

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/rainbow-deploy/rainbow/dev/localenv/process"
)

const loopback = "127.0.0.1"

// DefaultControllers are the kube-controller-manager controllers the local
// environment runs: enough for Deployments to roll, owner references to
// cascade, namespaces to be deleted, pods to get service accounts and
// Services their EndpointSlices (through which the API server calls a
// webhook Service: --enable-aggregator-routing).
var DefaultControllers = []string{
	"deployment-controller",
	"replicaset-controller",
	"endpointslice-controller",
	"garbage-collector-controller",
	"namespace-controller",
	"serviceaccount-controller",
	"serviceaccount-token-controller",
	"disruption-controller",
	"horizontal-pod-autoscaler-controller",
	"root-ca-certificate-publisher-controller",
	"clusterrole-aggregation-controller",
}

// Config says where the binaries are, where state goes and which ports to use.
type Config struct {
	// Dir holds certificates, etcd data, logs and the kubeconfig. Its
	// previous contents are removed: each start is a fresh cluster.
	Dir string
	// BinDir holds etcd, kube-apiserver and kube-controller-manager.
	BinDir string
	// APIServerPort is the API server's secure port; 0 picks a free one.
	APIServerPort int
	// EtcdPort is etcd's client port; 0 picks a free one.
	EtcdPort    int
	Controllers []string
	// Progress receives one line per step; may be nil.
	Progress func(format string, args ...any)
}

// ControlPlane is a running control plane.
type ControlPlane struct {
	cfg        Config
	kubeconfig string
	rest       *rest.Config
	pki        *pki
	procs      []*process.Process
}

// AuditPolicy is what the API server records in logs/audit.log: the writes
// of service accounts, that is of controllers running in pods (the control
// plane's own controllers use the admin certificate), with who made them.
const AuditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: Metadata
    userGroups: ["system:serviceaccounts"]
    verbs: [create, update, patch, delete, deletecollection]
  - level: None
`

// KubeletTLS are the files of the kubelet API the API server calls for
// `kubectl logs`: its serving certificate and key (for 127.0.0.1, from the
// cluster CA, which the API server checks) and the CA of the client
// certificates to accept (the API server's is in system:masters).
func (cp *ControlPlane) KubeletTLS() (certFile, keyFile, clientCAFile string) {
	return cp.pki.KubeletCert, cp.pki.KubeletKey, cp.pki.CACert
}

// MetricsTLS are the files of the node agent's resource metrics API, which
// the API server's aggregation layer calls through the Service
// MetricsService: its serving certificate and key (for that Service's
// name, from the cluster CA, whose certificate caFile is) and the CA of the
// front proxy's client certificate (named FrontProxyClientName).
func (cp *ControlPlane) MetricsTLS() (certFile, keyFile, caFile, frontProxyCAFile string) {
	return cp.pki.MetricsCert, cp.pki.MetricsKey, cp.pki.CACert, cp.pki.FrontProxyCACert
}

// AuditLog is the API server's audit log (see AuditPolicy).
func (cp *ControlPlane) AuditLog() string { return filepath.Join(cp.cfg.Dir, "logs", "audit.log") }

// Start brings up etcd, the API server and the controller manager and
// returns once the API server is ready and the controller manager works.
func Start(ctx context.Context, cfg Config) (cp *ControlPlane, err error) {
	if cfg.Progress == nil {
		cfg.Progress = func(string, ...any) {}
	}
	if len(cfg.Controllers) == 0 {
		cfg.Controllers = DefaultControllers
	}
	for _, bin := range []string{"etcd", "kube-apiserver", "kube-controller-manager"} {
		if _, err := os.Stat(filepath.Join(cfg.BinDir, bin)); err != nil {
			return nil, fmt.Errorf("%s not found in %s: build the control plane with `make kube-bins`", bin, cfg.BinDir)
		}
	}
	apiPort, err := process.ResolvePort(loopback, cfg.APIServerPort, "kube-apiserver", "--apiserver-port")
	if err != nil {
		return nil, err
	}
	etcdPort, err := process.ResolvePort(loopback, cfg.EtcdPort, "etcd client", "--etcd-port")
	if err != nil {
		return nil, err
	}
	etcdPeerPort, err := process.FreePort(loopback)
	if err != nil {
		return nil, err
	}
	for _, sub := range []string{"pki", "etcd", "logs", "audit"} {
		if err := os.RemoveAll(filepath.Join(cfg.Dir, sub)); err != nil {
			return nil, err
		}
	}
	certs, err := writePKI(filepath.Join(cfg.Dir, "pki"))
	if err != nil {
		return nil, fmt.Errorf("generate certificates: %w", err)
	}
	auditPolicy := filepath.Join(cfg.Dir, "audit", "policy.yaml")
	if err := os.MkdirAll(filepath.Dir(auditPolicy), 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(auditPolicy, []byte(AuditPolicy), 0o644); err != nil {
		return nil, err
	}

	started := &ControlPlane{cfg: cfg, kubeconfig: filepath.Join(cfg.Dir, "kubeconfig"), pki: certs}
	cp = started
	defer func() {
		if err != nil {
			started.Stop() // cp is nil by now: the error return cleared it
		}
	}()
	logs := filepath.Join(cfg.Dir, "logs")

	cfg.Progress("starting etcd on %s:%d", loopback, etcdPort)
	etcdURL := fmt.Sprintf("http://%s:%d", loopback, etcdPort)
	peerURL := fmt.Sprintf("http://%s:%d", loopback, etcdPeerPort)
	etcd, err := cp.start("etcd", []string{
		"--name=local",
		"--data-dir=" + filepath.Join(cfg.Dir, "etcd"),
		"--listen-client-urls=" + etcdURL,
		"--advertise-client-urls=" + etcdURL,
		"--listen-peer-urls=" + peerURL,
		"--initial-advertise-peer-urls=" + peerURL,
		"--initial-cluster=local=" + peerURL,
		"--listen-metrics-urls=",
		// Test and demo clusters trade durability for speed.
		"--unsafe-no-fsync",
		"--log-level=warn",
	}, logs)
	if err != nil {
		return nil, err
	}
	if err := waitFor(ctx, 30*time.Second, etcd, func() error {
		resp, err := http.Get(etcdURL + "/health")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("etcd /health returned %d", resp.StatusCode)
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("etcd did not become healthy: %w", err)
	}

	cfg.Progress("starting kube-apiserver on https://%s:%d", loopback, apiPort)
	apiserver, err := cp.start("kube-apiserver", []string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=" + loopback,
		"--advertise-address=" + loopback,
		"--secure-port=" + strconv.Itoa(apiPort),
		"--tls-cert-file=" + certs.ServingCert,
		"--tls-private-key-file=" + certs.ServingKey,
		"--client-ca-file=" + certs.CACert,
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + certs.SAPublic,
		"--service-account-signing-key-file=" + certs.SAPrivate,
		"--service-cluster-ip-range=10.0.0.0/24",
		"--authorization-mode=RBAC",
		// `kubectl logs`: the node agent's kubelet API, verified both ways.
		"--kubelet-certificate-authority=" + certs.CACert,
		"--kubelet-client-certificate=" + certs.KubeletClientCert,
		"--kubelet-client-key=" + certs.KubeletClientKey,
		"--kubelet-preferred-address-types=InternalIP",
		// Webhook Services resolve to their pods' EndpointSlices: no kube-proxy
		// routes ClusterIPs here.
		"--enable-aggregator-routing=true",
		// The aggregation layer (the node agent's metrics API, the
		// manager's external metrics): the front proxy's client certificate
		// and the request headers that name the user.
		"--requestheader-client-ca-file=" + certs.FrontProxyCACert,
		"--requestheader-allowed-names=" + FrontProxyClientName,
		"--requestheader-username-headers=X-Remote-User",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--proxy-client-cert-file=" + certs.FrontProxyClientCert,
		"--proxy-client-key-file=" + certs.FrontProxyClientKey,
		"--audit-policy-file=" + auditPolicy,
		"--audit-log-path=" + filepath.Join(logs, "audit.log"),
		"--audit-log-maxsize=20",
		"--audit-log-maxbackup=1",
		"--allow-privileged=true",
		"--enable-priority-and-fairness=false",
		"--profiling=false",
		"--v=0",
	}, logs)
	if err != nil {
		return nil, err
	}
	if err := cp.writeKubeconfig(certs, fmt.Sprintf("https://%s:%d", loopback, apiPort)); err != nil {
		return nil, err
	}
	client, err := kubernetes.NewForConfig(cp.rest)
	if err != nil {
		return nil, err
	}
	if err := waitFor(ctx, 90*time.Second, apiserver, func() error {
		body, err := client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err != nil {
			return fmt.Errorf("%v: %s", err, body)
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("kube-apiserver did not become ready: %w", err)
	}

	cfg.Progress("starting kube-controller-manager (%s)", strings.Join(cfg.Controllers, ", "))
	kcm, err := cp.start("kube-controller-manager", []string{
		"--kubeconfig=" + cp.kubeconfig,
		"--authentication-kubeconfig=" + cp.kubeconfig,
		"--authorization-kubeconfig=" + cp.kubeconfig,
		"--controllers=" + strings.Join(cfg.Controllers, ","),
		"--service-account-private-key-file=" + certs.SAPrivate,
		"--root-ca-file=" + certs.CACert,
		"--use-service-account-credentials=false",
		"--leader-elect=false",
		"--secure-port=0",
		// Quick garbage collection and namespace cleanup keep tests short.
		"--concurrent-gc-syncs=10",
		"--namespace-sync-period=10s",
		// HPAs look every 5s (15s in a cluster) and scale down after 30s
		// of lower recommendations (5m), so autoscaling shows in seconds;
		// an HPA's own behavior still overrides the window.
		"--horizontal-pod-autoscaler-sync-period=5s",
		"--horizontal-pod-autoscaler-downscale-stabilization=30s",
		"--v=0",
	}, logs)
	if err != nil {
		return nil, err
	}
	// The default service account only appears once the controller manager
	// runs its controllers, so it proves the whole chain works.
	if err := waitFor(ctx, 60*time.Second, kcm, func() error {
		_, err := client.CoreV1().ServiceAccounts(metav1.NamespaceDefault).Get(ctx, "default", metav1.GetOptions{})
		return err
	}); err != nil {
		return nil, fmt.Errorf("kube-controller-manager did not create the default service account: %w", err)
	}
	return cp, nil
}

// KubeconfigPath is the admin kubeconfig for the cluster.
func (cp *ControlPlane) KubeconfigPath() string { return cp.kubeconfig }

// RESTConfig is the admin client configuration.
func (cp *ControlPlane) RESTConfig() *rest.Config { return rest.CopyConfig(cp.rest) }

// Failed returns an error once any control-plane process has exited.
func (cp *ControlPlane) Failed() error {
	for _, p := range cp.procs {
		if err := p.ExitError(); err != nil {
			return err
		}
	}
	return nil
}

// Stop stops the processes in reverse start order.
func (cp *ControlPlane) Stop() {
	for i := len(cp.procs) - 1; i >= 0; i-- {
		cp.procs[i].Stop(10 * time.Second)
	}
	cp.procs = nil
}

func (cp *ControlPlane) start(name string, args []string, logDir string) (*process.Process, error) {
	p, err := process.Start(name, filepath.Join(cp.cfg.BinDir, name), args, os.Environ(), filepath.Join(logDir, name+".log"))
	if err != nil {
		return nil, err
	}
	cp.procs = append(cp.procs, p)
	return p, nil
}

func (cp *ControlPlane) writeKubeconfig(certs *pki, server string) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["rainbow-local"] = &clientcmdapi.Cluster{Server: server, CertificateAuthority: certs.CACert}
	kc.AuthInfos["rainbow-admin"] = &clientcmdapi.AuthInfo{ClientCertificate: certs.AdminCert, ClientKey: certs.AdminKey}
	kc.Contexts["rainbow-local"] = &clientcmdapi.Context{Cluster: "rainbow-local", AuthInfo: "rainbow-admin", Namespace: metav1.NamespaceDefault}
	kc.CurrentContext = "rainbow-local"
	if err := clientcmd.WriteToFile(*kc, cp.kubeconfig); err != nil {
		return err
	}
	restCfg, err := clientcmd.BuildConfigFromFlags("", cp.kubeconfig)
	if err != nil {
		return err
	}
	restCfg.QPS, restCfg.Burst = 200, 400
	cp.rest = restCfg
	return nil
}

// waitFor polls check until it succeeds, the process dies or time runs out.
func waitFor(ctx context.Context, timeout time.Duration, p *process.Process, check func() error) error {
	deadline := time.Now().Add(timeout)
	var last error
	for {
		if err := p.ExitError(); err != nil {
			return err
		}
		if last = check(); last == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("gave up after %s: %w (log: %s)", timeout, last, p.LogPath)
		}
		select {
		case <-ctx.Done():
			return errors.Join(ctx.Err(), last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}
