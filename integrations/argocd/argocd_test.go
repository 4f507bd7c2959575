package argocd

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "rewrite argocd-cm.yaml from the Lua files")

// TestConfigMapIsUpToDate: argocd-cm.yaml is what ConfigMap renders from
// the Lua files; -update rewrites it.
func TestConfigMapIsUpToDate(t *testing.T) {
	want := ConfigMap()
	if *update {
		if err := os.WriteFile("argocd-cm.yaml", want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile("argocd-cm.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("argocd-cm.yaml is stale: run go test ./integrations/argocd -run TestConfigMapIsUpToDate -update")
	}
}

// argoActions is the shape Argo CD reads from
// resource.customizations.actions.<group_kind>.
type argoActions struct {
	Discovery   string `json:"discovery.lua"`
	Definitions []struct {
		Name   string `json:"name"`
		Action string `json:"action.lua"`
	} `json:"definitions"`
}

// TestConfigMapHoldsTheScripts: decoded the way Argo CD decodes argocd-cm,
// the patch carries every script byte for byte.
func TestConfigMapHoldsTheScripts(t *testing.T) {
	var cm corev1.ConfigMap
	if err := yaml.UnmarshalStrict(ConfigMap(), &cm); err != nil {
		t.Fatal(err)
	}
	if cm.Name != "argocd-cm" || cm.Kind != "ConfigMap" || len(cm.Data) != 2 {
		t.Fatalf("not a patch of argocd-cm with two keys: %+v", cm)
	}
	if got := cm.Data["resource.customizations.health.temporal.io_TemporalWorkerDeployment"]; got != HealthScript() {
		t.Fatalf("health check in the ConfigMap differs from health.lua:\n%s", got)
	}
	var actions argoActions
	if err := yaml.UnmarshalStrict([]byte(cm.Data["resource.customizations.actions.temporal.io_TemporalWorkerDeployment"]), &actions); err != nil {
		t.Fatal(err)
	}
	if actions.Discovery != DiscoveryScript() {
		t.Fatalf("discovery in the ConfigMap differs from discovery.lua:\n%s", actions.Discovery)
	}
	names := ActionNames()
	if len(actions.Definitions) != len(names) {
		t.Fatalf("%d definitions, want %v", len(actions.Definitions), names)
	}
	for i, d := range actions.Definitions {
		want, err := ActionScript(names[i])
		if err != nil {
			t.Fatal(err)
		}
		if d.Name != names[i] || d.Action != want {
			t.Fatalf("definition %d (%s) differs from actions/%s/action.lua", i, d.Name, names[i])
		}
	}
}

// recording is an object the integration test
// TestCDToolsFollowARollout saved from the local environment, with what
// kstatus and the health check said about it there.
type recording struct {
	Kstatus string         `json:"kstatus"`
	Health  Health         `json:"health"`
	Object  map[string]any `json:"object"`
}

func recordings(t *testing.T) map[string]recording {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no recorded objects in testdata (RAINBOW_RECORD_ARGOCD=1 go test ./test/integration -run TestCDToolsFollowARollout): %v", err)
	}
	out := map[string]recording{}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var rec recording
		d := json.NewDecoder(bytes.NewReader(raw))
		d.UseNumber() // as unstructured content: integers stay integers
		if err := d.Decode(&rec); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		rec.Object = numbersToInt64(rec.Object).(map[string]any)
		out[strings.TrimSuffix(filepath.Base(f), ".json")] = rec
	}
	return out
}

// numbersToInt64 turns json.Numbers into int64 or float64, as
// unstructured.Unstructured holds them.
func numbersToInt64(v any) any {
	switch x := v.(type) {
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i
		}
		f, _ := x.Float64()
		return f
	case map[string]any:
		for k, e := range x {
			x[k] = numbersToInt64(e)
		}
	case []any:
		for i, e := range x {
			x[i] = numbersToInt64(e)
		}
	}
	return v
}

// TestHealthOfRecordedObjects: on every object recorded from a real
// rollout, health.lua says what it said live, and a blocked rollout is
// Degraded.
func TestHealthOfRecordedObjects(t *testing.T) {
	seen := map[string]bool{}
	for name, rec := range recordings(t) {
		h, err := RunHealth(HealthScript(), rec.Object)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if h != rec.Health {
			t.Errorf("%s: health %+v, recorded %+v", name, h, rec.Health)
		}
		if rec.Kstatus == "Failed" && h.Status != "Degraded" {
			t.Errorf("%s: kstatus Failed but health %s", name, h.Status)
		}
		seen[h.Status] = true
	}
	for _, want := range []string{"Healthy", "Progressing", "Suspended", "Degraded"} {
		if !seen[want] {
			t.Errorf("no recorded object is %s; record them again", want)
		}
	}
}

// copyObject deep-copies a recorded object through JSON, keeping integers.
func copyObject(t *testing.T, obj map[string]any) map[string]any {
	t.Helper()
	raw, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var out map[string]any
	if err := d.Decode(&out); err != nil {
		t.Fatal(err)
	}
	return numbersToInt64(out).(map[string]any)
}

func conditions(obj map[string]any) []any {
	return obj["status"].(map[string]any)["conditions"].([]any)
}

func setCondition(obj map[string]any, typ, status string) {
	for _, c := range conditions(obj) {
		if m := c.(map[string]any); m["type"] == typ {
			m["status"] = status
		}
	}
}

// TestHealthEdgeCases: states a live run rarely shows, made from recorded
// objects.
func TestHealthEdgeCases(t *testing.T) {
	recs := recordings(t)
	healthy, ramping, manual := recs["complete"].Object, recs["ramping"].Object, recs["seen-progressing-WaitingForPromotion"].Object
	cases := []struct {
		name   string
		obj    func() map[string]any
		status string
	}{
		{"Stalled wins over a Ready=True", func() map[string]any {
			o := copyObject(t, healthy)
			setCondition(o, "Stalled", "True")
			return o
		}, "Degraded"},
		{"a Ready=True of an older generation", func() map[string]any {
			o := copyObject(t, healthy)
			for _, c := range conditions(o) {
				c.(map[string]any)["observedGeneration"] = int64(1)
			}
			o["metadata"].(map[string]any)["generation"] = int64(2)
			o["status"].(map[string]any)["observedGeneration"] = int64(2)
			return o
		}, "Progressing"},
		{"a status of an older generation", func() map[string]any {
			o := copyObject(t, healthy)
			o["metadata"].(map[string]any)["generation"] = int64(99)
			return o
		}, "Progressing"},
		{"no status", func() map[string]any {
			o := copyObject(t, healthy)
			delete(o, "status")
			return o
		}, "Progressing"},
		{"Progressing=False with an error reason but no Stalled", func() map[string]any {
			o := copyObject(t, ramping)
			for _, c := range conditions(o) {
				m := c.(map[string]any)
				if m["type"] == "Stalled" {
					m["status"] = "False"
				}
				if m["type"] == "Progressing" {
					m["status"], m["reason"] = "False", "TemporalStateFetchFailed"
				}
			}
			return o
		}, "Degraded"},
		{"Manual with its gate still running", func() map[string]any {
			o := copyObject(t, manual)
			o["spec"].(map[string]any)["rollout"] = map[string]any{"strategy": "Manual", "gate": map[string]any{"workflowType": "RolloutGate"}}
			o["metadata"].(map[string]any)["annotations"] = nil
			return o
		}, "Progressing"},
		{"Manual from git, gate passed", func() map[string]any {
			o := copyObject(t, manual)
			st := o["status"].(map[string]any)
			o["spec"].(map[string]any)["rollout"] = map[string]any{"strategy": "Manual", "gate": map[string]any{"workflowType": "RolloutGate"}}
			st["gate"] = map[string]any{"buildID": st["targetVersion"].(map[string]any)["buildID"], "result": "Succeeded", "workflowID": "w"}
			o["metadata"].(map[string]any)["annotations"] = nil
			return o
		}, "Suspended"},
	}
	for _, c := range cases {
		h, err := RunHealth(HealthScript(), c.obj())
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if h.Status != c.status {
			t.Errorf("%s: %+v, want %s", c.name, h, c.status)
		}
	}
}

func discover(t *testing.T, obj map[string]any) string {
	t.Helper()
	actions, err := RunDiscovery(DiscoveryScript(), obj)
	if err != nil {
		t.Fatal(err)
	}
	var on []string
	for _, a := range actions {
		if !a.Disabled {
			on = append(on, a.Name)
		}
	}
	if len(actions) != len(ActionNames()) {
		t.Fatalf("discovery lists %v, want every one of %v", actions, ActionNames())
	}
	return strings.Join(on, ",")
}

func action(t *testing.T, name string, obj map[string]any) (string, error) {
	t.Helper()
	script, err := ActionScript(name)
	if err != nil {
		t.Fatal(err)
	}
	patch, err := RunAction(script, obj)
	return string(patch), err
}

// TestActionsOnRecordedObjects: which actions each recorded state offers,
// the patch each sends, and the refusals of the ones that do not apply.
func TestActionsOnRecordedObjects(t *testing.T) {
	recs := recordings(t)
	healthy, ramping := recs["complete"].Object, recs["ramping"].Object
	paused, legacy := recs["paused"].Object, recs["paused-legacy"].Object
	for _, c := range []struct {
		obj  map[string]any
		name string
		want string
	}{
		{healthy, "healthy", "pause"},
		{ramping, "ramping", "abort,pause,promote-full,promote-step"},
		{paused, "paused", "abort,promote-full,resume"},
		{legacy, "paused by an older pause action", "promote-full,resume"},
		{recs["gate-failed"].Object, "gate failed", "abort,pause"},
	} {
		if got := discover(t, c.obj); got != c.want {
			t.Errorf("%s: actions %s, want %s", c.name, got, c.want)
		}
	}

	for _, c := range []struct {
		name, action string
		obj          map[string]any
		patch        string
	}{
		{"pause a ramp", "pause", ramping, `{"spec":{"rollout":{"paused":true}}}`},
		{"resume", "resume", paused, `{"spec":{"rollout":{"paused":false}}}`},
		{"promote-full from a pause", "promote-full", paused, `{"spec":{"rollout":{"paused":false,"strategy":"AllAtOnce"}}}`},
		{"resume an older pause", "resume", legacy, `{"metadata":{"annotations":null},"spec":{"rollout":{"strategy":"Progressive"}}}`},
		{"promote-full from an older pause", "promote-full", legacy, `{"metadata":{"annotations":null},"spec":{"rollout":{"strategy":"AllAtOnce"}}}`},
		{"promote-full", "promote-full", ramping, `{"spec":{"rollout":{"strategy":"AllAtOnce"}}}`},
		{"promote-step", "promote-step", ramping,
			`{"spec":{"rollout":{"steps":[{"pauseDuration":"0s","rampPercentage":25},{"pauseDuration":"1h0m0s","rampPercentage":75}]}}}`},
		{"abort a ramp", "abort", ramping, `{"metadata":{"annotations":{"temporal.io/abort-rollout":"v2-bc821e32d34e460a"}}}`},
	} {
		got, err := action(t, c.action, copyObject(t, c.obj))
		if err != nil || got != c.patch {
			t.Errorf("%s: patch %s (%v), want %s", c.name, got, err, c.patch)
		}
	}

	// resume of an older pause keeps the other annotations.
	o := copyObject(t, legacy)
	o["metadata"].(map[string]any)["annotations"].(map[string]any)["team"] = "billing"
	if got, err := action(t, "resume", o); err != nil || got != `{"metadata":{"annotations":{"argocd.temporal.io/paused-strategy":null}},"spec":{"rollout":{"strategy":"Progressive"}}}` {
		t.Errorf("resume with another annotation: %s (%v)", got, err)
	}

	// An aborted rollout offers retry, and no promotion, until it is retried.
	abortedObj := copyObject(t, ramping)
	abortedObj["metadata"].(map[string]any)["annotations"] = map[string]any{"temporal.io/abort-rollout": "v2-bc821e32d34e460a"}
	if got := discover(t, abortedObj); got != "pause,retry" {
		t.Errorf("aborted: actions %s, want pause,retry", got)
	}
	if got, err := action(t, "retry", abortedObj); err != nil || got != `{"metadata":{"annotations":null}}` {
		t.Errorf("retry: patch %s (%v)", got, err)
	}

	manual := copyObject(t, recs["seen-progressing-WaitingForPromotion"].Object)
	delete(manual["metadata"].(map[string]any), "annotations")
	manual["spec"].(map[string]any)["rollout"].(map[string]any)["strategy"] = "Manual"
	for _, c := range []struct {
		name, action string
		obj          map[string]any
	}{
		{"pause twice", "pause", paused},
		{"pause an older pause", "pause", legacy},
		{"resume what is not paused", "resume", healthy},
		{"resume Manual from git", "resume", manual},
		{"promote-full Manual from git", "promote-full", manual},
		{"promote-step when nothing ramps", "promote-step", healthy},
		{"promote-step when paused", "promote-step", paused},
		{"abort a complete rollout", "abort", healthy},
		{"retry what was not aborted", "retry", ramping},
	} {
		if got, err := action(t, c.action, copyObject(t, c.obj)); err == nil {
			t.Errorf("%s: want an error, got patch %s", c.name, got)
		}
	}
	if got := discover(t, manual); got != "" {
		t.Errorf("Manual from git offers %s, want nothing", got)
	}
}
