package demo

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
)

// The abort story (`make demo-abort`): the TemporalWorkerDeployment of
// AbortFile rolls out under analysis while Hello workflows keep starting;
// v2 passes every check and becomes current, then v3, whose workers fail a
// share of the workflows (the demo worker's DEMO_FAIL_SHARE), fails the
// WorkflowFailureRate check at the first step, and the controller aborts
// the rollout and routes every new workflow back to v2 on its own.

// AbortFile is the abort story's TemporalWorkerDeployment, in Options.Dir.
const AbortFile = "abort.yaml"

const failShareEnv = "DEMO_FAIL_SHARE"

// AbortResult is what the abort story saw.
type AbortResult struct {
	// First, Second and Bad are the three versions' build IDs.
	First, Second, Bad string
	// SecondRamps and BadRamps are the ramp percentages each was seen at.
	SecondRamps, BadRamps []int32
	// Evidence is status.analysis.aborted; Event the note of the Warning
	// Event AnalysisFailed.
	Evidence, Event string
	// Current and Ramping are Temporal's routing once the abort was seen.
	Current, Ramping string
	// After counts the Hello workflows started once routing was back, by
	// the build that ran them; failures under "".
	After      map[string]int
	Milestones []Milestone
}

// RunAbort tells the abort story with o (SecondTag, DrainHold, PinnedTick
// and OwnedFiles are not used); failShare is the share of Hello workflows
// the bad version fails (default 0.5).
func RunAbort(ctx context.Context, o Options, failShare float64) (*AbortResult, error) {
	if o.HelloEvery == 0 {
		o.HelloEvery = 250 * time.Millisecond // enough workflows for minSamples at the first step
	}
	if err := o.defaults(); err != nil {
		return nil, err
	}
	if failShare == 0 {
		failShare = 0.5
	}
	conn, twd, err := load(o, AbortFile)
	if err != nil {
		return nil, err
	}
	if twd.Spec.Rollout.Strategy != v1alpha1.StrategyProgressive || twd.Spec.Rollout.Analysis == nil || len(twd.Spec.Rollout.Steps) == 0 {
		return nil, fmt.Errorf("%s: the abort story needs a Progressive rollout with steps and spec.rollout.analysis", AbortFile)
	}
	s := newStory(o, twd)
	defer s.stopWorkflows()
	res := &AbortResult{}
	err = s.tellAbort(ctx, conn, twd, failShare, res)
	res.Milestones = s.res.Milestones
	if err != nil {
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
		return res, err
	}
	if o.Linger {
		_, err := s.wait(ctx, 0, "Ctrl-C", func(snapshot) (bool, string) { return false, "" })
		if ctx.Err() != nil {
			return res, nil
		}
		return res, err
	}
	return res, nil
}

func (s *story) tellAbort(ctx context.Context, conn *v1alpha1.TemporalConnection, twd *v1alpha1.TemporalWorkerDeployment, failShare float64, res *AbortResult) error {
	a := twd.Spec.Rollout.Analysis
	first := twd.Spec.Rollout.Steps[0].RampPercentage
	s.say("")
	s.say("The abort demo: TemporalWorkerDeployment %s/%s rolls out with the %s strategy (%s),", twd.Namespace, twd.Name, twd.Spec.Rollout.Strategy, describeRollout(twd))
	s.say("judged every %s by spec.rollout.analysis from Temporal's own records of the new version:", durationOr(a.Interval, "30s"))
	for _, c := range a.Checks {
		s.say("  check %s", describeCheck(c))
	}
	s.say("v2 is healthy and becomes current; v3's workers fail %.0f%% of their workflows (%s), and the analysis", failShare*100, failShareEnv)
	s.say("aborts it at the first step. \"analysis\" lines are each check's verdict with its evidence, as status.analysis has it.")

	v1, err := s.createFirst(ctx, conn, twd)
	if err != nil {
		return err
	}
	res.First = v1
	s.startHellos(ctx)
	s.say("starting a Hello workflow every %s: the analysis counts how they end on each version", s.o.HelloEvery)
	if _, err := s.sleep(ctx, s.o.Look); err != nil {
		return err
	}

	v2, err := s.rollOut(ctx, twd, v1, "v2", nil)
	if err != nil {
		return err
	}
	res.Second, res.SecondRamps = v2, s.rampsOf(v2)
	s.milestone(s.name(v2)+" current", "%s is current after ramping %s: every check passed at each step.", s.name(v2), percents(res.SecondRamps))

	bad := corev1.EnvVar{Name: failShareEnv, Value: fmt.Sprint(failShare)}
	v3, err := s.rollOut(ctx, twd, v2, "v3", &bad)
	if err != nil {
		return err
	}
	res.Bad = v3
	var total time.Duration
	for _, st := range twd.Spec.Rollout.Steps {
		total += st.PauseDuration.Duration
	}
	snap, err := s.wait(ctx, 2*time.Minute+total, "the analysis to abort the rollout of "+s.name(v3), func(sn snapshot) (bool, string) {
		if sn.target() != v3 || sn.twd.Status.Analysis == nil || sn.twd.Status.Analysis.BuildID != v3 {
			return false, ""
		}
		c := meta.FindStatusCondition(sn.twd.Status.Conditions, v1alpha1.ConditionReady)
		return c != nil && c.Reason == v1alpha1.ReasonRolloutAborted && sn.twd.Status.Analysis.Aborted != "", ""
	})
	if err != nil {
		return err
	}
	st := snap.twd.Status.Analysis
	res.Evidence, res.BadRamps = st.Aborted, s.rampsOf(v3)
	at := "before any ramp was seen"
	if len(res.BadRamps) > 0 {
		at = fmt.Sprintf("at its %d%% step", res.BadRamps[len(res.BadRamps)-1])
	}
	s.milestone(s.name(v3)+" aborted "+at, "The analysis aborted the rollout of %s %s (the first step is %d%%).", s.name(v3), at, first)
	s.say("evidence  %s", s.shorten(st.Aborted))
	if st.WindowStart != nil {
		s.say("window    workflows started on %s since %s, when it started ramping (evaluated %s)", s.name(v3),
			st.WindowStart.UTC().Format(time.RFC3339), st.EvaluatedAt.UTC().Format(time.RFC3339))
	}
	s.say("status    Ready %s: %s", v1alpha1.ReasonRolloutAborted, s.shorten(meta.FindStatusCondition(snap.twd.Status.Conditions, v1alpha1.ConditionReady).Message))
	if _, err := s.wait(ctx, time.Minute, "the Warning Event "+v1alpha1.ReasonAnalysisFailed, func(snapshot) (bool, string) {
		return len(s.aborts) > 0, ""
	}); err != nil {
		return err
	}
	res.Event = s.aborts[len(s.aborts)-1]

	// Temporal's own routing, not only the status: the ramp is gone.
	routed, err := s.wait(ctx, time.Minute, "Temporal to route every new workflow to "+s.name(v2), func(snapshot) (bool, string) {
		resp, err := s.o.Temporal.WorkflowService().DescribeWorkerDeployment(ctx, &workflowservice.DescribeWorkerDeploymentRequest{
			Namespace: twd.Spec.WorkerOptions.TemporalNamespace, DeploymentName: twd.WorkerDeploymentName(),
		})
		if err != nil {
			return false, err.Error()
		}
		rc := resp.GetWorkerDeploymentInfo().GetRoutingConfig()
		res.Current, res.Ramping = rc.GetCurrentDeploymentVersion().GetBuildId(), rc.GetRampingDeploymentVersion().GetBuildId()
		return res.Current == v2 && res.Ramping == "", fmt.Sprintf("Temporal: current %q, ramping %q", res.Current, res.Ramping)
	})
	if err != nil {
		return err
	}
	s.milestone("traffic back on "+s.name(v2), "Temporal routes every new workflow to %s again: its routing has %s current and no ramp. %s keeps its pods (%s) for the workflows pinned to it.",
		s.name(v2), s.name(res.Current), s.name(v3), routed.pods(v3))

	s.hellos.markAfter()
	s.say("counting the Hello workflows started from now on")
	if _, err := s.wait(ctx, 6*trafficWindow, "Hello workflows to finish after the abort", func(snapshot) (bool, string) {
		n := 0
		for _, c := range s.hellos.counted() {
			n += c
		}
		return n >= 10, fmt.Sprintf("%d finished", n)
	}); err != nil {
		return err
	}
	res.After = s.hellos.counted()
	var parts []string
	for b, n := range res.After {
		if b == "" {
			parts = append(parts, fmt.Sprintf("failed ×%d", n))
		} else {
			parts = append(parts, fmt.Sprintf("%s ×%d", s.name(b), n))
		}
	}
	sort.Strings(parts)
	s.say("traffic  Hello workflows started since routing went back: %s", strings.Join(parts, " · "))
	if res.After[v3] > 0 || res.After[""] > 0 {
		return errors.New("Hello workflows started after the abort still ran on " + s.name(v3) + " or failed")
	}

	out := s.timeline()
	out("What now? The rollout of %s stays aborted (annotation %s) until you act:", s.name(v3), v1alpha1.AnnotationAbortRollout)
	if s.o.Kubeconfig != "" {
		out("  export KUBECONFIG=%s", s.o.Kubeconfig)
	}
	out("  .cache/bin/kubectl-rainbow -n %s retry %s   # ramp %s again from the first step, judged afresh (it fails again)", s.key.Namespace, s.key.Name, s.name(v3))
	out("  .cache/bin/kubectl-rainbow -n %s undo %s    # spec.template back to %s's (without %s)", s.key.Namespace, s.key.Name, s.name(v2), failShareEnv)
	out("  .cache/bin/kubectl-rainbow -n %s status %s --watch", s.key.Namespace, s.key.Name)
	out("docs/analysis.md explains the checks; kubectl get twd %s -o yaml shows status.analysis.", s.key.Name)
	if s.o.TemporalUI != "" {
		out("Temporal UI: %s/namespaces/%s/workflows (v3's failed Hello workflows say %q)", strings.TrimRight(s.o.TemporalUI, "/"), s.o.TemporalNamespace, "demo failure")
	}
	if s.o.Linger {
		out("")
		out("Everything keeps running, and Hello workflows keep starting. Press Ctrl-C to stop everything.")
		out("")
	}
	return nil
}

func describeCheck(c v1alpha1.AnalysisCheck) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s (%s)", c.Name, c.Kind)
	switch {
	case c.MaxPercent != nil:
		fmt.Fprintf(&b, ": at most %d%% of the workflows closed on the new version may fail", *c.MaxPercent)
	case c.Compare != "":
		fmt.Fprintf(&b, ": no worse than the %s version", c.Compare)
	case c.MaxAge != nil:
		fmt.Fprintf(&b, ": no task waits longer than %s", c.MaxAge.Duration)
	}
	if c.Kind == v1alpha1.CheckWorkflowFailureRate {
		fmt.Fprintf(&b, ", decided on at least %d of them", c.MinSamples)
	}
	fmt.Fprintf(&b, "; %d failed evaluation(s) in a row abort", c.FailureLimit+1)
	return b.String()
}
