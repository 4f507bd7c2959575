package temporal

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// ErrAddressNotAllowed: the address is not in --allowed-temporal-hosts, so
// the controller does not connect to it.
var ErrAddressNotAllowed = errors.New("address not allowed")

// AllowedHosts are the Temporal addresses the controller may connect to
// (--allowed-temporal-hosts). The zero value allows any address.
//
// Each pattern is a host with an optional port:
//   - "temporal.example.com" is that name only, not its subdomains;
//   - "*.example.com" is any name ending in ".example.com", at any depth
//     ("ns.acct.example.com"), but not "example.com" itself; "*" is only
//     allowed as the whole first label;
//   - "*" alone is any host (useful with a port: "*:7233");
//   - an IP address ("10.0.0.7", "[fd00::7]") is that address only; names
//     are never resolved, so a name does not match the address it
//     resolves to, and wildcards never match an IP address;
//   - ":7233" after the host limits the port; without one any port matches.
//
// Names compare case-insensitively.
type AllowedHosts struct {
	patterns []hostPattern
}

type hostPattern struct {
	// host is lower case; "*" is any, "*.x" any name ending in ".x", an IP
	// address is kept in netip's canonical form.
	host string
	// port is 0 for any.
	port int
}

// ParseAllowedHosts parses a comma-separated list of patterns; blanks
// around them and empty items are ignored, so "" allows any address.
func ParseAllowedHosts(list string) (AllowedHosts, error) {
	var a AllowedHosts
	for _, item := range strings.Split(list, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		p, err := parseHostPattern(item)
		if err != nil {
			return AllowedHosts{}, fmt.Errorf("allowed Temporal host %q: %w", item, err)
		}
		a.patterns = append(a.patterns, p)
	}
	return a, nil
}

func parseHostPattern(s string) (hostPattern, error) {
	host, port := s, ""
	switch {
	case strings.HasPrefix(s, "["):
		end := strings.Index(s, "]")
		if end < 0 {
			return hostPattern{}, errors.New("missing ] after an IPv6 address")
		}
		host, port = s[1:end], s[end+1:]
		if port != "" && !strings.HasPrefix(port, ":") {
			return hostPattern{}, errors.New("want [address] or [address]:port")
		}
		port = strings.TrimPrefix(port, ":")
		if _, err := netip.ParseAddr(host); err != nil || !strings.Contains(host, ":") {
			return hostPattern{}, errors.New("only IPv6 addresses go in brackets")
		}
	case strings.Count(s, ":") > 1:
		return hostPattern{}, errors.New("put an IPv6 address in brackets, e.g. [fd00::7]:7233")
	case strings.Contains(s, ":"):
		host, port, _ = strings.Cut(s, ":")
	}
	p := hostPattern{}
	if port != "" || strings.HasSuffix(s, ":") {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 || port != strconv.Itoa(n) {
			return hostPattern{}, errors.New("the port must be a number from 1 to 65535; leave it out to allow any port")
		}
		p.port = n
	}
	host = strings.ToLower(host)
	switch {
	case host == "*":
		p.host = host
	case strings.HasPrefix(host, "*."):
		if strings.Contains(host[2:], "*") || !isDNSName(host[2:]) {
			return hostPattern{}, errors.New(`want "*." followed by a DNS name; "*" may only be the whole first label`)
		}
		p.host = host
	default:
		if ip, err := netip.ParseAddr(host); err == nil {
			p.host = ip.Unmap().String()
			break
		}
		if strings.Contains(host, "*") {
			return hostPattern{}, errors.New(`"*" may only be the whole first label, as in "*.example.com"`)
		}
		if !isDNSName(host) {
			return hostPattern{}, errors.New("not a DNS name or an IP address")
		}
		p.host = host
	}
	return p, nil
}

// isDNSName: dot-separated labels of letters, digits and inner hyphens.
func isDNSName(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for _, label := range strings.Split(s, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}

// Any: no list was given, every address is allowed.
func (a AllowedHosts) Any() bool { return len(a.patterns) == 0 }

// Allows says whether the controller may connect to hostPort. An address
// that is not a plain host:port (a URL, a resolver scheme) is never
// allowed by a list.
func (a AllowedHosts) Allows(hostPort string) bool {
	if a.Any() {
		return true
	}
	host, portStr, err := net.SplitHostPort(hostPort)
	if err != nil {
		return false
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 1 || port > 65535 {
		return false
	}
	host = strings.ToLower(host)
	ip, ipErr := netip.ParseAddr(host)
	if ipErr == nil {
		if ip.Zone() != "" {
			return false
		}
		host = ip.Unmap().String()
	} else if !isDNSName(host) {
		return false
	}
	for _, p := range a.patterns {
		if p.port != 0 && p.port != port {
			continue
		}
		switch {
		case p.host == "*", p.host == host:
			return true
		case ipErr != nil && strings.HasPrefix(p.host, "*.") && strings.HasSuffix(host, p.host[1:]):
			return true
		}
	}
	return false
}

// Check is nil if hostPort is allowed, else an ErrAddressNotAllowed that
// names the allowed patterns.
func (a AllowedHosts) Check(hostPort string) error {
	if a.Allows(hostPort) {
		return nil
	}
	return fmt.Errorf("%w: %s is not one of the addresses this controller may connect to (--allowed-temporal-hosts=%s)",
		ErrAddressNotAllowed, hostPort, a)
}

// String is the list in ParseAllowedHosts' syntax, normalised.
func (a AllowedHosts) String() string {
	items := make([]string, len(a.patterns))
	for i, p := range a.patterns {
		host := p.host
		if strings.Contains(host, ":") {
			host = "[" + host + "]"
		}
		if p.port != 0 {
			host += ":" + strconv.Itoa(p.port)
		}
		items[i] = host
	}
	return strings.Join(items, ",")
}
