package harness

import (
	"bufio"
	"net/http"
	"time"
)

// IsLeader reads controller-runtime's leader_election_master_status for
// the Lease named lease from the metrics endpoint at addr (host:port). A
// replica that does not answer within two seconds (a stopped one) is not.
func IsLeader(addr, lease string) bool {
	hc := http.Client{Timeout: 2 * time.Second}
	resp, err := hc.Get("http://" + addr + "/metrics")
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
