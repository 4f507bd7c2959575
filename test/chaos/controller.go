package chaos

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/rainbow-deploy/rainbow/dev/localenv/process"
	"github.com/rainbow-deploy/rainbow/test/harness"
)

// Controller is a manager process (.cache/bin/manager) watching only the
// scenario's namespace, so that scenarios running side by side and their
// controllers do not meet.
type Controller struct {
	s    *Scenario
	Name string
	// Args are the manager's flags; Restart starts it with them again.
	Args    []string
	LogPath string
	// ProbeAddr and MetricsAddr are its endpoints (fresh ports per start).
	ProbeAddr, MetricsAddr string
	proc                   *process.Process
	starts                 int
}

// StartController starts a manager for the scenario's namespace with the
// environment's admin kubeconfig, extra flags appended, and waits until it
// is ready. It is stopped when the test ends.
func (s *Scenario) StartController(extra ...string) *Controller {
	s.Helper()
	return s.StartControllerNamed("manager", extra...)
}

// StartControllerNamed is StartController for one of several replicas:
// name tells their logs apart.
func (s *Scenario) StartControllerNamed(name string, extra ...string) *Controller {
	s.Helper()
	c := &Controller{s: s, Name: name, LogPath: filepath.Join(s.Env.Info.Dir, s.Namespace+"-"+name+".log")}
	c.Args = append([]string{
		"--kubeconfig=" + s.Env.Info.Kubeconfig,
		"--watch-namespaces=" + s.Namespace,
		"--webhook-port=0", // the scenarios create no TemporalWorkerOwnedResource
		"--zap-devel",
		"--zap-time-encoding=rfc3339nano",
	}, extra...)
	s.Logf("controller %s logs to %s", name, c.LogPath)
	c.start()
	s.Cleanup(func() {
		if c.proc != nil {
			_ = syscall.Kill(c.proc.Pid(), syscall.SIGCONT) // a frozen one cannot stop
			c.proc.Stop(20 * time.Second)
		}
	})
	c.WaitReady(2 * time.Minute)
	return c
}

func (c *Controller) start() {
	c.s.Helper()
	c.ProbeAddr, c.MetricsAddr = harness.FreeAddr(), harness.FreeAddr()
	args := append(append([]string{}, c.Args...),
		"--health-probe-bind-address="+c.ProbeAddr, "--metrics-bind-address="+c.MetricsAddr)
	c.starts++
	mark(c.LogPath, "start %d of %s at %s", c.starts, c.Name, time.Now().UTC().Format(time.RFC3339Nano))
	bin := filepath.Join(c.s.Env.BinDir, "manager")
	if b := os.Getenv("RAINBOW_CHAOS_MANAGER"); b != "" {
		bin = b // a binary of one's own, which a rebuild of .cache/bin cannot swap mid-run
	}
	p, err := process.Start(c.Name, bin, args, os.Environ(), c.LogPath)
	if err != nil {
		c.s.Fatalf("start the controller (run `make bins`?): %v", err)
	}
	c.proc = p
}

// Pid is the running process's id.
func (c *Controller) Pid() int { return c.proc.Pid() }

// WaitReady waits until /readyz answers 200, failing the test if the
// process exits or timeout passes.
func (c *Controller) WaitReady(timeout time.Duration) {
	c.s.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if err := c.proc.ExitError(); err != nil {
			c.s.Fatalf("controller %s: %v", c.Name, err)
		}
		if resp, err := http.Get("http://" + c.ProbeAddr + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			c.s.Fatalf("controller %s not ready after %s; log:\n%s", c.Name, timeout, logTail(c.LogPath, 30))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Kill sends SIGKILL and waits until the process is gone.
func (c *Controller) Kill() {
	c.s.Helper()
	_ = syscall.Kill(-c.proc.Pid(), syscall.SIGKILL)
	select {
	case <-c.proc.Done():
	case <-time.After(30 * time.Second):
		c.s.Fatalf("controller %s (pid %d) still runs 30s after SIGKILL", c.Name, c.proc.Pid())
	}
	mark(c.LogPath, "SIGKILL of %s at %s", c.Name, time.Now().UTC().Format(time.RFC3339Nano))
}

// Restart starts the process again with the same flags (new ports) and
// waits until it is ready.
func (c *Controller) Restart() {
	c.s.Helper()
	if exited, _ := c.proc.Exited(); !exited {
		c.s.Fatalf("controller %s restarted while it still runs", c.Name)
	}
	c.start()
	c.WaitReady(2 * time.Minute)
}

// Freeze stops the process with SIGSTOP: it keeps its connections and
// state, and resumes where it was on Thaw, as a process that lost the CPU
// (or a partitioned node) does.
func (c *Controller) Freeze() {
	_ = syscall.Kill(c.proc.Pid(), syscall.SIGSTOP)
	mark(c.LogPath, "SIGSTOP of %s at %s", c.Name, time.Now().UTC().Format(time.RFC3339Nano))
}

// Thaw resumes a frozen process with SIGCONT.
func (c *Controller) Thaw() {
	mark(c.LogPath, "SIGCONT of %s at %s", c.Name, time.Now().UTC().Format(time.RFC3339Nano))
	_ = syscall.Kill(c.proc.Pid(), syscall.SIGCONT)
}

// Exited reports whether the process has exited.
func (c *Controller) Exited() bool {
	exited, _ := c.proc.Exited()
	return exited
}

// mark appends a line to a controller's log, so that its own lines can be
// read next to what the scenario did to it.
func mark(path, format string, args ...any) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "----- chaos: "+format+"\n", args...)
}

// RestartNoWait starts the process again without waiting until it is ready.
func (c *Controller) RestartNoWait() {
	c.s.Helper()
	if !c.Exited() {
		c.s.Fatalf("controller %s restarted while it still runs", c.Name)
	}
	c.start()
}
