package workerdeployment

import (
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
)

const (
	// maxThrottleBackoff caps the wait between reads Temporal throttled.
	maxThrottleBackoff = 30 * time.Second
	// throttleReportAfter: a throttle shorter than this (Temporal throttles
	// reads for a moment after each routing change) is not worth a status
	// write.
	throttleReportAfter = 5 * time.Second
	// throttleNote starts the sentence the status carries while throttled.
	throttleNote = "Temporal has throttled reads of this worker deployment since "
)

// throttles remembers, per TWD, since when Temporal has throttled its reads
// and how many times in a row, for the backoff and the status.
type throttles struct {
	mu sync.Mutex
	m  map[types.NamespacedName]throttle
}

type throttle struct {
	since    time.Time
	attempts int
}

// note records one more throttled read and returns the throttle so far.
func (t *throttles) note(key types.NamespacedName, now time.Time) throttle {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = map[types.NamespacedName]throttle{}
	}
	th, ok := t.m[key]
	if !ok {
		th.since = now
	}
	th.attempts++
	t.m[key] = th
	return th
}

func (t *throttles) clear(key types.NamespacedName) {
	t.mu.Lock()
	delete(t.m, key)
	t.mu.Unlock()
}

// throttleBackoff doubles base with every throttled read in a row, up to
// maxThrottleBackoff, and spreads it by ±20% (jitter in [0, 1)) so that
// TWDs throttled together do not retry together.
func throttleBackoff(base time.Duration, attempts int, jitter float64) time.Duration {
	d := base
	for i := 1; i < attempts && d < maxThrottleBackoff; i++ {
		d *= 2
	}
	d = min(d, maxThrottleBackoff)
	return time.Duration(float64(d) * (0.8 + 0.4*jitter))
}

func randomJitter() float64 { return rand.Float64() }

// throttleSince is the start of the note: since when, in whole seconds.
func throttleSince(th throttle) string {
	return throttleNote + th.since.UTC().Format(time.RFC3339)
}

// throttledStatus keeps the last status of a TWD whose spec it already
// acted on, and once the throttle lasts, says so in Progressing's message
// without changing its status or reason. The note stays the same for the
// whole throttle: a status write wakes the TWD again at once, so a note
// that changed with each refusal (a count, a countdown) would bypass the
// backoff and read Temporal in a hot loop.
func throttledStatus(old v1alpha1.TemporalWorkerDeploymentStatus, th throttle, now time.Time) v1alpha1.TemporalWorkerDeploymentStatus {
	st := *old.DeepCopy()
	lasted := now.Sub(th.since)
	if lasted < throttleReportAfter {
		return st
	}
	c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionProgressing)
	if c == nil {
		return st
	}
	base, _, _ := strings.Cut(c.Message, "; "+throttleNote)
	if strings.HasPrefix(c.Message, throttleNote) {
		base = ""
	}
	note := throttleSince(th) + "; the status above is the last known one, and reads are retried with backoff (at most " +
		maxThrottleBackoff.String() + " apart)"
	if base != "" {
		note = base + "; " + note
	}
	updated := *c
	updated.Message = note
	v1alpha1.SetCondition(&st.Conditions, metav1.Condition{Type: updated.Type, Status: updated.Status, Reason: updated.Reason,
		Message: updated.Message, ObservedGeneration: updated.ObservedGeneration})
	return st
}
