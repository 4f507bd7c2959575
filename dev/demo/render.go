package demo

import (
	"fmt"
	"regexp"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/ptr"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
)

// snapshot is what the demo watches: the TemporalWorkerDeployment (nil
// while it does not exist) and its versioned Deployments by build ID.
type snapshot struct {
	twd  *v1alpha1.TemporalWorkerDeployment
	deps map[string]*appsv1.Deployment
	// hpas are the versions' HPAs, by build ID; nil when the demo attaches none.
	hpas map[string]*autoscalingv2.HorizontalPodAutoscaler
}

// observed reports whether the status describes the latest spec.
func (s snapshot) observed() bool {
	return s.twd != nil && s.twd.Status.ObservedGeneration == s.twd.Generation
}

// target is the build ID of the version the spec asks for, once the
// controller has seen the spec; "" before.
func (s snapshot) target() string {
	if !s.observed() || s.twd.Status.TargetVersion == nil {
		return ""
	}
	return s.twd.Status.TargetVersion.BuildID
}

// versions lists the builds the status names, target first, then
// current, ramping and deprecated, then Deployments the status misses.
func (s snapshot) versions() []*v1alpha1.WorkerVersion {
	var out []*v1alpha1.WorkerVersion
	seen := map[string]bool{}
	add := func(v *v1alpha1.WorkerVersion) {
		if v != nil && !seen[v.BuildID] {
			seen[v.BuildID] = true
			out = append(out, v)
		}
	}
	if s.twd != nil {
		st := &s.twd.Status
		add(st.TargetVersion)
		add(st.CurrentVersion)
		add(st.RampingVersion)
		for i := range st.DeprecatedVersions {
			add(&st.DeprecatedVersions[i])
		}
	}
	var extra []string
	for b := range s.deps {
		if !seen[b] {
			extra = append(extra, b)
		}
	}
	sort.Strings(extra)
	for _, b := range extra {
		add(&v1alpha1.WorkerVersion{BuildID: b})
	}
	return out
}

// version is the status of build, nil when the status does not name it.
func (s snapshot) version(build string) *v1alpha1.WorkerVersion {
	if s.twd == nil {
		return nil
	}
	for _, v := range s.versions() {
		if v.BuildID == build && v.Status != "" {
			return v
		}
	}
	return nil
}

// status of build in the TWD's status, "" when absent.
func (s snapshot) status(build string) v1alpha1.VersionStatus {
	if v := s.version(build); v != nil {
		return v.Status
	}
	return ""
}

// ready is true when the Ready condition is True for the latest spec.
func (s snapshot) ready() bool {
	if !s.observed() {
		return false
	}
	c := meta.FindStatusCondition(s.twd.Status.Conditions, v1alpha1.ConditionReady)
	return c != nil && c.Status == "True" && c.ObservedGeneration == s.twd.Generation
}

// replicas is the desired replica count of build's Deployment, -1 if it
// has none.
func (s snapshot) replicas(build string) int32 {
	d, ok := s.deps[build]
	if !ok {
		return -1
	}
	return ptr.Deref(d.Spec.Replicas, 1)
}

// line renders the snapshot in one line, for example
//
//	v2 Ramping 25% (2/2 pods) · v1 Current (2/2 pods) │ Ready False Ramping · Progressing True Ramping
func (s snapshot) line(name func(string) string) string {
	if s.twd == nil {
		return "no TemporalWorkerDeployment"
	}
	var parts []string
	for _, v := range s.versions() {
		p := name(v.BuildID)
		if v.Status != "" {
			p += " " + string(v.Status)
		}
		if v.Status == v1alpha1.VersionRamping && v.RampPercentage != nil {
			p += fmt.Sprintf(" %d%%", *v.RampPercentage)
		}
		p += " (" + s.pods(v.BuildID)
		if s.hpas[v.BuildID] != nil {
			p += ", HPA"
		}
		p += ")"
		parts = append(parts, p)
	}
	if len(parts) == 0 {
		parts = append(parts, "no versions yet")
	}
	var conds []string
	for _, typ := range []string{v1alpha1.ConditionReady, v1alpha1.ConditionProgressing} {
		if c := meta.FindStatusCondition(s.twd.Status.Conditions, typ); c != nil {
			conds = append(conds, fmt.Sprintf("%s %s %s", typ, c.Status, c.Reason))
		}
	}
	out := strings.Join(parts, " · ")
	if len(conds) > 0 {
		out += " │ " + strings.Join(conds, " · ")
	}
	return out
}

// pods describes build's Deployment: ready pods out of desired.
func (s snapshot) pods(build string) string {
	d, ok := s.deps[build]
	if !ok {
		return "no Deployment"
	}
	want, ready := ptr.Deref(d.Spec.Replicas, 1), d.Status.ReadyReplicas
	switch {
	case want == 0 && ready == 0:
		return "scaled to zero"
	case want == 0:
		return fmt.Sprintf("scaling to zero, %d pods left", ready)
	default:
		return fmt.Sprintf("%d/%d pods", ready, want)
	}
}

var generatedID = regexp.MustCompile(`^(.+)-[0-9a-f]{16}$`)

// shortNames names build IDs by their image tag ("v1" for
// "v1-0123456789abcdef") when no other known build has the same tag.
func shortNames(builds map[string]bool) map[string]string {
	byTag := map[string][]string{}
	for b := range builds {
		if m := generatedID.FindStringSubmatch(b); m != nil {
			byTag[m[1]] = append(byTag[m[1]], b)
		}
	}
	out := map[string]string{}
	for b := range builds {
		out[b] = b
		if m := generatedID.FindStringSubmatch(b); m != nil && len(byTag[m[1]]) == 1 {
			out[b] = m[1]
		}
	}
	return out
}
