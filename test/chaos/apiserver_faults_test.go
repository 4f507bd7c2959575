package chaos

import (
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/rainbow-deploy/rainbow/dev/faultproxy"
)

// TestKubeAPIFaults drives Progressive rollouts with a gate while the
// controller's requests to the API server (in its namespace, watches
// aside) meet conflicts, 5xx answers, requests that hang past the
// controller's reconcile deadline, and writes whose answer is lost after
// they were applied, at a rate drawn from the seed. Every rollout must
// complete, no workflow be lost, the invariants hold, no object be
// written in a hot loop, and no routing write to Temporal follow a failed
// Kubernetes write without a fresh Describe in between (a stale plan).
func TestKubeAPIFaults(t *testing.T) {
	t.Parallel()
	s := run.Scenario(t, "kube-api-faults")
	temporal := s.TemporalProxy()
	kube, kubeconfig := s.KubeProxy()
	c := s.StartController(kubeconfig)
	tw, traffic, inv := s.StartOrders(ProgressiveWithGate)

	rate := 0.1 + 0.15*float64(s.IntN(100))/100
	faults := faultproxy.KubeFault{
		Rate:  rate,
		Kinds: []faultproxy.KubeFaultKind{faultproxy.Conflict, faultproxy.ServerError, faultproxy.Timeout, faultproxy.LostResponse},
		// Past the reconcile's 30s deadline: the controller gives up first.
		Hang: 35 * time.Second,
		Match: func(r faultproxy.Request) bool {
			return faultproxy.DefaultEligible(r) && r.Namespace == s.Namespace
		},
	}
	s.Note("fault rate %.2f of the controller's requests in its namespace", rate)
	kube.Set(faults)
	from := time.Now()

	rollouts := s.Count(2, 10)
	var build string
	for i := 0; i < rollouts; i++ {
		tag := fmt.Sprintf("v%d", 2+i)
		start := time.Now()
		before := len(kube.Requests())
		build = tw.SetImage(tag)
		s.Eventually(6*time.Minute, "rollout to "+tag+" completes under API faults", func() (bool, string) {
			if c.Exited() {
				s.Fatalf("the controller exited; log:\n%s", logTail(c.LogPath, 30))
			}
			return tw.IsCurrent(build)
		})
		injected := countFaults(kube.Requests()[before:])
		for kind, n := range injected {
			for j := 0; j < n; j++ {
				s.Fault("kube-" + string(kind))
			}
		}
		// A rollout's length under faults: its "convergence".
		d := (&Fault{s: s, kind: "kube-api-faults-rollout", at: start}).Converged()
		s.Note("rollout %d: %s with faults %v", i+1, d.Round(100*time.Millisecond), injected)
	}
	counts := traffic.Finish(s.Length(3*time.Minute, 5*time.Minute))
	s.Logf("workflows: %+v", counts)
	waitOnlyVersion(s, build)
	kube.Pass()
	s.Logf("invariant checks: %v", inv.Finish())

	reqs := kube.Requests()
	stale, routes, failed := staleRoutingWrites(reqs, temporal.Calls())
	for _, v := range stale {
		s.Violation("routing write from a stale plan: %s", v)
	}
	s.Note("stale plan check: %d routing writes, %d failed Kubernetes writes", routes, failed)
	if hot := hotLoops(reqs, from, time.Second, 10); len(hot) > 0 {
		for _, h := range hot {
			s.Violation("hot loop: %s", h)
		}
	}
	total := countFaults(reqs)
	s.Logf("faults injected: %v over %d requests", total, len(reqs))
}

// countFaults counts the injected faults by kind.
func countFaults(reqs []faultproxy.Request) map[faultproxy.KubeFaultKind]int {
	n := map[faultproxy.KubeFaultKind]int{}
	for _, r := range reqs {
		if r.Fault != "" {
			n[r.Fault]++
		}
	}
	return n
}

// hotLoops lists the objects written more than limit times within any
// window after from: retries without backoff.
func hotLoops(reqs []faultproxy.Request, from time.Time, window time.Duration, limit int) []string {
	by := map[string][]time.Time{}
	for _, r := range reqs {
		if r.Write() && !r.Start.Before(from) && r.Resource != "events" {
			key := r.Resource + "/" + r.Name + "/" + r.Sub
			by[key] = append(by[key], r.Start)
		}
	}
	var out []string
	for key, ts := range by {
		sort.Slice(ts, func(i, j int) bool { return ts[i].Before(ts[j]) })
		for i, j := 0, 0; j < len(ts); j++ {
			for ts[j].Sub(ts[i]) > window {
				i++
			}
			if j-i+1 > limit {
				out = append(out, fmt.Sprintf("%s written %d times within %s at %s", key, j-i+1, window, ts[j].Format("15:04:05.000")))
				break
			}
		}
	}
	sort.Strings(out)
	return out
}
