package temporal

import (
	"errors"
	"strings"
	"testing"

	"go.temporal.io/api/serviceerror"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
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
