package notify

import (
	"context"
	"fmt"
	"sync"

	"github.com/go-logr/logr"
	"github.com/google/uuid"
)

// Notifier fans notifications out to its sinks. A nil *Notifier sends
// nothing. Notify never blocks; Start runs the senders.
type Notifier struct {
	sinks []*sink
}

// New makes a notifier of the sinks; nil when there are none.
func New(cfgs []SinkConfig, log logr.Logger) *Notifier {
	if len(cfgs) == 0 {
		return nil
	}
	n := &Notifier{}
	for i, c := range cfgs {
		if c.Name == "" {
			c.Name = fmt.Sprintf("%s-%d", c.Format, i)
		}
		n.sinks = append(n.sinks, newSink(c, log.WithName("notify")))
	}
	return n
}

// Notify queues e on every sink, giving it an ID if it has none.
func (n *Notifier) Notify(e Event) {
	if n == nil {
		return
	}
	if e.ID == "" {
		e.ID = uuid.NewString()
	}
	for _, s := range n.sinks {
		s.enqueue(e)
	}
}

// Start delivers until ctx ends (a controller-runtime Runnable).
func (n *Notifier) Start(ctx context.Context) error {
	var wg sync.WaitGroup
	for _, s := range n.sinks {
		wg.Go(func() { s.run(ctx) })
	}
	wg.Wait()
	return nil
}

// NeedLeaderElection: only the leader reconciles, so only it notifies;
// the senders may run on every replica.
func (n *Notifier) NeedLeaderElection() bool { return false }
