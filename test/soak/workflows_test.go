package soak

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"

	"github.com/rainbow-deploy/rainbow/dev/demoworker"
)

// started is one workflow the soak started.
type started struct {
	ID, RunID, Type string
	TWD             string
	Deployment      string
	At              time.Time
	Pinned          bool
	Duration        time.Duration
}

// traffic starts the demo worker's workflows on the task queues of the
// TWDs and checks them at the end.
type traffic struct {
	mu        sync.Mutex
	runs      []started
	startErrs []string
}

// workflowKind is what one start picks, with its weight.
type workflowKind struct {
	weight int
	typ    string
	pinned bool
	// duration picks a run time for a long workflow; nil for Hello.
	duration func(r *rand.Rand, soak time.Duration) time.Duration
}

func between(r *rand.Rand, lo, hi time.Duration) time.Duration {
	return lo + time.Duration(r.Int64N(int64(hi-lo)+1))
}

var workflowKinds = []workflowKind{
	{weight: 55, typ: demoworker.HelloWorkflow, pinned: true},
	{weight: 20, typ: demoworker.LongPinnedWorkflow, pinned: true, duration: func(r *rand.Rand, _ time.Duration) time.Duration {
		return between(r, 5*time.Second, time.Minute)
	}},
	// Long pinned workflows that span several rollouts: they keep their
	// version draining while newer versions come and go.
	{weight: 4, typ: demoworker.LongPinnedWorkflow, pinned: true, duration: func(r *rand.Rand, d time.Duration) time.Duration {
		return between(r, d/4, d/2)
	}},
	{weight: 21, typ: demoworker.LongAutoUpgradeWorkflow, duration: func(r *rand.Rand, d time.Duration) time.Duration {
		return between(r, 10*time.Second, max(d/4, 20*time.Second))
	}},
}

// run starts a workflow on the TWD's task queue every 2-6s until stop is
// closed. No long workflow runs past latestEnd.
func (tr *traffic) run(r *rand.Rand, w *worker, soak time.Duration, latestEnd time.Time, stop <-chan struct{}) {
	total := 0
	for _, k := range workflowKinds {
		total += k.weight
	}
	for n := 0; ; n++ {
		select {
		case <-stop:
			return
		case <-time.After(between(r, 2*time.Second, 6*time.Second)):
		}
		pick := r.IntN(total)
		var k workflowKind
		for _, k = range workflowKinds {
			if pick < k.weight {
				break
			}
			pick -= k.weight
		}
		s := started{ID: fmt.Sprintf("soak-%s-%d", w.name, n), Type: k.typ, TWD: w.name, Deployment: w.deployment, Pinned: k.pinned}
		var args []any
		if k.duration == nil {
			args = []any{"soak"}
		} else {
			s.Duration = min(k.duration(r, soak), max(time.Until(latestEnd), 5*time.Second))
			args = []any{demoworker.LongInput{Duration: s.Duration, Tick: 10 * time.Second}}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		run, err := env.Temporal.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: s.ID, TaskQueue: w.taskQueue}, k.typ, args...)
		cancel()
		tr.mu.Lock()
		if err != nil {
			tr.startErrs = append(tr.startErrs, fmt.Sprintf("%s: %v", s.ID, err))
		} else {
			s.RunID, s.At = run.GetRunID(), time.Now()
			tr.runs = append(tr.runs, s)
		}
		tr.mu.Unlock()
	}
}

// outcome is what became of one started workflow.
type outcome struct {
	started
	Err string
	// Builds are the build IDs of the workers that completed its workflow
	// tasks, in order; Start and Close its times in Temporal.
	Builds       []string
	Start, Close time.Time
	// Witness is the build its activities reported, as "first..last".
	Witness string
}

// wait waits for every started workflow to close, at most until deadline,
// and reads the history of each pinned one.
func (tr *traffic) wait(deadline time.Time) []outcome {
	tr.mu.Lock()
	runs := append([]started(nil), tr.runs...)
	tr.mu.Unlock()
	out := make([]outcome, len(runs))
	work := make(chan int)
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				out[i] = check(runs[i], deadline)
			}
		}()
	}
	for i := range runs {
		work <- i
	}
	close(work)
	wg.Wait()
	return out
}

func check(s started, deadline time.Time) outcome {
	o := outcome{started: s}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	run := env.Temporal.GetWorkflow(ctx, s.ID, s.RunID)
	var err error
	if s.Type == demoworker.HelloWorkflow {
		var greeting string
		err = run.Get(ctx, &greeting)
		o.Witness = greeting[strings.LastIndex(greeting, " ")+1:]
	} else {
		var res demoworker.LongResult
		err = run.Get(ctx, &res)
		o.Witness = res.StartedOn + ".." + res.FinishedOn
	}
	if err != nil {
		o.Err = err.Error()
		if ctx.Err() != nil {
			o.Err = "still open at the end of the soak"
		}
		return o
	}
	if !s.Pinned {
		return o
	}
	it := env.Temporal.GetWorkflowHistory(ctx, s.ID, s.RunID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			o.Err = "history: " + err.Error()
			return o
		}
		o.note(ev)
	}
	return o
}

func (o *outcome) note(ev *historypb.HistoryEvent) {
	if o.Start.IsZero() {
		o.Start = ev.GetEventTime().AsTime()
	}
	o.Close = ev.GetEventTime().AsTime()
	if a := ev.GetWorkflowTaskCompletedEventAttributes(); a != nil {
		o.Builds = append(o.Builds, a.GetDeploymentVersion().GetBuildId())
	}
}

// pinnedProblem says what is wrong with a pinned workflow's versions: every
// workflow task must have been completed by one build, the one its
// activities saw at its start and end. Empty when all is well.
func (o *outcome) pinnedProblem() string {
	if len(o.Builds) == 0 {
		return "no completed workflow task in its history"
	}
	first := o.Builds[0]
	for _, b := range o.Builds {
		if b != first {
			return fmt.Sprintf("started on %q, a later workflow task completed on %q (all: %v)", first, b, o.Builds)
		}
	}
	want := first
	if o.Type != demoworker.HelloWorkflow {
		want = first + ".." + first
	}
	if o.Witness != want {
		return fmt.Sprintf("pinned to %q by its history, its activities ran on %q", first, o.Witness)
	}
	return ""
}
