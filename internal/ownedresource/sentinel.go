package ownedresource

import (
	"slices"
	"strings"

	"github.com/rainbow-deploy/rainbow/internal/workload"
)

// The sentinels: values the controller fills in for each version, since
// only it knows them. A key of sentinelKeys marks one where its value is
// null or {} (the Temporal worker controller's form, which survives every
// way of applying: kubectl apply without --server-side drops nulls).
var sentinelKeys = []string{"scaleTargetRef", "matchLabels"}

// needed lists, per kind, the sentinels the kind cannot do without, which
// are filled in when absent too: an HPA or a ScaledObject needs a target,
// a PodDisruptionBudget without matchLabels would count other versions'
// pods (an empty selector selects every pod of the namespace). The path
// is a chain of object keys from the top of the object; any version of the
// group matches.
var needed = []struct {
	group, kind string
	path        []string
}{
	{"autoscaling", "HorizontalPodAutoscaler", []string{"spec", "scaleTargetRef"}},
	{"keda.sh", "ScaledObject", []string{"spec", "scaleTargetRef"}},
	{"policy", "PodDisruptionBudget", []string{"spec", "selector", "matchLabels"}},
}

// IsSentinelKey reports whether key marks a value the controller fills in
// (scaleTargetRef, matchLabels).
func IsSentinelKey(key string) bool {
	return slices.Contains(sentinelKeys, key)
}

// IsSentinel reports whether value under key is a sentinel: the key is
// one of IsSentinelKey's and the value null or an empty object.
func IsSentinel(key string, value any) bool {
	if !IsSentinelKey(key) {
		return false
	}
	m, isMap := value.(map[string]any)
	return value == nil || (isMap && len(m) == 0)
}

// FilledWhenAbsent reports whether the controller fills in the sentinel at
// path (object keys from the top of the object) of an object of this
// apiVersion and kind even when the key is absent: the kind needs it.
func FilledWhenAbsent(apiVersion, kind string, path []string) bool {
	for _, n := range neededBy(apiVersion, kind) {
		if slices.Equal(n, path) {
			return true
		}
	}
	return false
}

// AttachesAutoscaler reports whether the copies of object (spec.object)
// get the version's Deployment as their scaleTargetRef: a scaleTargetRef
// sentinel anywhere, or a kind that needs one and has none.
func AttachesAutoscaler(object map[string]any) bool {
	if anyEntry(object, func(k string, v any) bool { return k == "scaleTargetRef" && IsSentinel(k, v) }) {
		return true
	}
	apiVersion, _ := object["apiVersion"].(string)
	kind, _ := object["kind"].(string)
	for _, path := range neededBy(apiVersion, kind) {
		if path[len(path)-1] == "scaleTargetRef" && absentAt(object, path) {
			return true
		}
	}
	return false
}

// neededBy is the paths of needed for an object of apiVersion and kind.
func neededBy(apiVersion, kind string) [][]string {
	group, _, grouped := strings.Cut(apiVersion, "/")
	if !grouped {
		group = "" // the core group: "v1"
	}
	var out [][]string
	for _, n := range needed {
		if n.group == group && n.kind == kind {
			out = append(out, n.path)
		}
	}
	return out
}

// anyEntry reports whether f holds for a key and its value in some object
// anywhere in v.
func anyEntry(v any, f func(key string, value any) bool) bool {
	switch v := v.(type) {
	case map[string]any:
		for k, val := range v {
			if f(k, val) || anyEntry(val, f) {
				return true
			}
		}
	case []any:
		for _, e := range v {
			if anyEntry(e, f) {
				return true
			}
		}
	}
	return false
}

// absentAt reports whether fillNeeded would fill path in obj: every step
// is an object, absent or null, and the last key is absent.
func absentAt(obj map[string]any, path []string) bool {
	m := obj
	for _, k := range path[:len(path)-1] {
		switch next := m[k].(type) {
		case nil:
			return true
		case map[string]any:
			m = next
		default:
			return false
		}
	}
	_, found := m[path[len(path)-1]]
	return !found
}

// fillNeeded fills in, in the rendered obj, every sentinel its kind needs
// and lacks, making the objects on the way; a step that holds something
// other than an object (or null) is left alone, for the API server to
// refuse.
func (r *renderer) fillNeeded(obj map[string]any) {
	apiVersion, _ := obj["apiVersion"].(string)
	kind, _ := obj["kind"].(string)
	for _, path := range neededBy(apiVersion, kind) {
		if !absentAt(obj, path) {
			continue
		}
		m := obj
		for _, k := range path[:len(path)-1] {
			next, _ := m[k].(map[string]any)
			if next == nil {
				next = map[string]any{}
				m[k] = next
			}
			m = next
		}
		last := path[len(path)-1]
		m[last] = r.inject(last)
	}
}

// inject is the value the sentinel under key becomes, nil if key marks no
// sentinel.
func (r *renderer) inject(key string) any {
	switch key {
	case "scaleTargetRef":
		return map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": r.target.DeploymentName}
	case "matchLabels":
		labels := map[string]any{}
		sel := r.target.Selector
		if sel == nil {
			sel = workload.SelectorLabels(r.target.WorkerDeployment, r.target.BuildID)
		}
		for k, v := range sel {
			labels[k] = v
		}
		return labels
	}
	return nil
}
