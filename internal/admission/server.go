package admission

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	cradmission "sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingwebhookconfigurations,verbs=get;list;watch
// The rotation writes only its own configuration, not every webhook in the
// cluster; the chart swaps in its release's name (rainbow.generatedRules).
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingwebhookconfigurations,resourceNames=rainbow-validating-webhook,verbs=update;patch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;update;patch,namespace=rainbow-system

// Options configure the webhook and its server.
type Options struct {
	// Host and Port the server listens on; Port 0 means 9443.
	Host string
	Port int
	// CertDir holds tls.crt and tls.key; empty means controller-runtime's
	// default, <temp dir>/k8s-webhook-server/serving-certs.
	CertDir string
	// BannedKinds are refused in spec.object; nil means DefaultBannedKinds,
	// an empty list bans none of them (RBAC kinds are always banned).
	BannedKinds []string
	// ControllerUser and ControllerGroups are who the controller acts as
	// (for a service account, see ServiceAccountIdentity). Empty means
	// whoever the manager's client authenticates as.
	ControllerUser   string
	ControllerGroups []string
	// Rotation, if set, has the manager make and renew its own serving
	// certificate; otherwise one (from cert-manager, say) must be in
	// CertDir when the manager starts.
	Rotation *Rotation
	// AskClientCerts: ask clients for a certificate, without requiring
	// one, for an aggregated API served next to the webhook that
	// authenticates the API server's front proxy by it.
	AskClientCerts bool
	// CheckTemporalAddress refuses the addresses a TemporalConnection may
	// not name (--allowed-temporal-hosts); nil allows any.
	CheckTemporalAddress AddressCheck
}

// Rotation configures the built-in certificate rotation: a self-signed CA
// and a serving certificate kept in a Secret, the CA injected into the
// ValidatingWebhookConfiguration.
type Rotation struct {
	// Secret holds the CA and the serving certificate. It must exist (the
	// manifests create it empty); the manager fills it in.
	Secret types.NamespacedName
	// DNSName the API server calls the webhook by, such as
	// rainbow-webhook.rainbow-system.svc.
	DNSName string
	// WebhookConfiguration names the ValidatingWebhookConfiguration whose
	// caBundle is kept up to date.
	WebhookConfiguration string
	// WriteCertDir: the manager itself copies the Secret's certificate into
	// CertDir, for a manager running outside a cluster, where no volume
	// mounts the Secret.
	WriteCertDir bool
	// APIServices are APIServices served by the same server, whose
	// caBundle the rotation keeps up to date too.
	APIServices []string
	// ExtraDNSNames are further names of the certificate, such as the
	// Service an APIService names when the webhook is called by URL.
	ExtraDNSNames []string
}

// Server is the manager's webhook server. With rotation it starts serving
// only once the certificate is in CertDir and its CA in the webhook
// configuration.
type Server struct {
	webhook.Server
	opts  Options
	ready chan struct{}
}

// NewServer builds the webhook server to give the manager
// (manager.Options.WebhookServer); Setup then completes it.
func NewServer(o Options) *Server {
	if o.CertDir == "" {
		o.CertDir = filepath.Join(os.TempDir(), "k8s-webhook-server", "serving-certs")
	}
	wo := webhook.Options{Host: o.Host, Port: o.Port, CertDir: o.CertDir}
	if o.AskClientCerts {
		wo.TLSOpts = append(wo.TLSOpts, func(c *tls.Config) { c.ClientAuth = tls.RequestClientCert })
	}
	s := &Server{
		Server: webhook.NewServer(wo),
		opts:   o,
		ready:  make(chan struct{}),
	}
	if o.Rotation == nil {
		close(s.ready)
	}
	return s
}

// Start waits for the certificate, then serves until ctx ends.
func (s *Server) Start(ctx context.Context) error {
	select {
	case <-s.ready:
	case <-ctx.Done():
		return nil
	}
	return s.Server.Start(ctx)
}

// NeedLeaderElection is false: every replica serves the webhook.
func (s *Server) NeedLeaderElection() bool { return false }

// ReadyChecker fails until the server answers over TLS.
func (s *Server) ReadyChecker() healthz.Checker {
	started := s.Server.StartedChecker()
	return func(req *http.Request) error {
		select {
		case <-s.ready:
			return started(req)
		default:
			return fmt.Errorf("waiting for the serving certificate in %s (Secret %s)", s.opts.CertDir, s.opts.Rotation.Secret)
		}
	}
}

// Setup registers the validating webhooks on the manager's webhook server,
// which must be a *Server, its readiness check and, with rotation, the
// certificate rotator. Kinds are resolved with the manager's RESTMapper.
func Setup(mgr manager.Manager) error {
	s, ok := mgr.GetWebhookServer().(*Server)
	if !ok {
		return errors.New("the manager's webhook server was not made by admission.NewServer")
	}
	o := s.opts
	banned := o.BannedKinds
	if banned == nil {
		banned = DefaultBannedKinds
	}
	controller := SelfIdentity(mgr.GetClient())
	if o.ControllerUser != "" {
		controller = StaticIdentity(Identity{Username: o.ControllerUser, Groups: o.ControllerGroups})
	}
	v := NewValidator(mgr.GetScheme(), mgr.GetRESTMapper(), ClientReviewer{Client: mgr.GetClient()}, controller, banned)
	s.Register(Path, &cradmission.Webhook{Handler: v})
	// Its reader is the manager's cache, with claim.Index registered.
	s.Register(WorkerDeploymentPath, &cradmission.Webhook{Handler: NewWorkerDeploymentValidator(mgr.GetScheme(), ClientReviewer{Client: mgr.GetClient()}, mgr.GetClient())})
	s.Register(ConnectionPath, &cradmission.Webhook{Handler: NewConnectionValidator(mgr.GetScheme(), ClientReviewer{Client: mgr.GetClient()}, o.CheckTemporalAddress)})
	if err := mgr.AddReadyzCheck("webhook", s.ReadyChecker()); err != nil {
		return err
	}
	r := o.Rotation
	if r == nil {
		return nil
	}
	if r.Secret.Namespace == "" || r.Secret.Name == "" || r.DNSName == "" || r.WebhookConfiguration == "" {
		return errors.New("certificate rotation needs the Secret (namespace and name), the DNS name and the webhook configuration's name")
	}
	if r.WriteCertDir {
		if err := mgr.Add(&certWriter{reader: mgr.GetClient(), secret: r.Secret, dir: o.CertDir}); err != nil {
			return err
		}
	}
	hooks := []rotator.WebhookInfo{{Name: r.WebhookConfiguration, Type: rotator.Validating}}
	for _, a := range r.APIServices {
		hooks = append(hooks, rotator.WebhookInfo{Name: a, Type: rotator.APIService})
	}
	return rotator.AddRotator(mgr, &rotator.CertRotator{
		SecretKey:      r.Secret,
		CertDir:        o.CertDir,
		CAName:         "rainbow-webhook-ca",
		CAOrganization: "rainbow",
		DNSName:        r.DNSName,
		ExtraDNSNames:  r.ExtraDNSNames,
		IsReady:        s.ready,
		Webhooks:       hooks,
		FieldOwner:     "rainbow-cert-rotator",
		// Every replica serves the webhook, so every replica needs the
		// certificate; they share the Secret.
		RequireLeaderElection: false,
	})
}

// certWriter copies the certificate from the Secret into the webhook
// server's directory whenever it changes.
type certWriter struct {
	reader client.Reader
	secret types.NamespacedName
	dir    string
}

func (w *certWriter) NeedLeaderElection() bool { return false }

func (w *certWriter) Start(ctx context.Context) error {
	if err := os.MkdirAll(w.dir, 0o700); err != nil {
		return err
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	logger := log.Log.WithName("webhook-certs")
	var lastErr string
	for {
		var secret corev1.Secret
		if err := w.reader.Get(ctx, w.secret, &secret); err != nil {
			if err.Error() != lastErr {
				logger.Error(err, "read the webhook certificate's Secret", "secret", w.secret)
				lastErr = err.Error()
			}
		} else {
			// The key first: the server reloads when the certificate changes.
			for _, name := range []string{corev1.TLSPrivateKeyKey, corev1.TLSCertKey} {
				if err := writeIfChanged(filepath.Join(w.dir, name), secret.Data[name]); err != nil {
					return err
				}
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// writeIfChanged replaces path with data (atomically, by renaming a
// temporary file) unless it holds data already or data is empty.
func writeIfChanged(path string, data []byte) error {
	if len(data) == 0 {
		return nil
	}
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, data) {
		return nil
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
