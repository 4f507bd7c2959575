package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/rainbow-deploy/rainbow/dev/localenv/nodeagent/podexec"
)

const (
	backoffInitial = time.Second
	backoffMax     = 30 * time.Second
	backoffReset   = 60 * time.Second
)

type containerKind int

const (
	kindMain containerKind = iota
	kindInit
	kindSidecar // init container with restartPolicy Always
)

// container is the agent's record of one container across restarts.
type container struct {
	name string
	kind containerKind

	imageID      string // of the last run
	restartCount int32
	backoff      time.Duration
	nextStart    time.Time
	everStarted  bool

	proc                    *process                         // current run, nil when not running
	logs                    *containerLog                    // its runs' parts of the log file
	lastTerm                *corev1.ContainerStateTerminated // previous run that was restarted
	final                   *corev1.ContainerStateTerminated // last run, never restarted
	waitReason, waitMessage string
}

// podState is only touched by the reconcile of its key (the workqueue
// serializes those), except after the workers stopped in Run.
type podState struct {
	key, namespace, name string
	uid                  types.UID
	dir                  string
	startTime            time.Time

	podIP      string
	volumeDirs map[string]string // volume name -> host dir; "" means skipped
	volumeHash map[string]string // volume name -> content last written
	tokens     map[string]token  // "<volume>/<source index>" -> service-account token
	volumeErr  string

	init []*container
	main []*container

	initialized bool
	terminal    corev1.PodPhase // Succeeded or Failed once reached
	terminating bool            // SIGTERM sent; nothing (re)starts any more
	killAt      time.Time
	killTimer   *time.Timer
}

func newPodState(root, key string, pod *corev1.Pod, podIP string) *podState {
	st := &podState{
		key:        key,
		namespace:  pod.Namespace,
		name:       pod.Name,
		uid:        pod.UID,
		dir:        filepath.Join(root, "pods", pod.Namespace+"_"+pod.Name+"_"+string(pod.UID)),
		startTime:  time.Now(),
		podIP:      podIP,
		volumeDirs: map[string]string{},
		volumeHash: map[string]string{},
		tokens:     map[string]token{},
	}
	// Keep restart counts across agent restarts.
	counts := map[string]int32{}
	for _, s := range pod.Status.InitContainerStatuses {
		counts["init/"+s.Name] = s.RestartCount
	}
	for _, s := range pod.Status.ContainerStatuses {
		counts["main/"+s.Name] = s.RestartCount
	}
	for _, c := range pod.Spec.InitContainers {
		kind := kindInit
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			kind = kindSidecar
		}
		st.init = append(st.init, &container{name: c.Name, kind: kind, restartCount: counts["init/"+c.Name],
			logs: &containerLog{path: filepath.Join(st.dir, c.Name+".log")}})
	}
	for _, c := range pod.Spec.Containers {
		st.main = append(st.main, &container{name: c.Name, kind: kindMain, restartCount: counts["main/"+c.Name],
			logs: &containerLog{path: filepath.Join(st.dir, c.Name+".log")}})
	}
	return st
}

func (st *podState) all() []*container {
	out := make([]*container, 0, len(st.init)+len(st.main))
	return append(append(out, st.init...), st.main...)
}

func (st *podState) runningProcs() []*process {
	var out []*process
	for _, c := range st.all() {
		if c.proc != nil && !c.proc.exited() {
			out = append(out, c.proc)
		}
	}
	return out
}

func specFor(pod *corev1.Pod, c *container) *corev1.Container {
	list := pod.Spec.Containers
	if c.kind != kindMain {
		list = pod.Spec.InitContainers
	}
	for i := range list {
		if list[i].Name == c.name {
			return &list[i]
		}
	}
	return nil
}

// reconcile drives one pod towards its spec. It never blocks on processes:
// their exits and timers enqueue the key again.
func (a *Agent) reconcile(ctx context.Context, key string) (time.Duration, error) {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return 0, nil
	}
	pod, err := a.podLister.Pods(ns).Get(name)
	if apierrors.IsNotFound(err) {
		pod, err = nil, nil
	}
	if err != nil {
		return 0, err
	}
	a.mu.Lock()
	st := a.pods[key]
	a.mu.Unlock()

	if st != nil && (pod == nil || pod.UID != st.uid) {
		// Force-deleted, or replaced by a new pod with the same name.
		if !a.terminate(st, vanishedGrace) {
			return 0, nil
		}
		a.forget(st)
		st = nil
	}
	if pod == nil {
		return 0, nil
	}
	if pod.DeletionTimestamp != nil {
		if st != nil && !a.terminate(st, deletionGrace(pod)) {
			return 0, nil
		}
		if err := a.finalDelete(ctx, pod); err != nil {
			return 0, err
		}
		if st != nil {
			a.forget(st)
		}
		return 0, nil
	}
	if st == nil {
		if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
			return 0, nil // finished before this agent started
		}
		ip := localIP
		if !pod.Spec.HostNetwork {
			ip = a.ips.allocate(key, pod.Status.PodIP)
		}
		st = newPodState(a.cfg.RootDir, key, pod, ip)
		a.mu.Lock()
		a.pods[key] = st
		a.mu.Unlock()
	}
	return a.syncPod(ctx, pod, st)
}

func deletionGrace(pod *corev1.Pod) time.Duration {
	if pod.DeletionGracePeriodSeconds != nil {
		return time.Duration(*pod.DeletionGracePeriodSeconds) * time.Second
	}
	return terminationGrace(pod)
}

func terminationGrace(pod *corev1.Pod) time.Duration {
	if pod.Spec.TerminationGracePeriodSeconds != nil {
		return time.Duration(*pod.Spec.TerminationGracePeriodSeconds) * time.Second
	}
	return corev1.DefaultTerminationGracePeriodSeconds * time.Second
}

// terminate sends SIGTERM to every running process once and arms a SIGKILL at
// the deadline; a later call with an earlier deadline (shorter grace) wins. It
// reports whether all processes are gone.
func (a *Agent) terminate(st *podState, grace time.Duration) bool {
	st.terminating = true
	procs := st.runningProcs()
	if len(procs) == 0 {
		if st.killTimer != nil {
			st.killTimer.Stop()
		}
		return true
	}
	deadline := time.Now().Add(grace)
	if !st.killAt.IsZero() && !deadline.Before(st.killAt) {
		return false
	}
	first := st.killAt.IsZero()
	st.killAt = deadline
	if st.killTimer != nil {
		st.killTimer.Stop()
	}
	if grace <= 0 {
		for _, p := range procs {
			p.signal(syscall.SIGKILL)
		}
		return false
	}
	if first {
		a.log.Info("stopping pod", "pod", st.key, "grace", grace.String())
		for _, p := range procs {
			p.signal(syscall.SIGTERM)
		}
	}
	st.killTimer = time.AfterFunc(grace, func() {
		for _, p := range procs {
			if !p.exited() {
				a.log.Info("grace period over, killing", "pod", st.key, "pid", p.pid)
				p.signal(syscall.SIGKILL)
			}
		}
	})
	return false
}

// forget drops a pod whose processes are all gone; logs stay, volumes go.
func (a *Agent) forget(st *podState) {
	if st.killTimer != nil {
		st.killTimer.Stop()
	}
	a.mu.Lock()
	if a.pods[st.key] == st {
		delete(a.pods, st.key)
	}
	a.mu.Unlock()
	if st.podIP != localIP {
		a.ips.release(st.podIP)
	}
	if err := os.RemoveAll(filepath.Join(st.dir, "volumes")); err != nil {
		a.log.Error(err, "removing pod volumes", "pod", st.key)
	}
}

// finalDelete removes the pod object like kubelet once nothing runs any more.
func (a *Agent) finalDelete(ctx context.Context, pod *corev1.Pod) error {
	zero := int64(0)
	uid := pod.UID
	err := a.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: &zero,
		Preconditions:      &metav1.Preconditions{UID: &uid},
	})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("deleting pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	a.log.Info("pod deleted", "pod", pod.Namespace+"/"+pod.Name)
	return nil
}

// wakeup collects the earliest time the pod needs another look.
type wakeup struct {
	now time.Time
	at  time.Time
}

func (w *wakeup) atTime(t time.Time) {
	if w.at.IsZero() || t.Before(w.at) {
		w.at = t
	}
}

func (w *wakeup) after(d time.Duration) { w.atTime(w.now.Add(d)) }

func (w *wakeup) duration() time.Duration {
	if w.at.IsZero() {
		return 0
	}
	// Never return 0 for a pending wakeup: 0 means "none".
	return max(w.at.Sub(time.Now()), 10*time.Millisecond)
}

func (a *Agent) syncPod(ctx context.Context, pod *corev1.Pod, st *podState) (time.Duration, error) {
	w := &wakeup{now: time.Now()}
	for _, c := range st.all() {
		if c.proc != nil && c.proc.exited() {
			p := c.proc
			c.proc = nil
			term := &corev1.ContainerStateTerminated{
				ExitCode:    p.exitCode,
				Reason:      exitReason(p.exitCode),
				StartedAt:   metaTime(p.startedAt),
				FinishedAt:  metaTime(p.finishedAt),
				ContainerID: p.id,
			}
			if p.startErr != "" {
				term.ExitCode, term.Reason, term.Message = 128, "StartError", p.startErr
			}
			a.stopped(pod, st, c, term, p.finishedAt.Sub(p.startedAt), p.finishedAt)
		}
	}

	if st.terminal == "" && !st.terminating {
		if err := os.MkdirAll(st.dir, 0o755); err != nil {
			return 0, err
		}
		objs := a.newObjectCache(ctx, pod.Namespace)
		if err := a.setupVolumes(ctx, pod, st, objs, w); err != nil {
			st.volumeErr = err.Error()
			w.after(retryDelay)
		} else {
			st.volumeErr = ""
			a.runContainers(pod, st, objs, w)
		}
		if ph := st.phase(); ph == corev1.PodSucceeded || ph == corev1.PodFailed {
			st.terminal = ph
			a.log.Info("pod finished", "pod", st.key, "phase", ph)
		}
	}
	if st.terminal != "" {
		a.terminate(st, terminationGrace(pod)) // sidecars
	}
	for _, c := range st.all() {
		if c.proc != nil && c.proc.probes == nil && w.now.Sub(c.proc.startedAt) < readyAfter {
			w.atTime(c.proc.startedAt.Add(readyAfter))
		}
	}
	if err := a.writeStatus(ctx, pod, st, w.now); err != nil {
		return 0, err
	}
	return w.duration(), nil
}

func (a *Agent) runContainers(pod *corev1.Pod, st *podState, objs *objectCache, w *wakeup) {
	if !st.initialized {
		for _, c := range st.init {
			spec := specFor(pod, c)
			if c.kind == kindSidecar {
				a.ensureRunning(pod, st, c, spec, objs, w)
				if c.proc == nil {
					return // the next init container waits for this sidecar
				}
				continue
			}
			if c.final != nil && c.final.ExitCode == 0 {
				continue
			}
			if c.final != nil {
				st.terminal = corev1.PodFailed // init failed with restartPolicy Never
				return
			}
			a.ensureRunning(pod, st, c, spec, objs, w)
			return
		}
		st.initialized = true
	}
	for _, c := range st.init {
		if c.kind == kindSidecar {
			a.ensureRunning(pod, st, c, specFor(pod, c), objs, w)
		}
	}
	for _, c := range st.main {
		a.ensureRunning(pod, st, c, specFor(pod, c), objs, w)
	}
}

// ensureRunning starts c unless it runs, finished for good or backs off.
func (a *Agent) ensureRunning(pod *corev1.Pod, st *podState, c *container, spec *corev1.Container, objs *objectCache, w *wakeup) {
	if c.final != nil || c.proc != nil || spec == nil {
		return
	}
	if w.now.Before(c.nextStart) {
		w.atTime(c.nextStart)
		return
	}
	// Images the agent has an OCI layout for run from it under runc; any
	// other image names a local program.
	layout, fromLayout := lookupImage(a.cfg.Images, spec.Image)
	var program string
	if !fromLayout {
		var err error
		if program, err = a.resolveProgram(spec.Image); err != nil {
			c.waitReason, c.waitMessage = "ImagePullBackOff", err.Error()
			w.after(retryDelay)
			return
		}
	}
	hostname := ""
	if a.mountNS || fromLayout {
		hostname = podHostname(pod)
	}
	base := serviceEnv(a.cfg.APIServer)
	if hostname != "" {
		base = append([][2]string{{"HOSTNAME", hostname}}, base...)
	}
	env, err := containerEnv(pod, st.podIP, spec, objs, base)
	if err != nil {
		c.waitReason, c.waitMessage = "CreateContainerConfigError", err.Error()
		w.after(retryDelay)
		return
	}
	var p *process
	imageID := "local://" + program
	if fromLayout {
		p, imageID, err = a.startImageContainer(pod, st, c, spec, layout, env, hostname)
		var ie *imageError
		var ce *configError
		switch {
		case errors.As(err, &ie):
			c.waitReason, c.waitMessage = "ErrImagePull", err.Error()
			w.after(retryDelay)
			return
		case errors.As(err, &ce):
			c.waitReason, c.waitMessage = "CreateContainerConfigError", err.Error()
			w.after(retryDelay)
			return
		}
	} else {
		// With mount namespaces the volumes are where the pod says; without,
		// paths into them are rewritten to the host directories.
		var r mountRewriter
		var mounts []podexec.Mount
		if a.mountNS {
			mounts = containerMounts(pod, spec, st.volumeDirs, env, true)
		} else {
			r = newMountRewriter(spec, st.volumeDirs, env)
		}
		args := make([]string, len(spec.Args))
		for i, arg := range spec.Args {
			args[i] = r.arg(expand(arg, env.lookup))
		}
		p, err = a.startProcess(st.key, st.dir, c.logs, program, args, processEnv(spec.Image, env, r), hostname, mounts)
	}
	if err != nil {
		now := time.Now()
		a.stopped(pod, st, c, &corev1.ContainerStateTerminated{
			ExitCode: 128, Reason: "StartError", Message: err.Error(),
			StartedAt: metaTime(now), FinishedAt: metaTime(now),
		}, 0, now)
		if !c.nextStart.IsZero() {
			w.atTime(c.nextStart)
		}
		return
	}
	c.imageID = imageID
	a.log.Info("container started", "pod", st.key, "container", c.name, "program", p.program, "pid", p.pid, "containerID", p.id)
	a.startProbes(pod, st, spec, p)
	c.proc = p
	c.everStarted = true
	c.waitReason, c.waitMessage = "", ""
}

// stopped records a finished run and decides about a restart.
func (a *Agent) stopped(pod *corev1.Pod, st *podState, c *container, term *corev1.ContainerStateTerminated, ran time.Duration, finished time.Time) {
	if st.terminating || st.terminal != "" || !c.restarts(pod.Spec.RestartPolicy, term.ExitCode) {
		c.final = term
		return
	}
	c.lastTerm = term
	c.restartCount++
	if ran >= backoffReset {
		c.backoff = 0
	}
	if c.backoff == 0 {
		c.backoff = backoffInitial
	} else {
		c.backoff = min(2*c.backoff, backoffMax)
	}
	c.nextStart = finished.Add(c.backoff)
	c.waitReason = "CrashLoopBackOff"
	c.waitMessage = fmt.Sprintf("back-off %s restarting failed container=%s pod=%s_%s(%s)",
		c.backoff, c.name, pod.Name, pod.Namespace, pod.UID)
	a.log.Info("container exited, restarting after back-off", "pod", st.key, "container", c.name,
		"exitCode", term.ExitCode, "backoff", c.backoff.String())
}

func (c *container) restarts(policy corev1.RestartPolicy, code int32) bool {
	switch c.kind {
	case kindSidecar:
		return true
	case kindInit:
		return code != 0 && policy != corev1.RestartPolicyNever
	}
	switch policy {
	case corev1.RestartPolicyNever:
		return false
	case corev1.RestartPolicyOnFailure:
		return code != 0
	default:
		return true
	}
}

// phase follows kubelet: Pending until every container ran once, Running while
// any runs or will restart, then Succeeded or Failed.
func (st *podState) phase() corev1.PodPhase {
	if st.terminal != "" {
		return st.terminal
	}
	if !st.initialized {
		return corev1.PodPending
	}
	pending, active, failed := false, false, false
	for _, c := range st.main {
		switch {
		case c.proc != nil:
			active = true
		case c.final != nil:
			failed = failed || c.final.ExitCode != 0
		case c.everStarted:
			active = true // waiting for a restart
		default:
			pending = true
		}
	}
	switch {
	case pending:
		return corev1.PodPending
	case active:
		return corev1.PodRunning
	case failed:
		return corev1.PodFailed
	default:
		return corev1.PodSucceeded
	}
}

func exitReason(code int32) string {
	if code == 0 {
		return "Completed"
	}
	return "Error"
}

func processID(pid int) string { return "process://" + strconv.Itoa(pid) }

// metaTime drops sub-second precision, which the API does not store, so that
// status comparisons are stable.
func metaTime(t time.Time) metav1.Time { return metav1.NewTime(t.Truncate(time.Second)) }
