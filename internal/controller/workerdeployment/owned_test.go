package workerdeployment

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/internal/planner"
)

// TestOwnedStatus: each version's entry says how its copy went, the Ready
// condition sums them up, and a copy that could not be deleted stays on
// record so that the next pass deletes it.
func TestOwnedStatus(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	earlier := &metav1.Time{Time: now.Add(-time.Minute)}
	hpa := func(b string) planner.OwnedCopy {
		return planner.OwnedCopy{BuildID: b, APIVersion: "autoscaling/v2", Kind: "HorizontalPodAutoscaler", Name: "hpa-" + b, Generation: 2, Hash: "h"}
	}
	old := v1alpha1.TemporalWorkerOwnedResourceStatus{Versions: []v1alpha1.OwnedResourceVersion{
		{BuildID: "v0", Applied: true, APIVersion: "policy/v1", Kind: "PodDisruptionBudget", ResourceName: "pdb-v0", Generation: 1, AppliedAt: earlier},
		{BuildID: "v1", Applied: true, APIVersion: "autoscaling/v2", Kind: "HorizontalPodAutoscaler", ResourceName: "hpa-v1", Generation: 2, Hash: "h", AppliedAt: earlier},
	}}
	unchanged := hpa("v1")
	unchanged.Applied = true
	gone := planner.OwnedCopy{BuildID: "v0", APIVersion: "policy/v1", Kind: "PodDisruptionBudget", Name: "pdb-v0", Applied: true, Generation: 1}
	plan := planner.OwnedResourceStatus{Name: "hpa", Generation: 2, Versions: []planner.OwnedVersion{
		{Copy: gone, Deleting: true},
		{Copy: unchanged},
		{Copy: hpa("v2")},
		{Copy: hpa("v3")},
		{Copy: planner.OwnedCopy{BuildID: "v4"}, Error: "spec.x: template: boom"},
	}}

	t.Run("all well", func(t *testing.T) {
		out := &ownedOutcome{applied: map[string]bool{"v2": true, "v3": true}}
		plan := plan
		plan.Versions = plan.Versions[:4]
		st := ownedStatus(old, plan, out, now)
		if got := buildsOf(st); got != "v1 v2 v3" {
			t.Fatalf("versions %s, want v1 v2 v3 (v0's copy deleted)", got)
		}
		if st.Versions[0].AppliedAt != earlier || !st.Versions[1].AppliedAt.Time.Equal(now) || !st.Versions[1].Applied {
			t.Errorf("versions %+v: want v1 as applied before, v2 applied now", st.Versions)
		}
		c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionReady)
		if c.Status != metav1.ConditionTrue || c.Reason != v1alpha1.ReasonApplied || !strings.Contains(c.Message, "3 version(s): v1, v2, v3") || c.ObservedGeneration != 2 {
			t.Errorf("Ready = %+v", c)
		}
	})
	t.Run("failures are per version", func(t *testing.T) {
		out := &ownedOutcome{
			applied:   map[string]bool{"v2": true},
			applyErr:  map[string]error{"v3": errors.New("forbidden")},
			deleteErr: map[string]error{"v0": errors.New("the server is on fire")},
		}
		st := ownedStatus(old, plan, out, now)
		if got := buildsOf(st); got != "v0 v1 v2 v3 v4" {
			t.Fatalf("versions %s, want v0 kept (its delete failed) and v1 to v4", got)
		}
		v0, v3, v4 := st.Versions[0], st.Versions[3], st.Versions[4]
		if v0.ResourceName != "pdb-v0" || v0.Applied || v0.Message != "the server is on fire" {
			t.Errorf("v0 = %+v, want the PDB still recorded with the error", v0)
		}
		if v3.Applied || v3.Message != "forbidden" || v3.ResourceName != "hpa-v3" {
			t.Errorf("v3 = %+v, want the failed apply", v3)
		}
		if v4.Applied || !strings.Contains(v4.Message, "template") {
			t.Errorf("v4 = %+v, want the template error", v4)
		}
		c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionReady)
		if c.Status != metav1.ConditionFalse || c.Reason != v1alpha1.ReasonApplyFailed {
			t.Fatalf("Ready = %+v", c)
		}
		for _, want := range []string{"3 problem(s)", "v0: the server is on fire", "v3: forbidden", "v4: spec.x: template: boom"} {
			if !strings.Contains(c.Message, want) {
				t.Errorf("Ready message %q lacks %q", c.Message, want)
			}
		}
	})
	t.Run("huge errors are bounded", func(t *testing.T) {
		huge := strings.Repeat("é", 30000)
		out := &ownedOutcome{applied: map[string]bool{"v2": true}, applyErr: map[string]error{"v3": errors.New(huge)},
			deleteErr: map[string]error{"v0": errors.New(huge)}}
		plan := plan
		plan.Versions = append(slices.Clone(plan.Versions[:4]), planner.OwnedVersion{Copy: planner.OwnedCopy{BuildID: "v4"}, Error: huge})
		for i := 5; i < 20; i++ {
			plan.Versions = append(plan.Versions, planner.OwnedVersion{Copy: planner.OwnedCopy{BuildID: fmt.Sprint("v", i)}, Error: huge})
		}
		st := ownedStatus(old, plan, out, now)
		for _, v := range st.Versions {
			if len(v.Message) > v1alpha1.MaxVersionMessage || !utf8.ValidString(v.Message) {
				t.Errorf("%s: message of %d bytes (valid UTF-8: %v)", v.BuildID, len(v.Message), utf8.ValidString(v.Message))
			}
		}
		c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionReady)
		if len(c.Message) > v1alpha1.MaxConditionMessage || !strings.HasPrefix(c.Message, "18 problem(s): v0: éé") || !strings.Contains(c.Message, "more bytes)") {
			t.Errorf("Ready message of %d bytes: %.60q ... %q", len(c.Message), c.Message, c.Message[len(c.Message)-40:])
		}
		if got := buildsOf(st); !strings.HasPrefix(got, "v0 v1 v2 v3 v4 v5") {
			t.Errorf("versions %s: every copy stays on record", got)
		}
	})
	t.Run("no version yet", func(t *testing.T) {
		st := ownedStatus(v1alpha1.TemporalWorkerOwnedResourceStatus{}, planner.OwnedResourceStatus{Name: "hpa", Generation: 1}, nil, now)
		c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionReady)
		if c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, "no version") {
			t.Errorf("Ready = %+v", c)
		}
	})
}

func buildsOf(st v1alpha1.TemporalWorkerOwnedResourceStatus) string {
	var bs []string
	for _, v := range st.Versions {
		bs = append(bs, v.BuildID)
	}
	return strings.Join(bs, " ")
}

func TestFieldManager(t *testing.T) {
	if got := FieldManager("hpa"); got != "rainbow/hpa" {
		t.Errorf("FieldManager(hpa) = %q", got)
	}
	long := strings.Repeat("x", 253)
	a, b := FieldManager(long), FieldManager(long[:252]+"y")
	if len(a) > 128 || len(b) > 128 || a == b {
		t.Errorf("long names: %q (%d), %q (%d): want distinct, at most 128", a, len(a), b, len(b))
	}
}
