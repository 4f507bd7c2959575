package planner

import (
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"
)

// deadlineViolations: the progress deadline only changes what status says
// and, under abort, the target's own replicas. The plan past the deadline
// routes, scales down and deletes nothing the same plan without a deadline
// would not.
func deadlineViolations(in Input, r Result) []error {
	if in.Spec.ProgressDeadline <= 0 || in.Deletion != nil {
		return nil
	}
	without := in
	without.Spec.ProgressDeadline = 0
	o := Plan(without)
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if r.Routing != nil && !reflect.DeepEqual(r.Routing, o.Routing) {
		bad("the deadline made the plan route %+v (without it: %+v)", r.Routing, o.Routing)
	}
	if r.BecomeManager && !o.BecomeManager {
		bad("the deadline made the plan claim the manager role")
	}
	replicas := map[string]int32{}
	for _, d := range in.Deployments {
		if _, dup := replicas[d.Name]; !dup {
			replicas[d.Name] = d.Replicas
		}
	}
	for _, s := range r.Scale {
		if s.Replicas >= replicas[s.Name] || slices.Contains(o.Scale, s) {
			continue
		}
		if s.Reason != ScaleAbort || s.BuildID != in.Spec.TargetBuildID || !mayAbortTarget(in) {
			bad("the deadline made the plan scale %s down: %+v", s.Name, s)
		}
	}
	for _, d := range r.DeleteDeployments {
		if !slices.Contains(o.DeleteDeployments, d) {
			bad("the deadline made the plan delete Deployment %+v", d)
		}
	}
	for _, b := range r.DeleteTemporalVersions {
		if !slices.Contains(o.DeleteTemporalVersions, b) {
			bad("the deadline made the plan delete version %s from Temporal", b)
		}
	}
	return errs
}

// TestDeadlineSafetyRandom runs every invariant on generated inputs whose
// target's deadline passed long ago, abort asked for: the generator alone
// reaches the deadline rule rarely.
func TestDeadlineSafetyRandom(t *testing.T) {
	eachRandomInput(t, 977, 20000, func(in Input) []error {
		in.Spec.ProgressDeadline, in.Spec.ProgressDeadlineAbort, in.TargetSince = time.Minute, true, t0.Add(-time.Hour)
		in.Deletion, in.ClaimedBy = nil, nil
		return violations(in, Plan(in))
	})
}
