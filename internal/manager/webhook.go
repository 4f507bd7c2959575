package manager

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/rainbow-deploy/rainbow/internal/admission"
)

// WebhookOptions configure the TemporalWorkerOwnedResource validating
// webhook (see internal/admission).
type WebhookOptions = admission.Options

// WebhookRotation configures the webhook's built-in certificate rotation.
type WebhookRotation = admission.Rotation

// webhookServer is the manager's webhook server; nil (controller-runtime's
// default, never started) when there is no webhook.
func webhookServer(o *WebhookOptions) webhook.Server {
	if o == nil {
		return nil
	}
	return admission.NewServer(*o)
}

// bannedKinds are the kinds the controller refuses to make copies of: the
// webhook's, so that both refuse the same (nil: the default list).
func bannedKinds(o *WebhookOptions) []string {
	if o == nil {
		return nil
	}
	return o.BannedKinds
}

// withoutMissingCert turns the webhook server off when nothing provides its
// certificate: no rotation, no --webhook-cert-dir, and no tls.crt in the
// default directory. That is a manager started by hand outside a cluster,
// which would otherwise stop at its first TLS handshake setup; it says so
// once instead. A certificate directory named on purpose stays required.
func withoutMissingCert(o *WebhookOptions, log logr.Logger) *WebhookOptions {
	if o == nil || o.Rotation != nil || o.CertDir != "" {
		return o
	}
	crt := filepath.Join(os.TempDir(), "k8s-webhook-server", "serving-certs", "tls.crt")
	if _, err := os.Stat(crt); !errors.Is(err, fs.ErrNotExist) {
		return o
	}
	log.Info("no webhook certificate: running without the webhook server, so only the CRDs' OpenAPI and CEL rules check what is admitted "+
		"(give a certificate with --webhook-cert-dir or --webhook-cert-rotation, or pass --webhook-port=0 to say so)", "missing", crt)
	return nil
}
