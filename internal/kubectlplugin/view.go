package kubectlplugin

import (
	"sort"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
)

// Snapshot is what the API server shows about one TemporalWorkerDeployment:
// the plugin reads nothing from Temporal itself.
type Snapshot struct {
	TWD         *v1alpha1.TemporalWorkerDeployment
	Deployments []appsv1.Deployment
	Owned       []v1alpha1.TemporalWorkerOwnedResource
	Events      []corev1.Event
}

// NewSnapshot picks what belongs to twd out of its namespace's Deployments,
// owned resources and Events.
func NewSnapshot(twd *v1alpha1.TemporalWorkerDeployment, deps []appsv1.Deployment, owned []v1alpha1.TemporalWorkerOwnedResource, events []corev1.Event) Snapshot {
	s := Snapshot{TWD: twd}
	for _, d := range deps {
		if d.Namespace != twd.Namespace {
			continue
		}
		for _, o := range d.OwnerReferences {
			if o.UID == twd.UID {
				s.Deployments = append(s.Deployments, d)
			}
		}
	}
	for _, o := range owned {
		if o.Namespace == twd.Namespace && o.Spec.WorkerRef.Name == twd.Name {
			s.Owned = append(s.Owned, o)
		}
	}
	for _, e := range events {
		if e.InvolvedObject.UID == twd.UID {
			s.Events = append(s.Events, e)
		}
	}
	return s
}

// View is a Snapshot as the status command shows it, and its -o json|yaml.
type View struct {
	Namespace string               `json:"namespace"`
	Name      string               `json:"name"`
	Strategy  string               `json:"strategy"`
	Paused    bool                 `json:"paused,omitempty"`
	Aborted   string               `json:"abortedBuildID,omitempty"`
	Ready     string               `json:"ready"`
	Reason    string               `json:"reason"`
	Message   string               `json:"message"`
	Versions  []VersionView        `json:"versions"`
	Gate      *v1alpha1.GateStatus `json:"gate,omitempty"`
	Owned     []OwnedView          `json:"owned,omitempty"`
	Events    []EventView          `json:"events,omitempty"`
}

type VersionView struct {
	BuildID    string `json:"buildID"`
	Role       string `json:"role,omitempty"` // target, current, ramping
	Status     string `json:"status"`
	Ramp       *int32 `json:"rampPercentage,omitempty"`
	Deployment string `json:"deployment,omitempty"`
	Ready      int32  `json:"readyReplicas"`
	Desired    int32  `json:"desiredReplicas"`
	// Drainage: pinned workflows still open, and the drain deadline.
	PinnedWorkflows *int32     `json:"pinnedWorkflows,omitempty"`
	DrainDeadline   *time.Time `json:"drainDeadline,omitempty"`
	DrainedSince    *time.Time `json:"drainedSince,omitempty"`
}

type OwnedView struct {
	Name    string   `json:"name"`
	Kind    string   `json:"kind"`
	Ready   string   `json:"ready"`
	Applied []string `json:"appliedTo,omitempty"`
	Failed  []string `json:"failedOn,omitempty"`
}

type EventView struct {
	Time    time.Time `json:"time"`
	Type    string    `json:"type"`
	Reason  string    `json:"reason"`
	Message string    `json:"message"`
}

// lastEvents is how many Events status shows.
const lastEvents = 8

// NewView arranges a Snapshot: the target first, then the current and
// ramping versions, then older ones as status lists them.
func NewView(s Snapshot) View {
	twd := s.TWD
	v := View{Namespace: twd.Namespace, Name: twd.Name, Strategy: string(strategyOf(twd)), Paused: twd.Spec.Rollout.Paused, Gate: twd.Status.Gate}
	if a, ok := abortedTarget(twd); ok {
		v.Aborted = a
	}
	if c := meta.FindStatusCondition(twd.Status.Conditions, v1alpha1.ConditionReady); c != nil {
		v.Ready, v.Reason, v.Message = string(c.Status), c.Reason, c.Message
	}
	deps := map[string]appsv1.Deployment{}
	for _, d := range s.Deployments {
		deps[d.Name] = d
	}
	seen := map[string]bool{}
	add := func(w *v1alpha1.WorkerVersion, role string) {
		if w == nil || w.BuildID == "" {
			return
		}
		if seen[w.BuildID] {
			return
		}
		seen[w.BuildID] = true
		vv := VersionView{BuildID: w.BuildID, Role: role, Status: string(w.Status), Ramp: w.RampPercentage, Deployment: w.Deployment}
		if d, ok := deps[w.Deployment]; ok {
			vv.Ready = d.Status.ReadyReplicas
			if d.Spec.Replicas != nil {
				vv.Desired = *d.Spec.Replicas
			}
		}
		if dr := w.Drain; dr != nil && w.Status == v1alpha1.VersionDraining {
			vv.PinnedWorkflows = &dr.PinnedWorkflows
			if dr.Deadline != nil {
				vv.DrainDeadline = &dr.Deadline.Time
			}
		}
		if w.DrainedSince != nil {
			vv.DrainedSince = &w.DrainedSince.Time
		}
		v.Versions = append(v.Versions, vv)
	}
	st := twd.Status
	add(st.TargetVersion, "target")
	add(st.CurrentVersion, "current")
	add(st.RampingVersion, "ramping")
	for i := range st.DeprecatedVersions {
		add(&st.DeprecatedVersions[i], "")
	}
	for _, o := range s.Owned {
		ov := OwnedView{Name: o.Name, Kind: "?", Ready: "Unknown"}
		if c := meta.FindStatusCondition(o.Status.Conditions, v1alpha1.ConditionReady); c != nil {
			ov.Ready = string(c.Status)
		}
		for _, c := range o.Status.Versions {
			if c.Kind != "" {
				ov.Kind = c.Kind
			}
			if c.Applied {
				ov.Applied = append(ov.Applied, c.BuildID)
			} else {
				ov.Failed = append(ov.Failed, c.BuildID)
			}
		}
		v.Owned = append(v.Owned, ov)
	}
	events := append([]corev1.Event(nil), s.Events...)
	sort.SliceStable(events, func(i, j int) bool { return eventTime(events[i]).Before(eventTime(events[j])) })
	if len(events) > lastEvents {
		events = events[len(events)-lastEvents:]
	}
	for _, e := range events {
		v.Events = append(v.Events, EventView{Time: eventTime(e), Type: e.Type, Reason: e.Reason, Message: e.Message})
	}
	return v
}

func eventTime(e corev1.Event) time.Time {
	if e.Series != nil && !e.Series.LastObservedTime.IsZero() {
		return e.Series.LastObservedTime.Time
	}
	for _, t := range []time.Time{e.LastTimestamp.Time, e.EventTime.Time, e.FirstTimestamp.Time} {
		if !t.IsZero() {
			return t
		}
	}
	return e.CreationTimestamp.Time
}
