package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/rainbow-deploy/rainbow/dev/cmd/devenv/temporaldev"
	"github.com/rainbow-deploy/rainbow/dev/localenv"
	"github.com/rainbow-deploy/rainbow/dev/localenv/temporalauth"
)

// tlsFlag is --temporal-tls: off, "true" (server TLS) or "mtls" (client
// certificates required). A bare --temporal-tls means "true".
type tlsFlag string

func (f *tlsFlag) String() string   { return string(*f) }
func (f *tlsFlag) IsBoolFlag() bool { return true }
func (f *tlsFlag) Set(v string) error {
	if v == "mtls" {
		*f = "mtls"
		return nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return fmt.Errorf("want true, false or mtls")
	}
	*f = ""
	if b {
		*f = "true"
	}
	return nil
}

// Names of the Secrets devenv creates in namespace default, as
// docs/connections.md names them.
const (
	mtlsSecret   = "temporal-client"
	apiKeySecret = "temporal-api-key"
	apiKeyKey    = "apiKey"
)

// security is what devenv sets up for --temporal-tls and --temporal-auth.
type security struct {
	authority            *temporalauth.Authority
	dir                  string
	clientAuth           bool
	clientCrt, clientKey []byte
	apiKey               string
}

// setupSecurity makes the CA, the server certificate, a client certificate
// and an API key, and configures the Temporal server to demand them. nil
// when neither flag is set.
func setupSecurity(dir string, mode tlsFlag, auth, namespace string, o *temporaldev.Options) (*security, error) {
	switch auth {
	case "", "none":
		auth = ""
	case "api-key":
		// Temporal's SDKs send API keys only over TLS.
		if mode == "" {
			mode = "true"
		}
	default:
		return nil, fmt.Errorf("--temporal-auth=%q: want none or api-key", auth)
	}
	if mode == "" {
		return nil, nil
	}
	a, err := temporalauth.New("rainbow devenv Temporal CA")
	if err != nil {
		return nil, err
	}
	s := &security{authority: a, dir: filepath.Join(dir, "temporal-auth"), clientAuth: mode == "mtls"}
	if err := a.Write(s.dir); err != nil {
		return nil, err
	}
	crt, key, err := a.ServerCert([]string{"localhost", "127.0.0.1", "::1"})
	if err != nil {
		return nil, err
	}
	o.TLS = &temporaldev.TLS{CertPEM: crt, KeyPEM: key}
	if s.clientAuth {
		o.TLS.ClientCAPEM = a.CAPEM
	}
	if o.ProbeTLS, err = a.ClientTLS(s.clientAuth); err != nil {
		return nil, err
	}
	now := time.Now().Add(-time.Hour)
	if s.clientCrt, s.clientKey, err = a.ClientCert("rainbow-devenv-client", now, now.Add(365*24*time.Hour)); err != nil {
		return nil, err
	}
	for name, data := range map[string][]byte{"client.crt": s.clientCrt, "client.key": s.clientKey} {
		if err := os.WriteFile(filepath.Join(s.dir, name), data, 0o600); err != nil {
			return nil, err
		}
	}
	if auth == "api-key" {
		o.APIKeys = &temporaldev.APIKeys{Issuer: a.SigningPublicKey(), KeyID: a.KeyID()}
		// Admin of the one namespace: what the controller and its workers need.
		if s.apiKey, err = a.APIKey("rainbow-devenv", []string{namespace + ":admin"}, 365*24*time.Hour); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// describe fills the environment's info.
func (s *security) describe(info *localenv.Info) {
	if s == nil {
		return
	}
	info.TemporalTLS = &localenv.TemporalTLS{
		CA: string(s.authority.CAPEM), CAFile: filepath.Join(s.dir, temporalauth.CAFile),
		ServerName: "localhost", ClientAuth: s.clientAuth,
		ClientCert: string(s.clientCrt), ClientKey: string(s.clientKey),
		ClientCertFile: filepath.Join(s.dir, "client.crt"), ClientKeyFile: filepath.Join(s.dir, "client.key"),
	}
	info.TemporalAPIKey = s.apiKey
	info.TemporalAuthDir = s.dir
	info.TemporalSecrets = &localenv.TemporalSecrets{MutualTLS: mtlsSecret}
	if s.apiKey != "" {
		info.TemporalSecrets.APIKey, info.TemporalSecrets.APIKeyKey = apiKeySecret, apiKeyKey
	}
}

// createSecrets stores the credentials as Secrets in namespace default,
// shaped as docs/connections.md tells users to shape them.
func (s *security) createSecrets(ctx context.Context, c kubernetes.Interface) error {
	if s == nil {
		return nil
	}
	secrets := []*corev1.Secret{{
		ObjectMeta: metav1.ObjectMeta{Name: mtlsSecret},
		Type:       corev1.SecretTypeTLS,
		Data: map[string][]byte{
			corev1.TLSCertKey: s.clientCrt, corev1.TLSPrivateKeyKey: s.clientKey, "ca.crt": s.authority.CAPEM,
		},
	}}
	if s.apiKey != "" {
		secrets = append(secrets, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: apiKeySecret},
			Data:       map[string][]byte{apiKeyKey: []byte(s.apiKey), "ca.crt": s.authority.CAPEM},
		})
	}
	for _, sec := range secrets {
		sec.Namespace = metav1.NamespaceDefault
		// The default namespace appears a moment after the API server.
		err := retryUntil(ctx, 30*time.Second, func() error {
			_, err := c.CoreV1().Secrets(sec.Namespace).Create(ctx, sec, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				return nil
			}
			return err
		})
		if err != nil {
			return fmt.Errorf("create Secret default/%s: %w", sec.Name, err)
		}
	}
	return nil
}

func retryUntil(ctx context.Context, d time.Duration, f func() error) error {
	deadline := time.Now().Add(d)
	for {
		err := f()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// summary tells a developer how to connect, for devenv's banner.
func (s *security) summary() string {
	if s == nil {
		return ""
	}
	out := fmt.Sprintf("  Temporal TLS     CA %s, server name localhost", filepath.Join(s.dir, temporalauth.CAFile))
	if s.clientAuth {
		out += fmt.Sprintf("\n  client cert      %s, %s (required)", filepath.Join(s.dir, "client.crt"), filepath.Join(s.dir, "client.key"))
	}
	if s.apiKey != "" {
		out += "\n  API key          in env.json (temporalAPIKey) and Secret default/" + apiKeySecret + " (required)"
	}
	return out + fmt.Sprintf("\n  Secrets          default/%s (mutualTLSSecretRef)%s\n", mtlsSecret, map[bool]string{true: ", default/" + apiKeySecret + " (apiKeySecretRef)"}[s.apiKey != ""])
}
