package workerdeployment

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
)

func TestThrottleBackoffDoublesWithJitterUpToACap(t *testing.T) {
	cases := []struct {
		base     time.Duration
		attempts int
		jitter   float64
		want     time.Duration
	}{
		{200 * time.Millisecond, 1, 0.5, 200 * time.Millisecond},
		{200 * time.Millisecond, 2, 0.5, 400 * time.Millisecond},
		{200 * time.Millisecond, 5, 0.5, 3200 * time.Millisecond},
		{time.Second, 6, 0.5, 30 * time.Second},
		{time.Second, 60, 0.5, 30 * time.Second},
		{time.Second, 1, 0, 800 * time.Millisecond},
		{time.Second, 1, 0.999999, 1200 * time.Millisecond},
		{time.Second, 60, 0.999999, 36 * time.Second},
	}
	for _, c := range cases {
		if got := throttleBackoff(c.base, c.attempts, c.jitter).Round(time.Millisecond); got != c.want {
			t.Errorf("throttleBackoff(%s, %d, %v) = %s, want %s", c.base, c.attempts, c.jitter, got, c.want)
		}
	}
}

func TestThrottledStatusKeepsTheLastStatusAndSaysSinceWhen(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	old := v1alpha1.TemporalWorkerDeploymentStatus{
		ObservedGeneration: 3,
		CurrentVersion:     &v1alpha1.WorkerVersion{BuildID: "v2", Status: v1alpha1.VersionCurrent},
		Conditions: []metav1.Condition{
			{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonRolloutComplete, Message: "version v2 is current", ObservedGeneration: 3},
			{Type: v1alpha1.ConditionProgressing, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonRolloutComplete, Message: "version v2 is current", ObservedGeneration: 3},
		},
	}
	brief := throttledStatus(old, throttle{since: now.Add(-time.Second), attempts: 2}, now)
	if c := meta.FindStatusCondition(brief.Conditions, v1alpha1.ConditionProgressing); c.Message != "version v2 is current" {
		t.Fatalf("a brief throttle changed the message: %q", c.Message)
	}

	long := throttledStatus(old, throttle{since: now.Add(-90 * time.Second), attempts: 7}, now)
	c := meta.FindStatusCondition(long.Conditions, v1alpha1.ConditionProgressing)
	if c.Status != metav1.ConditionFalse || c.Reason != v1alpha1.ReasonRolloutComplete || c.ObservedGeneration != 3 {
		t.Fatalf("the throttle changed Progressing's status or reason: %+v", c)
	}
	for _, want := range []string{"version v2 is current; ", "throttled reads of this worker deployment since 2026-01-01T11:58:30Z", "retried with backoff"} {
		if !strings.Contains(c.Message, want) {
			t.Errorf("message %q lacks %q", c.Message, want)
		}
	}
	if r := meta.FindStatusCondition(long.Conditions, v1alpha1.ConditionReady); r.Message != "version v2 is current" || r.Status != metav1.ConditionTrue {
		t.Errorf("Ready changed: %+v", r)
	}
	if long.CurrentVersion == nil || long.CurrentVersion.BuildID != "v2" {
		t.Errorf("the versions were not kept: %+v", long)
	}
	// Later passes of the same throttle leave status as it is: a status
	// write wakes the TWD at once, so a note that changed with each refused
	// read would read Temporal in a hot loop, past the backoff (found by the
	// chaos test TestTemporalResourceExhausted: 16 reads a second).
	again := throttledStatus(long, throttle{since: now.Add(-90 * time.Second), attempts: 8}, now.Add(30*time.Second))
	if !equality.Semantic.DeepEqual(again, long) {
		t.Errorf("a later pass of the same throttle changed status:\n%+v\n%+v", long.Conditions, again.Conditions)
	}
	if m := meta.FindStatusCondition(again.Conditions, v1alpha1.ConditionProgressing).Message; strings.Count(m, throttleNote) != 1 {
		t.Errorf("second note: %q", m)
	}
}
