package nodeagent

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	corev1 "k8s.io/api/core/v1"

	"github.com/rainbow-deploy/rainbow/dev/localenv/nodeagent/podexec"
)

// RuncRoot is where the agent keeps runc's state, under its RootDir: `runc
// --root <RootDir>/runc state <id>` describes the container whose status
// names runc://<id>.
func RuncRoot(rootDir string) string { return filepath.Join(rootDir, "runc") }

// ContainerIDPrefix marks the containerID of a container run by runc.
const ContainerIDPrefix = "runc://"

// defaultPath is what a container gets when neither its image nor the pod
// sets PATH, as with containerd.
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// defaultCaps are the capabilities containerd gives a container before
// securityContext.capabilities drops or adds any.
var defaultCaps = []string{
	"CAP_AUDIT_WRITE", "CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FOWNER", "CAP_FSETID", "CAP_KILL", "CAP_MKNOD",
	"CAP_NET_BIND_SERVICE", "CAP_NET_RAW", "CAP_SETFCAP", "CAP_SETGID", "CAP_SETPCAP", "CAP_SETUID", "CAP_SYS_CHROOT",
}

// runtimeSpec is the OCI runtime configuration of one container run of
// spec from an image with config img: the process kubelet would start
// (command and args over the image's entrypoint and cmd, the image's
// environment under the pod's, the user from securityContext or the image),
// the root file system read-only if securityContext says so, the volume
// mounts, and namespaces for everything but the network: the process
// shares the node's, as every pod here does. hostname "" keeps the
// node's (hostNetwork).
func runtimeSpec(pod *corev1.Pod, spec *corev1.Container, img v1.Config, env *envList, hostname string, mounts []podexec.Mount) (*specs.Spec, error) {
	args := slices.Clone(img.Entrypoint)
	switch {
	case len(spec.Command) > 0:
		args = nil
		for _, a := range slices.Concat(spec.Command, spec.Args) {
			args = append(args, expand(a, env.lookup))
		}
	case len(spec.Args) > 0:
		for _, a := range spec.Args {
			args = append(args, expand(a, env.lookup))
		}
	default:
		args = append(args, img.Cmd...)
	}
	if len(args) == 0 {
		return nil, &configError{"no command specified: the image has no entrypoint or cmd, and the container no command"}
	}

	final := &envList{}
	for _, kv := range img.Env {
		k, v, _ := strings.Cut(kv, "=")
		final.set(k, v)
	}
	if _, ok := final.lookup("PATH"); !ok {
		final.set("PATH", defaultPath)
	}
	for _, k := range env.names {
		final.set(k, env.values[k])
	}
	processEnv := make([]string, 0, len(final.names))
	for _, k := range final.names {
		processEnv = append(processEnv, k+"="+final.values[k])
	}

	user, err := processUser(pod, spec, img.User)
	if err != nil {
		return nil, err
	}
	cwd := spec.WorkingDir
	if cwd == "" {
		cwd = img.WorkingDir
	}
	if cwd == "" {
		cwd = "/"
	}
	sc := spec.SecurityContext
	if sc == nil {
		sc = &corev1.SecurityContext{}
	}
	caps := capabilities(sc.Capabilities)
	procCaps := &specs.LinuxCapabilities{Bounding: caps}
	if user.UID == 0 {
		procCaps.Effective, procCaps.Permitted = caps, caps
	}

	s := &specs.Spec{
		Version: "1.0.2",
		Process: &specs.Process{
			User: user, Args: args, Env: processEnv, Cwd: cwd, Capabilities: procCaps,
			// Kubernetes allows privilege escalation unless told otherwise.
			NoNewPrivileges: sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation,
		},
		Root:     &specs.Root{Path: "rootfs", Readonly: sc.ReadOnlyRootFilesystem != nil && *sc.ReadOnlyRootFilesystem},
		Hostname: hostname,
		Mounts: []specs.Mount{
			{Destination: "/proc", Type: "proc", Source: "proc", Options: []string{"nosuid", "noexec", "nodev"}},
			{Destination: "/dev", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "strictatime", "mode=755", "size=65536k"}},
			{Destination: "/dev/pts", Type: "devpts", Source: "devpts", Options: []string{"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"}},
			{Destination: "/dev/shm", Type: "tmpfs", Source: "shm", Options: []string{"nosuid", "noexec", "nodev", "mode=1777", "size=65536k"}},
			{Destination: "/dev/mqueue", Type: "mqueue", Source: "mqueue", Options: []string{"nosuid", "noexec", "nodev"}},
			// Bound, not mounted: a fresh sysfs needs a network namespace of its own.
			{Destination: "/sys", Type: "bind", Source: "/sys", Options: []string{"rbind", "nosuid", "noexec", "nodev", "ro"}},
		},
		Linux: &specs.Linux{
			Namespaces: []specs.LinuxNamespace{{Type: specs.PIDNamespace}, {Type: specs.IPCNamespace}, {Type: specs.MountNamespace}},
			MaskedPaths: []string{"/proc/acpi", "/proc/asound", "/proc/kcore", "/proc/keys", "/proc/latency_stats", "/proc/timer_list",
				"/proc/timer_stats", "/proc/sched_debug", "/sys/firmware", "/proc/scsi"},
			ReadonlyPaths: []string{"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"},
		},
	}
	if hostname != "" {
		s.Linux.Namespaces = append(s.Linux.Namespaces, specs.LinuxNamespace{Type: specs.UTSNamespace})
	}
	for _, m := range mounts {
		opts := []string{"rbind", "rprivate", "rw"}
		if m.ReadOnly {
			opts[2] = "ro"
		}
		s.Mounts = append(s.Mounts, specs.Mount{Destination: m.Target, Type: "bind", Source: m.Source, Options: opts})
	}
	return s, nil
}

// processUser is the container's user: securityContext's runAsUser and
// runAsGroup (the container's over the pod's) over the image's USER, which
// must be numeric ("uid" or "uid:gid"). runAsNonRoot refuses uid 0 as
// kubelet does.
func processUser(pod *corev1.Pod, spec *corev1.Container, imageUser string) (specs.User, error) {
	var u specs.User
	var uid, gid *int64
	if imageUser != "" {
		us, gs, hasGroup := strings.Cut(imageUser, ":")
		n, err := strconv.ParseUint(us, 10, 32)
		if err != nil {
			return u, &configError{fmt.Sprintf("the image's user %q is not numeric: set securityContext.runAsUser (this node agent reads no /etc/passwd)", imageUser)}
		}
		uid = ptrTo(int64(n))
		if hasGroup {
			g, err := strconv.ParseUint(gs, 10, 32)
			if err != nil {
				return u, &configError{fmt.Sprintf("the image's group %q is not numeric: set securityContext.runAsGroup", gs)}
			}
			gid = ptrTo(int64(g))
		}
	}
	nonRoot := false
	for _, sc := range []*corev1.PodSecurityContext{pod.Spec.SecurityContext} {
		if sc == nil {
			continue
		}
		if sc.RunAsUser != nil {
			uid = sc.RunAsUser
		}
		if sc.RunAsGroup != nil {
			gid = sc.RunAsGroup
		}
		nonRoot = sc.RunAsNonRoot != nil && *sc.RunAsNonRoot
		u.AdditionalGids = append(u.AdditionalGids, toUint32s(sc.SupplementalGroups)...)
		if sc.FSGroup != nil {
			u.AdditionalGids = append(u.AdditionalGids, uint32(*sc.FSGroup))
		}
	}
	if sc := spec.SecurityContext; sc != nil {
		if sc.RunAsUser != nil {
			uid = sc.RunAsUser
		}
		if sc.RunAsGroup != nil {
			gid = sc.RunAsGroup
		}
		if sc.RunAsNonRoot != nil {
			nonRoot = *sc.RunAsNonRoot
		}
	}
	if uid != nil {
		u.UID = uint32(*uid)
	}
	if gid != nil {
		u.GID = uint32(*gid)
	}
	if nonRoot && u.UID == 0 {
		return u, &configError{fmt.Sprintf("container has runAsNonRoot and image will run as root (pod: %q, container: %s)", pod.Namespace+"/"+pod.Name, spec.Name)}
	}
	return u, nil
}

func ptrTo[T any](v T) *T { return &v }

func toUint32s(in []int64) []uint32 {
	out := make([]uint32, len(in))
	for i, v := range in {
		out[i] = uint32(v)
	}
	return out
}

// capabilities applies securityContext.capabilities to defaultCaps: drop
// first ("ALL" drops every one), then add.
func capabilities(c *corev1.Capabilities) []string {
	caps := slices.Clone(defaultCaps)
	if c == nil {
		return caps
	}
	name := func(cp corev1.Capability) string {
		n := strings.ToUpper(string(cp))
		if !strings.HasPrefix(n, "CAP_") {
			n = "CAP_" + n
		}
		return n
	}
	for _, d := range c.Drop {
		if strings.EqualFold(string(d), "ALL") {
			caps = nil
			break
		}
		caps = slices.DeleteFunc(caps, func(s string) bool { return s == name(d) })
	}
	for _, a := range c.Add {
		if n := name(a); !slices.Contains(caps, n) {
			caps = append(caps, n)
		}
	}
	return caps
}

// runcContainer is one container run by `runc run`, in the foreground: runc
// stays the agent's child for as long as the container runs, passes it its
// stdio (the log file) and exits with its status (128+n when signal n
// killed it).
type runcContainer struct {
	runc, root, id string
	bundle         string
}

// command is runc with its state root, then args.
func (r *runcContainer) command(args ...string) *exec.Cmd {
	return exec.Command(r.runc, append([]string{"--root", r.root}, args...)...)
}

// signal asks runc to signal the container's first process. Before the
// container exists (or after it is gone) runc run itself gets the signal,
// which it forwards once the container runs; SIGKILL ends runc run.
func (r *runcContainer) signal(pid int, sig syscall.Signal) {
	if err := r.command("kill", r.id, strconv.Itoa(int(sig))).Run(); err != nil {
		_ = syscall.Kill(pid, sig)
	}
}

// exec runs command in the container as its process runs (user, env,
// working directory, capabilities), like a CRI runtime's exec: `runc exec
// --process` with the container's process and other args.
func (r *runcContainer) exec(ctx context.Context, proc *specs.Process, command []string) error {
	if len(command) == 0 {
		return errors.New("exec probe without a command")
	}
	p := *proc
	p.Args = command
	data, err := json.Marshal(&p)
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(r.bundle, "exec-*.json")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, r.runc, "--root", r.root, "exec", "--process", f.Name(), r.id)
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		return fmt.Errorf("command %q timed out", command)
	}
	if err != nil {
		return fmt.Errorf("command %q: %v: %s", command, err, bytes.TrimSpace(out))
	}
	return nil
}

// startError is the last error runc logged, if the container never ran.
func (r *runcContainer) startError() string {
	f, err := os.Open(filepath.Join(r.bundle, "runc.log"))
	if err != nil {
		return ""
	}
	defer f.Close()
	var msg string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var rec struct{ Level, Msg string }
		if json.Unmarshal(sc.Bytes(), &rec) == nil && rec.Level == "error" {
			msg = rec.Msg
		}
	}
	return msg
}

// cleanup removes what is left of the container and its bundle.
func (r *runcContainer) cleanup() error {
	_ = r.command("delete", "--force", r.id).Run()
	return os.RemoveAll(r.bundle)
}

// FindRunc is the runc to use: configured (Config.Runc) if set, runc on
// PATH, or Debian's /usr/sbin/runc (not on every user's PATH).
func FindRunc(configured string) (string, error) {
	if configured != "" {
		return configured, checkExecutable(configured)
	}
	if p, err := exec.LookPath("runc"); err == nil {
		return p, nil
	}
	if checkExecutable("/usr/sbin/runc") == nil {
		return "/usr/sbin/runc", nil
	}
	return "", fmt.Errorf("the OCI runtime runc is not installed: install it (`apt-get install -y runc` on Debian and Ubuntu; `make test` does) or run the image's binary as a program instead (docs/local-environment.md)")
}

func (a *Agent) runcBinary() (string, error) { return FindRunc(a.cfg.Runc) }

// runcPid asks runc for the first process of a running container.
func (a *Agent) runcPid(id string) (int, bool) {
	runc, err := a.runcBinary()
	if err != nil {
		return 0, false
	}
	out, err := exec.Command(runc, "--root", RuncRoot(a.cfg.RootDir), "state", id).Output()
	var st struct {
		Status string `json:"status"`
		Pid    int    `json:"pid"`
	}
	if err != nil || json.Unmarshal(out, &st) != nil || st.Status != "running" || st.Pid <= 0 {
		return 0, false
	}
	return st.Pid, true
}

// removeStaleContainers deletes the containers a previous agent with the
// same RootDir left in runc's state (it was killed before it stopped them).
func (a *Agent) removeStaleContainers() {
	runc, err := a.runcBinary()
	if err != nil {
		return
	}
	root := RuncRoot(a.cfg.RootDir)
	out, err := exec.Command(runc, "--root", root, "list", "--quiet").Output()
	if err != nil {
		return
	}
	for _, id := range strings.Fields(string(out)) {
		a.log.Info("removing a container a previous agent left running", "id", id)
		_ = exec.Command(runc, "--root", root, "delete", "--force", id).Run()
	}
}

// startImageContainer unpacks the image into a fresh bundle in the pod's
// directory and starts it with runc. Errors of type *imageError and
// *configError are the image's or the pod's; others say why runc could not
// be started (its own failures are in process.startErr once it exits).
func (a *Agent) startImageContainer(pod *corev1.Pod, st *podState, c *container, spec *corev1.Container, layoutDir string, env *envList, hostname string) (*process, string, error) {
	runc, err := a.runcBinary()
	if err != nil {
		return nil, "", err
	}
	if uid := os.Geteuid(); uid != 0 {
		// The runtime config is not a rootless one (no user namespace).
		return nil, "", fmt.Errorf("running the image %s under runc needs root; the node agent runs as uid %d", spec.Image, uid)
	}
	img, err := layoutImage(layoutDir, spec.Image)
	if err != nil {
		return nil, "", err
	}
	digest, err := img.Digest()
	if err != nil {
		return nil, "", &imageError{err.Error()}
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, "", &imageError{fmt.Sprintf("image %s: %v", spec.Image, err)}
	}
	r := &runcContainer{
		runc: runc, root: RuncRoot(a.cfg.RootDir),
		id:     fmt.Sprintf("%s_%s_%d", pod.UID, c.name, c.restartCount),
		bundle: filepath.Join(st.dir, "containers", c.name),
	}
	if err := r.cleanup(); err != nil {
		return nil, "", err
	}
	if err := os.MkdirAll(r.bundle, 0o700); err != nil {
		return nil, "", err
	}
	hosts := filepath.Join(st.dir, "etc-hosts")
	if err := os.WriteFile(hosts, []byte(hostsFile(st.podIP, hostname)), 0o644); err != nil {
		return nil, "", err
	}
	mounts := []podexec.Mount{{Source: hosts, Target: "/etc/hosts", ReadOnly: true}}
	if fi, err := os.Stat("/etc/resolv.conf"); err == nil && fi.Mode().IsRegular() {
		mounts = append(mounts, podexec.Mount{Source: "/etc/resolv.conf", Target: "/etc/resolv.conf", ReadOnly: true})
	}
	mounts = append(mounts, containerMounts(pod, spec, st.volumeDirs, env, false)...)
	rs, err := runtimeSpec(pod, spec, cf.Config, env, hostname, mounts)
	if err != nil {
		return nil, "", err
	}
	data, err := json.MarshalIndent(rs, "", "  ")
	if err != nil {
		return nil, "", err
	}
	if err := os.WriteFile(filepath.Join(r.bundle, "config.json"), data, 0o600); err != nil {
		return nil, "", err
	}
	if err := unpack(img, filepath.Join(r.bundle, "rootfs")); err != nil {
		return nil, "", fmt.Errorf("unpacking image %s: %w", spec.Image, err)
	}
	cmd := r.command("--log", filepath.Join(r.bundle, "runc.log"), "--log-format", "json", "run", "--bundle", r.bundle, r.id)
	cmd.Dir = r.bundle
	// If the agent dies, runc run passes SIGTERM on to the container and
	// removes it once it exits; SIGKILL would end runc and orphan it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	p := &process{id: ContainerIDPrefix + r.id, program: spec.Image}
	p.kill = func(sig syscall.Signal) { r.signal(p.pid, sig) }
	p.exec = func(ctx context.Context, command []string) error { return r.exec(ctx, rs.Process, command) }
	p.onExit = func() {
		p.startErr = r.startError()
		if err := r.cleanup(); err != nil {
			a.log.Error(err, "removing a container's bundle", "pod", st.key, "container", c.name)
		}
	}
	if err := a.launch(st.key, c.logs, cmd, cmd.Start, p); err != nil {
		_ = r.cleanup()
		return nil, "", err
	}
	return p, imageRepository(spec.Image) + "@" + digest.String(), nil
}

// hostsFile is the container's /etc/hosts, as kubelet writes it for a pod.
func hostsFile(podIP, hostname string) string {
	s := "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"
	if hostname != "" {
		s += podIP + "\t" + hostname + "\n"
	}
	return s
}
