package workerenv

import (
	"strings"
	"testing"
)

func lookup(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func base() map[string]string {
	return map[string]string{Address: "h:7233", Namespace: "ns", DeploymentName: "a/b", BuildID: "v1"}
}

func TestFromEnv(t *testing.T) {
	cases := map[string]struct {
		env     map[string]string
		wantErr string
		wantTLS bool
	}{
		"plain":              {env: base()},
		"tls flag":           {env: with(base(), TLS, "true"), wantTLS: true},
		"ca implies tls":     {env: with(base(), TLSServerCA, "/ca"), wantTLS: true},
		"bad bool":           {env: with(base(), TLS, "yes please"), wantErr: TLS},
		"cert without key":   {env: with(base(), TLSClientCert, "/c"), wantErr: TLSClientKey},
		"missing build id":   {env: without(base(), BuildID), wantErr: BuildID},
		"missing address":    {env: without(base(), Address), wantErr: Address},
		"missing deployment": {env: without(base(), DeploymentName), wantErr: DeploymentName},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c, err := FromEnv(lookup(tc.env))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("want an error naming %s, got %v", tc.wantErr, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.TLS != tc.wantTLS {
				t.Errorf("TLS = %v, want %v", c.TLS, tc.wantTLS)
			}
			opts, err := c.ClientOptions()
			if tc.wantTLS && tc.env[TLSServerCA] == "" && err != nil {
				t.Fatal(err)
			}
			if err == nil && (opts.HostPort != "h:7233" || opts.Namespace != "ns") {
				t.Errorf("options = %+v", opts)
			}
		})
	}
}

func TestClientOptionsReportsUnreadableFiles(t *testing.T) {
	c, err := FromEnv(lookup(with(base(), TLSServerCA, "/does/not/exist")))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.ClientOptions(); err == nil || !strings.Contains(err.Error(), "server CA") {
		t.Fatalf("want a server CA error, got %v", err)
	}
}

func with(m map[string]string, k, v string) map[string]string { m[k] = v; return m }
func without(m map[string]string, k string) map[string]string { delete(m, k); return m }
