// Package temporal is the controller's only door to Temporal: connection
// parameters built from Secrets, a pool of SDK clients, and thin wrappers
// around the Worker Deployment API and the gate workflows. Nothing here
// decides; the planner does.
package temporal

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/internal/planner"
)

// ReasonAuthSecretInvalid is the condition reason for a missing or unusable
// credentials Secret.
const ReasonAuthSecretInvalid = "AuthSecretInvalid"

// Keys of a kubernetes.io/tls Secret, plus the optional CA.
const (
	SecretKeyTLSCert = corev1.TLSCertKey       // tls.crt
	SecretKeyTLSKey  = corev1.TLSPrivateKeyKey // tls.key
	SecretKeyCA      = "ca.crt"
)

// ConnectionParams is everything needed to dial one Temporal namespace.
type ConnectionParams struct {
	HostPort, Namespace, ServerName string
	ClientCert, ClientKey, CA       []byte
	APIKey                          string
	TLS                             bool
}

// Key identifies the parameters: any change, such as a rotated Secret,
// gives a new key and so a new client.
func (p ConnectionParams) Key() string {
	h := sha256.New()
	// Length-prefix every field so that moving bytes between fields
	// cannot produce the same digest.
	write := func(b []byte) {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	write([]byte(p.HostPort))
	write([]byte(p.Namespace))
	write([]byte(p.ServerName))
	write(p.ClientCert)
	write(p.ClientKey)
	write(p.CA)
	write([]byte(p.APIKey))
	if p.TLS {
		write([]byte{1})
	} else {
		write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// String never prints credentials, so params are safe to log.
func (p ConnectionParams) String() string {
	auth := "none"
	switch {
	case len(p.ClientCert) > 0 && p.APIKey != "":
		auth = "mTLS+apiKey"
	case len(p.ClientCert) > 0:
		auth = "mTLS"
	case p.APIKey != "":
		auth = "apiKey"
	}
	return fmt.Sprintf("%s/%s (tls=%t, auth=%s)", p.HostPort, p.Namespace, p.TLS, auth)
}

// tlsConfig is nil when the connection is plaintext.
func (p ConnectionParams) tlsConfig() (*tls.Config, error) {
	if !p.TLS {
		return nil, nil
	}
	cfg := &tls.Config{ServerName: p.ServerName, MinVersion: tls.VersionTLS12}
	if len(p.ClientCert) > 0 {
		pair, err := tls.X509KeyPair(p.ClientCert, p.ClientKey)
		if err != nil {
			return nil, fmt.Errorf("client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	if len(p.CA) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(p.CA) {
			return nil, fmt.Errorf("%s holds no PEM certificate", SecretKeyCA)
		}
		cfg.RootCAs = pool
	}
	return cfg, nil
}

// ParamsFromSecrets checks the Secrets a TemporalConnection references and
// turns them into connection parameters. namespace is the Temporal
// namespace. A nil Secret means the referenced Secret does not exist. The
// Problem's message names the Secret, the key and what to fix.
func ParamsFromSecrets(spec v1alpha1.TemporalConnectionSpec, namespace string, tlsSecret, apiKeySecret *corev1.Secret, now time.Time) (ConnectionParams, *planner.Problem) {
	p := ConnectionParams{HostPort: spec.HostPort, Namespace: namespace, ServerName: spec.TLSServerName}
	// A server name only matters with TLS; asking for one implies TLS.
	p.TLS = spec.TLSServerName != ""
	if ref := spec.MutualTLSSecretRef; ref != nil {
		if prob := mtlsFromSecret(&p, ref.Name, tlsSecret, now); prob != nil {
			return ConnectionParams{}, prob
		}
	}
	if ref := spec.APIKeySecretRef; ref != nil {
		if apiKeySecret == nil {
			return ConnectionParams{}, invalid("Secret %s not found: spec.apiKeySecretRef names it; create it with the API key under key %q", ref.Name, ref.Key)
		}
		raw, ok := apiKeySecret.Data[ref.Key]
		if !ok {
			return ConnectionParams{}, invalid("Secret %s has no key %q: put the API key there or change spec.apiKeySecretRef.key (the Secret has keys %s)", ref.Name, ref.Key, keysOf(apiKeySecret))
		}
		// Files written with a trailing newline are common; a key never
		// contains white space.
		key := strings.TrimSpace(string(raw))
		if key == "" {
			return ConnectionParams{}, invalid("Secret %s key %q is empty: put the API key there", ref.Name, ref.Key)
		}
		p.APIKey = key
		// Temporal refuses API keys over plaintext.
		p.TLS = true
		// A server whose certificate is from a private CA needs that CA
		// with an API key too; only the mTLS Secret could carry it.
		if ca, ok := apiKeySecret.Data[SecretKeyCA]; ok {
			if !x509.NewCertPool().AppendCertsFromPEM(ca) {
				return ConnectionParams{}, invalid("Secret %s key %q holds no PEM certificate: store the CA that signed the server's certificate, or remove the key to use the system roots", ref.Name, SecretKeyCA)
			}
			p.CA = ca
		}
	}
	return p, nil
}

func mtlsFromSecret(p *ConnectionParams, name string, s *corev1.Secret, now time.Time) *planner.Problem {
	if s == nil {
		return invalid("Secret %s not found: spec.mutualTLSSecretRef names it; create it with keys %s and %s (and optionally %s)", name, SecretKeyTLSCert, SecretKeyTLSKey, SecretKeyCA)
	}
	for _, k := range []string{SecretKeyTLSCert, SecretKeyTLSKey} {
		if len(s.Data[k]) == 0 {
			return invalid("Secret %s has no key %q (or it is empty): it must hold the client certificate in %s and its private key in %s, PEM encoded", name, k, SecretKeyTLSCert, SecretKeyTLSKey)
		}
	}
	crt, key := s.Data[SecretKeyTLSCert], s.Data[SecretKeyTLSKey]
	pair, err := tls.X509KeyPair(crt, key)
	if err != nil {
		return invalid("Secret %s keys %q and %q are not a usable PEM certificate and matching private key (%v): store the client certificate and its key, PEM encoded", name, SecretKeyTLSCert, SecretKeyTLSKey, err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return invalid("Secret %s key %q: the certificate does not parse (%v): store a PEM encoded X.509 certificate", name, SecretKeyTLSCert, err)
	}
	if now.After(leaf.NotAfter) {
		return invalid("Secret %s key %q: the client certificate (subject %q) expired at %s: renew it and update the Secret", name, SecretKeyTLSCert, leaf.Subject.String(), leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	if now.Before(leaf.NotBefore) {
		return invalid("Secret %s key %q: the client certificate (subject %q) is not valid before %s: check its validity period or the clocks", name, SecretKeyTLSCert, leaf.Subject.String(), leaf.NotBefore.UTC().Format(time.RFC3339))
	}
	if ca, ok := s.Data[SecretKeyCA]; ok && len(ca) > 0 {
		if !x509.NewCertPool().AppendCertsFromPEM(ca) {
			return invalid("Secret %s key %q holds no PEM certificate: store the CA that signed the server's certificate, or remove the key to use the system roots", name, SecretKeyCA)
		}
		p.CA = ca
	}
	p.ClientCert, p.ClientKey, p.TLS = crt, key, true
	return nil
}

func invalid(format string, args ...any) *planner.Problem {
	return &planner.Problem{Reason: ReasonAuthSecretInvalid, Message: fmt.Sprintf(format, args...)}
}

func keysOf(s *corev1.Secret) string {
	if len(s.Data) == 0 {
		return "none"
	}
	keys := make([]string, 0, len(s.Data))
	for k := range s.Data {
		keys = append(keys, fmt.Sprintf("%q", k))
	}
	// Stable messages avoid needless condition updates.
	slices.Sort(keys)
	return strings.Join(keys, ", ")
}
