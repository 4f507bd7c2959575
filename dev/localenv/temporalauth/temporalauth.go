// Package temporalauth is what the local environment's Temporal server
// trusts when it runs with TLS or API keys (devenv --temporal-tls,
// --temporal-auth=api-key): one CA for server and client certificates,
// and one key that signs the API keys (JWTs) the server accepts. devenv
// creates it; tests load it to issue more (a rotated client certificate,
// a second API key) and make their own to get refused.
package temporalauth

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/golang-jwt/jwt/v4"
)

// Files in the directory Write fills.
const (
	CAFile         = "ca.crt"
	CAKeyFile      = "ca.key"
	SigningKeyFile = "api-key-signing.key"
)

// PermissionsClaim is the JWT claim Temporal's default claim mapper reads,
// each entry "<namespace>:<role>" (temporal-system for every namespace).
const PermissionsClaim = "permissions"

// Authority holds a CA and an API key signing key.
type Authority struct {
	CA      *x509.Certificate
	CAPEM   []byte
	caKey   *ecdsa.PrivateKey
	signing *ecdsa.PrivateKey
}

// New makes a fresh authority; the CA is valid for ten years.
func New(name string) (*Authority, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now().Add(-time.Hour)
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             now,
		NotAfter:              now.Add(10 * 365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, caKey.Public(), caKey)
	if err != nil {
		return nil, err
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	signing, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	return &Authority{CA: ca, CAPEM: pemBlock("CERTIFICATE", der), caKey: caKey, signing: signing}, nil
}

// Write stores the CA, its key and the signing key in dir (0600 keys).
func (a *Authority) Write(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	caKey, err := keyPEM(a.caKey)
	if err != nil {
		return err
	}
	signing, err := keyPEM(a.signing)
	if err != nil {
		return err
	}
	for name, data := range map[string][]byte{CAFile: a.CAPEM, CAKeyFile: caKey, SigningKeyFile: signing} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return err
		}
	}
	return nil
}

// Load reads an authority Write stored in dir.
func Load(dir string) (*Authority, error) {
	read := func(name string) (*pem.Block, error) {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return nil, err
		}
		b, _ := pem.Decode(data)
		if b == nil {
			return nil, fmt.Errorf("%s: no PEM block", name)
		}
		return b, nil
	}
	caBlock, err := read(CAFile)
	if err != nil {
		return nil, err
	}
	ca, err := x509.ParseCertificate(caBlock.Bytes)
	if err != nil {
		return nil, err
	}
	a := &Authority{CA: ca, CAPEM: pem.EncodeToMemory(caBlock)}
	for name, dst := range map[string]**ecdsa.PrivateKey{CAKeyFile: &a.caKey, SigningKeyFile: &a.signing} {
		b, err := read(name)
		if err != nil {
			return nil, err
		}
		if *dst, err = x509.ParseECPrivateKey(b.Bytes); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
	}
	return a, nil
}

// ServerCert is a serving certificate for hosts (IP addresses or DNS
// names), PEM encoded.
func (a *Authority) ServerCert(hosts []string) (crt, key []byte, err error) {
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: hosts[0]},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	now := time.Now().Add(-time.Hour)
	return a.issue(tmpl, now, now.Add(365*24*time.Hour))
}

// ClientCert is a client certificate for commonName valid in
// [notBefore, notAfter], PEM encoded as tls.crt and tls.key of a
// kubernetes.io/tls Secret.
func (a *Authority) ClientCert(commonName string, notBefore, notAfter time.Time) (crt, key []byte, err error) {
	return a.issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: commonName},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, notBefore, notAfter)
}

func (a *Authority) issue(tmpl *x509.Certificate, notBefore, notAfter time.Time) (crt, key []byte, err error) {
	if a.caKey == nil {
		return nil, nil, errors.New("this authority has no CA key")
	}
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl.SerialNumber = serial()
	tmpl.NotBefore, tmpl.NotAfter = notBefore, notAfter
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.CA, k.Public(), a.caKey)
	if err != nil {
		return nil, nil, err
	}
	if key, err = keyPEM(k); err != nil {
		return nil, nil, err
	}
	return pemBlock("CERTIFICATE", der), key, nil
}

// APIKey is a JWT for subject with Temporal permissions such as
// "default:admin", valid for ttl.
func (a *Authority) APIKey(subject string, permissions []string, ttl time.Duration) (string, error) {
	now := time.Now()
	tok := jwt.NewWithClaims(jwt.SigningMethodES256, jwt.MapClaims{
		"sub":            subject,
		PermissionsClaim: permissions,
		"iat":            now.Add(-time.Minute).Unix(),
		"exp":            now.Add(ttl).Unix(),
	})
	// Temporal's claim mapper asks its key provider by key ID.
	tok.Header["kid"] = a.KeyID()
	return tok.SignedString(a.signing)
}

// KeyID names the signing key in the API keys' "kid" header.
func (a *Authority) KeyID() string {
	der, _ := x509.MarshalPKIXPublicKey(&a.signing.PublicKey)
	sum := sha256.Sum256(der)
	return hex.EncodeToString(sum[:8])
}

// SigningPublicKey verifies the API keys this authority issues.
func (a *Authority) SigningPublicKey() *ecdsa.PublicKey { return &a.signing.PublicKey }

// CAPool trusts this authority's certificates.
func (a *Authority) CAPool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(a.CA)
	return p
}

// ClientTLS is a TLS config trusting the CA, presenting a fresh client
// certificate if withCert.
func (a *Authority) ClientTLS(withCert bool) (*tls.Config, error) {
	cfg := &tls.Config{RootCAs: a.CAPool(), MinVersion: tls.VersionTLS12}
	if withCert {
		now := time.Now().Add(-time.Hour)
		crt, key, err := a.ClientCert("temporaldev", now, now.Add(365*24*time.Hour))
		if err != nil {
			return nil, err
		}
		pair, err := tls.X509KeyPair(crt, key)
		if err != nil {
			return nil, err
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		panic(err)
	}
	return n
}

func keyPEM(k *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		return nil, err
	}
	return pemBlock("EC PRIVATE KEY", der), nil
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}
