package nodeagent

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/rainbow-deploy/rainbow/dev/localenv/nodeagent/podexec"
)

// process is one run of a container: a local program, or runc running an
// image. exitCode, finishedAt and startErr are written before done is
// closed and only read after it.
type process struct {
	pid       int
	id        string // the containerID: process://<pid> or runc://<id>
	program   string
	startedAt time.Time
	done      chan struct{}
	probes    *probeResults // nil: no probes, ready after readyAfter

	// kill signals the container; nil: the process group.
	kill func(syscall.Signal)
	// onExit runs once the process has exited, before done is closed.
	onExit func()
	// exec runs a command in the container (exec probes); nil: cannot.
	exec func(ctx context.Context, command []string) error

	exitCode   int32
	finishedAt time.Time
	startErr   string // the runtime's reason when the container never ran
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// signal targets the whole process group. The group id stays reserved while
// any member lives, so this cannot hit an unrelated process.
func (p *process) signal(sig syscall.Signal) {
	if p.kill != nil {
		p.kill(sig)
		return
	}
	if err := syscall.Kill(-p.pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		// Fall back to the leader in case the group is gone but it is not.
		_ = syscall.Kill(p.pid, sig)
	}
}

// startProcess launches program (in namespaces with the pod's hostname and
// mounts, when the agent uses them); see launch.
func (a *Agent) startProcess(key, dir string, logs *containerLog, program string, args, env []string, hostname string, mounts []podexec.Mount) (*process, error) {
	var cmd *exec.Cmd
	if a.mountNS {
		cmd = podexecCommand(hostname, mounts, program, args)
	} else {
		cmd = exec.Command(program, args...)
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.Dir = dir
	cmd.Env = env
	start := cmd.Start
	if a.mountNS {
		start = func() error { return podexecStart(cmd) }
	}
	p := &process{program: program}
	if err := a.launch(key, logs, cmd, start, p); err != nil {
		return nil, err
	}
	return p, nil
}

// launch starts cmd as p, in its own process group, with its output appended
// to the container's log file (whose new run logs records), and a goroutine
// that reaps it and enqueues key.
func (a *Agent) launch(key string, logs *containerLog, cmd *exec.Cmd, start func() error, p *process) error {
	logFile, err := os.OpenFile(logs.path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logFile.Close() // the child holds its own copy
	offset, err := logFile.Seek(0, io.SeekEnd)
	if err != nil {
		return err
	}
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr.Setpgid = true
	if cmd.SysProcAttr.Pdeathsig == 0 {
		cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	}
	if err := start(); err != nil {
		return err
	}
	p.pid, p.startedAt, p.done = cmd.Process.Pid, time.Now(), make(chan struct{})
	if p.id == "" {
		p.id = processID(p.pid)
	}
	run := logs.started(offset, p.done)
	a.procWG.Add(1)
	go func() {
		defer a.procWG.Done()
		_ = cmd.Wait()
		p.exitCode = exitCode(cmd.ProcessState)
		p.finishedAt = time.Now()
		// Reap what the program left behind in its group, like a container's cgroup.
		_ = syscall.Kill(-p.pid, syscall.SIGKILL)
		if p.onExit != nil {
			p.onExit()
		}
		run.finish()
		close(p.done)
		a.log.V(1).Info("process exited", "pod", key, "pid", p.pid, "exitCode", p.exitCode)
		a.queue.Add(key)
	}()
	return nil
}

func exitCode(ps *os.ProcessState) int32 {
	if ps == nil {
		return 128
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int32(ws.Signal())
	}
	return int32(ps.ExitCode())
}
