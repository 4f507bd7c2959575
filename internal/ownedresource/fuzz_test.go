package ownedresource

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/rainbow-deploy/rainbow/internal/workload"
)

// FuzzRender renders arbitrary objects for arbitrary versions and checks
// what the controller relies on: no panic; the input is left as it was;
// the same input renders the same object and hash; a rendered copy has
// the controller's name, namespace and labels, one owner (the version's
// Deployment), apiVersion and kind, string labels and annotations, and no
// status. Whatever the templates say, rendering allocates less than
// allocLimit, and an error for a broken bound names a spec.object field.
func FuzzRender(f *testing.F) {
	for _, s := range []string{
		`{"apiVersion":"autoscaling/v2","kind":"HorizontalPodAutoscaler","spec":{"scaleTargetRef":null,"maxReplicas":5,"metrics":[{"name":"{{ .BuildID }}"}]}}`,
		`{"apiVersion":"policy/v1","kind":"PodDisruptionBudget","spec":{"selector":{"matchLabels":null}}}`,
		`{"apiVersion":"v1","kind":"X","metadata":{"name":"n","labels":{"temporal.io/build-id":"mine","a":"{{ .TemporalNamespace }}"},"annotations":{"b":1}},"status":{}}`,
		`{"apiVersion":"v1","kind":"X","a":"{{ range 3 }}{{ end }}","b":"{{ index .BuildID 9 }}","c":"{{ printf \"%0900d\" 1 }}"}`,
		`{"kind":"X"}`, `{}`,
		// Attempts to exhaust memory.
		`{"apiVersion":"v1","kind":"X","a":"` + strings.ReplaceAll(doubling(40, `printf "%s%s" $x $x`), `"`, `\"`) + `"}`,
		`{"apiVersion":"v1","kind":"X","a":"` + strings.ReplaceAll(doubling(40, `print $x $x $x`), `"`, `\"`) + `"}`,
		`{"apiVersion":"v1","kind":"X","a":"{{ printf \"%0100d%0100d%0100d\" 1 2 3 | printf \"%q%q\" }}","b":["{{ html .BuildID }}","{{ println . }}"]}`,
		// As kubectl apply without --server-side leaves them: no nulls.
		`{"apiVersion":"autoscaling/v2","kind":"HorizontalPodAutoscaler","spec":{"maxReplicas":5}}`,
		`{"apiVersion":"policy/v1","kind":"PodDisruptionBudget","spec":{"selector":{}}}`,
		`{"apiVersion":"keda.sh/v1alpha1","kind":"ScaledObject","spec":{"scaleTargetRef":{},"triggers":[{"selector":{"matchLabels":{}}}]}}`,
	} {
		f.Add(s, "v1.2-abc", "orders", "hpa")
	}
	f.Add(`{"apiVersion":"v1","kind":"X"}`, "", "", "")
	f.Fuzz(func(t *testing.T, object, buildID, twd, twor string) {
		var in map[string]any
		if json.Unmarshal([]byte(object), &in) != nil || in == nil {
			return
		}
		var pristine map[string]any
		_ = json.Unmarshal([]byte(object), &pristine)
		tg := Target{Namespace: "ns", WorkerDeployment: twd, OwnedResource: twor, BuildID: buildID,
			DeploymentName: "dep", DeploymentUID: "uid", TemporalNamespace: "tns", TemporalDeploymentName: "ns/w"}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		u, err := Render(in, tg)
		runtime.ReadMemStats(&after)
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > allocLimit {
			t.Fatalf("rendering allocated %d MiB", alloc>>20)
		}
		var fe *FieldError
		if errors.Is(err, ErrBound) && (!errors.As(err, &fe) || !strings.HasPrefix(fe.Field, "spec.object")) {
			t.Fatalf("a broken bound names no field of spec.object: %v", err)
		}
		if !reflect.DeepEqual(in, pristine) {
			t.Fatalf("Render modified its input")
		}
		u2, err2 := Render(in, tg)
		if (err == nil) != (err2 == nil) || (err != nil && err.Error() != err2.Error()) {
			t.Fatalf("not deterministic: %v, then %v", err, err2)
		}
		if err != nil {
			if err.Error() == "" {
				t.Fatal("an empty error")
			}
			return
		}
		if Hash(u) != Hash(u2) || !reflect.DeepEqual(u.Object, u2.Object) {
			t.Fatalf("not deterministic: %v, then %v", u.Object, u2.Object)
		}
		if u.GetAPIVersion() == "" || u.GetKind() == "" {
			t.Errorf("rendered without apiVersion or kind: %v", u.Object)
		}
		if n := u.GetName(); n != Name(twd, twor, buildID) || len(validation.IsDNS1123Label(n)) > 0 {
			t.Errorf("name %q, want %q, a DNS label", n, Name(twd, twor, buildID))
		}
		if u.GetNamespace() != "ns" {
			t.Errorf("namespace %q", u.GetNamespace())
		}
		refs := u.GetOwnerReferences()
		if len(refs) != 1 || refs[0].Kind != "Deployment" || refs[0].Name != "dep" || refs[0].UID != "uid" || refs[0].Controller == nil || !*refs[0].Controller {
			t.Errorf("owners %+v, want the version's Deployment only", refs)
		}
		labels := u.GetLabels()
		for k, want := range map[string]string{workload.LabelWorker: workload.WorkerLabel(twd), workload.LabelBuildID: buildID,
			LabelOwnedResource: workload.WorkerLabel(twor)} {
			if labels[k] != want {
				t.Errorf("label %s = %q, want %q", k, labels[k], want)
			}
		}
		meta := u.Object["metadata"].(map[string]any)
		for _, key := range []string{"labels", "annotations"} {
			m, _ := meta[key].(map[string]any)
			for k, v := range m {
				if _, ok := v.(string); !ok {
					t.Errorf("metadata.%s[%s] = %v, not a string", key, k, v)
				}
			}
		}
		if _, ok := u.Object["status"]; ok {
			t.Error("status kept")
		}
		// Every sentinel is filled in, and every one the kind needs.
		if anyEntry(u.Object, IsSentinel) {
			t.Errorf("a sentinel is left: %v", u.Object)
		}
		for _, path := range neededBy(u.GetAPIVersion(), u.GetKind()) {
			if absentAt(u.Object, path) {
				t.Errorf("%v of a %s is absent: %v", path, u.GetKind(), u.Object)
			}
		}
		// The planner leaves replicas to the copies' autoscaler: they do
		// target the version's Deployment.
		targetsDep := func(k string, v any) bool {
			return k == "scaleTargetRef" && reflect.DeepEqual(v, map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": "dep"})
		}
		if AttachesAutoscaler(in) && !anyEntry(u.Object, targetsDep) {
			t.Errorf("AttachesAutoscaler, yet no scaleTargetRef names Deployment dep: %v", u.Object)
		}
		if _, err := json.Marshal(u.Object); err != nil {
			t.Errorf("the copy does not encode: %v", err)
		}
	})
}

// FuzzPrintfBound: the bounded printf checks its result's length before
// making it; that bound is never below what fmt makes.
func FuzzPrintfBound(f *testing.F) {
	for _, format := range []string{"%s", "%q%x", "% #100.100X|%+q", "%100.100f%%%d", "%v %#v %T", "%c%U%b%e%g", "x"} {
		f.Add(format, "\x00\xff\U0010ffff", int64(-1<<63), 1.7976931348623157e308)
	}
	f.Fuzz(func(t *testing.T, format, s string, i int64, fl float64) {
		data := Data{DeploymentName: s, BuildID: s, TemporalNamespace: s, TemporalDeploymentName: s}
		for _, args := range [][]any{nil, {s}, {i, fl, s}, {data, true, nil, uint8(i), complex(fl, fl)}, {s, s, s, s}} {
			n, err := printfBound(format, args)
			if err != nil {
				continue
			}
			if got := len(fmt.Sprintf(format, args...)); got > n {
				t.Fatalf("printf %q with %#v made %d bytes, bound %d", format, args, got, n)
			}
		}
	})
}
