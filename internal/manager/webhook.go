package manager

import (
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
