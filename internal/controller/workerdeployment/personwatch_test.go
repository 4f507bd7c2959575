package workerdeployment

import (
	"context"
	"errors"
	"maps"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/rainbow-deploy/rainbow/internal/freshness"
	"github.com/rainbow-deploy/rainbow/internal/temporal"
)

func TestPersonWatchWakesOnlyChangedWorkerDeployments(t *testing.T) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	waiting := temporal.DeploymentSummary{Name: "ns/manual", CurrentBuildID: "v1", RoutingChangedAt: at}
	other := temporal.DeploymentSummary{Name: "ns/other", CurrentBuildID: "v7", RoutingChangedAt: at}
	list := map[string]temporal.DeploymentSummary{waiting.Name: waiting, other.Name: other}
	var calls atomic.Int32
	fetch := func(context.Context) (map[string]temporal.DeploymentSummary, error) {
		calls.Add(1)
		out := map[string]temporal.DeploymentSummary{}
		for k, v := range list {
			out[k] = v
		}
		return out, nil
	}
	w := newPersonWatch(&listReads{}, &settledDescribes{})
	manual, still, late := types.NamespacedName{Namespace: "ns", Name: "manual"}, types.NamespacedName{Namespace: "ns", Name: "other"},
		types.NamespacedName{Namespace: "ns", Name: "late"}
	w.wait(manual, "conn", fetch, waiting.Name, waiting, true, waiting)
	w.wait(still, "conn", fetch, other.Name, other, true, other)
	// Described with v3 current, not yet in the lagging list.
	w.wait(late, "conn", fetch, "ns/late", temporal.DeploymentSummary{}, false, temporal.DeploymentSummary{CurrentBuildID: "v3"})
	// Also not in the list yet; it will show up as described.
	quiet := types.NamespacedName{Namespace: "ns", Name: "quiet"}
	w.wait(quiet, "conn", fetch, "ns/quiet", temporal.DeploymentSummary{}, false, temporal.DeploymentSummary{CurrentBuildID: "v5"})

	now := at.Add(time.Minute)
	w.check(context.Background(), now)
	if len(w.events) != 0 || calls.Load() != 1 {
		t.Fatalf("nothing changed, yet %d wake-ups and %d lists", len(w.events), calls.Load())
	}

	// A person promotes v2 of ns/manual, and ns/late shows up in the list.
	promoted := waiting
	promoted.CurrentBuildID, promoted.RoutingChangedAt = "v2", at.Add(2*time.Minute)
	list[waiting.Name] = promoted
	list["ns/late"] = temporal.DeploymentSummary{Name: "ns/late", CurrentBuildID: "v4"}
	list["ns/quiet"] = temporal.DeploymentSummary{Name: "ns/quiet", CurrentBuildID: "v5"}
	now = now.Add(personWatchInterval)
	w.check(context.Background(), now)
	if calls.Load() != 2 {
		t.Fatalf("%d lists for three waiting TWDs over two intervals, want one per interval", calls.Load())
	}
	woken := map[string]bool{}
	for len(w.events) > 0 {
		woken[(<-w.events).Object.GetName()] = true
	}
	if !woken["manual"] || !woken["late"] || woken["other"] || woken["quiet"] {
		t.Fatalf("woken %v, want manual (promoted) and late (changed before the list showed it) only", woken)
	}

	// Woken TWDs are no longer watched until they register again; a
	// forgotten one never is.
	w.forget(still)
	w.forget(quiet)
	list[other.Name] = promoted
	w.check(context.Background(), now.Add(personWatchInterval))
	if len(w.events) != 0 {
		t.Fatalf("%d wake-ups after every waiter was woken or forgotten", len(w.events))
	}
	if len(w.conns) != 0 {
		t.Fatalf("connections still watched: %v", w.conns)
	}
}

func TestPersonWatchWakesManagerWaitersOnANewRun(t *testing.T) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	runs := map[string]time.Time{}
	var failing atomic.Bool
	var calls atomic.Int32
	var since time.Time
	query := func(_ context.Context, s time.Time) (map[string]time.Time, error) {
		calls.Add(1)
		since = s
		if failing.Load() {
			return nil, errors.New("visibility unavailable")
		}
		return maps.Clone(runs), nil
	}
	settled := &settledDescribes{}
	held, other := types.NamespacedName{Namespace: "ns", Name: "held"}, types.NamespacedName{Namespace: "ns", Name: "other"}
	settled.remember(held, settledEntry{})
	settled.remember(other, settledEntry{SettledState: freshness.SettledState{DescribedAt: at.Add(30 * time.Second)}})
	w := newPersonWatch(&listReads{}, settled)
	w.waitManager(held, "conn", query, "ns/held", at)
	w.waitManager(other, "conn", query, "ns/other", at.Add(30*time.Second))

	// Runs from before the describes: the describes saw them.
	runs["ns/held"], runs["ns/other"] = at.Add(-time.Minute), at.Add(-time.Minute)
	w.check(context.Background(), at.Add(40*time.Second))
	if len(w.events) != 0 || calls.Load() != 1 {
		t.Fatalf("nothing changed, yet %d wake-ups and %d queries", len(w.events), calls.Load())
	}
	if want := at.Add(-freshness.RunClockSlack); !since.Equal(want) {
		t.Fatalf("queried runs since %s, want %s (the oldest describe)", since, want)
	}
	if e, _ := settled.lookup(other); !e.QuietAt.Equal(at.Add(40 * time.Second)) {
		t.Fatalf("quiet at %s: the query's word that nothing changed is not kept for the next pass", e.QuietAt)
	}

	// A person hands back the role of ns/held: its workflow starts a run.
	runs["ns/held"] = at.Add(45 * time.Second)
	w.check(context.Background(), at.Add(50*time.Second))
	if len(w.events) != 1 || (<-w.events).Object.GetName() != "held" {
		t.Fatal("the TWD whose worker deployment changed was not woken alone")
	}
	if _, ok := settled.lookup(held); ok {
		t.Fatal("a woken TWD keeps its settled state, so its pass would not describe")
	}

	// Without an answer, the other is woken at the unwatched pace only.
	failing.Store(true)
	w.check(context.Background(), at.Add(30*time.Second+freshness.ManagerMaxAge-time.Second))
	if len(w.events) != 0 {
		t.Fatal("woken before the unwatched pace while the query fails")
	}
	w.check(context.Background(), at.Add(30*time.Second+freshness.ManagerMaxAge))
	if len(w.events) != 1 || len(w.conns) != 0 {
		t.Fatalf("%d wake-ups and %d connections watched once the unwatched pace is due", len(w.events), len(w.conns))
	}
}
