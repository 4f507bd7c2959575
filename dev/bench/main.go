// Command bench measures Rainbow against the real local environment
// (control plane, Temporal dev server, demo-worker processes) with the
// controller running as its own process: how fast it reacts during
// rollouts, how much it reads from Temporal, and what N TWDs cost. It
// prints a table and writes the figures as JSON under .cache/bench/. It
// fails only when it cannot measure; targets are reported as PASS or MISS.
//
// Run it with `make bench`; docs/performance.md explains every figure.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/rainbow-deploy/rainbow/test/harness"
)

type config struct {
	// N is the largest fleet of the scale phase, Ns every step of it.
	N                   int           `json:"n"`
	Ns                  []int         `json:"ns"`
	Rollouts            int           `json:"rollouts"`
	ProgressiveRollouts int           `json:"progressiveRollouts"`
	Steps               []int32       `json:"steps"`
	Pause               time.Duration `json:"pauseNanoseconds"`
	Idle                time.Duration `json:"idleNanoseconds"`
	Out                 string        `json:"-"`
	Manager             string        `json:"manager,omitempty"`
	ScaleRollout        bool          `json:"scaleRollout"`
	Waiting             time.Duration `json:"waitingNanoseconds"`
	ManagerArgs         []string      `json:"managerArgs,omitempty"`
	// LongPolls runs Temporal with production-like polling: idle long
	// polls of a minute instead of 5 s.
	LongPolls bool `json:"longPolls,omitempty"`
}

// Result is the JSON document a run writes.
type Result struct {
	Started  time.Time      `json:"started"`
	Finished time.Time      `json:"finished"`
	Machine  map[string]any `json:"machine"`
	Config   config         `json:"config"`
	// AllAtOnce rollouts of one TWD and the load they caused.
	Rollouts    []Rollout      `json:"rollouts"`
	RolloutLoad Window         `json:"rolloutLoad"`
	Steps       []StepReaction `json:"progressiveSteps"`
	// StepLoad is the controller's work over the Progressive rollouts.
	StepLoad Window `json:"progressiveLoad"`
	// StepProgress is the Progressive TWD's Ready reasons over time.
	StepProgress []progressSeen `json:"progressiveProgress"`
	// LatePollers are AllAtOnce rollouts whose workers poll after their
	// Deployment is available.
	LatePollers []Rollout `json:"latePollers,omitempty"`
	// MinReady are AllAtOnce rollouts whose Deployments become available
	// about 2 s after the version registers (minReadySeconds 1).
	MinReady []Rollout `json:"minReady,omitempty"`
	// Floor is Temporal's own answers right after a version registers.
	Floor []FloorSample `json:"temporalFloor,omitempty"`
	// Retirements are AllAtOnce rollouts followed to the old version's
	// deletion, for the calls a whole rollout costs.
	Retirements []Retirement `json:"retirements,omitempty"`
	// Waiting: Manual TWDs waiting for a person, alone and ten at once.
	Waiting []Waiting `json:"waiting,omitempty"`
	// HandBacks: TWDs waiting for the manager role, alone and ten at once.
	HandBacks []HandBack `json:"handBacks,omitempty"`
	// Scales is the scale phase's steps, the fleet growing through Ns.
	Scales []Scale `json:"scales,omitempty"`
	// Analysis is the analysis phase: N Progressive TWDs under every
	// built-in check rolling out at once.
	Analysis *AnalysisRun `json:"analysis,omitempty"`
	// Phases is how long each phase of the run took, in order.
	Phases []phaseTime `json:"phases"`
	Table  []row       `json:"table"`
	// Previous is the run this one is compared with, and Changes the
	// change of each figure since it.
	Previous string         `json:"previous,omitempty"`
	Changes  []figureChange `json:"changes,omitempty"`
	// Error is why the run stopped early; the figures are those measured
	// before.
	Error string `json:"error,omitempty"`
}

// phaseTime is how long one phase of the run took.
type phaseTime struct {
	Name    string  `json:"name"`
	Seconds float64 `json:"seconds"`
}

func main() {
	cfg := config{Steps: []int32{25, 50, 75}, Pause: 4 * time.Second}
	ns := flag.String("n", envString("BENCH_N", "10,50,100"),
		"the scale phase's fleet sizes, comma separated and growing, each TWD with a running demo worker (env BENCH_N); 0 skips the phase")
	flag.IntVar(&cfg.Rollouts, "rollouts", envInt("BENCH_ROLLOUTS", 12), "AllAtOnce rollouts timed one after the other (env BENCH_ROLLOUTS)")
	flag.IntVar(&cfg.ProgressiveRollouts, "progressive-rollouts", envInt("BENCH_PROGRESSIVE_ROLLOUTS", 4), "Progressive rollouts of three steps each")
	flag.DurationVar(&cfg.Idle, "idle", envDuration("BENCH_IDLE", 3*time.Minute), "how long the N TWDs are watched idle (env BENCH_IDLE)")
	flag.DurationVar(&cfg.Waiting, "waiting", envDuration("BENCH_WAITING", 2*time.Minute),
		"how long 1, then 10, Manual TWDs are watched waiting for a promotion (env BENCH_WAITING); 0 skips it")
	flag.BoolVar(&cfg.ScaleRollout, "scale-rollout", os.Getenv("BENCH_SCALE_ROLLOUT") != "false",
		"change the image of all N TWDs at once and time it (env BENCH_SCALE_ROLLOUT=false skips it: twice N workers run meanwhile)")
	flag.StringVar(&cfg.Manager, "manager", "", "manager binary to measure (default .cache/bin/manager, built by make bins)")
	flag.StringVar(&cfg.Out, "out", "", "directory for the JSON results and logs (default .cache/bench)")
	flag.BoolVar(&cfg.LongPolls, "long-polls", os.Getenv("BENCH_LONG_POLLS") == "true",
		"idle long polls return after Temporal's default minute, and pollers are forgotten 70 s after their last poll, instead of 5 s and 10 s: "+
			"production's poll load, for the scale phase; retiring a version then waits about a minute more (env BENCH_LONG_POLLS=true)")
	managerArgs := flag.String("manager-args", "", "extra flags for the manager, space separated (e.g. --zap-log-level=5 logs every reconcile)")
	flag.Parse()
	cfg.ManagerArgs = strings.Fields(*managerArgs)
	var err error
	if cfg.Ns, err = fleetSizes(*ns); err != nil {
		fmt.Fprintln(os.Stderr, "bench: -n / BENCH_N:", err)
		os.Exit(2)
	}
	if len(cfg.Ns) > 0 {
		cfg.N = cfg.Ns[len(cfg.Ns)-1]
	}
	if err = run(cfg); err != nil {
		fmt.Fprintln(os.Stderr, "bench: cannot measure:", err)
		os.Exit(1)
	}
}

func run(cfg config) error {
	root, err := harness.RepoRoot()
	if err != nil {
		return err
	}
	if cfg.Out == "" {
		cfg.Out = filepath.Join(root, ".cache", "bench")
	}
	res := Result{Started: time.Now(), Config: cfg, Machine: machine()}
	runDir := filepath.Join(cfg.Out, res.Started.Format("20060102-150405"))
	if err := os.MkdirAll(runDir, 0o755); err != nil {
		return err
	}
	// The watches' client-go logs are not wanted here.
	ctrllog.SetLogger(logr.Discard())
	klog.SetLogger(logr.Discard())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	fmt.Printf("bench: starting the environment and the controller (logs in %s)\n", runDir)
	e, err := startEnv(root, runDir, cfg.N+max(*analysisTWDs, 0), cfg.Manager, cfg.ManagerArgs, cfg.LongPolls)
	phase := newPhaseClock(&res)
	phase.done("start the environment and the controller")
	if err != nil {
		return err
	}
	defer e.stop()
	o := newObserver()
	if err := o.start(ctx, e); err != nil {
		return err
	}

	measureErr := measure(ctx, cfg, e, o, &res, phase)
	if measureErr != nil {
		// What was measured before the failure is still reported.
		res.Error = measureErr.Error()
		fmt.Fprintln(os.Stderr, "bench: stopped early:", measureErr)
	}
	res.Finished = time.Now()
	res.Machine["loadAverageAtEnd"] = loadAverage()
	res.Table = table(res)
	res.RolloutLoad.clean()
	res.StepLoad.clean()
	for i := range res.Waiting {
		res.Waiting[i].Window.clean()
	}
	for i := range res.HandBacks {
		res.HandBacks[i].Window.clean()
	}
	if res.Analysis != nil {
		res.Analysis.Window.clean()
	}
	for i := range res.Scales {
		s := &res.Scales[i]
		for _, w := range []*Window{&s.Create, &s.Idle, &s.Rollout, &s.Retire} {
			w.clean()
		}
	}
	fmt.Println()
	printTable(os.Stdout, header(res), res.Table)
	printPhases(os.Stdout, res.Phases)
	if len(res.Scales) > 0 {
		fmt.Println()
		printCurve(os.Stdout, res.Scales)
		caption := fmt.Sprintf("make bench %s, load average %v at start, %v at end (2 CPUs, shared)",
			res.Started.Format("2006-01-02 15:04 MST"), res.Machine["loadAverageAtStart"], res.Machine["loadAverageAtEnd"])
		if err := plotScale(filepath.Join(runDir, "scale.png"), res.Scales, caption); err != nil {
			return fmt.Errorf("plot: %w", err)
		}
		fmt.Printf("\nPlot: %s\n", filepath.Join(runDir, "scale.png"))
	}
	// The regression guard: the previous run's figures next to these.
	if prevPath, prevRes, err := previousResult(cfg.Out, runDir); err != nil {
		fmt.Printf("\nno previous result to compare with: %v\n", err)
	} else {
		res.Previous = prevPath
		res.Changes = compare(figures(prevRes), figures(res))
		fmt.Println()
		printChanges(os.Stdout, prevPath, prevRes, res.Changes)
	}

	data, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return err
	}
	for _, p := range []string{filepath.Join(runDir, "result.json"), filepath.Join(cfg.Out, "latest.json")} {
		if err := os.WriteFile(p, data, 0o644); err != nil {
			return err
		}
	}
	fmt.Printf("\nJSON: %s (and %s)\n", filepath.Join(runDir, "result.json"), filepath.Join(cfg.Out, "latest.json"))
	return measureErr
}

// measure runs the phases in order; res holds what each one measured.
func measure(ctx context.Context, cfg config, e *benchEnv, o *observer, res *Result, phase *phaseClock) error {
	var err error
	if err := createNamespace(ctx, e, "bench-reaction"); err != nil {
		return err
	}
	others := 0 // TWDs of the earlier phases in bench-reaction
	if cfg.Rollouts > 0 {
		fmt.Printf("bench: %d AllAtOnce rollouts of one TWD\n", cfg.Rollouts)
		if res.Rollouts, res.RolloutLoad, err = allAtOnce(ctx, e, o, "bench-reaction", cfg.Rollouts); err != nil {
			return err
		}
		others++
		phase.done("AllAtOnce rollouts")
		if *retireRollouts > 0 {
			fmt.Printf("bench: %d AllAtOnce rollouts, each followed to the old version's deletion\n", *retireRollouts)
			if res.Retirements, err = retirements(ctx, e, o, "bench-reaction", *retireRollouts); err != nil {
				return err
			}
			phase.done("rollouts with retirement")
		}
	}
	if *lateRollouts > 0 {
		fmt.Printf("bench: %d AllAtOnce rollouts whose workers poll %s after they start\n", *lateRollouts, latePollDelay)
		if res.LatePollers, err = latePollers(ctx, e, o, "bench-reaction", *lateRollouts); err != nil {
			return err
		}
		others++
		phase.done("late pollers")
	}
	if *minReadyRollouts > 0 {
		fmt.Printf("bench: %d AllAtOnce rollouts of a TWD with minReadySeconds 1\n", *minReadyRollouts)
		if res.MinReady, err = minReady(ctx, e, o, "bench-reaction", *minReadyRollouts); err != nil {
			return err
		}
		others++
		phase.done("minReadySeconds rollouts")
	}
	if *floorSamples > 0 {
		fmt.Printf("bench: Temporal's answers right after %d versions register (the benchmark's own workers, no controller)\n", *floorSamples)
		if res.Floor, err = temporalFloor(ctx, e, *floorSamples); err != nil {
			return err
		}
		phase.done("Temporal after registration")
	}
	if cfg.ProgressiveRollouts > 0 {
		fmt.Printf("bench: %d Progressive rollouts through %v%%, %s pauses\n", cfg.ProgressiveRollouts, cfg.Steps, cfg.Pause)
		if res.Steps, res.StepProgress, res.StepLoad, err = progressive(ctx, e, o, "bench-reaction", cfg.ProgressiveRollouts, cfg.Steps, cfg.Pause); err != nil {
			return err
		}
		if len(res.Steps) == 0 {
			return fmt.Errorf("no Progressive step could be timed")
		}
		others++
		phase.done("Progressive rollouts")
	}
	if cfg.Waiting > 0 {
		for i, k := range []int{1, 10} {
			fmt.Printf("bench: %d Manual TWDs waiting for a promotion for %s\n", k, cfg.Waiting)
			w, err := waiting(ctx, e, o, fmt.Sprintf("bench-waiting-%d", i), k, cfg.Waiting)
			if err != nil {
				return err
			}
			res.Waiting = append(res.Waiting, w)
		}
		phase.done("Manual TWDs waiting")
	}
	if *managerWaiting > 0 {
		for i, k := range []int{1, 10} {
			fmt.Printf("bench: %d TWDs waiting for the manager role for %s\n", k, *managerWaiting)
			h, err := handBack(ctx, e, o, fmt.Sprintf("bench-manager-%d", i), k, *managerWaiting)
			if err != nil {
				return err
			}
			res.HandBacks = append(res.HandBacks, h)
		}
		phase.done("TWDs waiting for the manager role")
	}
	prev := 0
	for step, n := range cfg.Ns {
		fmt.Printf("bench: scale, %d TWDs with one demo worker each (%d more)\n", n, n-prev)
		s, err := scale(ctx, e, o, "bench-scale", prev, n, step+1, "bench-reaction", others, cfg.Idle, cfg.ScaleRollout)
		if err != nil {
			return err
		}
		res.Scales = append(res.Scales, s)
		phase.done(fmt.Sprintf("scale to %d TWDs", n))
		prev = n
	}
	if n := *analysisTWDs; n > 0 {
		what := "with every built-in check"
		if *analysisBaseline {
			what = "without analysis (the baseline)"
		}
		fmt.Printf("bench: analysis, %d Progressive TWDs %s rolling out at once (steps %v%%, %s pauses, interval %s)\n",
			n, what, analysisSteps, *analysisPause, *analysisInterval)
		a, err := analysisPhase(ctx, e, o, "bench-analysis", n)
		res.Analysis = &a
		if err != nil {
			return err
		}
		phase.done(fmt.Sprintf("analysis, %d TWDs", n))
	}
	return nil
}

func header(res Result) string {
	m := res.Machine
	return fmt.Sprintf("Rainbow benchmark %s, %v CPUs, %v GiB RAM, load average %v at start and %v at end (the machine is shared), took %s",
		res.Started.Format(time.RFC3339), m["cpus"], m["memGiB"], m["loadAverageAtStart"], m["loadAverageAtEnd"],
		res.Finished.Sub(res.Started).Round(time.Second))
}

// table turns the results into the printed figures.
func table(res Result) []row {
	var rows []row
	var reaction, e2e, floor, stepR []float64
	phases := map[string][]float64{}
	for _, r := range res.Rollouts {
		reaction = append(reaction, r.ReactionSeconds)
		e2e = append(e2e, r.EndToEndSeconds)
		floor = append(floor, r.FloorSeconds)
		phases["spec change -> Deployment created"] = append(phases["spec change -> Deployment created"], r.DeploymentCreated.Sub(r.SpecChanged).Seconds())
		phases["Deployment -> pod created"] = append(phases["Deployment -> pod created"], r.PodCreated.Sub(r.DeploymentCreated).Seconds())
		phases["pod -> version registered"] = append(phases["pod -> version registered"], r.Registered.Sub(r.PodCreated).Seconds())
		phases["pod -> Deployment available"] = append(phases["pod -> Deployment available"], r.Available.Sub(r.PodCreated).Seconds())
		phases["current -> Ready=True seen"] = append(phases["current -> Ready=True seen"], r.Ready.Sub(r.Current).Seconds())
	}
	for _, s := range res.Steps {
		stepR = append(stepR, s.ReactionSeconds)
	}
	rs, es, fs, ss := stats(reaction), stats(e2e), stats(floor), stats(stepR)
	rows = append(rows,
		row{Figure: "AllAtOnce reaction, median / p95", Value: fmt.Sprintf("%s / %s (n=%d)", ms(rs.Median), ms(rs.P95), rs.N),
			Target: "median <= 150 ms, p95 <= 500 ms", Verdict: verdict(rs.N > 0 && rs.Median <= 0.15 && rs.P95 <= 0.5),
			How: "Temporal's routing_config.current_version_changed_time minus the later of (a) the benchmark's watch first seeing the version's " +
				"Deployment available as the controller defines it (observedGeneration current, updated and available replicas, Available=True) and " +
				"(b) the version's create time in Temporal (its workers' first poll registered it). One TWD, one replica, rollouts back to back; " +
				"the creation is a warm-up and not counted."},
		statusRow(phases["current -> Ready=True seen"]),
		row{Figure: "Progressive step reaction, median / p95", Value: fmt.Sprintf("%s / %s (n=%d)", ms(ss.Median), ms(ss.P95), ss.N),
			Target: "median < 1 s", Verdict: verdict(ss.N > 0 && ss.Median < 1),
			How: fmt.Sprintf("for each step: the next step's ramping_version_percentage_changed_time (or current_version_changed_time after the last step) "+
				"minus the step's own ramping_version_percentage_changed_time plus its pause; steps %v%%, %s pauses. The benchmark reads the routing config "+
				"once per step, when the TWD's status first shows the new ramp, so it does not compete with the controller's reads.",
				res.Config.Steps, res.Config.Pause)},
		row{Figure: "AllAtOnce end to end, median / p95", Value: fmt.Sprintf("%s / %s", secs(es.Median), secs(es.P95)),
			How: "from the spec update returning to the benchmark's watch first seeing Ready=True with the new version current and observedGeneration current."},
		row{Figure: "Floor: worker start, median / p95", Value: fmt.Sprintf("%s / %s", secs(fs.Median), secs(fs.P95)),
			How: "the version's create time in Temporal (its first poll registered it) minus the watch first seeing its pod: process start, SDK dial and first poll."},
		row{Figure: "End to end / floor (medians)", Value: fmt.Sprintf("%.1fx", es.Median/fs.Median),
			How: "the two medians above. The end to end time also holds the environment's own steps, see the breakdown."},
		row{Figure: "End to end breakdown (medians)", Value: breakdown(phases),
			How: "watch times of the Deployment and pod, Temporal's version create time and current_version_changed_time. The node agent marks a container " +
				"ready one second after it starts (it runs no probes), so 'pod -> Deployment available' is at least 1 s here."},
	)
	load := res.RolloutLoad
	rows = append(rows, row{Figure: "Temporal load, one TWD rolling out",
		Value: fmt.Sprintf("%.1f reads (%.1f worker-deployment) + %.1f writes per minute; per rollout %s", load.ReadsPerTWDMin, load.WorkerDeploymentReadsPerTM, load.WritesPerTWDMin, perRollout(load)),
		How: "the controller's rainbow_temporal_rpcs_total between each spec change and Ready, summed over the rollouts and divided by the time they took " +
			"(the retirement of the old versions, which goes on after Ready, is not in it). " +
			"Worker-deployment reads are DescribeWorkerDeployment and DescribeWorkerDeploymentVersion, which Temporal rate limits per namespace."})
	rows = append(rows, reactionRows(res)...)
	rows = append(rows, floorRows(res)...)
	rows = append(rows, row{Figure: "Temporal's latency during rollouts, mean / p95",
		Value: latencies(load.ServerLatency),
		How: "the frontend's service_latency histogram per method over the AllAtOnce rollouts (the benchmark's few reads included). " +
			"Making a version current needs at least the SetWorkerDeploymentCurrentVersion call: that is the floor of the reaction time."})
	rows = append(rows, row{Figure: "Cross-check with the server, rollouts",
		Value: load.crossCheck(),
		How:   "per method, controller count / Temporal frontend service_requests{service_name=\"frontend\"} over the whole rollout phase minus the benchmark's own calls."})
	for _, w := range res.Waiting {
		target, ok := waitingTarget(w.Window)
		rows = append(rows,
			row{Figure: fmt.Sprintf("Temporal reads per waiting TWD per minute (%d Manual TWDs)", w.TWDs),
				Value:  fmt.Sprintf("%.2f (%s)", w.Window.ReadsPerTWDMin, perMethod(w.Window)),
				Target: target, Verdict: verdict(ok),
				How: fmt.Sprintf("the controller's rainbow_temporal_rpcs_total over %s while %d Manual TWDs of one namespace wait for a promotion, "+
					"15 s after the last of them first reported WaitingForPromotion, divided by TWDs and minutes.", secs(w.Window.Seconds), w.TWDs)},
			row{Figure: fmt.Sprintf("A person's promotion seen (%d waiting)", w.TWDs),
				Value: secs(w.PromotionSeenSeconds), Target: "< 10 s plus the list's visibility lag", Verdict: verdict(w.PromotionSeenSeconds < 12),
				How: "from the benchmark's SetWorkerDeploymentCurrentVersion (as a person with the temporal CLI) for one of them to its watch " +
					"seeing Ready=True with the version current. One sample: where in the 10 s list interval the promotion falls decides it."},
		)
	}
	rows = append(rows, handBackRows(res.HandBacks)...)
	if n := len(res.Scales); n > 0 {
		rows = append(rows, scaleRows(&res.Scales[n-1], res.Scales[0].BaselineRSSMiB)...)
	}
	rows = append(rows, analysisRows(res.Analysis)...)
	return dropSkipped(res, rows)
}

// waitingTarget: TWDs waiting on a person share the namespace's read
// every 10 s; a lone one pays it all.
func waitingTarget(w Window) (string, bool) {
	if w.TWDs > 1 {
		return "at most 1 per TWD per minute", w.ReadsPerTWDMin <= 1
	}
	return "at most 6 per minute", w.ReadsPerTWDMin <= 6
}

// dropSkipped leaves out the rows of the AllAtOnce and Progressive phases
// when they were skipped (-rollouts 0, -progressive-rollouts 0): they
// would show zeros that nothing measured.
func dropSkipped(res Result, rows []row) []row {
	allAtOnce := []string{"AllAtOnce reaction,", "Status showing the AllAtOnce change", "AllAtOnce end to end", "Floor: worker start",
		"End to end / floor", "End to end breakdown", "Temporal load, one TWD rolling out", "Temporal's latency during rollouts", "Cross-check with the server, rollouts"}
	out := rows[:0]
	for _, r := range rows {
		skip := len(res.Steps) == 0 && strings.HasPrefix(r.Figure, "Progressive step reaction")
		for _, p := range allAtOnce {
			skip = skip || (len(res.Rollouts) == 0 && strings.HasPrefix(r.Figure, p))
		}
		if !skip {
			out = append(out, r)
		}
	}
	return out
}

// perMethod lists a window's controller calls by method.
func perMethod(w Window) string {
	return joinSorted(w.ControllerRPCs, func(m string, n float64) string { return fmt.Sprintf("%s %.0f", m, n) })
}

func scaleRows(s *Scale, baselineRSS float64) []row {
	// The busy window is the shared image change, or the creation of the
	// N TWDs (their first rollout) when the change was skipped.
	id, ro, rolling := s.Idle, s.Rollout, fmt.Sprintf("%d rolling out", s.N)
	if ro.Seconds == 0 {
		ro, rolling = s.Create, fmt.Sprintf("%d being created", s.N)
	}
	at500 := ""
	verdict500 := ""
	if s.N+2 >= 500 {
		verdict500 = verdict(id.RSSMiB < 150)
	} else {
		per := (id.RSSMiB - baselineRSS) / float64(s.N)
		at500 = fmt.Sprintf("; 500 TWDs not run (about %.0f MiB if it grew linearly: %.2f MiB per TWD)", baselineRSS+per*500, per)
	}
	return []row{
		{Figure: fmt.Sprintf("Temporal reads per idle TWD per minute (%d TWDs)", id.TWDs),
			Value:  fmt.Sprintf("%.2f (%.2f worker-deployment); writes %.2f", id.ReadsPerTWDMin, id.WorkerDeploymentReadsPerTM, id.WritesPerTWDMin),
			Target: "<= 1", Verdict: verdict(id.ReadsPerTWDMin <= 1),
			How: fmt.Sprintf("rainbow_temporal_rpcs_total over %.0f s with nothing changing (from 20 s after the last old version retired), divided by TWDs and minutes; "+
				"namespace-wide %.2f worker-deployment reads/s against Temporal's default limit of 50/s.", id.Seconds, id.WorkerDeploymentReadsPerSec)},
		{Figure: "Cross-check with the server, idle", Value: id.crossCheck(),
			How: "per method, controller count / frontend service_requests over the idle window (the benchmark made no Temporal calls then)."},
		{Figure: "Temporal load per TWD per minute, " + rolling,
			Value: fmt.Sprintf("%.2f reads (%.2f worker-deployment) + %.2f writes; %.1f worker-deployment reads/s in the namespace", ro.ReadsPerTWDMin, ro.WorkerDeploymentReadsPerTM, ro.WritesPerTWDMin, ro.WorkerDeploymentReadsPerSec),
			How:   "as idle, from the first spec change to the last TWD Ready; cross-check " + ro.crossCheck() + "."},
		{Figure: fmt.Sprintf("Controller RSS, %d idle TWDs", id.TWDs),
			Value:  fmt.Sprintf("%.0f MiB (%.0f MiB before the scale phase; peak %.0f MiB)%s", id.RSSMiB, baselineRSS, id.PeakRSSMiB, at500),
			Target: "< 150 MiB at 500 TWDs", Verdict: verdict500,
			How: "VmRSS of the manager process (.cache/bin/manager, run on its own) from /proc/<pid>/status at the end of the idle window; peak is VmHWM at the end of the run."},
		{Figure: "Controller CPU, idle / " + rolling, Value: fmt.Sprintf("%.2f / %.2f CPU s per minute", id.CPUSecondsPerMin, ro.CPUSecondsPerMin),
			How: "utime+stime of the manager process from /proc/<pid>/stat over each window."},
		{Figure: "CPU of every process, " + rolling, Value: cpuShare(ro),
			How: "utime+stime from /proc/<pid>/stat of every process of the environment, per minute (2.0 = both cores), grouped by name; devenv runs the " +
				"Temporal dev server and the node agent in one process. The machine's busy share is from /proc/stat and counts other users of the machine too."},
		{Figure: "Temporal's latency, " + rolling + ", mean / p95", Value: latencies(ro.ServerLatency),
			How: "the frontend's service_latency histogram per method over the same window."},
		{Figure: "Kubernetes API requests, idle / " + rolling, Value: fmt.Sprintf("%.1f / %.1f per minute (busy: %s)", id.KubeRequestsPerMin, ro.KubeRequestsPerMin, verbs(ro.KubeRequestsByVerb)),
			How: "client-go's rest_client_requests_total from the manager's /metrics (every request the process made, watches included)."},
		{Figure: "Reconcile time p50 / p95, idle / " + rolling,
			Value: fmt.Sprintf("%s / %s, %s / %s (%g and %g reconciles)", ms(id.ReconcileP50), ms(id.ReconcileP95), ms(ro.ReconcileP50), ms(ro.ReconcileP95), id.Reconciles, ro.Reconciles),
			How:   "controller_runtime_reconcile_time_seconds{controller=\"temporalworkerdeployment\"}, bucket counts differenced over the window, interpolated like histogram_quantile."},
		{Figure: "Workqueue wait p50 / p95, idle / " + rolling,
			Value: fmt.Sprintf("%s / %s, %s / %s", ms(id.QueueP50), ms(id.QueueP95), ms(ro.QueueP50), ms(ro.QueueP95)),
			How:   "workqueue_queue_duration_seconds{name=\"temporalworkerdeployment\"}, as above: time from an item being ready to a worker taking it."},
		rolloutRow(s),
	}
}

func rolloutRow(s *Scale) row {
	if s.Rollout.Seconds == 0 {
		return row{Figure: fmt.Sprintf("Create %d TWDs", s.N), Value: secs(s.CreateSeconds),
			How: "from the first create to the last Ready=True seen by the watch; the shared image change was skipped (-scale-rollout=false)."}
	}
	return row{Figure: fmt.Sprintf("Roll out %d TWDs after a shared image change", s.N),
		Value: fmt.Sprintf("%s (each TWD median %s, p95 %s); old versions retired %s later", secs(s.RolloutSeconds), secs(s.RolloutEndToEnd.Median), secs(s.RolloutEndToEnd.P95), secs(s.RetireSeconds)),
		How: fmt.Sprintf("the benchmark updates every TWD's image in turn, then times the first update to the last Ready=True seen by its watch. "+
			"Retired: one Deployment per TWD left and no deprecated version in any status (sunset delays 2 s and 3 s; drainage is reported within 7 s by the dev server). "+
			"Creating the last %d of them took %s.", s.Added, secs(s.CreateSeconds))}
}

func breakdown(phases map[string][]float64) string {
	order := []string{"spec change -> Deployment created", "Deployment -> pod created", "pod -> version registered", "pod -> Deployment available", "current -> Ready=True seen"}
	var parts []string
	for _, k := range order {
		parts = append(parts, fmt.Sprintf("%s %s", k, ms(stats(phases[k]).Median)))
	}
	return strings.Join(parts, "; ")
}

func perRollout(w Window) string {
	if w.Rollouts == 0 {
		return "-"
	}
	return joinSorted(w.InRollouts, func(m string, n float64) string { return fmt.Sprintf("%s %.1f", m, n/float64(w.Rollouts)) })
}

// joinSorted formats a map's entries in key order.
func joinSorted[V any](m map[string]V, format func(string, V) string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = format(k, m[k])
	}
	return strings.Join(parts, ", ")
}

func cpuShare(w Window) string {
	return fmt.Sprintf("machine %.0f%% busy; ", w.MachineBusy*100) +
		joinSorted(w.CPUByProcess, func(k string, v float64) string { return fmt.Sprintf("%s %.2f", k, v) }) + " CPU s/min"
}

func latencies(m map[string][2]float64) string {
	return joinSorted(m, func(k string, v [2]float64) string { return fmt.Sprintf("%s %s / %s", k, ms(v[0]), ms(v[1])) })
}

func verbs(m map[string]float64) string {
	return joinSorted(m, func(k string, v float64) string { return fmt.Sprintf("%s %g", k, v) })
}

func machine() map[string]any {
	m := map[string]any{"cpus": runtime.NumCPU(), "go": runtime.Version(), "loadAverageAtStart": loadAverage()}
	if data, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == "MemTotal:" {
				kib, _ := strconv.ParseFloat(f[1], 64)
				m["memGiB"] = fmt.Sprintf("%.0f", kib/1024/1024)
			}
		}
	}
	return m
}

func loadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

func envInt(key string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(key)); err == nil {
		return v
	}
	return def
}

func envString(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// fleetSizes parses "10,50,100": growing sizes; "0" or "" is none.
func fleetSizes(v string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(v, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%q is not a number of TWDs", f)
		}
		if n == 0 {
			continue
		}
		if len(out) > 0 && n <= out[len(out)-1] {
			return nil, fmt.Errorf("sizes must grow: %d after %d", n, out[len(out)-1])
		}
		out = append(out, n)
	}
	return out, nil
}

func envDuration(key string, def time.Duration) time.Duration {
	if v, err := time.ParseDuration(os.Getenv(key)); err == nil {
		return v
	}
	return def
}
