package planner

import "time"

// The waits several rules share. A rule's own timings stand next to it:
// GateCancelGrace (gate.go), drain.ActionInterval and the listing pace
// (drain/drain.go), the drainage cross-check (drain/crosscheck.go) and the
// copies' resync (owned/owned.go). docs/concepts.md lists them all.
const (
	// requeueTemporal: waiting on something only Temporal shows (pollers,
	// a routing write, a gate run). Nothing notifies us, so poll fast.
	requeueTemporal = time.Second
	// requeueTaskQueues: a registered version's other task queue types
	// follow its first within a few hundred milliseconds.
	requeueTaskQueues = 200 * time.Millisecond
	// requeueWatch: waiting on a Deployment; its watch wakes us sooner.
	requeueWatch = 30 * time.Second
	// requeuePerson: waiting on a person acting in Temporal (promoting a
	// Manual version, undoing a routing change, handing back the manager
	// role). Nothing in Temporal notifies us; the controller watches the
	// namespace's shared worker deployment list for routing changes
	// (Result.WaitsFor), so this is only the fallback.
	requeuePerson = 30 * time.Second
	// requeueDrainingMin: the fastest look at a draining version, just
	// after the promotion that started its drain (see drainingPoll).
	requeueDrainingMin = 5 * time.Second
	// requeuePollersGone: a retired version waits for Temporal to forget
	// its stopped workers' polls (the poller history TTL, minutes in
	// production) before it can be deleted.
	requeuePollersGone = 20 * time.Second
	// requeueTemporalDown: Temporal could not be read; retry without hammering it.
	requeueTemporalDown = 10 * time.Second
	// requeuePropagation: once propagationFirstLook has passed, how often
	// a routing change being applied is looked at again.
	requeuePropagation = 200 * time.Millisecond
	// propagationFirstLook: Temporal 1.32 reports an accepted routing
	// change applied to its task queues about a second after it, never
	// sooner in make bench's floor phase (25 quiet writes: 0.99 to 1.01 s;
	// under load 1.0 to 1.5 s). Earlier looks cost a describe each and
	// find it in progress (docs/performance.md, goal 4).
	propagationFirstLook = 1050 * time.Millisecond
	// requeueIdle: nothing moves; poll Temporal about once a minute for
	// external changes and drainage (Temporal refreshes drainage every few
	// minutes, so polling draining versions faster gains nothing).
	requeueIdle = time.Minute
	// requeueClaimed: another TWD holds the worker deployment; its
	// deletion or rename wakes this one (a watch), so this is a fallback.
	requeueClaimed = time.Minute
	// requeueAdoption: the migrate command removes the pending annotation,
	// which wakes the TWD (a watch); this is a fallback.
	requeueAdoption = time.Minute
)

// TemporalOutageBound: reads of a worker deployment that fail, other than
// by throttling, for longer than this are an outage and the rollout is
// blocked (TemporalStateFetchFailed, which kstatus reads as Failed);
// before, it waits (WaitingForTemporal). Temporal refuses reads for a few
// seconds after each routing change, and a restarting frontend is back in
// seconds: neither may fail a CD pipeline.
const TemporalOutageBound = time.Minute

// propagationDue: an accepted routing change usually reaches every
// partition within this long; later the look backs off.
const propagationDue = 2 * time.Second

// taskQueuesDue: a registered version's other task queue types arrive
// within this long; later, they are not about to.
const taskQueuesDue = 10 * time.Second

// pollersDue: workers usually poll within this long of their Deployment
// becoming available. Until then a target waiting for them is looked at
// every requeueTaskQueues, so that it is routed to soon after they poll;
// later the look backs off, so a worker that never polls costs few reads.
const pollersDue = 10 * time.Second

// backoff paces a wait on Temporal that began at since: every second at
// first, then a quarter of the time waited, at most requeueIdle.
func backoff(v *view, since time.Time) time.Duration {
	if since.IsZero() {
		return requeueTemporal
	}
	return min(requeueIdle, max(requeueTemporal, v.now().Sub(since)/4))
}

// waitFor records that the plan waits on a person's change in Temporal.
func (p *plan) waitFor(w PersonWait) {
	p.res.WaitsFor = w
	p.after(requeuePerson)
}

// afterDeadline asks to reconcile exactly at t, if it is in the future.
func (p *plan) afterDeadline(now, t time.Time) {
	if t.After(now) {
		p.after(t.Sub(now))
	}
}

// requeueAfter is the soonest requested requeue, at most requeueIdle.
func (p *plan) requeueAfter() time.Duration {
	d := requeueIdle
	for _, c := range p.requeue {
		if c > 0 && c < d {
			d = c
		}
	}
	return d
}

// PersonWait is what a person must change in Temporal for a plan to move.
type PersonWait string

const (
	// WaitRouting: a routing change (a Manual promotion, undoing someone
	// else's change); the namespace's worker deployment list shows it.
	WaitRouting PersonWait = "Routing"
	// WaitManager: the manager role handed back; only a describe shows
	// it, and a new run of the worker deployment's workflow hints at it.
	WaitManager PersonWait = "Manager"
)
