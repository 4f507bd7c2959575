package harness

import (
	"bufio"
	"crypto/tls"
	"net/http"
	"time"
)

// IsLeader reads controller-runtime's leader_election_master_status for
// the Lease named lease from the metrics endpoint at addr (host:port). A
// replica that does not answer within two seconds (a stopped one) is not.
func IsLeader(addr, lease string) bool {
	return isLeader(&http.Client{Timeout: 2 * time.Second}, "http://"+addr+"/metrics", "", lease)
}

// IsLeaderSecure is IsLeader for a manager run with --metrics-secure:
// HTTPS with its self-signed certificate, and token, which must be allowed
// to get /metrics (ClusterRole rainbow-metrics-reader).
func IsLeaderSecure(addr, token, lease string) bool {
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	return isLeader(hc, "https://"+addr+"/metrics", token, lease)
}

func isLeader(hc *http.Client, url, token, lease string) bool {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if sc.Text() == `leader_election_master_status{name="`+lease+`"} 1` {
			return true
		}
	}
	return false
}
