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

func newToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}

// guard is what every request must pass before the dashboard reads or acts
// with the user's credentials.
type guard struct {
	token string
	// hosts are the Host values the page is served under: the listening
	// address, and localhost with its port.
	hosts map[string]bool
}

func newGuard(token string, addr net.Addr) guard {
	g := guard{token: token, hosts: map[string]bool{addr.String(): true}}
	if tcp, ok := addr.(*net.TCPAddr); ok && tcp.IP.IsLoopback() {
		g.hosts[net.JoinHostPort("localhost", strconv.Itoa(tcp.Port))] = true
	}
	return g
}

// read refuses requests under another Host name: a web site that rebinds
// its own name to 127.0.0.1 would otherwise read the page, and its token.
func (g guard) read(r *http.Request) (int, string) {
	if !g.hosts[r.Host] {
		return http.StatusMisdirectedRequest, "unknown Host " + r.Host + ": open the address kubectl rainbow dashboard printed"
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
	if subtle.ConstantTimeCompare([]byte(r.Header.Get(tokenHeader)), []byte(g.token)) != 1 {
		return http.StatusForbidden, "refused: the request lacks this dashboard's token; reload the page"
	}
	return 0, ""
}
