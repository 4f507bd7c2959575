package main

import (
	"flag"
	"testing"

	"github.com/rainbow-deploy/rainbow/dev/cmd/devenv/temporaldev"
)

// TestSecurityFlags: a bare --temporal-tls is server TLS, =mtls requires
// client certificates, an API key turns TLS on, and no flag leaves
// Temporal as make demo runs it.
func TestSecurityFlags(t *testing.T) {
	cases := map[string]struct {
		args                         []string
		tls, clientAuth, apiKeys, ok bool
	}{
		"none":           {args: nil, ok: true},
		"tls":            {args: []string{"--temporal-tls"}, tls: true, ok: true},
		"mtls":           {args: []string{"--temporal-tls=mtls"}, tls: true, clientAuth: true, ok: true},
		"tls off":        {args: []string{"--temporal-tls=false"}, ok: true},
		"api key":        {args: []string{"--temporal-auth=api-key"}, tls: true, apiKeys: true, ok: true},
		"mtls and a key": {args: []string{"--temporal-tls=mtls", "--temporal-auth=api-key"}, tls: true, clientAuth: true, apiKeys: true, ok: true},
		"unknown auth":   {args: []string{"--temporal-auth=oidc"}},
		"unknown tls":    {args: []string{"--temporal-tls=maybe"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			fs := flag.NewFlagSet("devenv", flag.ContinueOnError)
			var mode tlsFlag
			var auth string
			fs.Var(&mode, "temporal-tls", "")
			fs.StringVar(&auth, "temporal-auth", "none", "")
			err := fs.Parse(tc.args)
			var o temporaldev.Options
			var sec *security
			if err == nil {
				sec, err = setupSecurity(t.TempDir(), mode, auth, "default", &o)
			}
			if (err == nil) != tc.ok {
				t.Fatalf("err = %v, want ok=%v", err, tc.ok)
			}
			if !tc.ok {
				return
			}
			if (o.TLS != nil) != tc.tls || (o.TLS != nil && (o.TLS.ClientCAPEM != nil) != tc.clientAuth) || (o.APIKeys != nil) != tc.apiKeys {
				t.Fatalf("options: TLS %+v, API keys %v", o.TLS, o.APIKeys != nil)
			}
			if (sec == nil) == tc.tls || (sec != nil && (sec.apiKey != "") != tc.apiKeys) {
				t.Fatalf("security = %+v", sec)
			}
		})
	}
}
