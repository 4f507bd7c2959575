package chaos

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/rainbow-deploy/rainbow/dev/demoworker"
)

// Traffic starts the demo worker's long workflows on a task queue, pinned
// and auto-upgrade by turns, each running a random while (some long enough
// to span several rollouts), until Finish.
type Traffic struct {
	s         *Scenario
	taskQueue string
	cancel    context.CancelFunc
	done      chan struct{}

	mu   sync.Mutex
	runs []*trafficRun
}

type trafficRun struct {
	id, runID, workflowType string
	run                     client.WorkflowRun
	started                 time.Time
	closed                  bool
	// pinnedTo is the build a pinned run is pinned on, once known.
	pinnedTo string
}

// Pinned reports whether the run is of the pinned type.
func (r *trafficRun) Pinned() bool { return r.workflowType == demoworker.LongPinnedWorkflow }

// StartTraffic starts a workflow every 1–3s (drawn from the scenario's
// seed) lasting 2–20s (smoke) or 2–40s, a tenth of them 1–3 minutes (full).
func (s *Scenario) StartTraffic(taskQueue string) *Traffic {
	ctx, cancel := context.WithCancel(context.Background())
	t := &Traffic{s: s, taskQueue: taskQueue, cancel: cancel, done: make(chan struct{})}
	go t.loop(ctx)
	s.Cleanup(func() { cancel(); <-t.done })
	return t
}

func (t *Traffic) loop(ctx context.Context) {
	defer close(t.done)
	for i := 0; ; i++ {
		wfType := demoworker.LongPinnedWorkflow
		if i%2 == 1 {
			wfType = demoworker.LongAutoUpgradeWorkflow
		}
		d := t.s.Between(2*time.Second, t.s.Length(20*time.Second, 40*time.Second))
		if t.s.Run.Full && t.s.IntN(10) == 0 {
			d = t.s.Between(time.Minute, 3*time.Minute)
		}
		id := fmt.Sprintf("chaos-%s-%d", t.taskQueue, i)
		startCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
		run, err := t.s.Env.Temporal.ExecuteWorkflow(startCtx, client.StartWorkflowOptions{ID: id, TaskQueue: t.taskQueue},
			wfType, demoworker.LongInput{Duration: d, Tick: 2 * time.Second})
		cancel()
		if err == nil {
			t.mu.Lock()
			t.runs = append(t.runs, &trafficRun{id: id, runID: run.GetRunID(), workflowType: wfType, run: run, started: time.Now()})
			t.mu.Unlock()
		} else if ctx.Err() == nil {
			t.s.Logf("traffic: start %s: %v", id, err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(t.s.Between(time.Second, 3*time.Second)):
		}
	}
}

// Open lists the runs not seen closed yet.
func (t *Traffic) open() []*trafficRun {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []*trafficRun
	for _, r := range t.runs {
		if !r.closed {
			out = append(out, r)
		}
	}
	return out
}

// Finish stops starting workflows, waits up to timeout for every started
// one to complete, counts them into the scenario and returns the counts.
// A workflow is lost if it failed or did not complete in time, and a
// pinned one also if it finished on another build than it started on.
func (t *Traffic) Finish(timeout time.Duration) WorkflowCounts {
	t.cancel()
	<-t.done
	t.mu.Lock()
	runs := append([]*trafficRun(nil), t.runs...)
	t.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var c WorkflowCounts
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for _, r := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			var res demoworker.LongResult
			err := r.run.Get(ctx, &res)
			if err == nil && r.Pinned() && res.StartedOn != res.FinishedOn {
				err = fmt.Errorf("pinned workflow started on %s, finished on %s", res.StartedOn, res.FinishedOn)
			}
			mu.Lock()
			defer mu.Unlock()
			c.Started++
			if err == nil {
				c.Completed++
				return
			}
			c.Lost++
			if errors.Is(err, context.DeadlineExceeded) {
				err = fmt.Errorf("not finished %s after the traffic stopped", timeout)
			}
			t.s.Errorf("workflow %s (%s, started %s) lost: %v", r.id, r.workflowType, r.started.Format(time.TimeOnly), err)
			c.LostIDs = append(c.LostIDs, r.id)
		}()
	}
	wg.Wait()
	t.mu.Lock()
	for _, r := range t.runs {
		r.closed = true
	}
	t.mu.Unlock()
	t.s.countWorkflows(c)
	return c
}
