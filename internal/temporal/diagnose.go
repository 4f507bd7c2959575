package temporal

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"go.temporal.io/api/serviceerror"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
)

// Fix names what to change in a TemporalConnection, or on the server, when
// dialing it failed on TLS or credentials; "" when err says nothing
// specific. gRPC hands TLS failures over as text only, so the text decides.
func Fix(spec v1alpha1.TemporalConnectionSpec, err error) string {
	if err == nil {
		return ""
	}
	msg := err.Error()
	caSecret := ""
	switch {
	case spec.MutualTLSSecretRef != nil:
		caSecret = spec.MutualTLSSecretRef.Name
	case spec.APIKeySecretRef != nil:
		caSecret = spec.APIKeySecretRef.Name
	}
	var denied *serviceerror.PermissionDenied
	switch {
	case strings.Contains(msg, "x509: certificate is valid for"), strings.Contains(msg, "x509: certificate is not valid for any names"):
		return fmt.Sprintf("the server's certificate does not carry the name %q: set spec.tlsServerName to a name it carries (listed above)", serverName(spec))
	case strings.Contains(msg, "x509: certificate signed by unknown authority"):
		if caSecret == "" {
			return "the server's certificate is not signed by a system root: give the CA that signed it as ca.crt of the Secret of spec.mutualTLSSecretRef or spec.apiKeySecretRef"
		}
		return fmt.Sprintf("the server's certificate is not signed by ca.crt in Secret %s (or, without ca.crt, by a system root): put the CA that signed the server's certificate there", caSecret)
	case strings.Contains(msg, "x509: certificate has expired or is not yet valid"):
		return "the server's certificate has expired or is not yet valid: renew it on the server, or check the clocks"
	case strings.Contains(msg, "remote error: tls:"):
		if ref := spec.MutualTLSSecretRef; ref != nil {
			return fmt.Sprintf("the server refused the client certificate in Secret %s (tls.crt): use one signed by a CA the server trusts for clients, and valid now", ref.Name)
		}
		return "the server requires a client certificate: give one with spec.mutualTLSSecretRef"
	case strings.Contains(msg, "first record does not look like a TLS handshake"):
		return "the server speaks plaintext at spec.hostPort: remove spec.tlsServerName and the credentials, or point spec.hostPort at its TLS address"
	case errors.As(err, &denied), strings.Contains(msg, "Request unauthorized"), strings.Contains(msg, "Unauthenticated"):
		if ref := spec.APIKeySecretRef; ref != nil {
			return fmt.Sprintf("the server refused the API key in Secret %s key %q: put a valid API key there, one allowed to use the namespace", ref.Name, ref.Key)
		}
		return "the server refused the request: it may require an API key (spec.apiKeySecretRef)"
	}
	return ""
}

// serverName is the name the client checks the server's certificate for.
func serverName(spec v1alpha1.TemporalConnectionSpec) string {
	if spec.TLSServerName != "" {
		return spec.TLSServerName
	}
	if host, _, err := net.SplitHostPort(spec.HostPort); err == nil {
		return host
	}
	return spec.HostPort
}

// explain adds the server's verdict on the client certificate (or on its
// absence) to err, a failed dial or health check over TLS. With TLS 1.3 a server refuses a
// client certificate only after the handshake, so gRPC sees no more than
// a broken pipe; one plain handshake and read shows the server's alert.
func explain(ctx context.Context, params ConnectionParams, err error) error {
	if err == nil || !params.TLS || ctx.Err() != nil {
		return err
	}
	cfg, cerr := params.tlsConfig()
	if cerr != nil {
		return err
	}
	cfg.NextProtos = []string{"h2"}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	conn, derr := (&tls.Dialer{Config: cfg}).DialContext(ctx, "tcp", params.HostPort)
	if derr != nil {
		return err
	}
	defer conn.Close()
	// An HTTP/2 server speaks first (its SETTINGS frame) once it accepts.
	_ = conn.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, rerr := conn.Read(make([]byte, 1)); rerr != nil && strings.Contains(rerr.Error(), "remote error: tls:") {
		return fmt.Errorf("%w (a TLS handshake on its own: %v)", err, rerr)
	}
	return err
}
