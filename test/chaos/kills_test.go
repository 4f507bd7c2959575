package chaos

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/utils/ptr"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rainbow-deploy/rainbow/internal/workload"
)

// TestControllerKills drives Progressive rollouts with a gate workflow
// under continuous pinned and auto-upgrade traffic, and SIGKILLs the
// controller at random points of each (1–3 times per rollout, after a
// delay drawn from the seed; now and then again while the restarted one
// starts up). Every rollout must complete, every workflow complete (pinned
// ones on their own version), the invariants hold, and at the end only
// the last version may be left.
func TestControllerKills(t *testing.T) {
	t.Parallel()
	s := run.Scenario(t, "controller-kills")
	c := s.StartController()
	tw, traffic, inv := s.StartOrders(ProgressiveWithGate)

	// One rollout without faults, as the yardstick of the others.
	start := time.Now()
	tw.WaitCurrent(4*time.Minute, tw.SetImage("v2"))
	s.Note("a rollout without kills took %s", time.Since(start).Round(100*time.Millisecond))

	want := s.Count(4, 50)
	kills, build := 0, ""
	for i := 3; kills < want; i++ {
		tag := fmt.Sprintf("v%d", i)
		build = tw.SetImage(tag)
		n := min(1+s.IntN(3), want-kills)
		var last *Fault
		for k := 0; k < n; k++ {
			// Most kills land within the rollout (~15s here): before its
			// Deployment exists, while the gate runs, during a ramp step,
			// at promotion, or while the old version is sunset.
			time.Sleep(s.Between(0, 12*time.Second))
			last = s.Fault("controller-kill")
			c.Kill()
			kills++
			if kills < want && s.IntN(5) == 0 {
				// Again while it starts: its caches half-filled, maybe
				// in the middle of its first reconcile.
				c.RestartNoWait()
				time.Sleep(s.Between(0, 3*time.Second))
				s.Fault("controller-kill-at-start")
				c.Kill()
				kills++
			}
			c.Restart()
		}
		s.Eventually(4*time.Minute, "rollout to "+tag+" completes after the kills", func() (bool, string) {
			done, seen := tw.IsCurrent(build)
			if !done {
				// The controller must be alive to converge; a crash of
				// its own is a defect, not a fault we injected.
				if c.Exited() {
					s.Fatalf("the controller exited by itself; log:\n%s", logTail(c.LogPath, 30))
				}
			}
			return done, seen
		})
		last.Converged()
	}
	s.Logf("%d kills over the rollouts; routing seen: %d changes", kills, len(inv.Routing()))

	counts := traffic.Finish(s.Length(2*time.Minute, 5*time.Minute))
	s.Logf("workflows: %+v", counts)
	waitOnlyVersion(s, build)
	checks := inv.Finish()
	s.Logf("invariant checks: %v", checks)
	if checks["removal"] == 0 {
		s.Errorf("no scale-down or deletion was checked: the invariant watch saw nothing")
	}
}

// waitOnlyVersion waits until build's is the TWD's only Deployment left:
// every older version drained, scaled down and deleted.
func waitOnlyVersion(s *Scenario, build string) {
	s.Helper()
	// A fault can make Temporal lose a version's last drainage report
	// (docs/concepts.md#version-statuses): the controller then learns the
	// version drained from its cross-check, crossCheckAfter into draining
	// and on a draining look that may come a minute later.
	s.Eventually(crossCheckAfter+4*time.Minute, "only the Deployment of "+build+" is left", func() (bool, string) {
		var list appsv1.DeploymentList
		if err := s.Env.Kube.List(context.Background(), &list, crclient.InNamespace(s.Namespace)); err != nil {
			return false, err.Error()
		}
		var names []string
		for _, d := range list.Items {
			names = append(names, fmt.Sprintf("%s(replicas=%d)", d.Name, ptr.Deref(d.Spec.Replicas, 1)))
		}
		return len(list.Items) == 1 && list.Items[0].Labels[workload.LabelBuildID] == build, strings.Join(names, ", ")
	})
}
