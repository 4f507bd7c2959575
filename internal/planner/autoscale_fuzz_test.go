package planner

import (
	"fmt"
	"reflect"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/internal/fuzzsrc"
)

// fuzzAutoscale gives the versions of a fuzz input backlogs: unknown, empty
// or waiting.
func fuzzAutoscale(s *fuzzsrc.Source, in *Input) {
	if in.Temporal == nil {
		return
	}
	for i := range in.Temporal.Versions {
		in.Temporal.Versions[i].Backlog = fuzzsrc.Pick(s, nil, ptr[int64](0), ptr[int64](2))
	}
}

// autoscaleViolations restates the rules next to autoscalers: replicas an
// autoscaler owns are never changed, except from zero; a version someone
// else scaled to zero gets exactly one worker back, and only when Temporal
// may hand it work and tasks wait (or its backlog is unknown); and outside
// a deletion every such version does get it.
func autoscaleViolations(in Input, r Result) []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	ts := in.Temporal
	autoscaled := in.Spec.Replicas == nil
	for _, or := range in.OwnedResources {
		if spec, ok := or.Object["spec"].(map[string]any); ok && !or.Deleting {
			// null or {}; or none in an HPA, which needs one.
			ref, has := spec["scaleTargetRef"]
			if m, isMap := ref.(map[string]any); (has && (ref == nil || isMap && len(m) == 0)) ||
				(!has && or.Object["kind"] == "HorizontalPodAutoscaler") {
				autoscaled = true
			}
		}
	}
	depOf := map[string]Deployment{}
	byName := map[string]Deployment{}
	for _, d := range in.Deployments {
		if _, ok := depOf[d.BuildID]; !ok {
			depOf[d.BuildID] = d
		}
		byName[d.Name] = d
	}
	version := func(b string) (TemporalVersion, bool) {
		if ts != nil {
			for _, v := range ts.Versions {
				if v.BuildID == b {
					return v, true
				}
			}
		}
		return TemporalVersion{}, false
	}
	// waits: Temporal may hand the version work and tasks wait for it.
	waits := func(d Deployment) bool {
		if ts == nil || otherServer(in, d) {
			return false
		}
		v, registered := version(d.BuildID)
		if d.BuildID != ts.CurrentBuildID && d.BuildID != ts.RampingBuildID {
			if !registered || reportedDrained(v) || v.Status == inactive {
				return false
			}
		}
		return v.Backlog == nil || *v.Backlog > 0
	}
	scaled := map[string]Scale{}
	for _, s := range r.Scale {
		d := byName[s.Name]
		scaled[s.BuildID] = s
		if autoscaled && d.Replicas > 0 && s.Replicas > 0 {
			bad("replicas of %s changed from %d to %d while an autoscaler owns them (%+v)", s.BuildID, d.Replicas, s.Replicas, s)
		}
		zeroedByOthers := d.Replicas == 0 && d.ScaledDownAt == nil
		if (s.Reason == ScaleRevive) != (s.Revival != nil) {
			bad("scale %+v: a revival record on other than a revival, or a revival without one", s)
		}
		if rv := s.Revival; rv != nil {
			tv, _ := version(s.BuildID)
			if !rv.At.Equal(in.Now) || rv.FromReplicas != d.Replicas || rv.Replicas != s.Replicas || rv.Message == "" ||
				!reflect.DeepEqual(rv.Backlog, tv.Backlog) || rv.Status != statusIn(r, s.BuildID) {
				bad("revival of %s records %+v; the Deployment was %+v, Temporal %+v, status %s", s.BuildID, *rv, d, tv, statusIn(r, s.BuildID))
			}
		}
		switch {
		case s.Reason == ScaleRevive && (s.Replicas != 1 || !zeroedByOthers || !waits(d)):
			bad("revived %s (%+v) with no work waiting, or not from someone else's zero (%+v)", s.BuildID, s, d)
		case zeroedByOthers && s.Replicas > 0 && s.Reason != ScaleRevive && s.Reason != ScaleToSpec:
			bad("scaled %s up from someone else's zero for %s", s.BuildID, s.Reason)
		}
	}
	if in.Deletion != nil || ts == nil {
		return errs
	}
	for b, d := range depOf {
		if d.Replicas != 0 || d.ScaledDownAt != nil || !waits(d) || (b == in.Spec.TargetBuildID && !autoscaled) {
			continue
		}
		if s, ok := scaled[b]; !ok || s.Replicas < 1 {
			st, _ := version(b)
			bad("version %s (%s, backlog %v) stays at zero while work waits for it: %+v", b, statusOr(st.Status), st.Backlog, r.Scale)
		}
	}
	return errs
}

// statusIn is build's status as the plan reports it.
func statusIn(r Result, build string) v1alpha1.VersionStatus {
	for _, v := range r.Versions {
		if v.BuildID == build {
			return v.Status
		}
	}
	return ""
}

func statusOr(s v1alpha1.VersionStatus) v1alpha1.VersionStatus {
	if s == "" {
		return "routed"
	}
	return s
}
