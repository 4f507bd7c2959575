package chaos

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/rainbow-deploy/rainbow/internal/manager"
	"github.com/rainbow-deploy/rainbow/test/harness"
)

// leaseDuration and retryPeriod are controller-runtime's leader election
// defaults, which the manager keeps.
const leaseDuration, retryPeriod = 15 * time.Second, 2 * time.Second

// TestLeaderFailover runs two replicas with leader election, each as its
// own service account, during Progressive rollouts with a gate and live
// traffic. At a random point of a rollout the leader is frozen (SIGSTOP:
// it keeps its connections and its view of the world, as a replica on a
// stalled or partitioned node does). The standby must take the Lease over
// and finish the rollout; the old leader is then resumed (SIGCONT), must
// find out it lost the Lease and stop, and must not have written anything
// to Kubernetes (the API server's audit log) or to Temporal (its own log
// of Temporal writes) after the new leader took the Lease.
func TestLeaderFailover(t *testing.T) {
	t.Parallel()
	s := run.Scenario(t, "leader-failover")
	users := map[*Controller]string{}
	var replicas []*Controller
	for _, name := range []string{"replica-a", "replica-b"} {
		kubeconfig, user := s.ServiceAccountKubeconfig(name)
		// The later --kubeconfig wins over StartController's own.
		c := s.StartControllerNamed(name, "--kubeconfig="+kubeconfig, "--leader-elect", "--leader-election-namespace="+s.Namespace)
		users[c] = user
		replicas = append(replicas, c)
	}
	leader := waitLeader(s, replicas, nil)

	tw, traffic, inv := s.StartOrders(ProgressiveWithGate)

	var build string
	for i := 0; i < s.Count(2, 6); i++ {
		tag := fmt.Sprintf("v%d", i+2)
		build = tw.SetImage(tag)
		time.Sleep(s.Between(0, 10*time.Second))
		if !isLeader(leader) {
			s.Violation("%s no longer leads, though nothing was done to it since it took over", leader.Name)
			leader = waitLeader(s, replicas, nil)
		}
		standby := other(replicas, leader)
		f := s.Fault("leader-freeze")
		frozenAt := time.Now()
		leader.Freeze()
		waitLeader(s, []*Controller{standby}, leader)
		took := f.Converged()
		// How soon is recorded (the report's convergence), not asserted:
		// waitLeader's generous bound waits for the outcome.
		s.Logf("failover %d: %s frozen, %s took over after %s", i+1, leader.Name, standby.Name, took.Round(100*time.Millisecond))
		// The old leader stays frozen while the new one finishes the
		// rollout, so that it wakes up with a plan that is out of date.
		tw.WaitCurrent(4*time.Minute, build)
		lostAt := leaseTakenAt(s, users[standby], frozenAt)
		if renewed := lastLeaseWrite(s, users[leader], frozenAt); !renewed.IsZero() {
			s.Note("failover %d: Lease taken over %s after the frozen leader's last renewal (lease duration %s, retry period %s)",
				i+1, lostAt.Sub(renewed).Round(100*time.Millisecond), leaseDuration, retryPeriod)
		}
		leader.Thaw()
		s.Eventually(time.Minute, leader.Name+" exits once it finds it lost the Lease", func() (bool, string) {
			return leader.Exited(), "still running"
		})
		checkNoWritesAfter(s, leader, users[leader], lostAt)
		if !isLeader(standby) {
			s.Violation("%s lost the lead when the old leader %s resumed", standby.Name, leader.Name)
		}
		leader.Restart() // it comes back as the standby
		leader = standby
	}
	counts := traffic.Finish(s.Length(2*time.Minute, 5*time.Minute))
	s.Logf("workflows: %+v", counts)
	waitOnlyVersion(s, build)
	s.Logf("invariant checks: %v", inv.Finish())
}

// other is the replica that is not c.
func other(replicas []*Controller, c *Controller) *Controller {
	if replicas[0] == c {
		return replicas[1]
	}
	return replicas[0]
}

// waitLeader waits until one of candidates, not old, reports itself the
// leader on its metrics endpoint and returns it.
func waitLeader(s *Scenario, candidates []*Controller, old *Controller) *Controller {
	s.Helper()
	var leader *Controller
	s.Eventually(2*time.Minute, "one replica leads", func() (bool, string) {
		for _, c := range candidates {
			if c != old && isLeader(c) {
				leader = c
				return true, ""
			}
		}
		return false, "no leader among the candidates"
	})
	return leader
}

// isLeader reads controller-runtime's leader_election_master_status.
func isLeader(c *Controller) bool { return harness.IsLeader(c.MetricsAddr, manager.LeaderElectionID) }

// leaseTakenAt is when the API server received the first successful write
// of the Lease by user after since: the moment the old leader lost it.
func leaseTakenAt(s *Scenario, user string, since time.Time) time.Time {
	s.Helper()
	var at time.Time
	s.Eventually(30*time.Second, "the audit log shows "+user+" taking the Lease", func() (bool, string) {
		for _, e := range s.AuditWrites(user) {
			if e.ObjectRef.Resource == "leases" && e.ObjectRef.Name == manager.LeaderElectionID &&
				e.ResponseStatus.Code < 300 && e.Received.After(since) {
				at = e.Received
				return true, ""
			}
		}
		return false, "no write of the Lease yet"
	})
	return at
}

// lastLeaseWrite is when the API server received user's last successful
// write of the Lease before t.
func lastLeaseWrite(s *Scenario, user string, t time.Time) time.Time {
	var at time.Time
	for _, e := range s.AuditWrites(user) {
		if e.ObjectRef.Resource == "leases" && e.ObjectRef.Name == manager.LeaderElectionID &&
			e.ResponseStatus.Code < 300 && e.Received.Before(t) {
			at = e.Received
		}
	}
	return at
}

// checkNoWritesAfter: the audit log holds no write by the old leader's
// user received after lostAt, and its log no Temporal write after then.
func checkNoWritesAfter(s *Scenario, c *Controller, user string, lostAt time.Time) {
	s.Helper()
	var late []string
	for _, e := range s.AuditWrites(user) {
		if !e.Received.After(lostAt) {
			continue
		}
		// The elector's renewal of the Lease with the record it last saw:
		// a compare-and-swap the resource version makes fail, and how the
		// old leader finds out.
		if e.ObjectRef.Resource == "leases" && e.ObjectRef.Name == manager.LeaderElectionID && e.ResponseStatus.Code == 409 {
			s.Note("%s: its renewal of the Lease at +%s was refused (409)", c.Name, e.Received.Sub(lostAt).Round(time.Millisecond))
			continue
		}
		late = append(late, fmt.Sprintf("%s %s %s/%s%s -> %d at +%s", e.Verb, e.ObjectRef.Resource, e.ObjectRef.Namespace, e.ObjectRef.Name,
			map[bool]string{true: "/" + e.ObjectRef.Subresource}[e.ObjectRef.Subresource != ""], e.ResponseStatus.Code, e.Received.Sub(lostAt).Round(time.Millisecond)))
	}
	if len(late) > 0 {
		s.Violation("%s wrote to Kubernetes after it lost the Lease at %s: %s", c.Name, lostAt.Format(time.RFC3339Nano), strings.Join(late, "; "))
	}
	w, total, refused := temporalWrites(c.LogPath, lostAt)
	if len(w) > 0 {
		s.Violation("%s wrote to Temporal after it lost the Lease at %s: %s", c.Name, lostAt.Format(time.RFC3339Nano), strings.Join(w, "; "))
	}
	if total == 0 {
		s.Errorf("%s logged no Temporal write at all: is the manager's debug log of them gone? (%s)", c.Name, c.LogPath)
	}
	s.Note("%s: %d Temporal writes logged while it led, %d refused by its lease fence after it woke up", c.Name, total, refused)
}

// temporalWrites reads the manager's debug log of Temporal writes: the
// writes it let through after t, how many it let through in all, and how
// many its lease fence refused.
func temporalWrites(logPath string, t time.Time) (after []string, total, refused int) {
	data, err := os.ReadFile(logPath)
	if err != nil {
		return nil, 0, 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if strings.Contains(line, "\ttemporal write refused\t") {
			refused++
			continue
		}
		if !strings.Contains(line, "\ttemporal write\t") {
			continue
		}
		total++
		ts, _, _ := strings.Cut(line, "\t")
		if at, err := time.Parse(time.RFC3339Nano, ts); err == nil && at.After(t) {
			after = append(after, line)
		}
	}
	return after, total, refused
}
