package temporal

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/test/harness"
)

func secret(name string, data map[string][]byte) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: data}
}

func TestParamsFromSecretsMTLS(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	crt, key := harness.ClientCertPEM(t, now.Add(-time.Hour), now.Add(24*time.Hour))
	expired, expiredKey := harness.ClientCertPEM(t, now.Add(-48*time.Hour), now.Add(-time.Hour))
	future, futureKey := harness.ClientCertPEM(t, now.Add(time.Hour), now.Add(48*time.Hour))
	_, otherKey := harness.ClientCertPEM(t, now.Add(-time.Hour), now.Add(time.Hour))
	spec := v1alpha1.TemporalConnectionSpec{
		HostPort:           "temporal.example:7233",
		MutualTLSSecretRef: &v1alpha1.SecretReference{Name: "client-cert"},
		TLSServerName:      "temporal.internal",
	}

	cases := []struct {
		name string
		s    *corev1.Secret
		want []string // substrings of the message; nil: valid
	}{
		{"valid", secret("client-cert", map[string][]byte{"tls.crt": crt, "tls.key": key}), nil},
		{"valid with CA", secret("client-cert", map[string][]byte{"tls.crt": crt, "tls.key": key, "ca.crt": crt}), nil},
		{"not found", nil, []string{"Secret client-cert not found", "tls.crt", "tls.key"}},
		{"missing key", secret("client-cert", map[string][]byte{"tls.crt": crt}), []string{"client-cert", `"tls.key"`}},
		{"empty cert", secret("client-cert", map[string][]byte{"tls.crt": {}, "tls.key": key}), []string{"client-cert", `"tls.crt"`}},
		{"garbage PEM", secret("client-cert", map[string][]byte{"tls.crt": []byte("not a cert"), "tls.key": []byte("-----BEGIN nonsense")}), []string{"client-cert", "not a usable PEM certificate"}},
		{"key of another cert", secret("client-cert", map[string][]byte{"tls.crt": crt, "tls.key": otherKey}), []string{"client-cert", "matching private key"}},
		{"expired", secret("client-cert", map[string][]byte{"tls.crt": expired, "tls.key": expiredKey}), []string{"client-cert", `"tls.crt"`, "expired", "renew"}},
		{"not yet valid", secret("client-cert", map[string][]byte{"tls.crt": future, "tls.key": futureKey}), []string{"client-cert", "not valid before"}},
		{"garbage CA", secret("client-cert", map[string][]byte{"tls.crt": crt, "tls.key": key, "ca.crt": []byte("junk")}), []string{"client-cert", `"ca.crt"`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, prob := ParamsFromSecrets(spec, "ns1", tc.s, nil, now)
			if tc.want == nil {
				if prob != nil {
					t.Fatalf("unexpected problem: %+v", prob)
				}
				if !p.TLS || string(p.ClientCert) != string(crt) || string(p.ClientKey) != string(key) ||
					p.HostPort != spec.HostPort || p.Namespace != "ns1" || p.ServerName != "temporal.internal" {
					t.Fatalf("params = %+v", p)
				}
				if _, err := p.tlsConfig(); err != nil {
					t.Fatalf("tlsConfig: %v", err)
				}
				return
			}
			if prob == nil {
				t.Fatalf("want a problem mentioning %q, got params %v", tc.want, p)
			}
			if prob.Reason != ReasonAuthSecretInvalid {
				t.Errorf("reason = %q", prob.Reason)
			}
			for _, w := range tc.want {
				if !strings.Contains(prob.Message, w) {
					t.Errorf("message %q lacks %q", prob.Message, w)
				}
			}
		})
	}
}

func TestParamsFromSecretsAPIKey(t *testing.T) {
	now := time.Now()
	spec := v1alpha1.TemporalConnectionSpec{
		HostPort:        "ns.tmprl.cloud:7233",
		APIKeySecretRef: &v1alpha1.SecretKeyReference{Name: "api", Key: "key"},
	}
	p, prob := ParamsFromSecrets(spec, "ns", nil, secret("api", map[string][]byte{"key": []byte("s3cret\n")}), now)
	if prob != nil || p.APIKey != "s3cret" || !p.TLS {
		t.Fatalf("params %+v problem %+v", p, prob)
	}
	if strings.Contains(p.String(), "s3cret") {
		t.Errorf("String() leaks the key: %s", p)
	}
	// A private CA travels with the key, as with a client certificate.
	ca, _ := harness.ClientCertPEM(t, now.Add(-time.Hour), now.Add(time.Hour))
	p, prob = ParamsFromSecrets(spec, "ns", nil, secret("api", map[string][]byte{"key": []byte("s3cret"), "ca.crt": ca}), now)
	if prob != nil || string(p.CA) != string(ca) {
		t.Fatalf("with ca.crt: params %+v problem %+v", p, prob)
	}
	if cfg, err := p.tlsConfig(); err != nil || cfg.RootCAs == nil {
		t.Fatalf("with ca.crt: tlsConfig %v, %v", cfg, err)
	}
	for name, tc := range map[string]struct {
		s    *corev1.Secret
		want []string
	}{
		"not found":   {nil, []string{"Secret api not found", `"key"`}},
		"missing key": {secret("api", map[string][]byte{"other": []byte("x")}), []string{"Secret api has no key \"key\"", `"other"`}},
		"empty":       {secret("api", map[string][]byte{"key": []byte(" \n")}), []string{"Secret api key \"key\" is empty"}},
		"garbage CA":  {secret("api", map[string][]byte{"key": []byte("k"), "ca.crt": []byte("junk")}), []string{"Secret api", `"ca.crt"`, "no PEM"}},
	} {
		t.Run(name, func(t *testing.T) {
			_, prob := ParamsFromSecrets(spec, "ns", nil, tc.s, now)
			if prob == nil || prob.Reason != ReasonAuthSecretInvalid {
				t.Fatalf("problem = %+v", prob)
			}
			for _, w := range tc.want {
				if !strings.Contains(prob.Message, w) {
					t.Errorf("message %q lacks %q", prob.Message, w)
				}
			}
		})
	}
}

func TestParamsPlaintext(t *testing.T) {
	p, prob := ParamsFromSecrets(v1alpha1.TemporalConnectionSpec{HostPort: "localhost:7233"}, "default", nil, nil, time.Now())
	if prob != nil || p.TLS {
		t.Fatalf("params %+v problem %+v", p, prob)
	}
	if cfg, err := p.tlsConfig(); cfg != nil || err != nil {
		t.Fatalf("tlsConfig = %v, %v", cfg, err)
	}
}

func TestParamsKey(t *testing.T) {
	base := ConnectionParams{HostPort: "h:1", Namespace: "ns", APIKey: "k", TLS: true}
	if base.Key() != base.Key() {
		t.Fatal("key is not deterministic")
	}
	changed := []ConnectionParams{
		{HostPort: "h:2", Namespace: "ns", APIKey: "k", TLS: true},
		{HostPort: "h:1", Namespace: "ns2", APIKey: "k", TLS: true},
		{HostPort: "h:1", Namespace: "ns", APIKey: "k2", TLS: true},
		{HostPort: "h:1", Namespace: "ns", APIKey: "k", TLS: false},
		{HostPort: "h:1", Namespace: "ns", APIKey: "k", TLS: true, CA: []byte("x")},
		{HostPort: "h:1", Namespace: "ns", APIKey: "k", TLS: true, ServerName: "s"},
		// Moving bytes between fields must not collide.
		{HostPort: "h:1n", Namespace: "s", APIKey: "k", TLS: true},
	}
	for _, c := range changed {
		if c.Key() == base.Key() {
			t.Errorf("%+v has the same key as %+v", c, base)
		}
	}
	a := ConnectionParams{ClientCert: []byte("ab"), ClientKey: []byte("c")}
	b := ConnectionParams{ClientCert: []byte("a"), ClientKey: []byte("bc")}
	if a.Key() == b.Key() {
		t.Error("cert/key boundary is not part of the key")
	}
}
