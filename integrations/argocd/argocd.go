// Package argocd holds Rainbow's Argo CD resource customizations for
// temporal.io/TemporalWorkerDeployment (health.lua and the rollout actions
// under temporal.io/, in the folder layout Argo CD uses for its built-in
// ones) and runs them the way Argo CD does, so that tests can check them
// against real objects:
//
//   - a Lua state with only the base, table and package libraries (Argo CD
//     adds a reduced os library; these scripts use none);
//   - the object given as the global obj, converted from its JSON;
//   - the returned table encoded with gopher-json, as Argo CD does, and for
//     an action, turned into a JSON merge patch against the live object
//     after the same repair of empty tables Argo CD applies.
//
// ConfigMap renders the scripts as an argocd-cm patch (argocd-cm.yaml here).
package argocd

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"path"
	"sort"
	"strings"
	"time"

	jsonpatch "github.com/evanphx/json-patch/v5"
	lua "github.com/yuin/gopher-lua"
	luajson "layeh.com/gopher-json"
)

// Group and Kind the customizations are for.
const (
	Group = "temporal.io"
	Kind  = "TemporalWorkerDeployment"
)

// AnnotationPausedStrategy is where the pause action keeps the strategy it
// replaced with Manual; resume puts it back. Only these scripts read it.
const AnnotationPausedStrategy = "argocd.temporal.io/paused-strategy"

//go:embed temporal.io
var files embed.FS

const dir = Group + "/" + Kind

// HealthScript is health.lua.
func HealthScript() string { return mustRead(path.Join(dir, "health.lua")) }

// DiscoveryScript is actions/discovery.lua.
func DiscoveryScript() string { return mustRead(path.Join(dir, "actions", "discovery.lua")) }

// ActionNames lists the actions, one folder each under actions/.
func ActionNames() []string {
	entries, err := files.ReadDir(path.Join(dir, "actions"))
	if err != nil {
		panic(err)
	}
	var names []string
	for _, e := range entries {
		if e.IsDir() {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	return names
}

// ActionScript is actions/<name>/action.lua.
func ActionScript(name string) (string, error) {
	b, err := files.ReadFile(path.Join(dir, "actions", name, "action.lua"))
	if err != nil {
		return "", fmt.Errorf("no action %q: %w", name, err)
	}
	return string(b), nil
}

func mustRead(p string) string {
	b, err := files.ReadFile(p)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// Health is what a health script returns.
type Health struct {
	Status  string `json:"status"`
	Message string `json:"message,omitempty"`
}

// validHealth are the statuses Argo CD accepts; any other becomes Unknown.
var validHealth = map[string]bool{"Healthy": true, "Progressing": true, "Degraded": true, "Suspended": true, "Missing": true, "Unknown": true}

// RunHealth runs a health script on obj (an object as decoded from JSON or
// unstructured.Unstructured's content).
func RunHealth(script string, obj map[string]any) (Health, error) {
	out, err := run(script, obj)
	if err != nil {
		return Health{}, err
	}
	var h Health
	if err := json.Unmarshal(out, &h); err != nil {
		return Health{}, fmt.Errorf("health script returned %s: %w", out, err)
	}
	if !validHealth[h.Status] {
		return Health{Status: "Unknown", Message: "Lua returned an invalid health status"}, nil
	}
	return h, nil
}

// Action is one entry a discovery script returns.
type Action struct {
	Name     string
	Disabled bool
}

// RunDiscovery runs a discovery script on obj; the actions come sorted by name.
func RunDiscovery(script string, obj map[string]any) ([]Action, error) {
	out, err := run(script, obj)
	if err != nil {
		return nil, err
	}
	if string(out) == "[]" { // an empty table: no actions
		return nil, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(out, &m); err != nil {
		return nil, fmt.Errorf("discovery script returned %s: %w", out, err)
	}
	var actions []Action
	for name, raw := range m {
		a := Action{Name: name}
		var fields map[string]any
		if json.Unmarshal(raw, &fields) == nil { // {} comes back as [], an action without fields
			a.Disabled, _ = fields["disabled"].(bool)
		}
		actions = append(actions, a)
	}
	sort.Slice(actions, func(i, j int) bool { return actions[i].Name < actions[j].Name })
	return actions, nil
}

// RunAction runs an action script on the live object and returns the JSON
// merge patch Argo CD would send for it ("{}" when nothing changes). An
// action that changes status is refused: Argo CD would patch the status
// subresource, which the controller owns.
func RunAction(script string, live map[string]any) ([]byte, error) {
	out, err := run(script, live)
	if err != nil {
		return nil, err
	}
	if bytes.HasPrefix(out, []byte("[")) {
		return nil, fmt.Errorf("action returned a list of operations; these scripts return the changed object")
	}
	var changed map[string]any
	if err := json.Unmarshal(out, &changed); err != nil {
		return nil, fmt.Errorf("action returned %s: %w", out, err)
	}
	changed = keepEmptyMaps(changed, live)
	liveJSON, err := json.Marshal(live)
	if err != nil {
		return nil, err
	}
	changedJSON, err := json.Marshal(changed)
	if err != nil {
		return nil, err
	}
	patch, err := jsonpatch.CreateMergePatch(liveJSON, changedJSON)
	if err != nil {
		return nil, err
	}
	var fields map[string]any
	if err := json.Unmarshal(patch, &fields); err != nil {
		return nil, err
	}
	if _, ok := fields["status"]; ok {
		return nil, fmt.Errorf("action changes status: %s", patch)
	}
	return patch, nil
}

// keepEmptyMaps undoes what a round trip through Lua does to an empty
// object: gopher-json encodes every empty table as [], so where the live
// object has a map and the result an empty list, the live map is kept (the
// rule Argo CD applies), recursing through maps and lists.
func keepEmptyMaps(changed, live map[string]any) map[string]any {
	for k, nv := range changed {
		ov, ok := live[k]
		if !ok {
			continue
		}
		switch n := nv.(type) {
		case map[string]any:
			if o, ok := ov.(map[string]any); ok {
				changed[k] = keepEmptyMaps(n, o)
			}
		case []any:
			switch o := ov.(type) {
			case map[string]any:
				if len(n) == 0 {
					changed[k] = o
				}
			case []any:
				changed[k] = keepEmptyMapsInList(n, o)
			}
		}
	}
	return changed
}

func keepEmptyMapsInList(changed, live []any) []any {
	for i := range changed {
		if i >= len(live) {
			break
		}
		switch n := changed[i].(type) {
		case map[string]any:
			if o, ok := live[i].(map[string]any); ok {
				changed[i] = keepEmptyMaps(n, o)
			}
		case []any:
			if o, ok := live[i].([]any); ok {
				changed[i] = keepEmptyMapsInList(n, o)
			}
		}
	}
	return changed
}

// run runs script with obj as the global obj and returns the JSON of the
// value it returns.
func run(script string, obj map[string]any) ([]byte, error) {
	l := lua.NewState(lua.Options{SkipOpenLibs: true})
	defer l.Close()
	for _, lib := range []struct {
		name string
		open lua.LGFunction
	}{{lua.LoadLibName, lua.OpenPackage}, {lua.BaseLibName, lua.OpenBase}, {lua.TabLibName, lua.OpenTable}} {
		if err := l.CallByParam(lua.P{Fn: l.NewFunction(lib.open), NRet: 0, Protect: true}, lua.LString(lib.name)); err != nil {
			return nil, err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	l.SetContext(ctx)
	l.SetGlobal("obj", toLua(l, obj))
	if err := l.DoString(script); err != nil {
		return nil, err
	}
	ret := l.Get(-1)
	if ret.Type() != lua.LTTable {
		return nil, fmt.Errorf("expect table output from Lua script, not %s", ret.Type())
	}
	return luajson.Encode(ret)
}

// toLua converts a value decoded from JSON (or unstructured content, with
// int64 numbers) into Lua values, as Argo CD does.
func toLua(l *lua.LState, v any) lua.LValue {
	switch x := v.(type) {
	case nil:
		return lua.LNil
	case bool:
		return lua.LBool(x)
	case string:
		return lua.LString(x)
	case json.Number:
		return lua.LString(x)
	case float64:
		return lua.LNumber(x)
	case int64:
		return lua.LNumber(x)
	case int32:
		return lua.LNumber(x)
	case int:
		return lua.LNumber(x)
	case []any:
		t := l.CreateTable(len(x), 0)
		for _, e := range x {
			t.Append(toLua(l, e))
		}
		return t
	case map[string]any:
		t := l.CreateTable(0, len(x))
		for k, e := range x {
			t.RawSetH(lua.LString(k), toLua(l, e))
		}
		return t
	}
	return lua.LNil
}

// ConfigMap renders the scripts as a patch of Argo CD's argocd-cm
// ConfigMap: the health check and the actions of TemporalWorkerDeployment
// under the keys Argo CD reads.
func ConfigMap() []byte {
	var b strings.Builder
	b.WriteString(`# Rainbow's Argo CD customizations for temporal.io/TemporalWorkerDeployment,
# generated from integrations/argocd/temporal.io/ (do not edit; regenerate with
# go test ./integrations/argocd -run TestConfigMapIsUpToDate -update).
# Merge it into argocd-cm:
#   kubectl -n argocd patch configmap argocd-cm --type merge --patch-file integrations/argocd/argocd-cm.yaml
apiVersion: v1
kind: ConfigMap
metadata:
  name: argocd-cm
data:
`)
	key := strings.ReplaceAll(dir, "/", "_")
	fmt.Fprintf(&b, "  resource.customizations.health.%s: |\n", key)
	indent(&b, HealthScript(), 4)
	fmt.Fprintf(&b, "  resource.customizations.actions.%s: |\n", key)
	b.WriteString("    discovery.lua: |\n")
	indent(&b, DiscoveryScript(), 6)
	b.WriteString("    definitions:\n")
	for _, name := range ActionNames() {
		script, err := ActionScript(name)
		if err != nil {
			panic(err)
		}
		fmt.Fprintf(&b, "      - name: %s\n        action.lua: |\n", name)
		indent(&b, script, 10)
	}
	return []byte(b.String())
}

func indent(b *strings.Builder, text string, n int) {
	pad := strings.Repeat(" ", n)
	for _, line := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
		if line != "" {
			b.WriteString(pad)
			b.WriteString(line)
		}
		b.WriteString("\n")
	}
}
