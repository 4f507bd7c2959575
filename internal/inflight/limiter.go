package inflight

import (
	"context"
	"sync"
	"time"
)

// Class ranks a call waiting for a place: a free place goes to the oldest
// waiting call of the first class.
type Class int

const (
	// Urgent calls finish what people wait for: routing writes.
	Urgent Class = iota
	// Normal calls are the reads that decide them.
	Normal
	// Background calls can come later without delaying a rollout: the
	// retirement's deletes, version metadata.
	Background
	classes
)

// Limiter holds the calls to one Temporal namespace above the window's
// limit, and hands free places out by Class.
type Limiter struct {
	cfg Config
	now func() time.Time
	// changed, if set, hears every new limit (for a metric).
	changed func(limit float64, cut bool)

	mu       sync.Mutex
	w        Window
	inFlight int
	waiting  [classes][]chan struct{}
}

// NewLimiter starts a limiter at cfg.Initial. changed may be nil.
func NewLimiter(cfg Config, changed func(limit float64, cut bool)) *Limiter {
	return &Limiter{cfg: cfg, now: time.Now, changed: changed, w: Start(cfg)}
}

// Acquire waits for a place in the window, or for ctx to end. done must
// be called once the call came back, with whether Temporal refused it for
// load.
func (l *Limiter) Acquire(ctx context.Context, class Class) (done func(overloaded bool), err error) {
	class = min(max(class, Urgent), Background)
	l.mu.Lock()
	full := false
	if l.inFlight < l.w.Slots() && !l.waitingUpTo(class) {
		l.inFlight++
		full = l.inFlight >= l.w.Slots()
		l.mu.Unlock()
	} else {
		ready := make(chan struct{})
		l.waiting[class] = append(l.waiting[class], ready)
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

// waitingUpTo: a call of class or a higher one waits; a new call goes
// behind it.
func (l *Limiter) waitingUpTo(class Class) bool {
	for c := Urgent; c <= class; c++ {
		if len(l.waiting[c]) > 0 {
			return true
		}
	}
	return false
}

// drop takes ready out of the queues; false if it was already handed a
// place.
func (l *Limiter) drop(ready chan struct{}) bool {
	for c := range l.waiting {
		q := &l.waiting[c]
		for i, w := range *q {
			if w == ready {
				*q = append((*q)[:i], (*q)[i+1:]...)
				return true
			}
		}
	}
	return false
}

// release frees the call's place, applies its outcome and hands the free
// places on by class. An outcome with no latency and not overloaded (a
// place given back unused) leaves the window as it is.
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
	for c := Urgent; c < classes && l.inFlight < l.w.Slots(); {
		q := &l.waiting[c]
		if len(*q) == 0 {
			c++
			continue
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
