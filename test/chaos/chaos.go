// Package chaos runs the controller under faults on the local environment's
// real parts (kube-apiserver, etcd, kube-controller-manager, Temporal, demo
// workers) and checks that no workflow is lost and no safety rule broken.
//
// # Running
//
// `go test ./test/chaos/` (part of `make test`) is the smoke: each scenario
// injects a handful of faults in about two minutes. `make chaos` runs the
// full length (-chaos.full, or RAINBOW_CHAOS_FULL=1). Every run prints its
// seed first; -chaos.seed=N (or RAINBOW_CHAOS_SEED=N) replays the same
// random choices (which fault, when). Each run writes its result as JSON to
// .cache/chaos/result-<seed>.json (-chaos.out names another file).
//
// # Writing a scenario
//
// A scenario is a test in this package:
//
//	func TestMyFault(t *testing.T) {
//		s := run.Scenario(t, "my-fault")      // recorder, seeded random source
//		c := s.StartController()                // .cache/bin/manager for s.Namespace
//		// The TWD at v1 (harness.Rollout), then pinned and auto-upgrade
//		// workflows on it and the safety rules, checked while it runs:
//		tw, traffic, inv := s.StartOrders(ProgressiveWithGate)
//		f := s.Fault("controller-kill"); c.Kill(); c.Restart()
//		... wait for the outcome ...; f.Converged()
//		traffic.Finish(); inv.Finish()          // counts lost workflows, final checks
//	}
//
// Scenario.Count and Scenario.Length pick the smoke or the full size.
// Scenario.Violation records a broken rule and fails the test. Faults,
// workflow counts, convergence times and violations land in the JSON result.
//
// # Invariants
//
// Invariants watches the scenario's Deployments and Temporal while faults
// are injected:
//   - no version's Deployment is scaled to zero or deleted while Temporal
//     routes it work (current or ramping) or while a workflow the traffic
//     started pinned on it is still open;
//   - at most one gate workflow run per version (Temporal visibility, by
//     the gate's deterministic workflow ID);
//   - no routing write from a stale plan: the routing Temporal reports only
//     moves forward within a rollout (the target's ramp never drops back,
//     a version that stopped being current never becomes current again
//     unless the spec asks), and never points at a version without pollers.
package chaos

import (
	"encoding/json"
	"flag"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rainbow-deploy/rainbow/test/harness"
)

var (
	seedFlag = flag.Int64("chaos.seed", 0, "seed of the random choices; 0 picks one (RAINBOW_CHAOS_SEED)")
	fullFlag = flag.Bool("chaos.full", false, "run the full length, not the smoke (RAINBOW_CHAOS_FULL=1)")
	outFlag  = flag.String("chaos.out", "", "where to write the JSON result; default .cache/chaos/result-<seed>.json")
)

// Run is one run of the package: its seed, mode and result.
type Run struct {
	Env  *harness.Env
	Seed int64
	Full bool

	mu     sync.Mutex
	result Result
}

// Result is the JSON a run writes.
type Result struct {
	Seed      int64       `json:"seed"`
	Mode      string      `json:"mode"` // "smoke" or "full"
	Started   time.Time   `json:"started"`
	Seconds   float64     `json:"seconds"`
	Machine   Machine     `json:"machine"`
	Scenarios []*Scenario `json:"scenarios"`
}

// Machine is what the run ran on, since every figure depends on it.
type Machine struct {
	CPUs int `json:"cpus"`
	// LoadBefore and LoadAfter are /proc/loadavg's 1, 5 and 15 minutes.
	LoadBefore [3]float64 `json:"loadBefore"`
	LoadAfter  [3]float64 `json:"loadAfter"`
}

// Main is the package's TestMain: it settles the seed and mode, prints them,
// starts the environment and writes the result once the tests ran.
func Main(m *testing.M, run **Run) {
	flag.Parse()
	r := &Run{Seed: *seedFlag, Full: *fullFlag}
	if r.Seed == 0 {
		if v, err := strconv.ParseInt(os.Getenv("RAINBOW_CHAOS_SEED"), 10, 64); err == nil {
			r.Seed = v
		}
	}
	if r.Seed == 0 {
		r.Seed = time.Now().UnixNano() % 1_000_000_000
	}
	if v := os.Getenv("RAINBOW_CHAOS_FULL"); v != "" && v != "0" && v != "false" {
		r.Full = true
	}
	mode := "smoke"
	if r.Full {
		mode = "full"
	} else {
		// The smoke's scenarios mostly wait on their faults' timers: three
		// at once instead of two (the cores) take minutes off make test's
		// longest slot (docs/performance.md, "The test suite").
		harness.DefaultParallel(3)
	}
	fmt.Fprintf(os.Stderr, "chaos: seed %d (%s run); replay with -chaos.seed=%d%s\n", r.Seed, mode, r.Seed,
		map[bool]string{true: " -chaos.full", false: ""}[r.Full])
	r.result = Result{Seed: r.Seed, Mode: mode, Started: time.Now().UTC(), Machine: Machine{CPUs: runtime.NumCPU(), LoadBefore: loadAvg()}}
	*run = r
	harness.Main(m, &r.Env, func(*harness.Env) (func(), error) { return r.writeResult, nil })
}

// writeResult writes the JSON result and says where.
func (r *Run) writeResult() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.result.Seconds = time.Since(r.result.Started).Seconds()
	r.result.Machine.LoadAfter = loadAvg()
	path := *outFlag
	if path == "" {
		path = filepath.Join(r.Env.Root, ".cache", "chaos", fmt.Sprintf("result-%d.json", r.Seed))
	}
	data, err := json.MarshalIndent(&r.result, "", "  ")
	if err == nil {
		if err = os.MkdirAll(filepath.Dir(path), 0o755); err == nil {
			err = os.WriteFile(path, append(data, '\n'), 0o644)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos: write result:", err)
		return
	}
	fmt.Fprintf(os.Stderr, "chaos: result in %s (seed %d)\n", path, r.Seed)
}

func loadAvg() [3]float64 {
	var l [3]float64
	data, err := os.ReadFile("/proc/loadavg")
	if err == nil {
		_, _ = fmt.Sscanf(string(data), "%f %f %f", &l[0], &l[1], &l[2])
	}
	return l
}

// Scenario is one test's record and its slice of the environment.
type Scenario struct {
	Name string `json:"name"`
	// Seed is the run's seed mixed with the name: a scenario's choices do
	// not depend on which others ran before it.
	Seed       int64              `json:"seed"`
	Passed     bool               `json:"passed"`
	Seconds    float64            `json:"seconds"`
	Faults     map[string]int     `json:"faults"`
	Workflows  WorkflowCounts     `json:"workflows"`
	Converge   []Convergence      `json:"convergence"`
	Summary    map[string]Summary `json:"convergenceSummary"`
	Violations []string           `json:"violations"`
	Notes      []string           `json:"notes,omitempty"`

	*harness.T `json:"-"`
	Run        *Run `json:"-"`
	rand       *rand.Rand
	started    time.Time
}

// WorkflowCounts are the workflows a scenario's traffic started.
type WorkflowCounts struct {
	Started   int `json:"started"`
	Completed int `json:"completed"`
	// Lost are workflows that failed, timed out, were terminated, never
	// finished by the end, or (pinned) finished on another version.
	Lost int `json:"lost"`
	// LostIDs names the first lost ones, for a start on the cause.
	LostIDs []string `json:"lostIDs,omitempty"`
}

// Convergence is how long the system took to reach the expected state
// after one fault.
type Convergence struct {
	Fault   string  `json:"fault"`
	At      string  `json:"at"` // offset from the scenario's start
	Seconds float64 `json:"seconds"`
}

// Summary sums up the convergence times of one fault kind.
type Summary struct {
	Count     int     `json:"count"`
	MedianSec float64 `json:"medianSeconds"`
	MaxSec    float64 `json:"maxSeconds"`
}

// Scenario starts a scenario for t: a fresh namespace, a random source
// seeded from the run's seed and name, and a record in the result.
func (r *Run) Scenario(t *testing.T, name string) *Scenario {
	t.Helper()
	h := fnv.New64a()
	h.Write([]byte(name))
	seed := r.Seed ^ int64(h.Sum64()&(1<<62-1))
	s := &Scenario{
		Name: name, Seed: seed, Faults: map[string]int{}, Summary: map[string]Summary{},
		T: r.Env.NewTest(t), Run: r, rand: rand.New(rand.NewPCG(uint64(seed), uint64(r.Seed))), started: time.Now(),
	}
	t.Logf("scenario %s: seed %d", name, seed)
	r.mu.Lock()
	r.result.Scenarios = append(r.result.Scenarios, s)
	r.mu.Unlock()
	t.Cleanup(func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		s.Passed = !t.Failed()
		s.Seconds = time.Since(s.started).Seconds()
		s.summarize()
	})
	return s
}

// Count is smoke in the smoke run, full in the full run.
func (s *Scenario) Count(smoke, full int) int {
	if s.Run.Full {
		return full
	}
	return smoke
}

// Length is smoke in the smoke run, full in the full run.
func (s *Scenario) Length(smoke, full time.Duration) time.Duration {
	if s.Run.Full {
		return full
	}
	return smoke
}

// Between draws a duration in [lo, hi) from the scenario's random source.
func (s *Scenario) Between(lo, hi time.Duration) time.Duration {
	s.Run.mu.Lock()
	defer s.Run.mu.Unlock()
	if hi <= lo {
		return lo
	}
	return lo + time.Duration(s.rand.Int64N(int64(hi-lo)))
}

// IntN draws an int in [0, n) from the scenario's random source.
func (s *Scenario) IntN(n int) int {
	s.Run.mu.Lock()
	defer s.Run.mu.Unlock()
	return s.rand.IntN(n)
}

// Fault is one injected fault, for its convergence time.
type Fault struct {
	s    *Scenario
	kind string
	at   time.Time
}

// Fault counts a fault of kind, injected now.
func (s *Scenario) Fault(kind string) *Fault {
	s.Run.mu.Lock()
	defer s.Run.mu.Unlock()
	s.Faults[kind]++
	return &Fault{s: s, kind: kind, at: time.Now()}
}

// Converged records the time from the fault to now, when the outcome the
// scenario waited for was seen.
func (f *Fault) Converged() time.Duration {
	d := time.Since(f.at)
	f.s.Run.mu.Lock()
	defer f.s.Run.mu.Unlock()
	f.s.Converge = append(f.s.Converge, Convergence{
		Fault: f.kind, At: f.at.Sub(f.s.started).Round(time.Millisecond).String(), Seconds: round3(d.Seconds()),
	})
	return d
}

// Violation records a broken safety rule and fails the test.
func (s *Scenario) Violation(format string, args ...any) {
	s.Helper()
	msg := fmt.Sprintf(format, args...)
	s.Run.mu.Lock()
	s.Violations = append(s.Violations, msg)
	s.Run.mu.Unlock()
	s.Errorf("violation: %s", msg)
}

// Note adds a line to the scenario's record (what a run saw that is worth
// keeping, such as a defect's symptom).
func (s *Scenario) Note(format string, args ...any) {
	s.Run.mu.Lock()
	defer s.Run.mu.Unlock()
	s.Notes = append(s.Notes, fmt.Sprintf(format, args...))
}

// countWorkflows adds a traffic's counts to the scenario's.
func (s *Scenario) countWorkflows(c WorkflowCounts) {
	s.Run.mu.Lock()
	defer s.Run.mu.Unlock()
	s.Workflows.Started += c.Started
	s.Workflows.Completed += c.Completed
	s.Workflows.Lost += c.Lost
	for _, id := range c.LostIDs {
		if len(s.Workflows.LostIDs) < 20 {
			s.Workflows.LostIDs = append(s.Workflows.LostIDs, id)
		}
	}
}

// summarize computes the per-kind convergence summary; mu is held.
func (s *Scenario) summarize() {
	by := map[string][]float64{}
	for _, c := range s.Converge {
		by[c.Fault] = append(by[c.Fault], c.Seconds)
	}
	for kind, v := range by {
		sort.Float64s(v)
		s.Summary[kind] = Summary{Count: len(v), MedianSec: v[len(v)/2], MaxSec: v[len(v)-1]}
	}
}

func round3(f float64) float64 { return float64(int64(f*1000+0.5)) / 1000 }

// logTail is the last lines of a log file, for failure messages.
func logTail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
