package dashboard

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"net"
	"net/http"
	"net/url"
	"strconv"
)

// tokenHeader carries the page's token on every action request. A custom
// header also makes a cross-site fetch need a CORS preflight, which this
// server never grants.
const tokenHeader = "X-Rainbow-Token"

func newSecret() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}

// guard is what every request must pass before the dashboard reads or acts
// with the user's credentials.
type guard struct {
	// key is in the address the command prints; opening that address
	// turns it into a cookie, which every later request carries. Other
	// users of the machine can reach a loopback port, but not the key.
	key    string
	cookie string
	// token is embedded in the page, for actions.
	token string
	// hosts are the Host values the page is served under: the listening
	// address, and localhost with its port.
	hosts map[string]bool
}

func newGuard(key, token string, addr net.Addr) guard {
	g := guard{key: key, token: token, cookie: "rainbow-dashboard", hosts: map[string]bool{addr.String(): true}}
	if tcp, ok := addr.(*net.TCPAddr); ok {
		// Cookies ignore ports: one per dashboard.
		g.cookie += "-" + strconv.Itoa(tcp.Port)
		if tcp.IP.IsLoopback() {
			g.hosts[net.JoinHostPort("localhost", strconv.Itoa(tcp.Port))] = true
		}
	}
	return g
}

func same(a, b string) bool { return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1 }

// signIn answers a request that carries the key in its address: it sets
// the cookie and sends the browser to the same page without the key.
func (g guard) signIn(w http.ResponseWriter, r *http.Request) bool {
	q := r.URL.Query()
	if !q.Has("key") {
		return false
	}
	if code, msg := g.host(r); code != 0 {
		http.Error(w, msg, code)
		return true
	}
	if !same(q.Get("key"), g.key) {
		http.Error(w, "wrong key: open the address kubectl rainbow dashboard printed", http.StatusForbidden)
		return true
	}
	http.SetCookie(w, &http.Cookie{Name: g.cookie, Value: g.key, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
	q.Del("key")
	u := url.URL{Path: r.URL.Path, RawQuery: q.Encode()}
	http.Redirect(w, r, u.String(), http.StatusSeeOther)
	return true
}

// host refuses requests under another Host name: a web site that rebinds
// its own name to 127.0.0.1 would otherwise be same-origin with the page.
func (g guard) host(r *http.Request) (int, string) {
	if !g.hosts[r.Host] {
		return http.StatusMisdirectedRequest, "unknown Host " + r.Host + ": open the address kubectl rainbow dashboard printed"
	}
	return 0, ""
}

// read wants the Host and the cookie of a browser that opened the
// printed address.
func (g guard) read(r *http.Request) (int, string) {
	if code, msg := g.host(r); code != 0 {
		return code, msg
	}
	if c, err := r.Cookie(g.cookie); err != nil || !same(c.Value, g.key) {
		return http.StatusUnauthorized, "not signed in: open the address kubectl rainbow dashboard printed, with its key"
	}
	return 0, ""
}

// act also wants the page's own origin and token: another site open in the
// same browser can send a POST here, but neither from this origin nor with
// the token, which only this page holds.
func (g guard) act(r *http.Request) (int, string) {
	if code, msg := g.read(r); code != 0 {
		return code, msg
	}
	if r.Method != http.MethodPost {
		return http.StatusMethodNotAllowed, "actions are POST only"
	}
	o, err := url.Parse(r.Header.Get("Origin"))
	if err != nil || o.Scheme != "http" || o.Host != r.Host {
		return http.StatusForbidden, "refused: the request does not come from this dashboard's page (Origin " + r.Header.Get("Origin") + ")"
	}
	if !same(r.Header.Get(tokenHeader), g.token) {
		return http.StatusForbidden, "refused: the request lacks this dashboard's token; reload the page"
	}
	return 0, ""
}
