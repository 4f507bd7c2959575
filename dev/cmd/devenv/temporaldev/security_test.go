package temporaldev

import (
	"context"
	"crypto/tls"
	"log/slog"
	"testing"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"

	"github.com/rainbow-deploy/rainbow/dev/localenv/temporalauth"
)

// TestSecureServer: with TLS, client certificates and API keys, the
// frontend answers only a client that brings all three, each from the
// authority it was given.
func TestSecureServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Temporal server")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	auth, err := temporalauth.New("test CA")
	if err != nil {
		t.Fatal(err)
	}
	other, err := temporalauth.New("another CA")
	if err != nil {
		t.Fatal(err)
	}
	crt, key, err := auth.ServerCert([]string{"localhost", "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	probe, err := auth.ClientTLS(true)
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	srv, err := Start(ctx, Options{
		TLS:       &TLS{CertPEM: crt, KeyPEM: key, ClientCAPEM: auth.CAPEM},
		APIKeys:   &APIKeys{Issuer: auth.SigningPublicKey(), KeyID: auth.KeyID()},
		ProbeTLS:  probe,
		UIPort:    -1,
		LogOutput: logs,
	})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	defer func() {
		_ = srv.Stop()
		if t.Failed() {
			t.Logf("server logs:\n%s", logs.String())
		}
	}()

	tlsWith := func(a *temporalauth.Authority, cert bool) *tls.Config {
		cfg, err := a.ClientTLS(cert)
		if err != nil {
			t.Fatal(err)
		}
		cfg.RootCAs = auth.CAPool()
		return cfg
	}
	valid, err := auth.APIKey("test", []string{"default:admin"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	otherNS, _ := auth.APIKey("test", []string{"other:admin"}, time.Hour)
	foreign, _ := other.APIKey("test", []string{"default:admin"}, time.Hour)
	expired, _ := auth.APIKey("test", []string{"default:admin"}, -time.Minute)
	cases := map[string]struct {
		tls    *tls.Config
		apiKey string
		ok     bool
	}{
		"everything":                       {tlsWith(auth, true), valid, true},
		"plaintext":                        {nil, "", false},
		"no client certificate":            {tlsWith(auth, false), valid, false},
		"client certificate of another CA": {tlsWith(other, true), valid, false},
		"no API key":                       {tlsWith(auth, true), "", false},
		"API key of another issuer":        {tlsWith(auth, true), foreign, false},
		"expired API key":                  {tlsWith(auth, true), expired, false},
		"API key for another namespace":    {tlsWith(auth, true), otherNS, false},
		"not a JWT":                        {tlsWith(auth, true), "s3cret", false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			opts := client.Options{HostPort: srv.Address(), Logger: sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler))}
			opts.ConnectionOptions.TLS = tc.tls
			if tc.apiKey != "" {
				opts.Credentials = client.NewAPIKeyStaticCredentials(tc.apiKey)
			}
			c, err := client.DialContext(ctx, opts)
			if err == nil {
				defer c.Close()
				_, err = c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: "default"})
			}
			if tc.ok && err != nil {
				t.Fatalf("refused: %v", err)
			}
			if !tc.ok && err == nil {
				t.Fatal("accepted")
			}
		})
	}
}
