package nodeagent

import (
	"context"
	"runtime"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
)

// registerNode creates or adopts the Node and marks it Ready, retrying until
// the apiserver answers or ctx ends.
func (a *Agent) registerNode(ctx context.Context) error {
	var lastErr error
	err := wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		if lastErr = a.ensureNode(ctx); lastErr != nil {
			a.log.Info("node registration failed, retrying", "node", a.cfg.NodeName, "error", lastErr.Error())
			return false, nil
		}
		return true, nil
	})
	if err != nil && lastErr != nil {
		return lastErr
	}
	return err
}

func (a *Agent) nodeLabels() map[string]string {
	return map[string]string{
		corev1.LabelHostname:   a.cfg.NodeName,
		corev1.LabelOSStable:   runtime.GOOS,
		corev1.LabelArchStable: runtime.GOARCH,
	}
}

func (a *Agent) ensureNode(ctx context.Context) error {
	nodes := a.client.CoreV1().Nodes()
	node, err := nodes.Get(ctx, a.cfg.NodeName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		node, err = nodes.Create(ctx, &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: a.cfg.NodeName, Labels: a.nodeLabels()},
		}, metav1.CreateOptions{})
	}
	if err != nil {
		return err
	}
	// Admission adds node.kubernetes.io/not-ready on create and no node
	// lifecycle controller runs to lift it, so drop all taints ourselves.
	changed := len(node.Spec.Taints) > 0 || node.Spec.Unschedulable
	node.Spec.Taints = nil
	node.Spec.Unschedulable = false
	if node.Labels == nil {
		node.Labels = map[string]string{}
	}
	for k, v := range a.nodeLabels() {
		if node.Labels[k] != v {
			node.Labels[k] = v
			changed = true
		}
	}
	if changed {
		if _, err := nodes.Update(ctx, node, metav1.UpdateOptions{}); err != nil {
			return err
		}
	}
	if a.version == "" {
		// Report the control plane's version so version-aware clients are content.
		if v, err := a.client.Discovery().ServerVersion(); err == nil {
			a.version = v.GitVersion
		}
	}
	return a.updateNodeStatus(ctx, true)
}

func (a *Agent) updateNodeStatus(ctx context.Context, ready bool) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node, err := a.client.CoreV1().Nodes().Get(ctx, a.cfg.NodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		setNodeStatus(&node.Status, ready, a.version, a.kubeletPort, time.Now())
		_, err = a.client.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
		return err
	})
}

func setNodeStatus(s *corev1.NodeStatus, ready bool, version string, kubeletPort int, now time.Time) {
	res := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("8"),
		corev1.ResourceMemory: resource.MustParse("32Gi"),
		corev1.ResourcePods:   resource.MustParse("2000"),
	}
	s.Capacity = res
	s.Allocatable = res.DeepCopy()
	s.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: localIP}}
	// The API server reaches the kubelet API (logs) at this port of the InternalIP.
	s.DaemonEndpoints.KubeletEndpoint.Port = int32(kubeletPort)
	s.NodeInfo.OperatingSystem = runtime.GOOS
	s.NodeInfo.Architecture = runtime.GOARCH
	s.NodeInfo.KubeletVersion = version
	s.NodeInfo.ContainerRuntimeVersion = "process://rainbow-nodeagent"

	readyCond := corev1.NodeCondition{
		Type: corev1.NodeReady, Status: corev1.ConditionTrue,
		Reason: "KubeletReady", Message: "rainbow node agent is posting ready status",
	}
	if !ready {
		readyCond.Status = corev1.ConditionFalse
		readyCond.Reason = "AgentStopped"
		readyCond.Message = "rainbow node agent stopped"
	}
	want := []corev1.NodeCondition{
		readyCond,
		{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientMemory"},
		{Type: corev1.NodeDiskPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasNoDiskPressure"},
		{Type: corev1.NodePIDPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientPID"},
	}
	t := metav1.NewTime(now)
	for _, c := range want {
		c.LastHeartbeatTime = t
		c.LastTransitionTime = t
		found := false
		for i := range s.Conditions {
			old := &s.Conditions[i]
			if old.Type != c.Type {
				continue
			}
			found = true
			if old.Status == c.Status {
				c.LastTransitionTime = old.LastTransitionTime
			}
			*old = c
		}
		if !found {
			s.Conditions = append(s.Conditions, c)
		}
	}
}

// heartbeat keeps the Ready condition fresh.
func (a *Agent) heartbeat(ctx context.Context) {
	t := time.NewTicker(heartbeatInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		// ensureNode also recreates a deleted Node and lifts new taints.
		if err := a.ensureNode(ctx); err != nil && ctx.Err() == nil {
			a.log.Error(err, "node heartbeat failed", "node", a.cfg.NodeName)
		}
	}
}

// markNotReady is best effort: the apiserver may already be gone.
func (a *Agent) markNotReady() {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := a.updateNodeStatus(ctx, false); err != nil {
		a.log.V(1).Info("could not mark node NotReady", "error", err.Error())
	}
}
