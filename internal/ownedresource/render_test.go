package ownedresource

import (
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/rainbow-deploy/rainbow/internal/workload"
)

var target = Target{
	Namespace:              "shop",
	WorkerDeployment:       "orders",
	OwnedResource:          "autoscaler",
	BuildID:                "v2-abc",
	DeploymentName:         "orders-v2-abc",
	DeploymentUID:          "uid-2",
	TemporalNamespace:      "prod",
	TemporalDeploymentName: "shop/orders",
}

// decode turns JSON into what the planner passes: json.Unmarshal into
// map[string]any.
func decode(t testing.TB, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatalf("bad test JSON %s: %v", s, err)
	}
	return m
}

func asJSON(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestRender compares everything but metadata, which TestRenderMetadata
// covers.
func TestRender(t *testing.T) {
	const selector = `{"temporal.io/build-id":"v2-abc","temporal.io/worker-deployment":"orders"}`
	const deployment = `{"apiVersion":"apps/v1","kind":"Deployment","name":"orders-v2-abc"}`
	long := strings.Repeat("w", 80)
	for _, tc := range []struct {
		name   string
		target *Target // nil: target
		object string
		want   string
	}{{
		name:   "scaleTargetRef at top level",
		object: `{"apiVersion":"example.com/v1","kind":"Scaler","scaleTargetRef":null}`,
		want:   `{"apiVersion":"example.com/v1","kind":"Scaler","scaleTargetRef":` + deployment + `}`,
	}, {
		name:   "HPA spec.scaleTargetRef",
		object: `{"apiVersion":"autoscaling/v2","kind":"HorizontalPodAutoscaler","spec":{"scaleTargetRef":null,"minReplicas":2,"maxReplicas":10}}`,
		want:   `{"apiVersion":"autoscaling/v2","kind":"HorizontalPodAutoscaler","spec":{"maxReplicas":10,"minReplicas":2,"scaleTargetRef":` + deployment + `}}`,
	}, {
		name:   "PDB spec.selector.matchLabels",
		object: `{"apiVersion":"policy/v1","kind":"PodDisruptionBudget","spec":{"minAvailable":1,"selector":{"matchLabels":null}}}`,
		want:   `{"apiVersion":"policy/v1","kind":"PodDisruptionBudget","spec":{"minAvailable":1,"selector":{"matchLabels":` + selector + `}}}`,
	}, {
		name:   "in list elements",
		object: `{"apiVersion":"v1","kind":"X","spec":{"targets":[{"scaleTargetRef":null},{"selector":{"matchLabels":null}},"plain",null]}}`,
		want:   `{"apiVersion":"v1","kind":"X","spec":{"targets":[{"scaleTargetRef":` + deployment + `},{"selector":{"matchLabels":` + selector + `}},"plain",null]}}`,
	}, {
		name:   "matchLabels of a long TWD name are the Deployment's hashed label",
		target: &Target{WorkerDeployment: long, BuildID: "v1", DeploymentName: "d"},
		object: `{"apiVersion":"v1","kind":"X","selector":{"matchLabels":null}}`,
		want:   `{"apiVersion":"v1","kind":"X","selector":{"matchLabels":{"temporal.io/build-id":"v1","temporal.io/worker-deployment":"` + workload.WorkerLabel(long) + `"}}}`,
	}, {
		// An adopted Deployment keeps the incumbent's selector; a PDB of
		// ours must select its pods by it.
		name: "matchLabels of an adopted Deployment are its own selector's",
		target: &Target{WorkerDeployment: "orders", BuildID: "v1-b7c4", DeploymentName: "orders-v1-b7c4",
			Selector: map[string]string{"temporal.io/deployment-name": "orders", "temporal.io/build-id": "v1-b7c4"}},
		object: `{"apiVersion":"policy/v1","kind":"PodDisruptionBudget","spec":{"selector":{"matchLabels":null}}}`,
		want:   `{"apiVersion":"policy/v1","kind":"PodDisruptionBudget","spec":{"selector":{"matchLabels":{"temporal.io/build-id":"v1-b7c4","temporal.io/deployment-name":"orders"}}}}`,
	}, {
		name:   "{} is a sentinel too",
		object: `{"apiVersion":"example.com/v1","kind":"Scaler","spec":{"scaleTargetRef":{},"selector":{"matchLabels":{}}}}`,
		want:   `{"apiVersion":"example.com/v1","kind":"Scaler","spec":{"scaleTargetRef":` + deployment + `,"selector":{"matchLabels":` + selector + `}}}`,
	}, {
		// kubectl apply without --server-side drops every null.
		name:   "an HPA without scaleTargetRef gets one",
		object: `{"apiVersion":"autoscaling/v2","kind":"HorizontalPodAutoscaler","spec":{"minReplicas":2,"maxReplicas":10}}`,
		want:   `{"apiVersion":"autoscaling/v2","kind":"HorizontalPodAutoscaler","spec":{"maxReplicas":10,"minReplicas":2,"scaleTargetRef":` + deployment + `}}`,
	}, {
		name:   "an HPA of any version, without a spec",
		object: `{"apiVersion":"autoscaling/v1","kind":"HorizontalPodAutoscaler"}`,
		want:   `{"apiVersion":"autoscaling/v1","kind":"HorizontalPodAutoscaler","spec":{"scaleTargetRef":` + deployment + `}}`,
	}, {
		name:   "a KEDA ScaledObject without scaleTargetRef gets one",
		object: `{"apiVersion":"keda.sh/v1alpha1","kind":"ScaledObject","spec":{"maxReplicaCount":4}}`,
		want:   `{"apiVersion":"keda.sh/v1alpha1","kind":"ScaledObject","spec":{"maxReplicaCount":4,"scaleTargetRef":` + deployment + `}}`,
	}, {
		// What kubectl apply without --server-side leaves of
		// selector: {matchLabels: null}: a selector of every pod.
		name:   "a PDB's empty selector gets matchLabels",
		object: `{"apiVersion":"policy/v1","kind":"PodDisruptionBudget","spec":{"minAvailable":1,"selector":{}}}`,
		want:   `{"apiVersion":"policy/v1","kind":"PodDisruptionBudget","spec":{"minAvailable":1,"selector":{"matchLabels":` + selector + `}}}`,
	}, {
		name:   "a PDB without a selector gets one",
		object: `{"apiVersion":"policy/v1","kind":"PodDisruptionBudget","spec":{"maxUnavailable":1,"selector":null}}`,
		want:   `{"apiVersion":"policy/v1","kind":"PodDisruptionBudget","spec":{"maxUnavailable":1,"selector":{"matchLabels":` + selector + `}}}`,
	}, {
		name:   "a PDB's matchExpressions narrow the version's matchLabels",
		object: `{"apiVersion":"policy/v1","kind":"PodDisruptionBudget","spec":{"selector":{"matchExpressions":[{"key":"role","operator":"In","values":["a"]}]}}}`,
		want:   `{"apiVersion":"policy/v1","kind":"PodDisruptionBudget","spec":{"selector":{"matchExpressions":[{"key":"role","operator":"In","values":["a"]}],"matchLabels":` + selector + `}}}`,
	}, {
		name:   "absent keys are not added to other kinds",
		object: `{"apiVersion":"example.com/v1","kind":"Budget","spec":{"minAvailable":1,"selector":{}}}`,
		want:   `{"apiVersion":"example.com/v1","kind":"Budget","spec":{"minAvailable":1,"selector":{}}}`,
	}, {
		name:   "nor to the kinds that need one where a non-object stands in the way",
		object: `{"apiVersion":"policy/v1","kind":"PodDisruptionBudget","spec":{"selector":"all"}}`,
		want:   `{"apiVersion":"policy/v1","kind":"PodDisruptionBudget","spec":{"selector":"all"}}`,
	}, {
		name:   "non-null values are left alone",
		object: `{"apiVersion":"v1","kind":"X","spec":{"scaleTargetRef":{"kind":"StatefulSet","name":"db"},"selector":{"matchLabels":{"app":"db"}},"other":"x"}}`,
		want:   `{"apiVersion":"v1","kind":"X","spec":{"other":"x","scaleTargetRef":{"kind":"StatefulSet","name":"db"},"selector":{"matchLabels":{"app":"db"}}}}`,
	}, {
		name:   "null under other keys stays null",
		object: `{"apiVersion":"v1","kind":"X","spec":{"minReplicas":null,"scaleTargetRefs":null}}`,
		want:   `{"apiVersion":"v1","kind":"X","spec":{"minReplicas":null,"scaleTargetRefs":null}}`,
	}, {
		name: "templates in nested strings and lists",
		object: `{"apiVersion":"keda.sh/v1alpha1","kind":"ScaledObject","spec":{
			"triggers":[{"type":"temporal","metadata":{"namespace":"{{ .TemporalNamespace }}","buildId":"{{.BuildID}}","queue":"q",
				"workerDeploymentName":"{{ .TemporalDeploymentName }}"}}],
			"args":["--deployment={{ .DeploymentName }}","plain","{{ .BuildID }}/{{ .BuildID }}",3,true],
			"when":"{{ if eq .BuildID \"v2-abc\" }}yes{{ else }}no{{ end }}",
			"quoted":"{{ printf \"%q\" .BuildID }}"}}`,
		want: `{"apiVersion":"keda.sh/v1alpha1","kind":"ScaledObject","spec":{` +
			`"args":["--deployment=orders-v2-abc","plain","v2-abc/v2-abc",3,true],` +
			`"quoted":"\"v2-abc\"",` +
			`"scaleTargetRef":` + deployment + `,` + // a ScaledObject needs one
			`"triggers":[{"metadata":{"buildId":"v2-abc","namespace":"prod","queue":"q","workerDeploymentName":"shop/orders"},"type":"temporal"}],` +
			`"when":"yes"}}`,
	}, {
		name:   "strings without {{ are not templates, map keys are never rendered",
		object: `{"apiVersion":"v1","kind":"X","data":{"{{ .BuildID }}":"a }} b","t":"{ {.BuildID}}","f":"%s"}}`,
		want:   `{"apiVersion":"v1","kind":"X","data":{"f":"%s","t":"{ {.BuildID}}","{{ .BuildID }}":"a }} b"}}`,
	}, {
		name:   "templates in apiVersion and kind",
		object: `{"apiVersion":"{{ if true }}v1{{ end }}","kind":"ConfigMap","data":{"a":"b"}}`,
		want:   `{"apiVersion":"v1","data":{"a":"b"},"kind":"ConfigMap"}`,
	}, {
		name:   "status is dropped",
		object: `{"apiVersion":"example.com/v1","kind":"Scaler","spec":{},"status":{"currentReplicas":3}}`,
		want:   `{"apiVersion":"example.com/v1","kind":"Scaler","spec":{}}`,
	}, {
		name:   "numbers, booleans and empty values survive",
		object: `{"apiVersion":"v1","kind":"X","spec":{"f":1.5,"i":7,"big":12345678901,"b":false,"e":"","l":[],"m":{}}}`,
		want:   `{"apiVersion":"v1","kind":"X","spec":{"b":false,"big":12345678901,"e":"","f":1.5,"i":7,"l":[],"m":{}}}`,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			tg := target
			if tc.target != nil {
				tg = *tc.target
			}
			u, err := Render(decode(t, tc.object), tg)
			if err != nil {
				t.Fatalf("Render: %v", err)
			}
			got := u.DeepCopy().Object // also proves the output is valid unstructured content
			delete(got, "metadata")
			if g, w := asJSON(t, got), asJSON(t, decode(t, tc.want)); g != w {
				t.Errorf("got  %s\nwant %s", g, w)
			}
		})
	}
}

// TestAttachesAutoscaler: the planner leaves replicas to an autoscaler
// exactly when the copies target the version's Deployment.
func TestAttachesAutoscaler(t *testing.T) {
	for object, want := range map[string]bool{
		`{"apiVersion":"autoscaling/v2","kind":"HorizontalPodAutoscaler","spec":{"scaleTargetRef":null}}`:         true,
		`{"apiVersion":"autoscaling/v2","kind":"HorizontalPodAutoscaler","spec":{"scaleTargetRef":{}}}`:           true,
		`{"apiVersion":"autoscaling/v2","kind":"HorizontalPodAutoscaler","spec":{"maxReplicas":3}}`:               true, // kubectl dropped the null
		`{"apiVersion":"autoscaling/v1","kind":"HorizontalPodAutoscaler"}`:                                        true,
		`{"apiVersion":"keda.sh/v1alpha1","kind":"ScaledObject","spec":{"triggers":[]}}`:                          true,
		`{"apiVersion":"example.com/v1","kind":"Scaler","spec":{"targets":[{"scaleTargetRef":{}}]}}`:              true,
		`{"apiVersion":"autoscaling/v2","kind":"HorizontalPodAutoscaler","spec":{"scaleTargetRef":{"name":"x"}}}`: false,
		`{"apiVersion":"autoscaling/v2","kind":"HorizontalPodAutoscaler","spec":"x"}`:                             false,
		`{"apiVersion":"v1","kind":"HorizontalPodAutoscaler","spec":{}}`:                                          false, // not the autoscaling group
		`{"apiVersion":"example.com/v1","kind":"Scaler","spec":{}}`:                                               false,
		`{"apiVersion":"policy/v1","kind":"PodDisruptionBudget","spec":{"selector":{}}}`:                          false,
	} {
		if got := AttachesAutoscaler(decode(t, object)); got != want {
			t.Errorf("AttachesAutoscaler(%s) = %v, want %v", object, got, want)
		}
	}
}

func TestRenderErrors(t *testing.T) {
	// 17 of these fit in what one object's templates may write, 18 do not.
	big := map[string]any{"apiVersion": "v1", "kind": "X"}
	for i := range 18 {
		big[fmt.Sprintf("a%02d", i)] = strings.Repeat("x", 60000) + "{{ .BuildID }}"
	}
	for _, tc := range []struct {
		name    string
		object  string // JSON; "" means a nil map
		wantErr string
	}{
		{"template error names the path", `{"apiVersion":"v1","kind":"X","spec":{"metrics":[{"external":{"metric":{"name":"{{ .BuildID "}}}]}}`, `spec.object.spec.metrics[0].external.metric.name: template: `},
		{"unknown field", `{"apiVersion":"v1","kind":"X","spec":{"a":["x","{{ .Namespace }}"]}}`, `spec.object.spec.a[1]: template: value:1:3: executing "value" at <.Namespace>: can't evaluate field Namespace`},
		{"unknown function", `{"apiVersion":"v1","kind":"X","spec":{"a":"{{ env \"HOME\" }}"}}`, `spec.object.spec.a: template: value:1: function "env" not defined`},
		{"odd keys are quoted in the path", `{"apiVersion":"v1","kind":"X","metadata":{"annotations":{"example.com/x":"{{ .Nope }}"}}}`, `spec.object.metadata.annotations["example.com/x"]: template: `},
		{"first error in key order", `{"apiVersion":"v1","kind":"X","b":"{{ .B }}","a":"{{ .A }}"}`, `spec.object.a: template: `},
		{"range is refused", `{"apiVersion":"v1","kind":"X","a":"{{ range 1000000000000 }}{{ end }}"}`, `spec.object.a: template: range is not supported`},
		{"range nested in if is refused", `{"apiVersion":"v1","kind":"X","a":"{{ if true }}{{ else }}{{ range 10 }}x{{ end }}{{ end }}"}`, `spec.object.a: template: range is not supported`},
		{"define is refused", `{"apiVersion":"v1","kind":"X","a":"{{ define \"t\" }}{{ template \"t\" }}{{ end }}{{ template \"t\" }}"}`, `spec.object.a: template: define and block are not supported`},
		{"block is refused", `{"apiVersion":"v1","kind":"X","a":"{{ block \"t\" . }}x{{ end }}"}`, `spec.object.a: template: define and block are not supported`},
		{"template call is refused", `{"apiVersion":"v1","kind":"X","a":"{{ template \"value\" }}"}`, `spec.object.a: template: template calls are not supported`},
		{"output is bounded", asJSON(t, big), `spec.object.a17: template breaks a bound: the templates of one object may write at most 1048576 bytes`},
		{"missing apiVersion", `{"kind":"X"}`, `spec.object.apiVersion: required`},
		{"empty apiVersion", `{"apiVersion":"","kind":"X"}`, `spec.object.apiVersion: required`},
		{"template renders empty apiVersion", `{"apiVersion":"{{ if false }}v1{{ end }}","kind":"X"}`, `spec.object.apiVersion: required`},
		{"missing kind", `{"apiVersion":"v1"}`, `spec.object.kind: required`},
		{"kind not a string", `{"apiVersion":"v1","kind":3}`, `spec.object.kind: required`},
		{"nil object", ``, `spec.object.apiVersion: required`},
		{"metadata not an object", `{"apiVersion":"v1","kind":"X","metadata":"x"}`, `spec.object.metadata: must be an object`},
		{"labels not a map", `{"apiVersion":"v1","kind":"X","metadata":{"labels":["a"]}}`, `spec.object.metadata.labels: must be a map of strings`},
		{"label value not a string", `{"apiVersion":"v1","kind":"X","metadata":{"labels":{"a":1}}}`, `spec.object.metadata.labels.a: value must be a string`},
		{"annotation value not a string", `{"apiVersion":"v1","kind":"X","metadata":{"annotations":{"a":true}}}`, `spec.object.metadata.annotations.a: value must be a string`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var obj map[string]any
			if tc.object != "" {
				obj = decode(t, tc.object)
			}
			u, err := Render(obj, target)
			if err == nil || !strings.HasPrefix(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v, want prefix %q", err, tc.wantErr)
			}
			if u != nil {
				t.Errorf("got an object with the error: %v", u.Object)
			}
		})
	}
	delete(big, "a17")
	if _, err := Render(big, target); err != nil {
		t.Errorf("17 large values: %v", err)
	}
	// Values that did not come from JSON are an error, not a panic.
	obj := map[string]any{"apiVersion": "v1", "kind": "X", "spec": map[string]any{"n": []any{1}}}
	if _, err := Render(obj, target); err == nil || !strings.HasPrefix(err.Error(), "spec.object.spec.n[0]: unsupported value of type int") {
		t.Errorf("err = %v", err)
	}
}

func TestRenderMetadata(t *testing.T) {
	ours := map[string]any{
		workload.LabelWorker:  "orders",
		workload.LabelBuildID: "v2-abc",
		LabelOwnedResource:    "autoscaler",
	}
	with := func(m map[string]any, kv ...string) map[string]any {
		out := map[string]any{}
		for k, v := range m {
			out[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			out[kv[i]] = kv[i+1]
		}
		return out
	}
	for _, tc := range []struct {
		name     string
		metadata string // the user's metadata JSON, "" for none
		want     map[string]any
	}{{
		name: "no metadata",
		want: map[string]any{"labels": ours},
	}, {
		name:     "null labels and annotations",
		metadata: `{"labels":null,"annotations":null}`,
		want:     map[string]any{"labels": ours},
	}, {
		name:     "user labels merged, ours win; annotations kept and rendered",
		metadata: `{"labels":{"team":"payments","temporal.io/build-id":"forged","temporal.io/owned-resource":"other"},"annotations":{"note":"for {{ .DeploymentName }}","example.com/x":"y"}}`,
		want: map[string]any{
			"labels":      with(ours, "team", "payments"),
			"annotations": map[string]any{"note": "for orders-v2-abc", "example.com/x": "y"},
		},
	}, {
		name: "every other field is dropped",
		metadata: `{"name":"mine","generateName":"mine-","namespace":"elsewhere","uid":"u","resourceVersion":"7","generation":3,
			"creationTimestamp":"2020-01-01T00:00:00Z","deletionTimestamp":"2020-01-01T00:00:00Z","finalizers":["example.com/keep"],
			"ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":"x","uid":"y"}],"managedFields":[{"manager":"kubectl"}],
			"labels":{"a":"b"}}`,
		want: map[string]any{"labels": with(ours, "a", "b")},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			obj := `{"apiVersion":"v1","kind":"ConfigMap"}`
			if tc.metadata != "" {
				obj = `{"apiVersion":"v1","kind":"ConfigMap","metadata":` + tc.metadata + `}`
			}
			u, err := Render(decode(t, obj), target)
			if err != nil {
				t.Fatal(err)
			}
			want := with(tc.want, "name", Name("orders", "autoscaler", "v2-abc"), "namespace", "shop")
			want["ownerReferences"] = []any{map[string]any{
				"apiVersion": "apps/v1", "kind": "Deployment", "name": "orders-v2-abc", "uid": "uid-2", "controller": true,
			}}
			if g, w := asJSON(t, u.Object["metadata"]), asJSON(t, want); g != w {
				t.Errorf("metadata\ngot  %s\nwant %s", g, w)
			}
		})
	}
}

func TestRenderLongNamesGiveValidLabels(t *testing.T) {
	tg := target
	tg.WorkerDeployment = strings.Repeat("w", 100)
	tg.OwnedResource = strings.Repeat("o.", 100) + "o"
	u, err := Render(decode(t, `{"apiVersion":"v1","kind":"ConfigMap"}`), tg)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range u.GetLabels() {
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			t.Errorf("label %s=%q: %v", k, v, errs)
		}
	}
	if got := u.GetLabels()[LabelOwnedResource]; got != workload.WorkerLabel(tg.OwnedResource) {
		t.Errorf("owned-resource label = %q", got)
	}
	if errs := validation.IsDNS1123Label(u.GetName()); len(errs) > 0 || len(u.GetName()) > 47 {
		t.Errorf("name %q: %v", u.GetName(), errs)
	}
}

// TestRenderOwnerReference reads the reference back the way clients do.
func TestRenderOwnerReference(t *testing.T) {
	u, err := Render(decode(t, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"ownerReferences":[{"apiVersion":"v1","kind":"Pod","name":"p","uid":"q"}]}}`), target)
	if err != nil {
		t.Fatal(err)
	}
	refs := u.GetOwnerReferences()
	if len(refs) != 1 {
		t.Fatalf("owner references = %+v", refs)
	}
	r := refs[0]
	if r.APIVersion != "apps/v1" || r.Kind != "Deployment" || r.Name != "orders-v2-abc" || r.UID != "uid-2" {
		t.Errorf("owner = %+v", r)
	}
	if r.Controller == nil || !*r.Controller {
		t.Error("not the controller reference")
	}
	if r.BlockOwnerDeletion != nil && *r.BlockOwnerDeletion {
		t.Error("blockOwnerDeletion needs finalizer permission on Deployments")
	}
	if u.GetName() != Name("orders", "autoscaler", "v2-abc") || u.GetNamespace() != "shop" {
		t.Errorf("name = %s/%s", u.GetNamespace(), u.GetName())
	}
	if u.GetAPIVersion() != "v1" || u.GetKind() != "ConfigMap" {
		t.Errorf("gvk = %s", u.GroupVersionKind())
	}
}

func TestRenderLeavesInputUntouched(t *testing.T) {
	const in = `{"apiVersion":"autoscaling/v2","kind":"HorizontalPodAutoscaler",
		"metadata":{"name":"x","labels":{"a":"b"},"annotations":{"n":"{{ .BuildID }}"}},
		"spec":{"scaleTargetRef":null,"selector":{"matchLabels":null},"metrics":[{"name":"{{ .DeploymentName }}","tags":["{{ .BuildID }}"]}]},
		"status":{"x":1}}`
	obj := decode(t, in)
	u, err := Render(obj, target)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(obj, decode(t, in)) {
		t.Errorf("Render changed its input: %s", asJSON(t, obj))
	}
	// The output shares nothing with the input.
	u.Object["spec"].(map[string]any)["metrics"].([]any)[0].(map[string]any)["tags"].([]any)[0] = "changed"
	u.Object["spec"].(map[string]any)["metrics"].([]any)[0].(map[string]any)["new"] = "added"
	u.Object["metadata"].(map[string]any)["labels"].(map[string]any)["a"] = "changed"
	u.Object["metadata"].(map[string]any)["annotations"].(map[string]any)["n"] = "changed"
	if !reflect.DeepEqual(obj, decode(t, in)) {
		t.Errorf("changing the output changed the input: %s", asJSON(t, obj))
	}
	// Rendering twice gives two independent, equal objects.
	a, _ := Render(obj, target)
	b, _ := Render(obj, target)
	a.Object["spec"].(map[string]any)["scaleTargetRef"].(map[string]any)["name"] = "changed"
	if reflect.DeepEqual(a.Object, b.Object) {
		t.Error("two renders share the injected scaleTargetRef")
	}
}

func TestName(t *testing.T) {
	shape := regexp.MustCompile(`^(?:[a-z0-9]([-a-z0-9]*[a-z0-9])?-)?[0-9a-f]{8}$`)
	long := strings.Repeat("x", 100)
	for _, tc := range []struct {
		name             string
		twd, twor, build string
		want             string // exact; golden, since a new name would apply a second copy
		wantPrefix       string
	}{
		{name: "short", twd: "orders", twor: "hpa", build: "v1", want: "orders-hpa-v1-a496515b"},
		{name: "sanitised", twd: "Orders", twor: "my.hpa", build: "v1.0_A", wantPrefix: "orders-my-hpa-v1-0-a-"},
		{name: "long is cut to fit", twd: long, twor: "hpa", build: "v1", wantPrefix: strings.Repeat("x", 38) + "-"},
		{name: "trailing dash after the cut is trimmed", twd: strings.Repeat("a", 37), twor: "hpa", build: "v1", wantPrefix: strings.Repeat("a", 37) + "-"},
		{name: "leading dashes are trimmed", twd: "..orders", twor: "hpa", build: "v1", wantPrefix: "orders-hpa-v1-"},
		{name: "nothing usable leaves the hash", twd: "", twor: "", build: "", want: "63cab8e9"},
		{name: "non-ASCII", twd: "ördérs", twor: "hpa", build: "v1", wantPrefix: "rd-rs-hpa-v1-"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Name(tc.twd, tc.twor, tc.build)
			if tc.want != "" && got != tc.want {
				t.Errorf("Name = %q, want %q", got, tc.want)
			}
			if !strings.HasPrefix(got, tc.wantPrefix) {
				t.Errorf("Name = %q, want prefix %q", got, tc.wantPrefix)
			}
			if len(got) > 47 || len(validation.IsDNS1123Label(got)) > 0 || !shape.MatchString(got) {
				t.Errorf("Name = %q (%d chars) is not a valid name", got, len(got))
			}
			if again := Name(tc.twd, tc.twor, tc.build); again != got {
				t.Errorf("not stable: %q, then %q", got, again)
			}
		})
	}

	// Triples that read the same after sanitising or truncation, or split
	// the same text differently, get distinct names.
	groups := [][][3]string{
		{{long, "hpa", "v1"}, {long, "hpa", "v2"}, {long, "pdb", "v1"}, {long + "y", "hpa", "v1"}},
		{{"orders", "hpa", "v1.0"}, {"orders", "hpa", "v1-0"}, {"orders", "hpa", "V1-0"}},
		{{"a-b", "c", "d"}, {"a", "b-c", "d"}, {"a", "b", "c-d"}},
		{{"a", "b", "1:c"}, {"a", "b1:", "c"}},
	}
	for _, g := range groups {
		seen := map[string][3]string{}
		for _, tr := range g {
			n := Name(tr[0], tr[1], tr[2])
			if other, dup := seen[n]; dup {
				t.Errorf("%q and %q both named %q", other, tr, n)
			}
			seen[n] = tr
		}
	}
}

func FuzzName(f *testing.F) {
	f.Add("orders", "hpa", "v1")
	f.Add(strings.Repeat("x", 100), "hpa", "v1.0")
	f.Add("", "", "")
	f.Add("---", "...", "ÄÖÜ")
	f.Fuzz(func(t *testing.T, twd, twor, build string) {
		n := Name(twd, twor, build)
		if len(n) > 47 || len(validation.IsDNS1123Label(n)) > 0 {
			t.Errorf("Name(%q, %q, %q) = %q", twd, twor, build, n)
		}
	})
}

func TestHash(t *testing.T) {
	const hpa = `{"apiVersion":"autoscaling/v2","kind":"HorizontalPodAutoscaler","spec":{"scaleTargetRef":null,"maxReplicas":5,"metrics":[{"name":"{{ .BuildID }}"}]}}`
	render := func(object string, tg Target) string {
		t.Helper()
		u, err := Render(decode(t, object), tg)
		if err != nil {
			t.Fatal(err)
		}
		return Hash(u)
	}
	base := render(hpa, target)
	if !regexp.MustCompile(`^[0-9a-f]{16}$`).MatchString(base) {
		t.Errorf("Hash = %q, want 16 hex digits", base)
	}
	for range 20 { // map iteration order varies from run to run
		if h := render(hpa, target); h != base {
			t.Fatalf("not stable: %s, then %s", base, h)
		}
	}
	// Key order in the input does not matter.
	if h := render(`{"spec":{"metrics":[{"name":"{{ .BuildID }}"}],"maxReplicas":5,"scaleTargetRef":null},"kind":"HorizontalPodAutoscaler","apiVersion":"autoscaling/v2"}`, target); h != base {
		t.Errorf("key order changed the hash")
	}
	newBuild := target
	newBuild.BuildID = "v3"
	newDeployment := target
	newDeployment.DeploymentName = "orders-other"
	newNamespace := target
	newNamespace.TemporalNamespace = "staging"
	for name, h := range map[string]string{
		"a value":              render(strings.Replace(hpa, `"maxReplicas":5`, `"maxReplicas":6`, 1), target),
		"a field added":        render(strings.Replace(hpa, `"maxReplicas":5`, `"maxReplicas":5,"minReplicas":1`, 1), target),
		"the build ID":         render(hpa, newBuild),
		"the Deployment":       render(hpa, newDeployment),
		"a template's data":    render(strings.Replace(hpa, ".BuildID", ".TemporalNamespace", 1), newNamespace),
		"an annotation":        render(strings.Replace(hpa, `"spec"`, `"metadata":{"annotations":{"a":"b"}},"spec"`, 1), target),
		"a number's JSON type": render(strings.Replace(hpa, `"maxReplicas":5`, `"maxReplicas":"5"`, 1), target),
	} {
		if h == base {
			t.Errorf("changing %s kept the hash", name)
		}
	}
	if Hash(nil) == "" || Hash(nil) == base {
		t.Errorf("Hash(nil) = %q", Hash(nil))
	}
}

func TestCheckTemplate(t *testing.T) {
	for text, want := range map[string]string{
		"{{ .BuildID }}": "",
		"{{ $.TemporalDeploymentName }}/{{ .DeploymentName }}": "",
		"{{ printf \"%s-x\" .TemporalNamespace }}":             "",
		"{{ with .BuildID }}{{ .Whatever }}{{ end }}":          "", // dot is a string there: left to Render
		"{{ with .BuildID }}{{ $.Nope }}{{ end }}":             "unknown field .Nope",
		"{{ if .BuildID }}{{ else }}{{ .Nope }}{{ end }}":      "unknown field .Nope",
		"{{ .BuildID.Length }}":                                ".BuildID is a string and has no field .Length",
		"{{ .Namespace | printf \"%s\" }}":                     "unknown field .Namespace",
		"{{ .BuildID":                                          "unclosed action",
		"{{ range 3 }}{{ end }}":                               "range is not supported",
		"{{ block \"t\" . }}{{ end }}":                         "define and block are not supported",
		"{{ .BuildID | html }}":                                `function "html" is not available`,
		"{{ (urlquery .BuildID).X }}":                          `function "urlquery" is not available`,
		strings.Repeat("x", 70000) + "{{ .BuildID }}":          "a string holding a template may be at most 65536 bytes",
	} {
		err := CheckTemplate(text)
		if (want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), want)) {
			t.Errorf("CheckTemplate(%q) = %v, want %q", text, err, want)
		}
		// Whatever passes the check renders: only the version's values
		// can make it fail then.
		if err == nil {
			if _, rerr := Render(map[string]any{"apiVersion": "v1", "kind": "X", "a": text}, target); rerr != nil && want == "" && !strings.Contains(text, "Whatever") {
				t.Errorf("%q passed the check but Render failed: %v", text, rerr)
			}
		}
	}
}
