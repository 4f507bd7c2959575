package soak

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rainbow-deploy/rainbow/dev/localenv/process"
)

// controller runs the manager binary against the environment, restarts it
// on request and samples its resident memory.
type controller struct {
	path, logPath string
	kubeconfig    string

	mu      sync.Mutex
	proc    *process.Process
	probe   string
	samples []RSSSample
}

// Restart is one controller restart the soak made.
type Restart struct {
	At     time.Time `json:"at"`
	Signal string    `json:"signal"`
	// Down is how long no controller ran; Ready how long the new one took
	// to answer /readyz.
	DownSeconds  float64 `json:"downSeconds"`
	ReadySeconds float64 `json:"readySeconds"`
}

func newController(dir string) *controller {
	path := *managerFlag
	if path == "" {
		path = filepath.Join(env.BinDir, "manager")
	}
	return &controller{
		path:       path,
		logPath:    filepath.Join(dir, "manager.log"),
		kubeconfig: env.Info.Kubeconfig,
	}
}

// start runs a new manager process and waits until it is ready.
func (c *controller) start() (time.Duration, error) {
	var addrs [2]string
	for i := range addrs {
		port, err := process.FreePort("127.0.0.1")
		if err != nil {
			return 0, err
		}
		addrs[i] = "127.0.0.1:" + strconv.Itoa(port)
	}
	args := []string{
		"--kubeconfig=" + c.kubeconfig,
		"--metrics-bind-address=" + addrs[0],
		"--health-probe-bind-address=" + addrs[1],
		"--webhook-port=0", // the soak attaches no owned resources
	}
	began := time.Now()
	p, err := process.Start("manager", c.path, args, append(os.Environ(), "KUBECONFIG="), c.logPath)
	if err != nil {
		return 0, err
	}
	c.mu.Lock()
	c.proc, c.probe = p, addrs[1]
	c.mu.Unlock()
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		if err := p.ExitError(); err != nil {
			return 0, err
		}
		if resp, err := http.Get("http://" + c.probe + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return time.Since(began), nil
			}
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("manager not ready after 2 minutes; log %s:\n%s", c.logPath, process.Tail(c.logPath, 20))
		}
	}
}

// restart stops the running manager with sig (SIGKILL: no chance to clean
// up; SIGTERM: a graceful shutdown), waits down, and starts a new one.
func (c *controller) restart(sig syscall.Signal, down time.Duration) (Restart, error) {
	c.mu.Lock()
	p := c.proc
	c.mu.Unlock()
	r := Restart{At: time.Now(), Signal: sig.String()}
	if sig == syscall.SIGKILL {
		_ = syscall.Kill(p.Pid(), syscall.SIGKILL)
		<-p.Done()
	} else {
		p.Stop(time.Minute)
	}
	time.Sleep(down)
	r.DownSeconds = time.Since(r.At).Seconds()
	ready, err := c.start()
	r.ReadySeconds = ready.Seconds()
	return r, err
}

// alive fails when the manager exited without being asked to.
func (c *controller) alive() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.proc.ExitError()
}

func (c *controller) stop() {
	c.mu.Lock()
	p := c.proc
	c.mu.Unlock()
	if p != nil {
		p.Stop(30 * time.Second)
	}
}

// sample records the manager's resident memory (VmRSS in /proc).
func (c *controller) sample() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.proc == nil {
		return
	}
	if exited, _ := c.proc.Exited(); exited {
		return
	}
	pid := c.proc.Pid()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "VmRSS:" && f[2] == "kB" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			c.samples = append(c.samples, RSSSample{At: time.Now(), PID: pid, Bytes: kb << 10})
		}
	}
}

func (c *controller) rss() []RSSSample {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]RSSSample(nil), c.samples...)
}
