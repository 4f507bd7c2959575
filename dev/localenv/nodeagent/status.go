package nodeagent

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// writeStatus updates the pod status only if it differs from what the API
// holds. The lister copy may be stale: a conflict re-reads and compares again.
func (a *Agent) writeStatus(ctx context.Context, pod *corev1.Pod, st *podState, now time.Time) error {
	pods := a.client.CoreV1().Pods(pod.Namespace)
	for range 5 {
		want := desiredStatus(pod, st, now)
		if apiequality.Semantic.DeepEqual(want, pod.Status) {
			return nil
		}
		upd := pod.DeepCopy()
		upd.Status = want
		_, err := pods.UpdateStatus(ctx, upd, metav1.UpdateOptions{})
		if err == nil || apierrors.IsNotFound(err) {
			return nil
		}
		if !apierrors.IsConflict(err) {
			return fmt.Errorf("updating status of pod %s: %w", st.key, err)
		}
		fresh, err := pods.Get(ctx, pod.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		if fresh.UID != st.uid || fresh.DeletionTimestamp != nil {
			return nil // the next reconcile handles it
		}
		pod = fresh
	}
	return fmt.Errorf("updating status of pod %s: too many conflicts", st.key)
}

// desiredStatus overlays what the agent owns on the current status, keeping
// fields set by others (qosClass, foreign conditions).
func desiredStatus(pod *corev1.Pod, st *podState, now time.Time) corev1.PodStatus {
	s := *pod.Status.DeepCopy()
	s.Phase = st.phase()
	s.HostIP, s.PodIP = localIP, st.podIP
	s.HostIPs = []corev1.HostIP{{IP: localIP}}
	s.PodIPs = []corev1.PodIP{{IP: st.podIP}}
	if s.StartTime == nil {
		t := metaTime(st.startTime)
		s.StartTime = &t
	}

	var incomplete, unready []string
	s.InitContainerStatuses = nil
	for _, c := range st.init {
		cs := st.containerStatus(pod, c, now, "PodInitializing")
		s.InitContainerStatuses = append(s.InitContainerStatuses, cs)
		switch {
		case c.kind == kindSidecar:
			if !cs.Ready {
				unready = append(unready, c.name)
			}
			if !st.initialized && c.proc == nil {
				incomplete = append(incomplete, c.name)
			}
		case !st.initialized && (c.final == nil || c.final.ExitCode != 0):
			incomplete = append(incomplete, c.name)
		}
	}
	mainWaiting := "ContainerCreating"
	if !st.initialized {
		mainWaiting = "PodInitializing"
	}
	s.ContainerStatuses = nil
	for _, c := range st.main {
		cs := st.containerStatus(pod, c, now, mainWaiting)
		s.ContainerStatuses = append(s.ContainerStatuses, cs)
		if !cs.Ready {
			unready = append(unready, c.name)
		}
	}

	ts := metaTime(now)
	cond := func(t corev1.PodConditionType, ok bool, reason, msg string) corev1.PodCondition {
		c := corev1.PodCondition{Type: t, Status: corev1.ConditionTrue, LastTransitionTime: ts}
		if !ok {
			c.Status, c.Reason, c.Message = corev1.ConditionFalse, reason, msg
		}
		return c
	}
	initialized := st.initialized || st.terminal == corev1.PodSucceeded
	containersReady := cond(corev1.ContainersReady, len(unready) == 0, "ContainersNotReady",
		fmt.Sprintf("containers with unready status: [%s]", strings.Join(unready, " ")))
	ready := containersReady
	ready.Type = corev1.PodReady
	if st.terminal != "" {
		containersReady = cond(corev1.ContainersReady, false, "PodCompleted", "")
		ready = cond(corev1.PodReady, false, "PodCompleted", "")
	} else if ready.Status == corev1.ConditionTrue {
		if gates := unmetReadinessGates(pod); len(gates) > 0 {
			ready = cond(corev1.PodReady, false, "ReadinessGatesNotReady",
				fmt.Sprintf("readiness gates not ready: [%s]", strings.Join(gates, " ")))
		}
	}
	owned := []corev1.PodCondition{
		cond(corev1.PodInitialized, initialized, "ContainersNotInitialized",
			fmt.Sprintf("containers with incomplete status: [%s]", strings.Join(incomplete, " "))),
		ready,
		containersReady,
		cond(corev1.PodScheduled, true, "", ""),
	}
	for _, c := range owned {
		mergeCondition(&s.Conditions, c)
	}
	return s
}

// mergeCondition replaces or appends c, keeping the transition time when the
// status did not change.
func mergeCondition(conds *[]corev1.PodCondition, c corev1.PodCondition) {
	for i := range *conds {
		old := &(*conds)[i]
		if old.Type != c.Type {
			continue
		}
		if old.Status == c.Status {
			c.LastTransitionTime = old.LastTransitionTime
		}
		c.LastProbeTime = old.LastProbeTime
		c.ObservedGeneration = old.ObservedGeneration
		*old = c
		return
	}
	*conds = append(*conds, c)
}

func unmetReadinessGates(pod *corev1.Pod) []string {
	var out []string
	for _, g := range pod.Spec.ReadinessGates {
		met := false
		for _, c := range pod.Status.Conditions {
			if c.Type == g.ConditionType && c.Status == corev1.ConditionTrue {
				met = true
			}
		}
		if !met {
			out = append(out, string(g.ConditionType))
		}
	}
	return out
}

func (st *podState) containerStatus(pod *corev1.Pod, c *container, now time.Time, defaultWaiting string) corev1.ContainerStatus {
	cs := corev1.ContainerStatus{Name: c.name, RestartCount: c.restartCount}
	if spec := specFor(pod, c); spec != nil {
		cs.Image = spec.Image
	}
	cs.ImageID = c.imageID
	if c.lastTerm != nil {
		t := *c.lastTerm
		cs.LastTerminationState.Terminated = &t
	}
	started := false
	switch {
	case c.proc != nil:
		ready := now.Sub(c.proc.startedAt) >= readyAfter
		started = true
		if c.proc.probes != nil {
			started, ready = c.proc.probes.get()
		}
		cs.ContainerID = c.proc.id
		cs.State.Running = &corev1.ContainerStateRunning{StartedAt: metaTime(c.proc.startedAt)}
		cs.Ready = st.terminal == "" && !st.terminating && ready
	case c.final != nil:
		t := *c.final
		cs.ContainerID = t.ContainerID
		cs.State.Terminated = &t
	default:
		reason, msg := c.waitReason, c.waitMessage
		if reason == "" {
			reason = defaultWaiting
			if st.volumeErr != "" {
				reason, msg = "ContainerCreating", st.volumeErr
			}
		}
		cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: reason, Message: msg}
	}
	cs.Started = &started
	return cs
}
