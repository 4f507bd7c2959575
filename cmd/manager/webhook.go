package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"k8s.io/apimachinery/pkg/types"

	"github.com/rainbow-deploy/rainbow/internal/admission"
	"github.com/rainbow-deploy/rainbow/internal/manager"
)

// webhookFlags are the flags of the TemporalWorkerOwnedResource webhook.
type webhookFlags struct {
	port                    int
	host, certDir           string
	rotation                bool
	writeCerts              bool
	secret, dnsName, config string
	extraDNSNames           string
	bannedKinds             string
	controllerSA            string
}

func bindWebhookFlags(fs *flag.FlagSet) *webhookFlags {
	f := &webhookFlags{}
	fs.IntVar(&f.port, "webhook-port", 9443, "port of the validating webhooks (TemporalWorkerDeployments, TemporalConnections, TemporalWorkerOwnedResources; HTTPS); 0 disables the webhook server")
	fs.StringVar(&f.host, "webhook-host", "", "address the webhook server listens on; empty means all")
	fs.StringVar(&f.certDir, "webhook-cert-dir", "", "directory holding the webhook's tls.crt and tls.key; empty means <temp dir>/k8s-webhook-server/serving-certs")
	fs.BoolVar(&f.rotation, "webhook-cert-rotation", false,
		"make and renew the webhook's certificate in --webhook-secret and inject its CA into --webhook-configuration-name (instead of cert-manager)")
	fs.StringVar(&f.secret, "webhook-secret", "rainbow-system/rainbow-webhook-cert", "namespace/name of the Secret holding the rotated certificate")
	fs.StringVar(&f.dnsName, "webhook-dns-name", "rainbow-webhook.rainbow-system.svc", "DNS name of the rotated serving certificate: the name the API server calls the webhook by")
	fs.StringVar(&f.extraDNSNames, "webhook-extra-dns-names", "",
		"comma-separated further DNS names of the rotated certificate, such as the Service an APIService names when the webhook is called by URL")
	fs.StringVar(&f.config, "webhook-configuration-name", "rainbow-validating-webhook", "ValidatingWebhookConfiguration whose caBundle the rotation keeps up to date")
	fs.BoolVar(&f.writeCerts, "webhook-write-certs", false,
		"copy the rotated certificate from the Secret into --webhook-cert-dir (for a manager outside a cluster, where no volume mounts the Secret)")
	fs.StringVar(&f.bannedKinds, "owned-resource-banned-kinds", strings.Join(admission.DefaultBannedKinds, ","),
		"comma-separated kinds a TemporalWorkerOwnedResource may not attach, in any API group, refused by the webhook and the controller; empty bans none of these (RBAC kinds are always banned)")
	sa := ""
	if ns, name := os.Getenv("POD_NAMESPACE"), os.Getenv("SERVICE_ACCOUNT_NAME"); ns != "" && name != "" {
		sa = ns + "/" + name
	}
	fs.StringVar(&f.controllerSA, "controller-service-account", sa,
		"namespace/name of the controller's service account, whose permissions the webhook checks (defaults to $POD_NAMESPACE/$SERVICE_ACCOUNT_NAME); empty means whoever the manager authenticates as")
	return f
}

// options are the manager's webhook options; nil when disabled.
func (f *webhookFlags) options() (*manager.WebhookOptions, error) {
	if f.port == 0 {
		return nil, nil
	}
	o := &manager.WebhookOptions{Host: f.host, Port: f.port, CertDir: f.certDir, BannedKinds: []string{}}
	for _, k := range strings.Split(f.bannedKinds, ",") {
		if k = strings.TrimSpace(k); k != "" {
			o.BannedKinds = append(o.BannedKinds, k)
		}
	}
	if f.controllerSA != "" {
		ns, name, err := namespacedName("--controller-service-account", f.controllerSA)
		if err != nil {
			return nil, err
		}
		id := admission.ServiceAccountIdentity(ns, name)
		o.ControllerUser, o.ControllerGroups = id.Username, id.Groups
	}
	if f.rotation {
		ns, name, err := namespacedName("--webhook-secret", f.secret)
		if err != nil {
			return nil, err
		}
		o.Rotation = &manager.WebhookRotation{
			Secret: types.NamespacedName{Namespace: ns, Name: name}, DNSName: f.dnsName,
			WebhookConfiguration: f.config, WriteCertDir: f.writeCerts,
		}
		for _, n := range strings.Split(f.extraDNSNames, ",") {
			if n = strings.TrimSpace(n); n != "" {
				o.Rotation.ExtraDNSNames = append(o.Rotation.ExtraDNSNames, n)
			}
		}
	}
	return o, nil
}

func namespacedName(flagName, v string) (string, string, error) {
	ns, name, ok := strings.Cut(v, "/")
	if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		return "", "", fmt.Errorf("%s=%q: want namespace/name", flagName, v)
	}
	return ns, name, nil
}
