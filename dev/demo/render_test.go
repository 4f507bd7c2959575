package demo

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
)

func TestShortNames(t *testing.T) {
	got := shortNames(map[string]bool{
		"v1-0123456789abcdef": true,
		"v2-0123456789abcdef": true,
		"v2-fedcba9876543210": true, // same tag as another: keeps its full ID
		"custom":              true,
	})
	want := map[string]string{
		"v1-0123456789abcdef": "v1",
		"v2-0123456789abcdef": "v2-0123456789abcdef",
		"v2-fedcba9876543210": "v2-fedcba9876543210",
		"custom":              "custom",
	}
	for id, name := range want {
		if got[id] != name {
			t.Errorf("shortNames[%s] = %q, want %q", id, got[id], name)
		}
	}
}

func TestLine(t *testing.T) {
	dep := func(want, ready int32) *appsv1.Deployment {
		return &appsv1.Deployment{Spec: appsv1.DeploymentSpec{Replicas: ptr.To(want)}, Status: appsv1.DeploymentStatus{ReadyReplicas: ready}}
	}
	v1 := v1alpha1.WorkerVersion{BuildID: "v1-0123456789abcdef", Status: v1alpha1.VersionCurrent}
	v2 := v1alpha1.WorkerVersion{BuildID: "v2-0123456789abcdef", Status: v1alpha1.VersionRamping, RampPercentage: ptr.To[int32](25)}
	old := v1alpha1.WorkerVersion{BuildID: "v0-0123456789abcdef", Status: v1alpha1.VersionDrained}
	twd := &v1alpha1.TemporalWorkerDeployment{
		ObjectMeta: metav1.ObjectMeta{Generation: 2},
		Status: v1alpha1.TemporalWorkerDeploymentStatus{
			ObservedGeneration: 2,
			TargetVersion:      &v2,
			CurrentVersion:     &v1,
			RampingVersion:     &v2,
			DeprecatedVersions: []v1alpha1.WorkerVersion{old},
			Conditions: []metav1.Condition{
				{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonRamping, ObservedGeneration: 2, LastTransitionTime: metav1.NewTime(time.Now())},
				{Type: v1alpha1.ConditionProgressing, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonRamping, ObservedGeneration: 2},
			},
		},
	}
	snap := snapshot{twd: twd, deps: map[string]*appsv1.Deployment{
		v1.BuildID:            dep(2, 2),
		v2.BuildID:            dep(2, 1),
		old.BuildID:           dep(0, 0),
		"v9-0123456789abcdef": dep(1, 0), // not in the status yet
	}}
	builds := map[string]bool{}
	for id := range snap.deps {
		builds[id] = true
	}
	names := shortNames(builds)
	got := snap.line(func(id string) string { return names[id] })
	want := "v2 Ramping 25% (1/2 pods) · v1 Current (2/2 pods) · v0 Drained (scaled to zero) · v9 (0/1 pods) │ Ready False Ramping · Progressing True Ramping"
	if got != want {
		t.Errorf("line:\n got  %s\n want %s", got, want)
	}
	if snap.target() != v2.BuildID || snap.status(old.BuildID) != v1alpha1.VersionDrained || snap.replicas("none") != -1 || snap.ready() {
		t.Errorf("target %q, status of v0 %q, replicas of none %d, ready %v", snap.target(), snap.status(old.BuildID), snap.replicas("none"), snap.ready())
	}
}
