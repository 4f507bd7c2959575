package dashboard

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestGuard(t *testing.T) {
	g := newGuard("key", "token", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 4000})
	type req struct{ method, host, origin, cookie, token string }
	signedIn := req{"POST", "127.0.0.1:4000", "http://127.0.0.1:4000", "key", "token"}
	with := func(f func(*req)) req { r := signedIn; f(&r); return r }
	for name, tc := range map[string]struct {
		req       req
		code      int
		mentioned string
	}{
		"the page's own request":              {signedIn, 0, ""},
		"under localhost":                     {with(func(r *req) { r.host, r.origin = "localhost:4000", "http://localhost:4000" }), 0, ""},
		"GET":                                 {with(func(r *req) { r.method = "GET" }), http.StatusMethodNotAllowed, "POST"},
		"no token":                            {with(func(r *req) { r.token = "" }), http.StatusForbidden, "token"},
		"wrong token":                         {with(func(r *req) { r.token = "tokeN" }), http.StatusForbidden, "token"},
		"the key as token":                    {with(func(r *req) { r.token = "key" }), http.StatusForbidden, "token"},
		"another site":                        {with(func(r *req) { r.origin = "https://evil.example" }), http.StatusForbidden, "Origin"},
		"no Origin":                           {with(func(r *req) { r.origin = "" }), http.StatusForbidden, "Origin"},
		"another origin with the right token": {with(func(r *req) { r.origin = "http://localhost:4000" }), http.StatusForbidden, "Origin"},
		"no cookie":                           {with(func(r *req) { r.cookie = "" }), http.StatusUnauthorized, "key"},
		"the token as cookie":                 {with(func(r *req) { r.cookie = "token" }), http.StatusUnauthorized, "key"},
		"a rebound name":                      {with(func(r *req) { r.host, r.origin = "evil.example:4000", "http://evil.example:4000" }), http.StatusMisdirectedRequest, "Host"},
		"another port":                        {with(func(r *req) { r.host, r.origin = "127.0.0.1:4001", "http://127.0.0.1:4001" }), http.StatusMisdirectedRequest, "Host"},
	} {
		r := httptest.NewRequest(tc.req.method, "http://"+tc.req.host+"/act/ns/orders/pause", nil)
		r.Host = tc.req.host
		if tc.req.origin != "" {
			r.Header.Set("Origin", tc.req.origin)
		}
		if tc.req.token != "" {
			r.Header.Set(tokenHeader, tc.req.token)
		}
		if tc.req.cookie != "" {
			r.AddCookie(&http.Cookie{Name: "rainbow-dashboard-4000", Value: tc.req.cookie})
		}
		code, msg := g.act(r)
		if code != tc.code || !strings.Contains(msg, tc.mentioned) {
			t.Errorf("%s: %d %q, want %d mentioning %q", name, code, msg, tc.code, tc.mentioned)
		}
	}
}

func TestSignIn(t *testing.T) {
	g := newGuard("key", "token", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 4000})
	get := func(host, target string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("GET", "http://"+host+target, nil)
		r.Host = host
		w := httptest.NewRecorder()
		if !g.signIn(w, r) {
			w.Code = 0
		}
		return w
	}
	w := get("127.0.0.1:4000", "/twd/ns/orders?key=key")
	c := w.Result().Cookies()
	if w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/twd/ns/orders" || len(c) != 1 ||
		c[0].Name != "rainbow-dashboard-4000" || c[0].Value != "key" || !c[0].HttpOnly || c[0].SameSite != http.SameSiteStrictMode {
		t.Fatalf("sign-in: %d to %q, cookies %v", w.Code, w.Header().Get("Location"), c)
	}
	if w := get("127.0.0.1:4000", "/?key=guess"); w.Code != http.StatusForbidden || len(w.Result().Cookies()) != 0 {
		t.Fatalf("a wrong key: %d, cookies %v", w.Code, w.Result().Cookies())
	}
	if w := get("evil.example:4000", "/?key=key"); w.Code != http.StatusMisdirectedRequest {
		t.Fatalf("a rebound name with the key: %d", w.Code)
	}
	if w := get("127.0.0.1:4000", "/"); w.Code != 0 {
		t.Fatalf("a request without a key was answered by sign-in: %d", w.Code)
	}
}

func TestNonLoopbackHasNoLocalhostAlias(t *testing.T) {
	g := newGuard("key", "token", &net.TCPAddr{IP: net.IPv4(10, 0, 0, 5), Port: 4000})
	if g.hosts["localhost:4000"] || !g.hosts["10.0.0.5:4000"] {
		t.Fatalf("hosts %v", g.hosts)
	}
}
