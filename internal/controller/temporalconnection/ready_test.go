package temporalconnection

import (
	"errors"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
)

func TestRecheckAfter(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	cond := func(s metav1.ConditionStatus, since time.Duration) metav1.Condition {
		return metav1.Condition{Status: s, LastTransitionTime: metav1.NewTime(now.Add(-since))}
	}
	cases := map[string]struct {
		ready metav1.Condition
		want  time.Duration
	}{
		"ready long ago":              {cond(metav1.ConditionTrue, 48*time.Hour), recheckReady},
		"ready just now":              {cond(metav1.ConditionTrue, 0), recheckReady},
		"failing just now":            {cond(metav1.ConditionFalse, 0), 10 * time.Second},
		"failing for 5s":              {cond(metav1.ConditionFalse, 5*time.Second), 10 * time.Second},
		"failing for 40s doubles":     {cond(metav1.ConditionFalse, 40*time.Second), 40 * time.Second},
		"failing for an hour, capped": {cond(metav1.ConditionFalse, time.Hour), 5 * time.Minute},
		"transition in the future":    {cond(metav1.ConditionFalse, -time.Minute), 10 * time.Second},
	}
	for name, tc := range cases {
		if got := recheckAfter(tc.ready, now); got != tc.want {
			t.Errorf("%s: recheckAfter = %s, want %s", name, got, tc.want)
		}
	}
}

func TestBlockedMessage(t *testing.T) {
	cases := map[string]struct {
		users []string
		want  string
	}{
		"one":              {[]string{"orders"}, "still use it: orders."},
		"sorted":           {[]string{"b", "c", "a"}, "still use it: a, b, c."},
		"more than a few":  {[]string{"g", "f", "e", "d", "c", "b", "a"}, "still use it: a, b, c, d, e and 2 more."},
		"exactly the most": {[]string{"e", "d", "c", "b", "a"}, "still use it: a, b, c, d, e."},
	}
	for name, tc := range cases {
		got := blockedMessage("prod", tc.users)
		for _, want := range []string{"TemporalConnection prod is being deleted", tc.want, "spec.workerOptions.connectionRef.name"} {
			if !strings.Contains(got, want) {
				t.Errorf("%s: message %q lacks %q", name, got, want)
			}
		}
	}
}

// TestUnreachableMessageNamesFieldsToCheck: the advice follows the
// connection's transport and credentials.
func TestUnreachableMessageNamesFieldsToCheck(t *testing.T) {
	err := errors.New("connection refused")
	cases := map[string]struct {
		spec   v1alpha1.TemporalConnectionSpec
		tls    bool
		want   []string
		unwant []string
	}{
		"plaintext": {
			spec: v1alpha1.TemporalConnectionSpec{HostPort: "temporal:7233"},
			want: []string{"Temporal at temporal:7233", "over plaintext with no credentials", "connection refused", "spec.hostPort", "set spec.tlsServerName"},
		},
		"mTLS": {
			spec: v1alpha1.TemporalConnectionSpec{HostPort: "t:7233", MutualTLSSecretRef: &v1alpha1.SecretReference{Name: "certs"}},
			tls:  true,
			want: []string{"over TLS with the client certificate in Secret certs", "host of spec.hostPort (or set spec.tlsServerName)", "ca.crt in Secret certs"},
		},
		"API key with server name": {
			spec:   v1alpha1.TemporalConnectionSpec{HostPort: "t:7233", TLSServerName: "ns.tmprl.cloud", APIKeySecretRef: &v1alpha1.SecretKeyReference{Name: "key", Key: "apiKey"}},
			tls:    true,
			want:   []string{`TLS (server name "ns.tmprl.cloud")`, `API key in Secret key key "apiKey"`, `"ns.tmprl.cloud" (spec.tlsServerName)`, "ca.crt in Secret key or a system root", "API key in Secret key is valid"},
			unwant: []string{"client certificate"},
		},
	}
	// An error that says what is wrong gets that fix alone.
	cases["refused client certificate"] = struct {
		spec   v1alpha1.TemporalConnectionSpec
		tls    bool
		want   []string
		unwant []string
	}{
		spec:   cases["mTLS"].spec,
		tls:    true,
		want:   []string{"The server refused the client certificate in Secret certs"},
		unwant: []string{"spec.hostPort"},
	}
	for name, tc := range cases {
		e := err
		if name == "refused client certificate" {
			e = errors.New("health check: connection error: desc = \"error reading server preface: remote error: tls: unknown certificate authority\"")
		}
		got := unreachableMessage(tc.spec, tc.tls, e)
		for _, want := range tc.want {
			if !strings.Contains(got, want) {
				t.Errorf("%s: message %q lacks %q", name, got, want)
			}
		}
		for _, unwant := range tc.unwant {
			if strings.Contains(got, unwant) {
				t.Errorf("%s: message %q mentions %q", name, got, unwant)
			}
		}
	}
}
