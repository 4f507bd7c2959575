package main

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"time"

	deploymentpb "go.temporal.io/api/deployment/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/worker"

	"github.com/rainbow-deploy/rainbow/dev/demoworker"
	"github.com/rainbow-deploy/rainbow/internal/workerenv"
)

var floorSamples = flag.Int("floor-samples", envInt("BENCH_FLOOR_SAMPLES", 5),
	"new versions registered by the benchmark's own workers to time Temporal's answers right after registration (env BENCH_FLOOR_SAMPLES); 0 skips them")

// FloorSample is what Temporal answered about one version just after its
// first worker registered it, asked by the benchmark itself (no
// controller): how long DescribeWorkerDeploymentVersion keeps answering
// late, and how long SetWorkerDeploymentCurrentVersion takes meanwhile.
type FloorSample struct {
	Build string `json:"build"`
	// DescribeReadySeconds: from the version's create time to the end of
	// the first DescribeWorkerDeploymentVersion that answered it, asked
	// back to back from the worker's start.
	DescribeReadySeconds float64 `json:"describeReadySeconds"`
	// FirstDescribeSeconds is how long that first answer took.
	FirstDescribeSeconds float64 `json:"firstDescribeSeconds"`
	// SlowestDescribeSeconds is the slowest of the describes made every
	// 100 ms after that until 2.5 s after registration, asked
	// SlowestDescribeAt seconds after registration.
	SlowestDescribeSeconds float64 `json:"slowestDescribeSeconds"`
	SlowestDescribeAt      float64 `json:"slowestDescribeAt"`
	// LaterDescribeSeconds is one describe after those.
	LaterDescribeSeconds float64 `json:"laterDescribeSeconds"`
	// SetCurrentAfterSeconds: from the create time of a second version of
	// another worker deployment to the end of the first accepted
	// SetWorkerDeploymentCurrentVersion, tried back to back.
	SetCurrentAfterSeconds float64 `json:"setCurrentAfterSeconds"`
	// SetCurrentSeconds is how long the accepted call took.
	SetCurrentSeconds float64 `json:"setCurrentSeconds"`
	// Completed*Seconds: from an accepted SetWorkerDeploymentCurrentVersion
	// to the first DescribeWorkerDeployment reporting the routing change
	// COMPLETED (applied to every task queue), asked every 50 ms for up
	// to completedWait (-1: not by then). Soon: the write accepted right
	// after registration; InWindow: made windowDelay after the create
	// time, where a Deployment becomes available here; Settled: made 2.5 s
	// after it.
	CompletedSoonSeconds    float64 `json:"completedSoonSeconds"`
	CompletedSettledSeconds float64 `json:"completedSettledSeconds"`
	// CompletedAfterDelay is the same for a write made at each of
	// windowDelays after the create time (no earlier than Temporal accepts
	// it), by delay.
	CompletedAfterDelay map[string]float64 `json:"completedAfterDelay"`
}

// windowDelays: when, after a version registers, the floor phase makes it
// current; this machine's Deployment becomes available about 0.9 s after
// registration (minReadySeconds 0).
var windowDelays = []time.Duration{0, 300 * time.Millisecond, 600 * time.Millisecond, 900 * time.Millisecond, 1300 * time.Millisecond}

// completedWait bounds the wait for a routing change to be applied.
const completedWait = 15 * time.Second

// temporalFloor registers n+1 versions in each of two worker deployments
// with in-process demo workers and times the calls a routing change needs
// right after registration. The first version of each only makes
// something current, as in a real rollout.
func temporalFloor(ctx context.Context, e *benchEnv, n int) ([]FloorSample, error) {
	ws := e.temporal.WorkflowService()
	ns := e.Info.TemporalNamespace
	var out []FloorSample
	var running []worker.Worker
	defer func() {
		for _, w := range running {
			w.Stop()
		}
	}()
	start := func(deployment, build string) (time.Time, error) {
		w := demoworker.New(e.temporal, workerenv.Config{DeploymentName: deployment, BuildID: build}, "bench-floor-"+deployment)
		at := time.Now()
		if err := w.Start(); err != nil {
			return at, err
		}
		running = append(running, w)
		// Keep only the current version's worker and this one, in each
		// of the three worker deployments.
		if len(running) > 16 {
			running[0].Stop()
			running = running[1:]
		}
		return at, nil
	}
	version := func(deployment, build string) *deploymentpb.WorkerDeploymentVersion {
		return &deploymentpb.WorkerDeploymentVersion{DeploymentName: deployment, BuildId: build}
	}
	describeV := func(deployment, build string) (*workflowservice.DescribeWorkerDeploymentVersionResponse, error) {
		return ws.DescribeWorkerDeploymentVersion(ctx, &workflowservice.DescribeWorkerDeploymentVersionRequest{
			Namespace: ns, DeploymentVersion: version(deployment, build)})
	}
	setCurrent := func(deployment, build string) error {
		_, err := ws.SetWorkerDeploymentCurrentVersion(ctx, &workflowservice.SetWorkerDeploymentCurrentVersionRequest{
			Namespace: ns, DeploymentName: deployment, BuildId: build, Identity: "bench-floor"})
		return err
	}
	// completed is how long until Temporal reports the routing change of
	// deployment applied, from now.
	completed := func(deployment string) float64 {
		t := time.Now()
		for time.Since(t) < completedWait {
			resp, err := ws.DescribeWorkerDeployment(ctx, &workflowservice.DescribeWorkerDeploymentRequest{Namespace: ns, DeploymentName: deployment})
			if err == nil && resp.GetWorkerDeploymentInfo().GetRoutingConfigUpdateState() == enumspb.ROUTING_CONFIG_UPDATE_STATE_COMPLETED {
				return time.Since(t).Seconds()
			}
			time.Sleep(50 * time.Millisecond)
		}
		return -1
	}
	routeAfter := func(build string, delay time.Duration) (float64, error) {
		deployment := fmt.Sprintf("window-%d", time.Now().UnixNano())
		set := func(b string) error {
			return waitFor(ctx, time.Minute, "version "+b+" of "+deployment+" current", func() bool {
				if err := setCurrent(deployment, b); err != nil {
					time.Sleep(20 * time.Millisecond)
					return false
				}
				return true
			}, func() string { return "" })
		}
		if _, err := start(deployment, build+"-a"); err != nil {
			return 0, err
		}
		if err := set(build + "-a"); err != nil {
			return 0, err
		}
		completed(deployment)
		if _, err := start(deployment, build); err != nil {
			return 0, err
		}
		var created time.Time
		err := waitFor(ctx, time.Minute, "version "+build+" of "+deployment+" registered", func() bool {
			resp, err := describeV(deployment, build)
			if err != nil {
				time.Sleep(20 * time.Millisecond)
				return false
			}
			created = resp.GetWorkerDeploymentVersionInfo().GetCreateTime().AsTime()
			return true
		}, func() string { return "" })
		if err != nil {
			return 0, err
		}
		time.Sleep(time.Until(created.Add(delay)))
		if err := set(build); err != nil {
			return 0, err
		}
		return completed(deployment), nil
	}
	for i := 0; i <= n; i++ {
		build := fmt.Sprintf("f%d-%d", i, time.Now().UnixNano())
		s := FloorSample{Build: build}

		// Describe back to back from the worker's start.
		if _, err := start("describe", build); err != nil {
			return out, err
		}
		var created time.Time
		err := waitFor(ctx, time.Minute, "version "+build+" describable", func() bool {
			t := time.Now()
			resp, err := describeV("describe", build)
			if err != nil {
				time.Sleep(20 * time.Millisecond)
				return false
			}
			created = resp.GetWorkerDeploymentVersionInfo().GetCreateTime().AsTime()
			s.FirstDescribeSeconds = time.Since(t).Seconds()
			s.DescribeReadySeconds = time.Since(created).Seconds()
			return true
		}, func() string { return "" })
		if err != nil {
			return out, err
		}
		// Keep describing, as a controller waiting on the Deployment would,
		// for 2.5 s after registration: the slowest answer and when.
		for time.Since(created) < 2500*time.Millisecond {
			t := time.Now()
			if _, err := describeV("describe", build); err != nil {
				return out, fmt.Errorf("describe %s after its first answer: %w", build, err)
			}
			if d := time.Since(t).Seconds(); d > s.SlowestDescribeSeconds {
				s.SlowestDescribeSeconds, s.SlowestDescribeAt = d, t.Sub(created).Seconds()
			}
			time.Sleep(100 * time.Millisecond)
		}
		t := time.Now()
		if _, err := describeV("describe", build); err != nil {
			return out, fmt.Errorf("describe %s after its first answer: %w", build, err)
		}
		s.LaterDescribeSeconds = time.Since(t).Seconds()
		if err := setCurrent("describe", build); err != nil {
			return out, fmt.Errorf("set %s current: %w", build, err)
		}
		s.CompletedSettledSeconds = completed("describe")

		// Set current at each of windowDelays after registration, as a
		// controller would at the Deployment's availability if it did not
		// describe the version first. Each in a worker deployment of its
		// own, so that a change Temporal never reports applied does not
		// hold another's: a first version made current, then the measured
		// one.
		for _, delay := range windowDelays {
			secs, err := routeAfter(build, delay)
			if err != nil {
				return out, err
			}
			if s.CompletedAfterDelay == nil {
				s.CompletedAfterDelay = map[string]float64{}
			}
			s.CompletedAfterDelay[delay.String()] = secs
		}

		// Set current back to back from the worker's start, in another
		// worker deployment that no describe keeps busy.
		if _, err := start("set", build); err != nil {
			return out, err
		}
		var accepted time.Time
		err = waitFor(ctx, time.Minute, "version "+build+" current", func() bool {
			t := time.Now()
			if err := setCurrent("set", build); err != nil {
				// Refused: not registered yet, or not all its task queues.
				time.Sleep(20 * time.Millisecond)
				return false
			}
			accepted = time.Now()
			s.SetCurrentSeconds = accepted.Sub(t).Seconds()
			return true
		}, func() string { return "" })
		if err != nil {
			return out, err
		}
		s.CompletedSoonSeconds = completed("set")
		// Its create time; the describe may refuse for a moment while the
		// task queues' statistics catch up with the registration.
		err = waitFor(ctx, time.Minute, "version "+build+" of the second worker deployment describable", func() bool {
			resp, err := describeV("set", build)
			if err != nil {
				return false
			}
			s.SetCurrentAfterSeconds = accepted.Sub(resp.GetWorkerDeploymentVersionInfo().GetCreateTime().AsTime()).Seconds()
			return true
		}, nil)
		if err != nil {
			return out, err
		}
		if i == 0 {
			continue // nothing was current before
		}
		out = append(out, s)
		fmt.Printf("  Temporal after registration %d: first describe answered %4.0f ms after it (took %4.0f ms); slowest of the next %4.0f ms (asked %4.0f ms after it); "+
			"2.5 s after it %3.0f ms; set current accepted %4.0f ms after it (took %3.0f ms); routing applied %s after a write right after it, "+
			"after one made at %s; %s after one 2.5 s after it\n",
			i, s.DescribeReadySeconds*1000, s.FirstDescribeSeconds*1000, s.SlowestDescribeSeconds*1000, s.SlowestDescribeAt*1000,
			s.LaterDescribeSeconds*1000, s.SetCurrentAfterSeconds*1000, s.SetCurrentSeconds*1000,
			appliedIn(s.CompletedSoonSeconds), byDelay(s.CompletedAfterDelay), appliedIn(s.CompletedSettledSeconds))
	}
	return out, nil
}

// appliedIn formats a Completed*Seconds figure.
func appliedIn(secs float64) string {
	if secs < 0 {
		return fmt.Sprintf("not within %s", completedWait)
	}
	return fmt.Sprintf("%.0f ms", secs*1000)
}

// floorRows are the table's rows for Temporal's own answers after
// registration.
func floorRows(res Result) []row {
	if len(res.Floor) == 0 {
		return nil
	}
	var ready, slowest, slowestAt, later, setAfter, set []float64
	var soon, settled []float64
	window := map[string][]float64{}
	for _, s := range res.Floor {
		soon, settled = append(soon, s.CompletedSoonSeconds), append(settled, s.CompletedSettledSeconds)
		for d, v := range s.CompletedAfterDelay {
			window[d] = append(window[d], v)
		}
		ready = append(ready, s.DescribeReadySeconds)
		slowest = append(slowest, s.SlowestDescribeSeconds)
		slowestAt = append(slowestAt, s.SlowestDescribeAt)
		later = append(later, s.LaterDescribeSeconds)
		setAfter = append(setAfter, s.SetCurrentAfterSeconds)
		set = append(set, s.SetCurrentSeconds)
	}
	return []row{
		{Figure: "Temporal: describing a new version in the 2.5 s after its registration, median / p95",
			Value: fmt.Sprintf("first answer %s / %s after it; slowest answer took %s / %s, asked %s after it (median); 2.5 s after it %s (n=%d)",
				ms(stats(ready).Median), ms(stats(ready).P95), ms(stats(slowest).Median), ms(stats(slowest).P95), ms(stats(slowestAt).Median),
				ms(stats(later).Median), len(ready)),
			How: "the benchmark's own in-process demo worker registers a new version of a worker deployment with a current version; " +
				"DescribeWorkerDeploymentVersion is asked back to back from the worker's start until it answers, then every 100 ms until 2.5 s after " +
				"the version's create time. No controller is involved."},
		{Figure: "Temporal: SetWorkerDeploymentCurrentVersion right after registration, median / p95",
			Value: fmt.Sprintf("accepted %s / %s after it (the call took %s median) (n=%d)", ms(stats(setAfter).Median), ms(stats(setAfter).P95),
				ms(stats(set).Median), len(set)),
			How: "the same, in another worker deployment: SetWorkerDeploymentCurrentVersion tried back to back from the worker's start (refused " +
				"until the version and its task queues are registered), a version of it current before."},
		{Figure: "Temporal: a routing change applied, by when it was made after registration",
			Value: fmt.Sprintf("made right after it: %s; %s; 2.5 s after it: %s", applied(soon), appliedByDelay(window), applied(settled)),
			How: fmt.Sprintf("from an accepted SetWorkerDeploymentCurrentVersion to the first DescribeWorkerDeployment reporting its routing update "+
				"state COMPLETED, asked every 50 ms for up to %s: the write right after registration (the row above; once one is never "+
				"reported applied, that worker deployment's later changes are not either), one made at each of %v after the create time, "+
				"each in a worker deployment of its own with a version current before (a Deployment becomes available about 0.9 s after "+
				"registration here), and one made 2.5 s after it (the describing worker deployment).", completedWait, windowDelays)},
	}
}

// applied summarizes Completed*Seconds figures: the median of those
// applied in time, and how many were not.
func applied(secs []float64) string {
	var in []float64
	for _, s := range secs {
		if s >= 0 {
			in = append(in, s)
		}
	}
	out := fmt.Sprintf("median %s (n=%d)", ms(stats(in).Median), len(in))
	if late := len(secs) - len(in); late > 0 {
		out += fmt.Sprintf(", %d not within %s", late, completedWait)
	}
	return out
}

// byDelay formats CompletedAfterDelay for one sample, in windowDelays' order.
func byDelay(m map[string]float64) string {
	var parts []string
	for _, d := range windowDelays {
		parts = append(parts, fmt.Sprintf("%s: %s", d, appliedIn(m[d.String()])))
	}
	return strings.Join(parts, ", ")
}

// appliedByDelay is applied for each of windowDelays.
func appliedByDelay(m map[string][]float64) string {
	var parts []string
	for _, d := range windowDelays {
		parts = append(parts, fmt.Sprintf("%s after it: %s", d, applied(m[d.String()])))
	}
	return strings.Join(parts, "; ")
}
