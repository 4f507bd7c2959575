package controlplane

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// pki holds the paths of the certificates and keys the control plane uses.
type pki struct {
	CACert, CAKey           string
	ServingCert, ServingKey string
	AdminCert, AdminKey     string
	SAPublic, SAPrivate     string
	// The node agent's kubelet API and the API server's client for it.
	KubeletCert, KubeletKey             string
	KubeletClientCert, KubeletClientKey string
	// The aggregation layer: the front proxy's own CA (aggregated APIs
	// trust it for the request headers only) and client certificate, and
	// the serving certificate of the node agent's resource metrics API.
	FrontProxyCACert, FrontProxyCAKey         string
	FrontProxyClientCert, FrontProxyClientKey string
	MetricsCert, MetricsKey                   string
}

// FrontProxyClientName is the front proxy's client certificate name, the
// one name aggregated APIs accept (--requestheader-allowed-names).
const FrontProxyClientName = "front-proxy-client"

// MetricsService is the Service in kube-system through which the API server
// reaches the node agent's resource metrics API; its serving certificate
// is made for this name.
const MetricsService = "rainbow-node-metrics"

// writePKI creates a throwaway CA, an API server serving certificate for
// loopback, an admin client certificate in system:masters, the service
// account signing key pair, and for `kubectl logs` a kubelet serving
// certificate for 127.0.0.1 and the API server's client certificate for it.
// Everything is regenerated on each start.
func writePKI(dir string) (*pki, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	p := &pki{
		CACert: filepath.Join(dir, "ca.crt"), CAKey: filepath.Join(dir, "ca.key"),
		ServingCert: filepath.Join(dir, "apiserver.crt"), ServingKey: filepath.Join(dir, "apiserver.key"),
		AdminCert: filepath.Join(dir, "admin.crt"), AdminKey: filepath.Join(dir, "admin.key"),
		SAPublic: filepath.Join(dir, "sa.pub"), SAPrivate: filepath.Join(dir, "sa.key"),
		KubeletCert: filepath.Join(dir, "kubelet.crt"), KubeletKey: filepath.Join(dir, "kubelet.key"),
		KubeletClientCert: filepath.Join(dir, "apiserver-kubelet-client.crt"), KubeletClientKey: filepath.Join(dir, "apiserver-kubelet-client.key"),
		FrontProxyCACert: filepath.Join(dir, "front-proxy-ca.crt"), FrontProxyCAKey: filepath.Join(dir, "front-proxy-ca.key"),
		FrontProxyClientCert: filepath.Join(dir, "front-proxy-client.crt"), FrontProxyClientKey: filepath.Join(dir, "front-proxy-client.key"),
		MetricsCert: filepath.Join(dir, "metrics.crt"), MetricsKey: filepath.Join(dir, "metrics.key"),
	}
	now := time.Now().Add(-time.Hour)
	newCA := func(cn, certPath, keyPath string) (*x509.Certificate, *ecdsa.PrivateKey, error) {
		caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, nil, err
		}
		caTmpl := &x509.Certificate{
			SerialNumber:          big.NewInt(1),
			Subject:               pkix.Name{CommonName: cn},
			NotBefore:             now,
			NotAfter:              now.Add(10 * 365 * 24 * time.Hour),
			KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
			BasicConstraintsValid: true,
			IsCA:                  true,
		}
		caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, caKey.Public(), caKey)
		if err != nil {
			return nil, nil, err
		}
		caCert, err := x509.ParseCertificate(caDER)
		if err != nil {
			return nil, nil, err
		}
		return caCert, caKey, writeCertAndKey(certPath, keyPath, caDER, caKey)
	}
	caCert, caKey, err := newCA("rainbow-local-ca", p.CACert, p.CAKey)
	if err != nil {
		return nil, err
	}
	fpCert, fpKey, err := newCA("rainbow-local-front-proxy-ca", p.FrontProxyCACert, p.FrontProxyCAKey)
	if err != nil {
		return nil, err
	}

	leafOf := func(caCert *x509.Certificate, caKey crypto.Signer) func(int64, pkix.Name, x509.ExtKeyUsage, string, string, []net.IP, ...string) error {
		return func(serial int64, subject pkix.Name, usage x509.ExtKeyUsage, certPath, keyPath string, ips []net.IP, dns ...string) error {
			key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
			if err != nil {
				return err
			}
			tmpl := &x509.Certificate{
				SerialNumber: big.NewInt(serial),
				Subject:      subject,
				NotBefore:    now,
				NotAfter:     now.Add(10 * 365 * 24 * time.Hour),
				KeyUsage:     x509.KeyUsageDigitalSignature,
				ExtKeyUsage:  []x509.ExtKeyUsage{usage},
			}
			tmpl.IPAddresses, tmpl.DNSNames = ips, dns
			der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, key.Public(), caKey)
			if err != nil {
				return err
			}
			return writeCertAndKey(certPath, keyPath, der, key)
		}
	}
	leaf := leafOf(caCert, caKey)
	// Pods reach the API server at 127.0.0.1 (KUBERNETES_SERVICE_HOST); 10.0.0.1
	// is the `kubernetes` Service's ClusterIP, which nothing routes here.
	if err := leaf(2, pkix.Name{CommonName: "kube-apiserver"}, x509.ExtKeyUsageServerAuth, p.ServingCert, p.ServingKey,
		[]net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("10.0.0.1")},
		"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"); err != nil {
		return nil, err
	}
	if err := leaf(4, pkix.Name{CommonName: "rainbow-local"}, x509.ExtKeyUsageServerAuth, p.KubeletCert, p.KubeletKey,
		[]net.IP{net.ParseIP("127.0.0.1")}); err != nil {
		return nil, err
	}
	if err := leaf(5, pkix.Name{CommonName: "kube-apiserver-kubelet-client", Organization: []string{"system:masters"}},
		x509.ExtKeyUsageClientAuth, p.KubeletClientCert, p.KubeletClientKey, nil); err != nil {
		return nil, err
	}
	if err := leaf(3, pkix.Name{CommonName: "rainbow-admin", Organization: []string{"system:masters"}}, x509.ExtKeyUsageClientAuth, p.AdminCert, p.AdminKey, nil); err != nil {
		return nil, err
	}
	// The aggregation layer calls the metrics API by its Service's name.
	if err := leaf(6, pkix.Name{CommonName: MetricsService}, x509.ExtKeyUsageServerAuth, p.MetricsCert, p.MetricsKey, nil,
		MetricsService+".kube-system.svc"); err != nil {
		return nil, err
	}
	if err := leafOf(fpCert, fpKey)(2, pkix.Name{CommonName: FrontProxyClientName}, x509.ExtKeyUsageClientAuth,
		p.FrontProxyClientCert, p.FrontProxyClientKey, nil); err != nil {
		return nil, err
	}

	saKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	pubDER, err := x509.MarshalPKIXPublicKey(saKey.Public())
	if err != nil {
		return nil, err
	}
	if err := writePEM(p.SAPublic, "PUBLIC KEY", pubDER); err != nil {
		return nil, err
	}
	if err := writeKey(p.SAPrivate, saKey); err != nil {
		return nil, err
	}
	return p, nil
}

func writeCertAndKey(certPath, keyPath string, der []byte, key crypto.Signer) error {
	if err := writePEM(certPath, "CERTIFICATE", der); err != nil {
		return err
	}
	return writeKey(keyPath, key)
}

func writeKey(path string, key crypto.Signer) error {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	return writePEM(path, "PRIVATE KEY", der)
}

func writePEM(path, blockType string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: blockType, Bytes: der}), 0o600)
}
