package buildid

import (
	"encoding/json"
	"math/bits"
	"reflect"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// serverDefaults are values the API server writes into a Deployment's pod
// template (SetDefaults of core/v1) that a user's TWD template may lack.
// Each maps a path ("[]": every item) to the values it may default to.
var serverDefaults = func() map[string][]any {
	container := map[string][]any{
		"terminationMessagePath":   {"/dev/termination-log"},
		"terminationMessagePolicy": {"File"},
		"imagePullPolicy":          {"IfNotPresent", "Always"},
	}
	for _, probe := range []string{"livenessProbe", "readinessProbe", "startupProbe"} {
		container[probe+".timeoutSeconds"] = []any{float64(1)}
		container[probe+".periodSeconds"] = []any{float64(10)}
		container[probe+".successThreshold"] = []any{float64(1)}
		container[probe+".failureThreshold"] = []any{float64(3)}
		container[probe+".httpGet.scheme"] = []any{"HTTP"}
	}
	container["env[].valueFrom.fieldRef.apiVersion"] = []any{"v1"}
	out := map[string][]any{
		"spec.restartPolicy":                     {"Always"},
		"spec.dnsPolicy":                         {"ClusterFirst"},
		"spec.schedulerName":                     {"default-scheduler"},
		"spec.terminationGracePeriodSeconds":     {float64(30)},
		"spec.enableServiceLinks":                {true},
		"spec.volumes[].secret.defaultMode":      {float64(420)},
		"spec.volumes[].configMap.defaultMode":   {float64(420)},
		"spec.volumes[].projected.defaultMode":   {float64(420)},
		"spec.volumes[].downwardAPI.defaultMode": {float64(420)},
	}
	for _, list := range []string{"containers", "initContainers"} {
		for p, v := range container {
			out["spec."+list+"[]."+p] = v
		}
	}
	return out
}()

// maxDefaultsTried bounds the search: 2^n templates are hashed.
const maxDefaultsTried = 14

// WithoutServerDefaults finds the template whose TemplateHash is want among
// tpl without some of the values the API server defaults: what the user
// wrote may hold some of them too. False when none does.
func WithoutServerDefaults(tpl *corev1.PodTemplateSpec, want string) (*corev1.PodTemplateSpec, bool) {
	raw, err := json.Marshal(tpl)
	if err != nil {
		return nil, false
	}
	var generic any
	if err := json.Unmarshal(raw, &generic); err != nil {
		return nil, false
	}
	var found [][]any // locations: keys and list indices
	for path, values := range serverDefaults {
		locate(generic, strings.Split(path, "."), nil, values, &found)
	}
	if len(found) > maxDefaultsTried {
		return nil, false
	}
	// Most users write no defaults: try dropping the most first.
	masks := make([]uint32, 0, 1<<len(found))
	for m := uint32(0); m < 1<<len(found); m++ {
		masks = append(masks, m)
	}
	sortByOnes(masks)
	for _, m := range masks {
		var copy any
		_ = json.Unmarshal(raw, &copy)
		for i, loc := range found {
			if m&(1<<i) != 0 {
				remove(copy, loc)
			}
		}
		b, _ := json.Marshal(copy)
		var out corev1.PodTemplateSpec
		if json.Unmarshal(b, &out) == nil && TemplateHash(&out) == want {
			return &out, true
		}
	}
	return nil, false
}

func sortByOnes(masks []uint32) {
	// Stable by popcount, most ones first.
	buckets := make([][]uint32, 33)
	for _, m := range masks {
		n := bits.OnesCount32(m)
		buckets[n] = append(buckets[n], m)
	}
	masks = masks[:0]
	for n := 32; n >= 0; n-- {
		masks = append(masks, buckets[n]...)
	}
}

func locate(v any, path []string, at []any, values []any, found *[][]any) {
	m, ok := v.(map[string]any)
	if !ok || len(path) == 0 {
		return
	}
	key, list := strings.CutSuffix(path[0], "[]")
	child, ok := m[key]
	switch {
	case !ok:
	case list:
		items, _ := child.([]any)
		for i, item := range items {
			locate(item, path[1:], append(append(append([]any(nil), at...), key), i), values, found)
		}
	case len(path) > 1:
		locate(child, path[1:], append(append([]any(nil), at...), key), values, found)
	default:
		for _, d := range values {
			if reflect.DeepEqual(child, d) {
				*found = append(*found, append(append([]any(nil), at...), key))
			}
		}
	}
}

func remove(v any, loc []any) {
	for _, step := range loc[:len(loc)-1] {
		switch s := step.(type) {
		case string:
			v = v.(map[string]any)[s]
		case int:
			v = v.([]any)[s]
		}
	}
	delete(v.(map[string]any), loc[len(loc)-1].(string))
}
