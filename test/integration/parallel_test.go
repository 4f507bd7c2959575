package integration

import (
	"flag"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"
)

// defaultParallel is how many of this package's tests run at once unless
// -parallel says otherwise: they mostly wait (on rollouts, Temporal's
// drainage, sunset delays), not on the CPU, and each has its own namespace,
// TWD and task queue. Not more: they share one Temporal dev server, which
// gets about half a core on a busy 2-core machine; at 12 and at 8 at once
// (the longest, which start together, are also the busiest on Temporal) it
// answered routing writes past the controller's deadline and a demo's Hello
// workflow past its minute. Four leaves room for the package that make test
// runs beside this one (go test -p 2). A test that must not overlap others does not
// call parallel: Go runs the sequential tests first, then the parallel ones.
const defaultParallel = 4

// seconds is how long the longest tests took in a passing run, one at a
// time on an idle machine. The longest start first, so that none of them
// starts last and ends the run; a test not listed starts after those that
// are. A stale figure only costs wall time.
var seconds = map[string]int{
	"TestReadyMeansTemporalRoutesThere":                  141,
	"TestTemporalOutageScalesNothingDown":                134,
	"TestHealthyRolloutsNeverLookFailed/twd-0":           100, // half of the 197 s of the whole, before it was split
	"TestHealthyRolloutsNeverLookFailed/twd-1":           100,
	"TestRolloutAnalysis":                                87,
	"TestCPUAutoscaling":                                 80,
	"TestDrainDeadline/Terminate":                        68,
	"TestManagerHeldByOtherIdentityIsNotFought":          68,
	"TestAnalysisHasNoFalsePositives/twd-0":              63,
	"TestAnalysisHasNoFalsePositives/twd-1":              62,
	"TestRolloutAnalysisWorkflowTasks":                   61,
	"TestProgressDeadlineFailsStuckRollouts":             58,
	"TestDrainDeadline/Cancel":                           57,
	"TestSecondTWDCannotClaimWorkerDeployment":           56,
	"TestOwnedResourcesFollowVersions":                   55,
	"TestMutualTLS":                                      53,
	"TestAPIKey":                                         53,
	"TestBacklogAutoscaling":                             49,
	"TestDeletionWaitsForPinnedWorkflows":                48,
	"TestFluxExampleHealthChecks":                        47,
	"TestExamplesRollOut/progressive":                    47,
	"TestDemo":                                           44,
	"TestAllAtOnceKeepsPinnedWorkflowsOnTheirVersion":    44,
	"TestDemoAbort":                                      43,
	"TestSupersededGateIgnoringCancellationIsTerminated": 41,
	"TestExamplesRollOut/analysis-prometheus":            38,
	"TestExamplesRollOut/analysis":                       38,
	"TestRolloutAnalysisPrometheus":                      34,
	"TestMigrateFromTheWorkerController":                 34,
	"TestDeletingTheTWDRemovesItFromTemporal":            31,
	"TestConnectionAddressNotAllowed":                    31,
	"TestOwnedStatusIsNoDeleteList":                      31,
	"TestDrainDeadline/DryRun":                           31,
}

// parallel runs t in parallel with the package's other parallel tests,
// once one of the package's slots is free. A test whose subtests call
// parallel calls t.Parallel instead: a slot held while its subtests wait
// for one could leave none for them.
func parallel(t *testing.T) {
	t.Parallel()
	slots.acquire(t.Name())
	t.Cleanup(slots.release)
}

// slots hands out the package's -parallel, longest test first. Go's own
// limit is raised out of its way (useSlots): Go starts waiting tests in an
// order of its scheduler's, which put the longest test last.
var slots = &scheduler{}

// useSlots makes the -parallel in effect the package's slots.
func useSlots() {
	n, err := strconv.Atoi(flag.Lookup("test.parallel").Value.String())
	if err != nil || n < 1 {
		n = 1
	}
	slots.free = n
	_ = flag.Set("test.parallel", "1000")
}

// settle is how long the scheduler waits, from the first test asking, for
// the others to ask: they do all at once, when the sequential tests end.
const settle = 2 * time.Second

type scheduler struct {
	mu      sync.Mutex
	free    int
	waiting []waiter
	started bool
	settled bool
}

type waiter struct {
	name  string
	ready chan struct{}
}

func (s *scheduler) acquire(name string) {
	w := waiter{name: name, ready: make(chan struct{})}
	s.mu.Lock()
	s.waiting = append(s.waiting, w)
	if !s.started {
		s.started = true
		time.AfterFunc(settle, func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.settled = true
			s.grant()
		})
	}
	s.grant()
	s.mu.Unlock()
	<-w.ready
}

func (s *scheduler) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.free++
	s.grant()
}

// grant starts the longest waiting tests while slots are free (first come
// among equals).
func (s *scheduler) grant() {
	for s.settled && s.free > 0 && len(s.waiting) > 0 {
		next := 0
		for i, w := range s.waiting {
			if seconds[w.name] > seconds[s.waiting[next].name] {
				next = i
			}
		}
		close(s.waiting[next].ready)
		s.waiting = append(s.waiting[:next], s.waiting[next+1:]...)
		s.free--
	}
}

// TestSlotsStartTheLongestFirst: with one slot, the tests asking at once
// start longest first, then first come.
func TestSlotsStartTheLongestFirst(t *testing.T) {
	s := &scheduler{free: 1}
	names := []string{"TestNotListed", "TestDemo", "TestAlsoNotListed", "TestReadyMeansTemporalRoutesThere"}
	order := make(chan string, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(time.Duration(i) * 50 * time.Millisecond) // asking in this order
			s.acquire(name)
			order <- name
			s.release()
		}()
	}
	wg.Wait()
	close(order)
	var got []string
	for name := range order {
		got = append(got, name)
	}
	want := []string{"TestReadyMeansTemporalRoutesThere", "TestDemo", "TestNotListed", "TestAlsoNotListed"}
	if !slices.Equal(got, want) {
		t.Fatalf("started %v, want %v", got, want)
	}
}
