package temporal

import (
	"context"
	"crypto/tls"
	"errors"
	"strings"
	"testing"
	"time"

	"go.temporal.io/api/serviceerror"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/dev/localenv/temporalauth"
	"github.com/rainbow-deploy/rainbow/test/harness"
)

// TestFix: each TLS or credential failure, as gRPC reports it, names the
// field or Secret to change; anything else gets no advice.
func TestFix(t *testing.T) {
	mtls := v1alpha1.TemporalConnectionSpec{HostPort: "127.0.0.1:7233", MutualTLSSecretRef: &v1alpha1.SecretReference{Name: "client"}}
	apiKey := v1alpha1.TemporalConnectionSpec{HostPort: "ns.acct.tmprl.cloud:7233", APIKeySecretRef: &v1alpha1.SecretKeyReference{Name: "key", Key: "apiKey"}}
	named := mtls
	named.TLSServerName = "wrong.example"
	handshake := func(s string) error {
		return errors.New(`health check: connection error: desc = "transport: authentication handshake failed: ` + s + `"`)
	}
	cases := map[string]struct {
		spec v1alpha1.TemporalConnectionSpec
		err  error
		want []string // empty: no advice
	}{
		"unknown server CA": {mtls, handshake("tls: failed to verify certificate: x509: certificate signed by unknown authority"),
			[]string{"not signed by ca.crt in Secret client"}},
		"unknown server CA, API key": {apiKey, handshake("tls: failed to verify certificate: x509: certificate signed by unknown authority"),
			[]string{"ca.crt in Secret key"}},
		"wrong name": {named, handshake("tls: failed to verify certificate: x509: certificate is valid for localhost, 127.0.0.1, not wrong.example"),
			[]string{`"wrong.example"`, "spec.tlsServerName"}},
		"wrong host": {mtls, handshake("tls: failed to verify certificate: x509: certificate is valid for localhost, not 127.0.0.1"),
			[]string{`"127.0.0.1"`, "spec.tlsServerName"}},
		"client certificate refused": {mtls, errors.New(`health check: connection error: desc = "error reading server preface: remote error: tls: unknown certificate authority"`),
			[]string{"refused the client certificate in Secret client"}},
		"client certificate required": {apiKey, errors.New(`remote error: tls: certificate required`),
			[]string{"spec.mutualTLSSecretRef"}},
		"plaintext server": {mtls, handshake("tls: first record does not look like a TLS handshake"),
			[]string{"plaintext"}},
		"API key refused": {apiKey, serviceerror.NewPermissionDenied("Request unauthorized.", ""),
			[]string{`API key in Secret key key "apiKey"`}},
		"API key refused, wrapped": {apiKey, errors.Join(errors.New("health check"), serviceerror.NewPermissionDenied("Request unauthorized.", "")),
			[]string{"refused the API key"}},
		"unreachable": {mtls, errors.New("connection refused"), nil},
	}
	for name, tc := range cases {
		got := Fix(tc.spec, tc.err)
		if len(tc.want) == 0 && got != "" {
			t.Errorf("%s: advice %q for an error that says nothing specific", name, got)
		}
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: advice %q lacks %q", name, got, w)
			}
		}
	}
}

// TestExplainShowsTheServersVerdict: a server that refuses the client
// certificate after a TLS 1.3 handshake is named as refusing it; one that
// accepts it adds nothing to the error.
func TestExplainShowsTheServersVerdict(t *testing.T) {
	auth, err := temporalauth.New("server CA")
	if err != nil {
		t.Fatal(err)
	}
	crt, key, err := auth.ServerCert([]string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(crt, key)
	if err != nil {
		t.Fatal(err)
	}
	l, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{
		Certificates: []tls.Certificate{pair}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: auth.CAPool(),
		MinVersion: tls.VersionTLS13, NextProtos: []string{"h2"},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				// Speaks first once the handshake passed, as HTTP/2 does.
				if c.(*tls.Conn).Handshake() == nil {
					_, _ = c.Write([]byte("settings"))
				}
				time.Sleep(time.Second)
			}()
		}
	}()
	now := time.Now()
	accepted, acceptedKey, _ := auth.ClientCert("ok", now.Add(-time.Hour), now.Add(time.Hour))
	unknown, unknownKey := harness.ClientCertPEM(t, now.Add(-time.Hour), now.Add(time.Hour))
	dialErr := errors.New("failed reaching server: write: broken pipe")
	for name, tc := range map[string]struct {
		crt, key []byte
		refused  bool
	}{
		"unknown certificate": {unknown, unknownKey, true},
		"no certificate":      {nil, nil, true},
		"accepted":            {accepted, acceptedKey, false},
	} {
		p := ConnectionParams{HostPort: l.Addr().String(), TLS: true, ClientCert: tc.crt, ClientKey: tc.key, CA: auth.CAPEM}
		got := explain(context.Background(), p, dialErr)
		if !errors.Is(got, dialErr) {
			t.Errorf("%s: %v does not wrap the dial error", name, got)
		}
		if refused := strings.Contains(got.Error(), "remote error: tls:"); refused != tc.refused {
			t.Errorf("%s: %v, want the server's refusal: %v", name, got, tc.refused)
		}
	}
}
