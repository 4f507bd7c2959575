package demo

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"sync"
	"time"

	sdkclient "go.temporal.io/sdk/client"

	"github.com/rainbow-deploy/rainbow/dev/demoworker"
)

// hellos counts the Hello workflows the demo keeps starting, by the build
// that ran them (their result names it).
type hellos struct {
	mu       sync.Mutex
	total    map[string]int
	window   map[string]int
	failures int
	windowF  int
	lastErr  error
	// after counts those started since markAfter, failures under "".
	since time.Time
	after map[string]int
}

func (h *hellos) record(build string, started time.Time, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.after != nil && !started.Before(h.since) {
		h.after[build]++
	}
	if err != nil {
		h.failures++
		h.windowF++
		h.lastErr = err
		return
	}
	h.total[build]++
	h.window[build]++
}

// markAfter starts counting the workflows started from now on apart.
func (h *hellos) markAfter() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.since, h.after = time.Now(), map[string]int{}
}

// counted returns the counts since markAfter, failures under "".
func (h *hellos) counted() map[string]int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return maps.Clone(h.after)
}

// takeWindow returns the counts since the last call and starts a new window.
func (h *hellos) takeWindow() (map[string]int, int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	w, f := h.window, h.windowF
	h.window, h.windowF = map[string]int{}, 0
	return w, f
}

func (h *hellos) counts() (map[string]int, int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make(map[string]int, len(h.total))
	for b, n := range h.total {
		out[b] = n
	}
	return out, h.failures
}

func (h *hellos) lastError() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.lastErr == nil {
		return ""
	}
	return h.lastErr.Error()
}

// pinnedRun is the long pinned workflow started on the first version.
type pinnedRun struct {
	id, runID string
	done      chan struct{}
	res       demoworker.LongResult
	err       error
}

func (p *pinnedRun) finished() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// startWorkflows starts the trickle of Hello workflows and the pinned
// workflow. stopWorkflows ends them.
func (s *story) startWorkflows(ctx context.Context) {
	ctx = s.startHellos(ctx)
	c := s.o.Temporal
	s.pinned = &pinnedRun{id: s.idPrefix + "-pinned", done: make(chan struct{})}
	run, err := c.ExecuteWorkflow(ctx, sdkclient.StartWorkflowOptions{ID: s.pinned.id, TaskQueue: s.taskQueue},
		demoworker.LongPinnedWorkflow, demoworker.LongInput{Duration: pinnedLimit, Tick: s.o.PinnedTick})
	if err != nil {
		s.pinned.err = fmt.Errorf("start: %w", err)
		close(s.pinned.done)
	} else {
		s.pinned.runID = run.GetRunID()
		s.workflows.Add(1)
		go func() {
			defer s.workflows.Done()
			defer close(s.pinned.done)
			s.pinned.err = run.Get(ctx, &s.pinned.res)
		}()
	}
}

// startHellos starts a Hello workflow every HelloEvery until
// stopWorkflows; the context it returns ends then.
func (s *story) startHellos(ctx context.Context) context.Context {
	ctx, s.stopHellos = context.WithCancel(ctx)
	s.workflows.Add(1)
	go func() {
		defer s.workflows.Done()
		tick := time.NewTicker(s.o.HelloEvery)
		defer tick.Stop()
		for n := 1; ; n++ {
			s.workflows.Add(1)
			go func() {
				defer s.workflows.Done()
				s.hello(ctx, fmt.Sprintf("%s-hello-%d", s.idPrefix, n))
			}()
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return ctx
}

// hello runs one Hello workflow and records the build that ran it.
func (s *story) hello(ctx context.Context, id string) {
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	started := time.Now()
	run, err := s.o.Temporal.ExecuteWorkflow(wctx, sdkclient.StartWorkflowOptions{ID: id, TaskQueue: s.taskQueue}, demoworker.HelloWorkflow, "rainbow")
	var out string
	if err == nil {
		err = run.Get(wctx, &out)
	}
	if ctx.Err() != nil {
		return // the demo is stopping: not the workflow's fault
	}
	if err != nil {
		s.hellos.record("", started, fmt.Errorf("%s: %w", id, err))
		return
	}
	// "hello rainbow from <build ID>"
	_, build, ok := strings.Cut(out, " from ")
	if !ok {
		s.hellos.record("", started, fmt.Errorf("%s: unexpected result %q", id, out))
		return
	}
	s.hellos.record(build, started, nil)
}

func (s *story) stopWorkflows() {
	if s.stopHellos != nil {
		s.stopHellos()
	}
	s.workflows.Wait()
}

// queryPinned asks the pinned workflow which build ran it last, retrying
// until it answers: its query handler exists once its first activity ran.
func (s *story) queryPinned(ctx context.Context) (string, error) {
	var build string
	_, err := s.wait(ctx, time.Minute, "the pinned workflow to answer its "+demoworker.BuildIDQuery+" query", func(snapshot) (bool, string) {
		if s.pinned.finished() && s.pinned.err != nil {
			return false, "the pinned workflow failed: " + s.pinned.err.Error()
		}
		qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		v, err := s.o.Temporal.QueryWorkflow(qctx, s.pinned.id, s.pinned.runID, demoworker.BuildIDQuery)
		if err != nil {
			return false, err.Error()
		}
		if err := v.Get(&build); err != nil {
			return false, err.Error()
		}
		return true, ""
	})
	return build, err
}
