// Package podexec starts a container's program in a mount namespace of its
// own, with the pod's volumes bind-mounted at their mountPath, and with the
// pod's hostname in a UTS namespace, as a container runtime would. Go
// cannot run code between fork and exec, so the node agent re-executes its
// own binary (/proc/self/exe) under the name Arg0 in new namespaces
// (CLONE_NEWNS, CLONE_NEWUTS); this package's init recognizes that name,
// sets the hostname, makes every mount private, binds the volumes, and
// replaces itself with the program (execve). Any binary that links the node agent
// therefore doubles as the helper.
//
// The package imports almost nothing, so its init runs within a few
// milliseconds of the helper's start, before the heavy packages of the
// binary that links it.
package podexec

import (
	"os"
	"sort"
	"strings"
	"syscall"
)

// Arg0 is argv[0] of the helper.
const Arg0 = "rainbow-pod-exec"

// statusFD is the pipe the helper reports a setup failure on. It is
// close-on-exec, so the agent reads EOF once the program runs.
const statusFD = 3

// Mount is one bind mount in the container's mount namespace.
type Mount struct {
	Source, Target string
	ReadOnly       bool
}

// Args is the helper's argv after Arg0: the hostname (empty: keep the
// node's), the mounts, then the program and its arguments.
func Args(hostname string, mounts []Mount, program string, args []string) []string {
	out := make([]string, 0, 2+4*len(mounts)+2+len(args))
	if hostname != "" {
		out = append(out, "-h", hostname)
	}
	for _, m := range mounts {
		mode := "rw"
		if m.ReadOnly {
			mode = "ro"
		}
		out = append(out, "-m", mode, m.Source, m.Target)
	}
	out = append(out, "--", program)
	return append(out, args...)
}

// CheckArgs is the helper's argv after Arg0 to test that mount namespaces
// work: it makes the mounts private, binds the working directory onto
// itself and exits 0.
func CheckArgs() []string { return []string{"--check"} }

func init() {
	if len(os.Args) == 0 || os.Args[0] != Arg0 {
		return
	}
	err := run(os.Args[1:])
	// run only returns on failure: tell the agent why, and the log too.
	msg := Arg0 + ": " + err.Error() + "\n"
	status := os.NewFile(statusFD, "status")
	if _, werr := status.WriteString(msg); werr != nil {
		_, _ = os.Stderr.WriteString(msg)
	}
	os.Exit(127)
}

type failure string

func (f failure) Error() string { return string(f) }

func fail(what string, err error) error { return failure(what + ": " + err.Error()) }

func run(args []string) error {
	syscall.CloseOnExec(statusFD)
	if len(args) == 1 && args[0] == "--check" {
		if err := makePrivate(); err != nil {
			return err
		}
		dir, err := os.Getwd()
		if err != nil {
			return fail("getwd", err)
		}
		if err := syscall.Mount(dir, dir, "", syscall.MS_BIND, ""); err != nil {
			return fail("bind mount "+dir, err)
		}
		os.Exit(0)
	}
	if len(args) >= 2 && args[0] == "-h" {
		if err := syscall.Sethostname([]byte(args[1])); err != nil {
			return fail("set the hostname", err)
		}
		args = args[2:]
	}
	var mounts []Mount
	for len(args) >= 4 && args[0] == "-m" {
		mounts = append(mounts, Mount{Source: args[2], Target: args[3], ReadOnly: args[1] == "ro"})
		args = args[4:]
	}
	if len(args) < 2 || args[0] != "--" {
		return failure("usage: " + Arg0 + " [-h HOSTNAME] [-m ro|rw SOURCE TARGET]... -- PROGRAM [ARG]...")
	}
	if err := makePrivate(); err != nil {
		return err
	}
	// Parents before children, so that a mount inside another volume lands
	// in that volume.
	sort.SliceStable(mounts, func(i, j int) bool { return depth(mounts[i].Target) < depth(mounts[j].Target) })
	for _, m := range mounts {
		if err := bind(m); err != nil {
			return err
		}
	}
	// Read-only last: a mount point inside a read-only volume must be
	// created before that volume becomes read-only.
	for _, m := range mounts {
		if !m.ReadOnly {
			continue
		}
		if err := syscall.Mount("", m.Target, "", syscall.MS_BIND|syscall.MS_REMOUNT|syscall.MS_RDONLY, ""); err != nil {
			return fail("remount "+m.Target+" read-only", err)
		}
	}
	program := args[1]
	return fail("exec "+program, syscall.Exec(program, args[1:], os.Environ()))
}

// makePrivate stops mounts from propagating between this namespace and the
// host's: without it, a bind mount here would appear on the host too.
func makePrivate() error {
	if err := syscall.Mount("", "/", "", syscall.MS_REC|syscall.MS_PRIVATE, ""); err != nil {
		return fail("make mounts private", err)
	}
	return nil
}

// bind mounts m.Source at m.Target, creating the mount point like a runtime
// does: a directory for a directory, an empty file for a file.
func bind(m Mount) error {
	fi, err := os.Stat(m.Source)
	if err != nil {
		return fail("volume source", err)
	}
	if fi.IsDir() {
		err = os.MkdirAll(m.Target, 0o755)
	} else if _, serr := os.Stat(m.Target); os.IsNotExist(serr) {
		if err = os.MkdirAll(parent(m.Target), 0o755); err == nil {
			var f *os.File
			if f, err = os.OpenFile(m.Target, os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
				err = f.Close()
			}
		}
	}
	if err != nil {
		return fail("mount point "+m.Target, err)
	}
	if err := syscall.Mount(m.Source, m.Target, "", syscall.MS_BIND|syscall.MS_REC, ""); err != nil {
		return fail("bind mount "+m.Source+" at "+m.Target, err)
	}
	return nil
}

func depth(p string) int { return strings.Count(strings.TrimRight(p, "/"), "/") }

func parent(p string) string {
	p = strings.TrimRight(p, "/")
	if i := strings.LastIndexByte(p, '/'); i > 0 {
		return p[:i]
	}
	return "/"
}
