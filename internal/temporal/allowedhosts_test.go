package temporal

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"testing"

	"go.temporal.io/sdk/client"
)

func TestAllowedHostsMatching(t *testing.T) {
	cases := map[string]struct {
		list          string
		allowed, deny []string
	}{
		"empty allows any": {
			list:    " , ",
			allowed: []string{"temporal.example.com:7233", "127.0.0.1:1", "[::1]:7233"},
		},
		"exact name, any port": {
			list:    "temporal.example.com",
			allowed: []string{"temporal.example.com:7233", "Temporal.Example.COM:443"},
			deny:    []string{"a.temporal.example.com:7233", "temporal.example.com.evil.test:7233", "example.com:7233", "temporal.example.co:7233"},
		},
		"exact name and port": {
			list:    "temporal.example.com:7233",
			allowed: []string{"temporal.example.com:7233"},
			deny:    []string{"temporal.example.com:7234", "temporal.example.com:22"},
		},
		"wildcard at any depth, not the apex": {
			list:    "*.tmprl.cloud:7233",
			allowed: []string{"ns.acct.tmprl.cloud:7233", "x.tmprl.cloud:7233"},
			deny:    []string{"tmprl.cloud:7233", "eviltmprl.cloud:7233", "ns.acct.tmprl.cloud:22", "tmprl.cloud.evil.test:7233"},
		},
		"wildcards never match IP addresses": {
			list: "*.0.0.1",
			deny: []string{"127.0.0.1:7233"},
		},
		"any host on a port": {
			list:    "*:7233",
			allowed: []string{"anything.test:7233", "10.1.2.3:7233", "[fd00::1]:7233"},
			deny:    []string{"anything.test:22"},
		},
		"IPv4": {
			list:    "10.0.0.7",
			allowed: []string{"10.0.0.7:7233"},
			deny:    []string{"10.0.0.70:7233", "10.0.0.8:7233", "ten.test:7233"},
		},
		"IPv6, in canonical form either way": {
			list:    "[FD00:0::7]:7233",
			allowed: []string{"[fd00::7]:7233", "[fd00:0:0:0:0:0:0:7]:7233"},
			deny:    []string{"[fd00::7]:7234", "[fd00::8]:7233"},
		},
		"several": {
			list:    "temporal.example.com:7233, *.tmprl.cloud:7233,127.0.0.1",
			allowed: []string{"temporal.example.com:7233", "a.b.tmprl.cloud:7233", "127.0.0.1:40000"},
			deny:    []string{"127.0.0.2:40000", "localhost:40000"},
		},
		"not a host:port is never allowed by a list": {
			list: "*",
			deny: []string{"temporal", "dns:///temporal:7233", "temporal:0", "temporal:65536", "temporal:x", "[fe80::1%eth0]:7233", "a/b:7233", "-a:7233", ""},
		},
	}
	for name, tc := range cases {
		a, err := ParseAllowedHosts(tc.list)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, hp := range tc.allowed {
			if !a.Allows(hp) || a.Check(hp) != nil {
				t.Errorf("%s: %q does not allow %q", name, tc.list, hp)
			}
		}
		for _, hp := range tc.deny {
			if a.Allows(hp) {
				t.Errorf("%s: %q allows %q", name, tc.list, hp)
			}
			if err := a.Check(hp); !errors.Is(err, ErrAddressNotAllowed) || !strings.Contains(err.Error(), "--allowed-temporal-hosts="+a.String()) {
				t.Errorf("%s: Check(%q) = %v, want ErrAddressNotAllowed naming the list", name, hp, err)
			}
		}
	}
}

func TestParseAllowedHostsRefuses(t *testing.T) {
	cases := map[string]string{
		"temporal*.example.com": `"*" may only be the whole first label`,
		"*.*.example.com":       `"*" may only be the whole first label`,
		"a.*.example.com":       `"*" may only be the whole first label`,
		"*.":                    `want "*." followed by a DNS name`,
		"temporal:":             "the port must be a number from 1 to 65535",
		"temporal:0":            "the port must be a number from 1 to 65535",
		"temporal:07233":        "the port must be a number from 1 to 65535",
		"temporal:*":            "the port must be a number from 1 to 65535",
		"fd00::7":               "put an IPv6 address in brackets",
		"[fd00::7":              "missing ]",
		"[10.0.0.1]:7233":       "only IPv6 addresses go in brackets",
		"[fd00::7]7233":         "want [address] or [address]:port",
		"https://temporal":      "the port must be a number from 1 to 65535",
		"temporal_x.test":       "not a DNS name or an IP address",
		"a..b":                  "not a DNS name or an IP address",
	}
	for in, want := range cases {
		_, err := ParseAllowedHosts("ok.test, " + in)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), `"`+in+`"`) {
			t.Errorf("ParseAllowedHosts(%q) = %v, want an error naming it with %q", in, err, want)
		}
	}
}

// TestAllowedHostsString round-trips the normalised list.
func TestAllowedHostsString(t *testing.T) {
	a, err := ParseAllowedHosts(" Temporal.Example.com:7233,*.tmprl.cloud , [FD00::7]:1,*")
	if err != nil {
		t.Fatal(err)
	}
	const want = "temporal.example.com:7233,*.tmprl.cloud,[fd00::7]:1,*"
	if a.String() != want {
		t.Fatalf("String() = %q, want %q", a.String(), want)
	}
	b, err := ParseAllowedHosts(a.String())
	if err != nil || b.String() != want {
		t.Fatalf("re-parsed: %q, %v", b.String(), err)
	}
}

// FuzzAllowedHosts: a list allows only plain host:port addresses, and a
// list without wildcards allows a name only if it names it.
func FuzzAllowedHosts(f *testing.F) {
	f.Add("temporal.example.com", "temporal.example.com:7233")
	f.Add("*.tmprl.cloud:7233", "a.tmprl.cloud:7233")
	f.Add("10.0.0.1", "[::ffff:10.0.0.1]:1")
	f.Fuzz(func(t *testing.T, list, hostPort string) {
		a, err := ParseAllowedHosts(list)
		if err != nil || a.Any() || !a.Allows(hostPort) {
			return
		}
		host, port, err := net.SplitHostPort(hostPort)
		if n, perr := strconv.Atoi(port); err != nil || perr != nil || n < 1 || n > 65535 || strings.ContainsAny(host, "/*%_ ") {
			t.Fatalf("%q allows %q, which is not a plain host:port", list, hostPort)
		}
		if _, err := netip.ParseAddr(host); err == nil || strings.Contains(list, "*") {
			return
		}
		for _, p := range a.patterns {
			if p.host == strings.ToLower(host) {
				return
			}
		}
		t.Fatalf("%q (no wildcards) allows %q", list, hostPort)
	})
}

// TestPoolDialsOnlyAllowedHosts: neither Get nor Probe dials an address
// outside the list, whatever the caller checked.
func TestPoolDialsOnlyAllowedHosts(t *testing.T) {
	allowed, err := ParseAllowedHosts("temporal.example.com:7233")
	if err != nil {
		t.Fatal(err)
	}
	dials := 0
	pool := NewPool("test", nil).WithAllowedHosts(allowed).WithDialer(func(context.Context, client.Options) (client.Client, error) {
		dials++
		return nil, errors.New("dialled")
	})
	defer pool.Close()
	params := ConnectionParams{HostPort: "127.0.0.1:7233", Namespace: "default", APIKey: "secret", TLS: true}
	if _, err := pool.Get(context.Background(), "owner", params); !errors.Is(err, ErrAddressNotAllowed) {
		t.Errorf("Get: %v, want ErrAddressNotAllowed", err)
	}
	if _, err := pool.Probe(context.Background(), params); !errors.Is(err, ErrAddressNotAllowed) {
		t.Errorf("Probe: %v, want ErrAddressNotAllowed", err)
	}
	if dials != 0 {
		t.Errorf("%d dials to a disallowed address", dials)
	}
	params.HostPort = "temporal.example.com:7233"
	if _, err := pool.Probe(context.Background(), params); err == nil || errors.Is(err, ErrAddressNotAllowed) || dials != 1 {
		t.Errorf("Probe of an allowed address: %v after %d dials, want one dial", err, dials)
	}
}
