package soak

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	appsv1 "k8s.io/api/apps/v1"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rainbow-deploy/rainbow/internal/workload"
	"github.com/rainbow-deploy/rainbow/test/harness"
	"github.com/rainbow-deploy/rainbow/test/invariants"
)

// Result is what a soak run writes to result-<seed>.json.
type Result struct {
	Seed          int64            `json:"seed"`
	Duration      string           `json:"duration"`
	StartedAt     time.Time        `json:"startedAt"`
	WallSeconds   float64          `json:"wallSeconds"`
	CPUs          int              `json:"cpus"`
	LoadAvgStart  string           `json:"loadAvgStart"`
	LoadAvgEnd    string           `json:"loadAvgEnd"`
	TWDs          int              `json:"twds"`
	Passed        bool             `json:"passed"`
	Failures      []string         `json:"failures"`
	Workflows     Workflows        `json:"workflows"`
	Rollouts      Rollouts         `json:"rollouts"`
	Restarts      []Restart        `json:"restarts"`
	Removals      Removals         `json:"removals"`
	Gates         invariants.Gates `json:"gates"`
	Cleanup       Cleanup          `json:"cleanup"`
	Memory        Memory           `json:"memory"`
	RoutingReads  int              `json:"routingReads"`
	RoutingErrors int              `json:"routingReadErrors"`
}

type Workflows struct {
	Started   int            `json:"started"`
	Completed int            `json:"completed"`
	Lost      int            `json:"lost"`
	ByType    map[string]int `json:"startedByType"`
	// StartRefused counts starts Temporal refused (not started, so not lost).
	StartRefused int `json:"startRefused"`
	// PinnedChecked pinned workflows had their history read; PinnedMoved
	// of them did not finish on the version they started on.
	PinnedChecked int `json:"pinnedChecked"`
	PinnedMoved   int `json:"pinnedMoved"`
	// LongestPinnedSeconds is the longest pinned run, and SpannedRollouts
	// the most rollouts of its TWD that one pinned run lived through.
	LongestPinnedSeconds float64  `json:"longestPinnedSeconds"`
	SpannedRollouts      int      `json:"mostRolloutsSpannedByOnePinnedRun"`
	Problems             []string `json:"problems,omitempty"`
}

type Rollouts struct {
	// NewVersions excludes each TWD's first version.
	NewVersions int            `json:"newVersions"`
	InPlace     int            `json:"inPlace"`
	ByStrategy  map[string]int `json:"newVersionsByStrategy"`
	CustomIDs   int            `json:"newVersionsWithCustomBuildID"`
	Gated       int            `json:"gated"`
	GateFailed  int            `json:"gateFailed"`
	// Convergence is the time from the spec change until the controller
	// carried it out (Manual: including the soak's promotion).
	Convergence map[string]Percentiles `json:"convergence"`
	All         []Rollout              `json:"all"`
}

type Removals struct {
	DeploymentsCreated int                  `json:"deploymentsCreated"`
	ReplicaChanges     int                  `json:"replicaChanges"`
	ScaledOrDeleted    int                  `json:"scaledToZeroOrDeleted"`
	Violations         []string             `json:"violations"`
	All                []invariants.Removal `json:"all"`
}

type Cleanup struct {
	// Seconds from the end of the last workflow until no version but the
	// current one was left, in Kubernetes and in Temporal.
	Seconds   float64  `json:"seconds"`
	Leftovers []string `json:"leftovers"`
}

type Memory struct {
	Flatness Flatness `json:"flatness"`
	// Samples are every 5s: seconds since the start, pid, MiB.
	Samples [][3]float64 `json:"samples"`
}

// Figures of the workload.
const (
	twdCount      = 3
	rssEvery      = 5 * time.Second
	memoryWarmup  = 2 * time.Minute
	memoryWindow  = 5 * time.Minute
	routingEvery  = 3 * time.Second
	drainDeadline = 5 * time.Minute
	// cleanupDeadline leaves room for the controller's drainage cross-check
	// (a version Temporal's summary keeps draining is described itself
	// every 5 minutes, docs/concepts.md#version-statuses), then the sunset
	// delays and Temporal forgetting the retired workers' polls.
	cleanupDeadline = 12 * time.Minute
)

// TestSoak runs rollouts of every strategy on three TWDs, restarts the
// controller and keeps workflows running for -soak.duration, then checks
// that every workflow completed (pinned ones on their version), that no
// version lost its workers while needed, that nothing is left behind and
// that the controller's memory stayed flat. See docs/reliability.md#soak.
func TestSoak(t *testing.T) {
	seed := *seedFlag
	if seed == 0 {
		seed = time.Now().UnixNano() % 1_000_000_000
	}
	dur := *durationFlag
	fmt.Fprintf(os.Stderr, "soak: seed %d, duration %s (reproduce with -soak.seed=%d -soak.duration=%s)\n", seed, dur, seed, dur)
	t.Logf("seed %d, duration %s", seed, dur)
	outDir := *outFlag
	if outDir == "" {
		outDir = filepath.Join(env.Root, ".cache", "soak")
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		t.Fatal(err)
	}
	res := &Result{Seed: seed, Duration: dur.String(), StartedAt: time.Now(), CPUs: runtime.NumCPU(), LoadAvgStart: loadAvg(), TWDs: twdCount}
	fail := func(format string, args ...any) {
		msg := fmt.Sprintf(format, args...)
		res.Failures = append(res.Failures, msg)
		t.Error(msg)
	}
	resultPath := filepath.Join(outDir, fmt.Sprintf("result-%d.json", seed))
	defer func() {
		res.WallSeconds = time.Since(res.StartedAt).Seconds()
		res.LoadAvgEnd = loadAvg()
		res.Passed = !t.Failed()
		data, _ := json.MarshalIndent(res, "", "  ")
		if err := os.WriteFile(resultPath, data, 0o644); err != nil {
			t.Error(err)
		}
		fmt.Fprintf(os.Stderr, "soak: seed %d: result in %s\n", seed, resultPath)
	}()

	tt := env.NewTest(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := env.CreateConnection(ctx, tt.Namespace); err != nil {
		t.Fatal(err)
	}
	ctl := newController(outDir)
	ctl.logPath = filepath.Join(outDir, fmt.Sprintf("manager-%d.log", seed))
	_ = os.Remove(ctl.logPath)
	if _, err := ctl.start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ctl.stop)
	go every(ctx, rssEvery, ctl.sample)

	workers := make([]*worker, twdCount)
	deployments := map[string]string{}
	var names []string
	for i := range workers {
		workers[i] = newWorker(tt.Namespace, []string{"alpha", "bravo", "charlie", "delta"}[i])
		deployments[workers[i].name] = workers[i].deployment
		names = append(names, workers[i].deployment)
	}
	deps, err := invariants.WatchRemovals(ctx, env.Clients, tt.Namespace, func(twd string) string { return deployments[twd] }, nil)
	if err != nil {
		t.Fatal(err)
	}
	routing := watchRouting(ctx, names, routingEvery)

	end := time.Now().Add(dur)
	latestEnd := end.Add(30 * time.Second) // no long workflow runs longer
	var tr traffic
	stopTraffic := make(chan struct{})
	var mu sync.Mutex
	var wg, trafficWG sync.WaitGroup
	for i, w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(seed), uint64(i+1)))
			first := true
			for first || time.Now().Before(end) || w.gateFailed {
				if !first {
					time.Sleep(between(r, 5*time.Second, 30*time.Second))
				}
				twd := w.spec()
				if !first {
					if got, err := w.get(ctx); err == nil {
						twd = got
					}
				}
				ro := w.plan(r, twd, first)
				err := w.carryOut(ctx, r, &ro)
				mu.Lock()
				res.Rollouts.All = append(res.Rollouts.All, ro)
				mu.Unlock()
				if err != nil {
					mu.Lock()
					fail("rollout: %v", err)
					mu.Unlock()
					return
				}
				if first {
					first = false
					trafficWG.Add(1)
					go func() {
						defer trafficWG.Done()
						tr.run(rand.New(rand.NewPCG(uint64(seed), uint64(100+i))), w, dur, latestEnd, stopTraffic)
					}()
				}
			}
		}()
	}
	// Restarts in the first 55% of the run; the rest is one process, whose
	// memory is the one checked for flatness.
	wg.Add(1)
	go func() {
		defer wg.Done()
		r := rand.New(rand.NewPCG(uint64(seed), 0))
		restartUntil := time.Now().Add(dur * 55 / 100)
		for {
			time.Sleep(between(r, 20*time.Second, max(min(3*time.Minute, dur/4), 20*time.Second)))
			if time.Now().After(restartUntil) {
				return
			}
			sig := syscall.SIGKILL
			if r.IntN(100) < 30 {
				sig = syscall.SIGTERM
			}
			rs, err := ctl.restart(sig, between(r, 0, 5*time.Second))
			mu.Lock()
			res.Restarts = append(res.Restarts, rs)
			if err != nil {
				fail("controller restart: %v", err)
			}
			mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	wg.Wait()
	close(stopTraffic)
	trafficWG.Wait()
	if err := ctl.alive(); err != nil {
		fail("the controller stopped by itself: %v", err)
	}

	// Every workflow must complete; pinned ones on their version.
	outcomes := tr.wait(later(latestEnd, time.Now()).Add(drainDeadline))
	lastClose := time.Now()
	pinnedNeeds := summarizeWorkflows(res, &tr, outcomes, fail)

	// Nothing may be left behind once the sunset delays pass.
	cleanupStart := time.Now()
	var left []string
	for deadline := time.Now().Add(cleanupDeadline); ; time.Sleep(2 * time.Second) {
		left = nil
		for _, w := range workers {
			left = append(left, w.leftovers(ctx)...)
		}
		if len(left) == 0 || time.Now().After(deadline) {
			break
		}
	}
	res.Cleanup.Seconds = time.Since(cleanupStart).Seconds()
	res.Cleanup.Leftovers = left
	if len(left) > 0 {
		fail("left behind %s after the last workflow closed: %s", time.Since(lastClose).Round(time.Second), strings.Join(left, "; "))
	}
	time.Sleep(2 * time.Second) // the watch's last events
	cancel()

	deps.Stop()
	removals, created, scales := deps.Snapshot()
	res.Removals = Removals{DeploymentsCreated: created, ReplicaChanges: scales, ScaledOrDeleted: len(removals), All: removals}
	res.Removals.Violations = invariants.Violations(removals, append(routing.needs(), pinnedNeeds...))
	for _, v := range res.Removals.Violations {
		fail("a version lost its workers while needed: %s", v)
	}
	routing.mu.Lock()
	for _, reads := range routing.reads {
		res.RoutingReads += len(reads)
	}
	res.RoutingErrors = routing.errs
	routing.mu.Unlock()

	gctx, gcancel := context.WithTimeout(context.Background(), time.Minute)
	res.Gates = invariants.CheckGates(gctx, env.Temporal, env.Info.TemporalNamespace, names, true)
	gcancel()
	for _, p := range append(res.Gates.Problems, res.Gates.Unchecked...) {
		fail("gate: %s", p)
	}
	summarizeRollouts(res)
	if dur >= 20*time.Minute && res.Rollouts.NewVersions < 20 {
		fail("only %d new versions rolled out; a full soak makes at least 20", res.Rollouts.NewVersions)
	}

	rss := ctl.rss()
	res.Memory.Flatness = CheckFlat(rss, memoryWarmup, memoryWindow)
	for _, s := range rss {
		res.Memory.Samples = append(res.Memory.Samples, [3]float64{s.At.Sub(res.StartedAt).Seconds(), float64(s.PID), float64(s.Bytes) / mib})
	}
	if f := res.Memory.Flatness; f.Evaluated && !f.Flat {
		fail("the controller's memory grew %.1f MiB (tolerance %.1f MiB) from %.1f MiB over %s", f.GrowthMiB, f.ToleranceMiB, f.FirstMedianMiB, f.WindowEnd.Sub(f.WindowStart).Round(time.Second))
	}
	f := res.Memory.Flatness
	t.Logf("%d workflows started, %d completed, %d lost; %d new versions (%v), %d in place, %d restarts; cleanup %.0fs; memory %.1f -> %.1f MiB (evaluated %v)",
		res.Workflows.Started, res.Workflows.Completed, res.Workflows.Lost, res.Rollouts.NewVersions, res.Rollouts.ByStrategy,
		res.Rollouts.InPlace, len(res.Restarts), res.Cleanup.Seconds, f.FirstMedianMiB, f.LastMedianMiB, f.Evaluated)
}

// summarizeWorkflows counts the outcomes, reports the lost and moved ones
// and returns the spans during which pinned workflows were open.
func summarizeWorkflows(res *Result, tr *traffic, outcomes []outcome, fail func(string, ...any)) []invariants.Need {
	wf := &res.Workflows
	wf.ByType = map[string]int{}
	wf.StartRefused = len(tr.startErrs)
	var needs []invariants.Need
	for _, o := range outcomes {
		wf.Started++
		wf.ByType[o.Type]++
		if o.Err != "" {
			wf.Lost++
			wf.Problems = append(wf.Problems, fmt.Sprintf("%s (%s on %s): %s", o.ID, o.Type, o.TWD, o.Err))
			continue
		}
		wf.Completed++
		if !o.Pinned {
			continue
		}
		wf.PinnedChecked++
		if p := o.pinnedProblem(); p != "" {
			wf.PinnedMoved++
			wf.Problems = append(wf.Problems, fmt.Sprintf("%s (%s on %s): %s", o.ID, o.Type, o.TWD, p))
		}
		if len(o.Builds) > 0 {
			needs = append(needs, invariants.Need{Version: invariants.Version{Deployment: o.Deployment, BuildID: o.Builds[0]}, From: o.Start, To: o.Close, Why: "pinned workflow " + o.ID + " was open on it"})
		}
		wf.LongestPinnedSeconds = max(wf.LongestPinnedSeconds, o.Close.Sub(o.Start).Seconds())
		spanned := 0
		for _, ro := range res.Rollouts.All {
			if ro.TWD == o.TWD && ro.Kind == "new version" && ro.At.After(o.Start) && ro.At.Before(o.Close) {
				spanned++
			}
		}
		wf.SpannedRollouts = max(wf.SpannedRollouts, spanned)
	}
	if wf.Lost > 0 || wf.PinnedMoved > 0 {
		fail("%d of %d workflows lost, %d pinned ones moved: %s", wf.Lost, wf.Started, wf.PinnedMoved, strings.Join(first(wf.Problems, 10), "; "))
	}
	return needs
}

func first(s []string, n int) []string { return s[:min(n, len(s))] }

func summarizeRollouts(res *Result) {
	ro := &res.Rollouts
	ro.ByStrategy = map[string]int{}
	byKind := map[string][]time.Duration{}
	for _, r := range ro.All {
		if r.Kind == "in place" {
			ro.InPlace++
		} else if !r.First {
			ro.NewVersions++
			ro.ByStrategy[r.Strategy]++
			if r.Custom {
				ro.CustomIDs++
			}
			if r.Gate != "" {
				ro.Gated++
			}
			if r.Gate == "fail" {
				ro.GateFailed++
			}
		}
		if r.Outcome == "" || strings.HasPrefix(r.Outcome, "not ") {
			continue
		}
		key := r.Kind
		if r.Kind == "new version" {
			key = r.Strategy
			if r.Gate != "" {
				key += "+gate"
			}
			if r.Gate == "fail" {
				key = "gate failed"
			}
		}
		byKind[key] = append(byKind[key], time.Duration(r.ConvergenceSeconds*float64(time.Second)))
	}
	ro.Convergence = map[string]Percentiles{}
	for k, d := range byKind {
		ro.Convergence[k] = Summarize(d)
	}
}

// leftovers lists what is left of the TWD besides its current version: in
// its status, as Deployments, and as versions in Temporal.
func (w *worker) leftovers(ctx context.Context) []string {
	twd, err := w.get(ctx)
	if err != nil {
		return []string{w.name + ": " + err.Error()}
	}
	cur := ""
	if twd.Status.CurrentVersion != nil {
		cur = twd.Status.CurrentVersion.BuildID
	}
	var out []string
	if twd.Status.TargetVersion == nil || twd.Status.TargetVersion.BuildID != cur {
		out = append(out, fmt.Sprintf("%s: the target is not current (%s)", w.name, harness.DescribeTWD(twd)))
	}
	if twd.Status.RampingVersion != nil {
		out = append(out, fmt.Sprintf("%s: version %s still ramping", w.name, twd.Status.RampingVersion.BuildID))
	}
	for _, v := range twd.Status.DeprecatedVersions {
		out = append(out, fmt.Sprintf("%s: version %s (%s) still in status", w.name, v.BuildID, v.Status))
	}
	var list appsv1.DeploymentList
	if err := env.Kube.List(ctx, &list, crclient.InNamespace(w.namespace), crclient.MatchingLabels{workload.LabelWorker: w.name}); err != nil {
		out = append(out, err.Error())
	}
	for _, d := range list.Items {
		if b := d.Labels[workload.LabelBuildID]; b != cur {
			out = append(out, fmt.Sprintf("%s: Deployment %s of version %s", w.name, d.Name, b))
		}
	}
	resp, err := env.Temporal.WorkflowService().DescribeWorkerDeployment(ctx, &workflowservice.DescribeWorkerDeploymentRequest{
		Namespace: env.Info.TemporalNamespace, DeploymentName: w.deployment,
	})
	if err != nil {
		return append(out, fmt.Sprintf("%s: describe worker deployment: %v", w.name, err))
	}
	for _, v := range resp.GetWorkerDeploymentInfo().GetVersionSummaries() {
		if b := v.GetDeploymentVersion().GetBuildId(); b != cur {
			out = append(out, fmt.Sprintf("%s: Temporal version %s (%s; %s)", w.name, b, v.GetStatus(), openOn(ctx, w.deployment, b)))
		}
	}
	return out
}

// openOn says how many workflows visibility lists as running on a version:
// it tells a version Temporal keeps draining for open workflows from one
// whose drainage status lags.
func openOn(ctx context.Context, deployment, build string) string {
	resp, err := env.Temporal.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{
		Namespace: env.Info.TemporalNamespace,
		Query:     fmt.Sprintf("TemporalWorkerDeploymentVersion = '%s:%s' AND ExecutionStatus = 'Running'", deployment, build),
	})
	if err != nil {
		return "open workflows unknown: " + err.Error()
	}
	return fmt.Sprintf("%d workflows running on it per visibility", resp.GetCount())
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func every(ctx context.Context, d time.Duration, f func()) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		f()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func loadAvg() string {
	data, _ := os.ReadFile("/proc/loadavg")
	return strings.Join(strings.Fields(string(data))[:min(3, len(strings.Fields(string(data))))], " ")
}
