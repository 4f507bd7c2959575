package inflight

import (
	"context"
	"errors"
	"testing"
	"time"
)

// fakeClock is the limiter's clock, moved by hand.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

func newTestLimiter(cfg Config) (*Limiter, *fakeClock) {
	clk := &fakeClock{t: t0}
	l := NewLimiter(cfg, nil)
	l.now = clk.now
	return l, clk
}

func mustAcquire(t *testing.T, l *Limiter, class Class) func(bool) {
	t.Helper()
	done, err := l.Acquire(context.Background(), class)
	if err != nil {
		t.Fatal(err)
	}
	return done
}

// acquireLater starts an Acquire that waits; the channel gets its done
// once it holds a place.
func acquireLater(l *Limiter, class Class) <-chan func(bool) {
	out := make(chan func(bool), 1)
	go func() {
		done, err := l.Acquire(context.Background(), class)
		if err == nil {
			out <- done
		}
	}()
	return out
}

// waitQueued waits until the classes' queues hold want calls (Urgent,
// Normal, Background).
func waitQueued(t *testing.T, l *Limiter, want ...int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		l.mu.Lock()
		same := true
		for c := range l.waiting {
			if c < len(want) && len(l.waiting[c]) != want[c] || c >= len(want) && len(l.waiting[c]) != 0 {
				same = false
			}
		}
		l.mu.Unlock()
		if same {
			return
		}
	}
	t.Fatalf("never %v calls queued by class", want)
}

func TestLimiterHoldsCallsAboveTheLimitAndLetsWritesFirst(t *testing.T) {
	l, clk := newTestLimiter(Config{Initial: 2, Min: 1, Max: 4, SlowAfter: time.Second, Cut: 0.5})
	a := mustAcquire(t, l, Normal)
	b := mustAcquire(t, l, Normal)
	if l.InFlight() != 2 {
		t.Fatalf("in flight %d, want 2", l.InFlight())
	}
	read := acquireLater(l, Normal)
	waitQueued(t, l, 0, 1)
	write := acquireLater(l, Urgent)
	waitQueued(t, l, 1, 1)

	clk.t = clk.t.Add(10 * time.Millisecond)
	a(false) // fast: the write queued after the read goes first
	var w func(bool)
	select {
	case w = <-write:
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting write did not get the free place")
	}
	select {
	case <-read:
		t.Fatal("the read went before the write, or beyond the limit")
	default:
	}
	if l.Limit() != 2 {
		t.Fatalf("a fast answer with a place to spare when sent changed the limit to %v", l.Limit())
	}
	b(false) // it took the last place: a fast answer grows the window
	if l.Limit() <= 2 {
		t.Fatalf("a fast answer in a full window left the limit at %v", l.Limit())
	}
	r := <-read
	w(false)
	r(false)
	if l.InFlight() != 0 {
		t.Fatalf("in flight %d after every call came back", l.InFlight())
	}
}

func TestLimiterCutsOnASlowAnswer(t *testing.T) {
	var heard []float64
	l, clk := newTestLimiter(Config{Initial: 4, Min: 1, Max: 8, SlowAfter: time.Second, Cut: 0.5})
	l.changed = func(limit float64, cut bool) {
		if cut {
			heard = append(heard, limit)
		}
	}
	calls := []func(bool){mustAcquire(t, l, Normal), mustAcquire(t, l, Normal), mustAcquire(t, l, Normal)}
	clk.t = clk.t.Add(3 * time.Second)
	for _, done := range calls {
		done(false)
	}
	if l.Limit() != 2 || len(heard) != 1 {
		t.Fatalf("three slow answers sent together: limit %v, cuts heard %v; want one cut to 2", l.Limit(), heard)
	}
	// Two places now: a third call waits.
	mustAcquire(t, l, Normal)
	mustAcquire(t, l, Urgent)
	later := acquireLater(l, Normal)
	waitQueued(t, l, 0, 1)
	select {
	case <-later:
		t.Fatal("a third call went with a limit of 2")
	default:
	}
}

func TestLimiterRefusalCuts(t *testing.T) {
	l, _ := newTestLimiter(Config{Initial: 4, Min: 1, Max: 8, SlowAfter: time.Second, Cut: 0.5})
	done := mustAcquire(t, l, Urgent)
	done(true)
	if l.Limit() != 2 {
		t.Fatalf("a refusal for load left the limit at %v, want 2", l.Limit())
	}
}

func TestLimiterWaitEndsWithItsContext(t *testing.T) {
	l, _ := newTestLimiter(Config{Initial: 1, Min: 1, Max: 2, SlowAfter: time.Second, Cut: 0.5})
	held := mustAcquire(t, l, Normal)
	ctx, cancel := context.WithCancel(context.Background())
	errs := make(chan error, 1)
	go func() {
		_, err := l.Acquire(ctx, Urgent)
		errs <- err
	}()
	waitQueued(t, l, 1, 0)
	cancel()
	if err := <-errs; !errors.Is(err, context.Canceled) {
		t.Fatalf("Acquire returned %v, want the context's error", err)
	}
	waitQueued(t, l, 0, 0)
	held(false)
	if l.InFlight() != 0 {
		t.Fatalf("in flight %d, want 0: the cancelled wait kept a place", l.InFlight())
	}
	mustAcquire(t, l, Normal)
}

// TestLimiterHandsPlacesOutByClass: with one place, calls queued as
// background, normal and urgent get it in the reverse order, and a new
// call goes behind a waiting one of its class or a higher one.
func TestLimiterHandsPlacesOutByClass(t *testing.T) {
	l, clk := newTestLimiter(Config{Initial: 1, Min: 1, Max: 1, SlowAfter: time.Hour, Cut: 0.5})
	held := mustAcquire(t, l, Normal)
	background := acquireLater(l, Background)
	waitQueued(t, l, 0, 0, 1)
	normal := acquireLater(l, Normal)
	waitQueued(t, l, 0, 1, 1)
	urgent := acquireLater(l, Urgent)
	waitQueued(t, l, 1, 1, 1)
	clk.t = clk.t.Add(time.Millisecond)
	held(false)
	for _, next := range []struct {
		name string
		ch   <-chan func(bool)
	}{{"urgent", urgent}, {"normal", normal}, {"background", background}} {
		select {
		case done := <-next.ch:
			done(false)
		case <-time.After(10 * time.Second):
			t.Fatalf("the %s call did not get the place next", next.name)
		}
	}
	if l.InFlight() != 0 {
		t.Fatalf("in flight %d after every call came back", l.InFlight())
	}
}
