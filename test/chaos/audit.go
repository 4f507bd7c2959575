package chaos

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
)

// ServiceAccountKubeconfig creates the service account name in the
// scenario's namespace, binds it to cluster-admin and writes a kubeconfig
// with a token of it. A controller started with it writes as its own user,
// which the API server's audit log records (its policy logs the writes of
// service accounts only: see localenv's controlplane.AuditPolicy), so each
// replica's writes can be told apart. It returns the path and the user name.
func (s *Scenario) ServiceAccountKubeconfig(name string) (path, user string) {
	s.Helper()
	ctx := context.Background()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.Namespace}}
	if err := s.Env.Kube.Create(ctx, sa); err != nil {
		s.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: s.Namespace + "-" + name},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: s.Namespace}},
	}
	if err := s.Env.Kube.Create(ctx, binding); err != nil {
		s.Fatal(err)
	}
	s.Cleanup(func() { _ = s.Env.Kube.Delete(context.Background(), binding) })
	tok, err := s.Env.Clients.CoreV1().ServiceAccounts(s.Namespace).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](4 * 3600)},
	}, metav1.CreateOptions{})
	if err != nil {
		s.Fatal(err)
	}
	ca := s.Env.REST.CAData
	if len(ca) == 0 && s.Env.REST.CAFile != "" {
		if ca, err = os.ReadFile(s.Env.REST.CAFile); err != nil {
			s.Fatal(err)
		}
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["local"] = &clientcmdapi.Cluster{Server: s.Env.REST.Host, CertificateAuthorityData: ca}
	cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: tok.Status.Token}
	cfg.Contexts["local"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: name}
	cfg.CurrentContext = "local"
	path = filepath.Join(s.Env.Info.Dir, s.Namespace+"-"+name+".kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		s.Fatal(err)
	}
	return path, "system:serviceaccount:" + s.Namespace + ":" + name
}

// AuditEvent is what the scenarios read of one audit log entry.
type AuditEvent struct {
	Verb       string    `json:"verb"`
	RequestURI string    `json:"requestURI"`
	Received   time.Time `json:"requestReceivedTimestamp"`
	User       struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef struct {
		Resource    string `json:"resource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
		Subresource string `json:"subresource"`
	} `json:"objectRef"`
	ResponseStatus struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
}

// AuditWrites returns the writes the API server's audit log holds by user,
// oldest first (the log records writes by service accounts).
func (s *Scenario) AuditWrites(user string) []AuditEvent {
	s.Helper()
	var out []AuditEvent
	// The log rotates at 20 MB, keeping one backup; read the backup first.
	logs, _ := filepath.Glob(filepath.Join(s.Env.Info.Dir, "logs", "audit-*.log"))
	logs = append(logs, filepath.Join(s.Env.Info.Dir, "logs", "audit.log"))
	for _, p := range logs {
		f, err := os.Open(p)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var e AuditEvent
			if json.Unmarshal(sc.Bytes(), &e) == nil && e.User.Username == user {
				out = append(out, e)
			}
		}
		f.Close()
	}
	return out
}
