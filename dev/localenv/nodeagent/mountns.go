package nodeagent

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	corev1 "k8s.io/api/core/v1"

	"github.com/rainbow-deploy/rainbow/dev/localenv/nodeagent/podexec"
)

// podexecCommand is exec.Cmd for program in a new mount namespace with
// mounts and, unless hostname is empty, a UTS namespace with that hostname.
// Start it with podexecStart, which reports a failed mount or exec as an
// error.
func podexecCommand(hostname string, mounts []podexec.Mount, program string, args []string) *exec.Cmd {
	flags := uintptr(syscall.CLONE_NEWNS)
	if hostname != "" {
		flags |= syscall.CLONE_NEWUTS
	}
	return &exec.Cmd{
		// The running binary itself, even if its file was replaced since.
		Path:        "/proc/self/exe",
		Args:        append([]string{podexec.Arg0}, podexec.Args(hostname, mounts, program, args)...),
		SysProcAttr: &syscall.SysProcAttr{Cloneflags: flags},
	}
}

// podHostname is the hostname kubelet gives a pod's containers:
// spec.hostname or the pod's name, at most 63 characters. Pods on the
// host network keep the node's ("").
func podHostname(pod *corev1.Pod) string {
	if pod.Spec.HostNetwork {
		return ""
	}
	h := pod.Spec.Hostname
	if h == "" {
		h = pod.Name
	}
	if len(h) > 63 {
		h = strings.TrimRight(h[:63], "-.")
	}
	return h
}

// podexecStart starts cmd (made by podexecCommand, with any further SysProcAttr fields
// set) and waits until the helper either ran the program or failed; the
// error then says why, and the helper process has been reaped.
func podexecStart(cmd *exec.Cmd) error {
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	defer r.Close()
	cmd.ExtraFiles = []*os.File{w} // fd 3 in the child
	err = cmd.Start()
	w.Close()
	if err != nil {
		return err
	}
	msg, err := io.ReadAll(r) // EOF at exec: the pipe is close-on-exec there
	if err == nil && len(msg) == 0 {
		return nil
	}
	_ = cmd.Wait()
	if err != nil {
		return err
	}
	return errors.New(strings.TrimSpace(strings.TrimPrefix(string(msg), podexec.Arg0+": ")))
}

// mountNamespaces reports whether this process may create mount namespaces (it
// needs CAP_SYS_ADMIN, in practice root), by running the helper's check.
func mountNamespaces() error {
	cmd := &exec.Cmd{
		Path:        "/proc/self/exe",
		Args:        append([]string{podexec.Arg0}, podexec.CheckArgs()...),
		Dir:         os.TempDir(),
		SysProcAttr: &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNS | syscall.CLONE_NEWUTS},
	}
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	defer r.Close()
	cmd.ExtraFiles = []*os.File{w}
	err = cmd.Start()
	w.Close()
	if err != nil {
		return err
	}
	msg, _ := io.ReadAll(r)
	if err := cmd.Wait(); err != nil {
		if len(msg) > 0 {
			return errors.New(strings.TrimSpace(string(msg)))
		}
		return err
	}
	return nil
}

// containerMounts are the bind mounts of a container's volumeMounts. The
// volume types kubelet mounts read-only (secret, configMap, downwardAPI,
// projected) are read-only here too; volumes the agent skips are not
// mounted. A container that sees the host's file system (hostFS) needs no
// mount of a hostPath volume at its own path; one with a root of its own does.
func containerMounts(pod *corev1.Pod, c *corev1.Container, volumeDirs map[string]string, env *envList, hostFS bool) []podexec.Mount {
	readOnlyType := map[string]bool{}
	for _, v := range pod.Spec.Volumes {
		readOnlyType[v.Name] = v.Secret != nil || v.ConfigMap != nil || v.DownwardAPI != nil || v.Projected != nil
	}
	var out []podexec.Mount
	for _, m := range c.VolumeMounts {
		dir := mountSource(m, volumeDirs, env)
		target := filepath.Clean(m.MountPath)
		if dir == "" || !filepath.IsAbs(target) {
			continue
		}
		if dir == target && hostFS {
			continue // a hostPath volume at its own path
		}
		out = append(out, podexec.Mount{Source: dir, Target: target, ReadOnly: m.ReadOnly || readOnlyType[m.Name]})
	}
	return out
}
