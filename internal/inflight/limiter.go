package inflight

import (
	"context"
	"sync"
	"time"
)

// Limiter holds the calls to one Temporal namespace above the window's
// limit. Waiting writes go before waiting reads: a routing write finishes
// a rollout, while a read that waits only looks later.
type Limiter struct {
	cfg Config
	now func() time.Time
	// changed, if set, hears every new limit (for a metric).
	changed func(limit float64, cut bool)

	mu       sync.Mutex
	w        Window
	inFlight int
	writes   []chan struct{}
	reads    []chan struct{}
}

// NewLimiter starts a limiter at cfg.Initial. changed may be nil.
func NewLimiter(cfg Config, changed func(limit float64, cut bool)) *Limiter {
	return &Limiter{cfg: cfg, now: time.Now, changed: changed, w: Start(cfg)}
}

// Acquire waits for a place in the window, or for ctx to end. done must
// be called once the call came back, with whether Temporal refused it for
// load.
func (l *Limiter) Acquire(ctx context.Context, write bool) (done func(overloaded bool), err error) {
	l.mu.Lock()
	full := false
	if l.inFlight < l.w.Slots() && len(l.writes) == 0 && (write || len(l.reads) == 0) {
		l.inFlight++
		full = l.inFlight >= l.w.Slots()
		l.mu.Unlock()
	} else {
		ready := make(chan struct{})
		if write {
			l.writes = append(l.writes, ready)
		} else {
			l.reads = append(l.reads, ready)
		}
		l.mu.Unlock()
		select {
		case <-ready:
			full = true // it waited: the window was full
		case <-ctx.Done():
			l.mu.Lock()
			if l.drop(ready) {
				l.mu.Unlock()
				return nil, ctx.Err()
			}
			l.mu.Unlock()
			// Handed a place as ctx ended: give it on.
			l.release(Outcome{Sent: l.now()})
			return nil, ctx.Err()
		}
	}
	sent := l.now()
	return func(overloaded bool) {
		l.release(Outcome{Sent: sent, Latency: l.now().Sub(sent), Overloaded: overloaded, Full: full})
	}, nil
}

// drop takes ready out of the queues; false if it was already handed a
// place.
func (l *Limiter) drop(ready chan struct{}) bool {
	for _, q := range []*[]chan struct{}{&l.writes, &l.reads} {
		for i, c := range *q {
			if c == ready {
				*q = append((*q)[:i], (*q)[i+1:]...)
				return true
			}
		}
	}
	return false
}

// release frees the call's place, applies its outcome and hands the free
// places on, writes first. An outcome with no latency and not overloaded
// (a place given back unused) leaves the window as it is.
func (l *Limiter) release(o Outcome) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.inFlight--
	before := l.w.Limit
	if o.Latency > 0 || o.Overloaded {
		l.w = l.w.After(l.cfg, o)
	}
	if l.changed != nil && l.w.Limit != before {
		l.changed(l.w.Limit, l.w.Limit < before)
	}
	for l.inFlight < l.w.Slots() {
		q := &l.reads
		if len(l.writes) > 0 {
			q = &l.writes
		}
		if len(*q) == 0 {
			return
		}
		close((*q)[0])
		*q = (*q)[1:]
		l.inFlight++
	}
}

// Limit is the window's limit now.
func (l *Limiter) Limit() float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Limit
}

// InFlight is how many calls hold a place now.
func (l *Limiter) InFlight() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.inFlight
}
