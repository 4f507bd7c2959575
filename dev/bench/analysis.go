package main

import (
	"context"
	"flag"
	"fmt"
	"math"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.temporal.io/sdk/client"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/dev/demoworker"
)

var (
	analysisTWDs = flag.Int("analysis-twds", envInt("BENCH_ANALYSIS_TWDS", 10),
		"Progressive TWDs with every built-in analysis check, rolled out at once (env BENCH_ANALYSIS_TWDS); 0 skips the phase")
	analysisInterval = flag.Duration("analysis-interval", envDuration("BENCH_ANALYSIS_INTERVAL", 10*time.Second),
		"spec.rollout.analysis.interval of the analysis phase (env BENCH_ANALYSIS_INTERVAL)")
	analysisPause = flag.Duration("analysis-pause", envDuration("BENCH_ANALYSIS_PAUSE", 30*time.Second),
		"the pause of each of the analysis phase's two steps, 25% and 75% (env BENCH_ANALYSIS_PAUSE)")
	analysisLoad = flag.Float64("analysis-load", envFloat("BENCH_ANALYSIS_LOAD", 5),
		"Hello workflows the benchmark starts per second during the analysis phase, spread over the TWDs in turn (env BENCH_ANALYSIS_LOAD)")
	analysisBaseline = flag.Bool("analysis-baseline", os.Getenv("BENCH_ANALYSIS_BASELINE") == "true",
		"run the analysis phase's rollouts without spec.rollout.analysis, for the reads a Progressive rollout makes anyway (env BENCH_ANALYSIS_BASELINE=true)")
	analysisTimeout = flag.Duration("analysis-timeout", envDuration("BENCH_ANALYSIS_TIMEOUT", 30*time.Minute),
		"how long the analysis phase waits for the rollouts; the figures are reported either way (env BENCH_ANALYSIS_TIMEOUT)")
)

// The controller's read budget (internal/controller/workerdeployment/analysis.go)
// and Temporal's visibility limit per namespace and frontend, defaults of
// server v1.32.1 (common/dynamicconfig/constants.go:
// frontend.namespaceRPS.visibility 10, frontend.namespaceBurstRatio.visibility 1).
const (
	budgetRPS, budgetBurst               = 5, 4
	temporalVisibilityRPS, temporalBurst = 10, 10
)

var analysisSteps = []int32{25, 75}

// AnalysisRun is the analysis phase: N Progressive TWDs with every built-in
// check, all rolling out a new version at once under a Hello load.
type AnalysisRun struct {
	TWDs int `json:"twds"`
	// Baseline: the same rollouts without spec.rollout.analysis.
	Baseline        bool     `json:"baseline,omitempty"`
	Steps           []int32  `json:"steps"`
	PauseSeconds    float64  `json:"pauseSeconds"`
	IntervalSeconds float64  `json:"intervalSeconds"`
	Checks          []string `json:"checks"`
	// LoadPerSecond is the Hello workflows started per second over all
	// TWDs; HelloStarted those started during the phase.
	LoadPerSecond float64 `json:"loadPerSecond"`
	HelloStarted  int64   `json:"helloStarted"`
	HelloErrors   int64   `json:"helloStartErrors"`
	// Completed TWDs were Ready with the new version current before the
	// timeout; RolloutSeconds is from the first spec change to the last
	// of them (or to the timeout).
	Completed      int     `json:"completed"`
	Aborted        int     `json:"aborted"`
	TimedOut       bool    `json:"timedOut"`
	RolloutSeconds float64 `json:"rolloutSeconds"`
	// PerTWD is each TWD's spec change to Ready; FloorSeconds what the
	// pauses alone take.
	PerTWD       Stats   `json:"perTWDSeconds"`
	FloorSeconds float64 `json:"floorSeconds"`
	// StepSeconds is how long each step ramped (its ramp first seen in
	// status to the next one, or to Ready), StepHold that minus the pause.
	StepSeconds Stats `json:"stepSeconds"`
	StepHold    Stats `json:"stepHoldSeconds"`
	// Evaluations seen in status (a new status.analysis.evaluatedAt):
	// all of them, those inconclusive because the namespace's read
	// budget was spent, those holding for minSamples, those where every
	// check passed.
	Evaluations       int `json:"evaluations"`
	BudgetEvaluations int `json:"budgetSpentEvaluations"`
	SampleEvaluations int `json:"minSamplesEvaluations"`
	// ThrottledEvaluations had a read Temporal refused (ResourceExhausted).
	ThrottledEvaluations int `json:"throttledEvaluations"`
	PassedEvaluations    int `json:"passedEvaluations"`
	// CheckEvaluations is rainbow_analysis_evaluations_total by result
	// over the phase (one per check per evaluation).
	CheckEvaluations map[string]float64 `json:"checkEvaluationsByResult"`
	// Deferrals is rainbow_analysis_deferrals_total by wait over the
	// phase: passes whose due evaluation the controller's budget deferred.
	Deferrals map[string]float64 `json:"deferralsByWait,omitempty"`
	// Counts and DescribeVersions are the controller's
	// CountWorkflowExecutions and DescribeWorkerDeploymentVersion calls
	// over the phase; ServerCounts the dev server's count of the former.
	Counts           float64 `json:"countWorkflowExecutions"`
	ServerCounts     float64 `json:"serverCountWorkflowExecutions"`
	DescribeVersions float64 `json:"describeWorkerDeploymentVersion"`
	CountsPerStep    float64 `json:"countsPerTWDPerStep"`
	// DescribesPerMinute is DescribeWorkerDeploymentVersion per TWD per
	// minute of the rollouts: with the baseline, what the analysis adds.
	DescribesPerMinute float64 `json:"describesPerTWDPerMinute"`
	DescribesPerStep   float64 `json:"describesPerTWDPerStep"`
	CountsPerRead      float64 `json:"countsPerEvaluationThatRead"`
	// The namespace-wide rate of visibility counts from 1 s samples of
	// the controller's counter: the highest over one sample, over any 10 s,
	// and the mean over the rollouts.
	CountRatePeak1s  float64 `json:"countRatePeak1s"`
	CountRatePeak10s float64 `json:"countRatePeak10s"`
	CountRateMean    float64 `json:"countRateMean"`
	// CountErrors are failed counts by gRPC code (ResourceExhausted would
	// be Temporal's own limit).
	CountErrors map[string]float64 `json:"countErrors,omitempty"`
	// LoadAverage is the machine's at the first image change and at the end.
	LoadAverage [2]string   `json:"loadAverage"`
	Samples     []rpcSample `json:"samples"`
	Window      Window      `json:"window"`
}

// rpcSample is the controller's counters at one moment of the phase.
type rpcSample struct {
	Seconds   float64 `json:"seconds"` // since the first spec change
	Counts    float64 `json:"counts"`
	Describes float64 `json:"describes"`
}

func analysisTWD(e *benchEnv, ns, name, tag string, pause, interval time.Duration) *v1alpha1.TemporalWorkerDeployment {
	var steps []v1alpha1.RolloutStep
	for _, p := range analysisSteps {
		steps = append(steps, v1alpha1.RolloutStep{RampPercentage: p, PauseDuration: metav1.Duration{Duration: pause}})
	}
	if *analysisBaseline {
		return newTWD(e, ns, name, tag, v1alpha1.RolloutSpec{Strategy: v1alpha1.StrategyProgressive, Steps: steps})
	}
	return newTWD(e, ns, name, tag, v1alpha1.RolloutSpec{
		Strategy: v1alpha1.StrategyProgressive,
		Steps:    steps,
		Analysis: &v1alpha1.AnalysisSpec{
			Interval: &metav1.Duration{Duration: interval},
			Checks: []v1alpha1.AnalysisCheck{
				{Name: "failures", Kind: v1alpha1.CheckWorkflowFailureRate, MaxPercent: ptr.To[int32](10), MinSamples: 3, FailureLimit: 2},
				{Name: "vs-current", Kind: v1alpha1.CheckWorkflowFailureRate, Compare: v1alpha1.CompareCurrent, MarginPercent: ptr.To[int32](10), MinSamples: 3, FailureLimit: 2},
				{Name: "stuck", Kind: v1alpha1.CheckWorkflowTaskFailures, MaxPercent: ptr.To[int32](0), MinSamples: 3, FailureLimit: 2},
				{Name: "backlog", Kind: v1alpha1.CheckBacklogAge, MaxAge: &metav1.Duration{Duration: 5 * time.Minute}, FailureLimit: 2},
			},
		},
	})
}

// analysisPhase creates n Progressive TWDs with every built-in check,
// starts Hello workflows on their task queues, changes every image at
// once and follows the rollouts, sampling the controller's Temporal calls
// every second.
func analysisPhase(ctx context.Context, e *benchEnv, o *observer, ns string, n int) (AnalysisRun, error) {
	r := AnalysisRun{TWDs: n, Baseline: *analysisBaseline, Steps: analysisSteps, PauseSeconds: analysisPause.Seconds(), IntervalSeconds: analysisInterval.Seconds(),
		Checks:        []string{"WorkflowFailureRate maxPercent", "WorkflowFailureRate compare: Current", "WorkflowTaskFailures maxPercent 0", "BacklogAge"},
		LoadPerSecond: *analysisLoad, FloorSeconds: float64(len(analysisSteps)) * analysisPause.Seconds()}
	if err := createNamespace(ctx, e, ns); err != nil {
		return r, err
	}
	keys := make([]types.NamespacedName, n)
	changes := make([]change, n)
	start := time.Now()
	for i := range keys {
		keys[i] = types.NamespacedName{Namespace: ns, Name: fmt.Sprintf("a%03d", i)}
		var err error
		if changes[i], err = create(ctx, e, analysisTWD(e, ns, keys[i].Name, "x1", *analysisPause, *analysisInterval)); err != nil {
			return r, err
		}
	}
	if _, err := waitAllReady(ctx, o, keys, changes, generous(n)); err != nil {
		return r, err
	}
	fmt.Printf("  %d TWDs Ready in %.1fs; starting %.0f Hello workflows a second\n", n, time.Since(start).Seconds(), *analysisLoad)

	loadCtx, stopLoad := context.WithCancel(ctx)
	var started, failed atomic.Int64
	loadDone := helloLoad(loadCtx, e, keys, *analysisLoad, &started, &failed)
	defer func() { stopLoad(); <-loadDone }()
	// Some workflows on the current version before the ramps start.
	time.Sleep(10 * time.Second)

	a, err := e.snapshot()
	if err != nil {
		return r, err
	}
	startedBefore, failedBefore := started.Load(), failed.Load()
	r.LoadAverage[0] = loadAverage()
	first := time.Now()
	for i, k := range keys {
		if changes[i], err = setTag(ctx, e, k, "x2"); err != nil {
			return r, err
		}
	}
	fmt.Printf("  %d images changed in %.1fs; following the rollouts (at most %s)\n", n, time.Since(first).Seconds(), *analysisTimeout)
	sampleCtx, stopSampling := context.WithCancel(ctx)
	samplesDone := make(chan []rpcSample)
	go func() { samplesDone <- sampleRPCs(sampleCtx, e, first) }()

	// Done when every TWD is Ready with the new version or aborted; the
	// figures are computed also after the timeout or an interruption.
	var last time.Time
	waitErr := waitFor(ctx, *analysisTimeout, "every rollout Ready or aborted", func() bool {
		for i, k := range keys {
			if t, ok := o.readyAt(k, changes[i].generation); ok {
				if t.After(last) {
					last = t
				}
			} else if o.readyReason(k) != v1alpha1.ReasonRolloutAborted {
				return false
			}
		}
		return true
	}, nil)
	end := time.Now()
	stopSampling()
	r.Samples = <-samplesDone
	if waitErr != nil {
		r.TimedOut = true
		fmt.Printf("  not every rollout finished: %v\n", waitErr)
	} else if !last.IsZero() {
		end = last
	}
	b, err := e.snapshot()
	if err != nil {
		return r, err
	}
	r.LoadAverage[1] = loadAverage()
	r.HelloStarted, r.HelloErrors = started.Load()-startedBefore, failed.Load()-failedBefore
	r.RolloutSeconds = end.Sub(first).Seconds()
	r.Window = window(fmt.Sprintf("%d TWDs rolling out under analysis", n), a, b, n)

	var perTWD, steps, holds []float64
	for i, k := range keys {
		if o.readyReason(k) == v1alpha1.ReasonRolloutAborted {
			r.Aborted++
		}
		ready, ok := o.readyAt(k, changes[i].generation)
		if ok {
			r.Completed++
			perTWD = append(perTWD, ready.Sub(changes[i].at).Seconds())
		}
		evals, ramps := o.evaluations(k, changes[i].build)
		for j, p := range analysisSteps {
			from, ok := ramps[p]
			if !ok {
				continue
			}
			to, ok := ready, ok
			if j+1 < len(analysisSteps) {
				to, ok = ramps[analysisSteps[j+1]]
			}
			if ok {
				d := to.Sub(from).Seconds()
				steps, holds = append(steps, d), append(holds, d-analysisPause.Seconds())
			}
		}
		for _, ev := range evals {
			r.Evaluations++
			switch {
			case ev.budget:
				r.BudgetEvaluations++
			case ev.throttled:
				r.ThrottledEvaluations++
			case ev.samples:
				r.SampleEvaluations++
			}
			if ev.results[v1alpha1.AnalysisPassed] == len(r.Checks) {
				r.PassedEvaluations++
			}
		}
	}
	r.PerTWD, r.StepSeconds, r.StepHold = stats(perTWD), stats(steps), stats(holds)
	r.CheckEvaluations = map[string]float64{}
	ea, eb := a.manager.by("rainbow_analysis_evaluations_total", "result", map[string]string{"namespace": ns}),
		b.manager.by("rainbow_analysis_evaluations_total", "result", map[string]string{"namespace": ns})
	for res, v := range eb {
		r.CheckEvaluations[res] = v - ea[res]
	}
	r.Deferrals = map[string]float64{}
	da, db := a.manager.by("rainbow_analysis_deferrals_total", "wait", map[string]string{"namespace": ns}),
		b.manager.by("rainbow_analysis_deferrals_total", "wait", map[string]string{"namespace": ns})
	for w, v := range db {
		r.Deferrals[w] = v - da[w]
	}
	r.Counts = r.Window.ControllerRPCs["CountWorkflowExecutions"]
	r.DescribeVersions = r.Window.ControllerRPCs["DescribeWorkerDeploymentVersion"]
	frontend := map[string]string{"service_name": "frontend", "operation": "CountWorkflowExecutions"}
	r.ServerCounts = b.server.sum(serverMetric, frontend) - a.server.sum(serverMetric, frontend)
	r.CountErrors = map[string]float64{}
	for k, v := range r.Window.ControllerRPCErrors {
		if len(k) > len("CountWorkflowExecutions ") && k[:len("CountWorkflowExecutions ")] == "CountWorkflowExecutions " {
			r.CountErrors[k[len("CountWorkflowExecutions "):]] = v
		}
	}
	judged := float64(n * len(analysisSteps))
	r.CountsPerStep, r.DescribesPerStep = r.Counts/judged, r.DescribeVersions/judged
	if read := r.Evaluations - r.BudgetEvaluations; read > 0 {
		r.CountsPerRead = r.Counts / float64(read)
	}
	if r.Window.Seconds > 0 {
		r.DescribesPerMinute = r.DescribeVersions / float64(n) / (r.Window.Seconds / 60)
	}
	r.CountRatePeak1s, r.CountRatePeak10s = peakRate(r.Samples, 0), peakRate(r.Samples, 10)
	if r.Window.Seconds > 0 {
		r.CountRateMean = r.Counts / r.Window.Seconds
	}
	if ctx.Err() != nil {
		return r, ctx.Err()
	}
	return r, nil
}

// helloLoad starts rate Hello workflows a second, one TWD's task queue
// after another, until ctx ends; at most 32 starts wait at once (a start
// that finds them all busy is counted as an error).
func helloLoad(ctx context.Context, e *benchEnv, keys []types.NamespacedName, rate float64, started, failed *atomic.Int64) <-chan struct{} {
	done := make(chan struct{})
	if rate <= 0 {
		close(done)
		return done
	}
	go func() {
		defer close(done)
		var wg sync.WaitGroup
		defer wg.Wait()
		sem := make(chan struct{}, 32)
		tick := time.NewTicker(time.Duration(float64(time.Second) / rate))
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			k := keys[i%len(keys)]
			select {
			case sem <- struct{}{}:
			default:
				failed.Add(1)
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				defer cancel()
				id := fmt.Sprintf("%s-hello-%d", k.Name, time.Now().UnixNano())
				if _, err := e.temporal.ExecuteWorkflow(sctx, client.StartWorkflowOptions{ID: id, TaskQueue: taskQueueOf(k.Namespace, k.Name)},
					demoworker.HelloWorkflow, "bench"); err != nil {
					if ctx.Err() == nil {
						failed.Add(1)
					}
					return
				}
				started.Add(1)
			}()
		}
	}()
	return done
}

// sampleRPCs reads the controller's counters of the analysis' Temporal
// calls every second until ctx ends.
func sampleRPCs(ctx context.Context, e *benchEnv, since time.Time) []rpcSample {
	var out []rpcSample
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		if sc, err := fetchOnce(e.metricsURL); err == nil {
			out = append(out, rpcSample{Seconds: time.Since(since).Seconds(),
				Counts:    sc.sum(rpcMetric, map[string]string{"method": "CountWorkflowExecutions"}),
				Describes: sc.sum(rpcMetric, map[string]string{"method": "DescribeWorkerDeploymentVersion"})})
		}
		select {
		case <-ctx.Done():
			return out
		case <-tick.C:
		}
	}
}

// peakRate is the highest rate of counts between two samples at least
// over seconds apart (0: consecutive samples).
func peakRate(s []rpcSample, over float64) float64 {
	peak := 0.0
	for i := range s {
		for j := i + 1; j < len(s); j++ {
			dt := s[j].Seconds - s[i].Seconds
			if dt <= 0 || dt < over {
				continue
			}
			peak = math.Max(peak, (s[j].Counts-s[i].Counts)/dt)
			break
		}
	}
	return peak
}

func analysisRows(r *AnalysisRun) []row {
	if r == nil {
		return nil
	}
	pct := func(k, of int) string {
		if of == 0 {
			return "0"
		}
		return fmt.Sprintf("%d (%.0f%%)", k, 100*float64(k)/float64(of))
	}
	done := fmt.Sprintf("all %d in %s", r.TWDs, secs(r.RolloutSeconds))
	if r.Completed < r.TWDs {
		done = fmt.Sprintf("%d of %d in %s (%d aborted by the analysis)", r.Completed, r.TWDs, secs(r.RolloutSeconds), r.Aborted)
	}
	if r.TimedOut {
		done += ", then the benchmark stopped waiting"
	}
	demand := float64(r.TWDs) * 4 / r.IntervalSeconds
	if r.Baseline {
		return []row{{Figure: fmt.Sprintf("%d Progressive rollouts without analysis (baseline)", r.TWDs),
			Value: fmt.Sprintf("%s; each TWD median %s, p95 %s; steps beyond their pause median %s, p95 %s, max %s; "+
				"%.1f DescribeWorkerDeploymentVersion per TWD per step, %.2f per TWD per minute; %.0f CountWorkflowExecutions",
				done, secs(r.PerTWD.Median), secs(r.PerTWD.P95), secs(r.StepHold.Median), secs(r.StepHold.P95), secs(r.StepHold.Max),
				r.DescribesPerStep, r.DescribesPerMinute, r.Counts),
			How: "the analysis phase's rollouts with -analysis-baseline: the same steps and load, no spec.rollout.analysis; the reads a Progressive rollout makes anyway."}}
	}
	return []row{
		{Figure: fmt.Sprintf("Analysis reads per TWD per judged step (%d TWDs)", r.TWDs),
			Value: fmt.Sprintf("%.1f CountWorkflowExecutions, %.1f DescribeWorkerDeploymentVersion (%.2f per TWD per minute); %.2f counts per evaluation that read",
				r.CountsPerStep, r.DescribesPerStep, r.DescribesPerMinute, r.CountsPerRead),
			How: fmt.Sprintf("the controller's rainbow_temporal_rpcs_total over the phase (server: %g CountWorkflowExecutions, controller %g) divided by TWDs and "+
				"steps (%v%%, %s pauses, interval %s, every built-in check: %v); the describes are all the rollout's, not only the analysis'. "+
				"Per evaluation: counts over the evaluations status showed that were not refused by the read budget.",
				r.ServerCounts, r.Counts, r.Steps, secs(r.PauseSeconds), secs(r.IntervalSeconds), r.Checks)},
		{Figure: fmt.Sprintf("Visibility counts per second in the namespace, %d ramping at once", r.TWDs),
			Value: fmt.Sprintf("peak %.1f (1 s) / %.1f (10 s), mean %.2f; the TWDs would ask %.1f/s; failed %s",
				r.CountRatePeak1s, r.CountRatePeak10s, r.CountRateMean, demand, failedCounts(r.CountErrors)),
			How: fmt.Sprintf("1 s samples of the controller's CountWorkflowExecutions counter from the first image change to the last Ready. "+
				"Against the controller's budget of %d/s (burst %d; --analysis-visibility-rps) per Temporal namespace and Temporal's frontend.namespaceRPS.visibility, "+
				"default %d/s per frontend with burst ratio 1 (server v1.32.1 common/dynamicconfig/constants.go). "+
				"'Would ask' is %d TWDs x 4 counts per evaluation / interval.",
				budgetRPS, budgetBurst, temporalVisibilityRPS, r.TWDs)},
		{Figure: "Analysis evaluations, inconclusive for the read budget",
			Value: fmt.Sprintf("%s of %d; %s refused by Temporal (ResourceExhausted); %s held for minSamples; %s all checks passed; metric %s; deferred passes %s",
				pct(r.BudgetEvaluations, r.Evaluations), r.Evaluations, pct(r.ThrottledEvaluations, r.Evaluations),
				pct(r.SampleEvaluations, r.Evaluations), pct(r.PassedEvaluations, r.Evaluations),
				joinSorted(r.CheckEvaluations, func(k string, v float64) string { return k + " " + strconv.FormatFloat(v, 'f', 0, 64) }),
				failedCounts(r.Deferrals)),
			How: "each new status.analysis.evaluatedAt the watch saw; budget: a check's message names the read budget (before the budget deferred " +
				"evaluations instead of recording them); the metric is rainbow_analysis_evaluations_total by result (one per check per evaluation); " +
				"deferred passes are rainbow_analysis_deferrals_total by wait (Turn: a reservation, Spare: waiting for unreserved counts)."},
		{Figure: fmt.Sprintf("%d rollouts under analysis", r.TWDs),
			Value: fmt.Sprintf("%s (pauses alone %s); each TWD median %s, p95 %s; steps held beyond their pause median %s, p95 %s, max %s",
				done, secs(r.FloorSeconds), secs(r.PerTWD.Median), secs(r.PerTWD.P95), secs(r.StepHold.Median), secs(r.StepHold.P95), secs(r.StepHold.Max)),
			How: fmt.Sprintf("from the first image change to the last Ready=True with the new version current; a step lasts from its ramp first seen in "+
				"status to the next ramp (or Ready), minus its pause. %d Hello workflows started over the phase (%g/s over all TWDs, %d refused). "+
				"Load average %s at the first image change, %s at the end.",
				r.HelloStarted, r.LoadPerSecond, r.HelloErrors, r.LoadAverage[0], r.LoadAverage[1])},
	}
}

func failedCounts(m map[string]float64) string {
	if len(m) == 0 {
		return "none"
	}
	return joinSorted(m, func(k string, v float64) string { return fmt.Sprintf("%s %g", k, v) })
}

func envFloat(key string, def float64) float64 {
	if v, err := strconv.ParseFloat(os.Getenv(key), 64); err == nil {
		return v
	}
	return def
}
