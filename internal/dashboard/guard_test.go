package dashboard

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestGuard(t *testing.T) {
	g := newGuard("secret", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 4000})
	req := func(method, host, origin, token string) *http.Request {
		r := httptest.NewRequest(method, "http://"+host+"/act/ns/orders/pause", nil)
		r.Host = host
		if origin != "" {
			r.Header.Set("Origin", origin)
		}
		if token != "" {
			r.Header.Set(tokenHeader, token)
		}
		return r
	}
	for name, tc := range map[string]struct {
		r         *http.Request
		code      int
		mentioned string
	}{
		"the page's own request":              {req("POST", "127.0.0.1:4000", "http://127.0.0.1:4000", "secret"), 0, ""},
		"under localhost":                     {req("POST", "localhost:4000", "http://localhost:4000", "secret"), 0, ""},
		"GET":                                 {req("GET", "127.0.0.1:4000", "http://127.0.0.1:4000", "secret"), http.StatusMethodNotAllowed, "POST"},
		"no token":                            {req("POST", "127.0.0.1:4000", "http://127.0.0.1:4000", ""), http.StatusForbidden, "token"},
		"wrong token":                         {req("POST", "127.0.0.1:4000", "http://127.0.0.1:4000", "secreT"), http.StatusForbidden, "token"},
		"another site":                        {req("POST", "127.0.0.1:4000", "https://evil.example", "secret"), http.StatusForbidden, "Origin"},
		"no Origin":                           {req("POST", "127.0.0.1:4000", "", "secret"), http.StatusForbidden, "Origin"},
		"a rebound name":                      {req("POST", "evil.example:4000", "http://evil.example:4000", "secret"), http.StatusMisdirectedRequest, "Host"},
		"another port":                        {req("POST", "127.0.0.1:4001", "http://127.0.0.1:4001", "secret"), http.StatusMisdirectedRequest, "Host"},
		"another origin with the right token": {req("POST", "127.0.0.1:4000", "http://localhost:4000", "secret"), http.StatusForbidden, "Origin"},
	} {
		code, msg := g.act(tc.r)
		if code != tc.code || !strings.Contains(msg, tc.mentioned) {
			t.Errorf("%s: %d %q, want %d mentioning %q", name, code, msg, tc.code, tc.mentioned)
		}
	}
	if code, _ := g.read(req("GET", "evil.example:4000", "", "")); code == 0 {
		t.Error("a page under a rebound name was served")
	}
}

func TestNonLoopbackHasNoLocalhostAlias(t *testing.T) {
	g := newGuard("secret", &net.TCPAddr{IP: net.IPv4(10, 0, 0, 5), Port: 4000})
	if g.hosts["localhost:4000"] || !g.hosts["10.0.0.5:4000"] {
		t.Fatalf("hosts %v", g.hosts)
	}
}
