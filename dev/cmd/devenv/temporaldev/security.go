package temporaldev

import (
	"crypto/ecdsa"
	"crypto/rsa"
	"crypto/tls"
	"encoding/base64"
	"fmt"

	"go.temporal.io/server/common/authorization"
	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/log"
)

// TLS makes the frontend serve TLS.
type TLS struct {
	// CertPEM and KeyPEM are the frontend's serving certificate.
	CertPEM, KeyPEM []byte
	// ClientCAPEM, if set, makes the frontend require client certificates
	// signed by it (mutual TLS).
	ClientCAPEM []byte
}

// APIKeys makes the frontend accept only requests that carry a bearer token
// (an API key) signed by Issuer: a JWT, ES256, whose "kid" header is KeyID,
// with Temporal permissions ("<namespace>:<role>") in its "permissions"
// claim. Requests without one get only health checks.
type APIKeys struct {
	Issuer *ecdsa.PublicKey
	KeyID  string
}

func (o Options) secure() bool { return o.TLS != nil || o.APIKeys != nil }

// frontendTLS is the frontend's TLS settings; the internal frontend, which
// the server's own worker service and the UI use, stays on loopback
// without TLS and authorization.
func frontendTLS(t *TLS) config.GroupTLS {
	if t == nil {
		return config.GroupTLS{}
	}
	b64 := base64.StdEncoding.EncodeToString
	s := config.ServerTLS{CertData: b64(t.CertPEM), KeyData: b64(t.KeyPEM)}
	if t.ClientCAPEM != nil {
		s.ClientCAData, s.RequireClientAuth = []string{b64(t.ClientCAPEM)}, true
	}
	return config.GroupTLS{Server: s}
}

// authorization is the frontend's authorizer and claim mapper: Temporal's
// default ones, the claim mapper reading only keys a signs.
func authorizationFor(a *APIKeys, logger log.Logger) (authorization.Authorizer, authorization.ClaimMapper) {
	if a == nil {
		return authorization.NewNoopAuthorizer(), authorization.NewNoopClaimMapper()
	}
	return authorization.NewDefaultAuthorizer(),
		authorization.NewDefaultJWTClaimMapper(keyProvider{a}, &config.Authorization{}, logger)
}

// keyProvider hands the claim mapper the one key that signs API keys.
type keyProvider struct{ a *APIKeys }

func (k keyProvider) EcdsaKey(alg, kid string) (*ecdsa.PublicKey, error) {
	if kid != k.a.KeyID {
		return nil, fmt.Errorf("unknown key ID %q", kid)
	}
	return k.a.Issuer, nil
}

func (keyProvider) HmacKey(alg, kid string) ([]byte, error) {
	return nil, fmt.Errorf("signing method %s not accepted", alg)
}

func (keyProvider) RsaKey(alg, kid string) (*rsa.PublicKey, error) {
	return nil, fmt.Errorf("signing method %s not accepted", alg)
}

func (keyProvider) SupportedMethods() []string { return []string{"ES256"} }

func (keyProvider) Close() {}

var _ authorization.TokenKeyProvider = keyProvider{}

// probeTLS is how the readiness probe reaches the public frontend.
func (o Options) probeTLS() *tls.Config {
	if o.TLS == nil {
		return nil
	}
	return o.ProbeTLS
}
