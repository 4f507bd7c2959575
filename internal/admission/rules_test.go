package admission

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
)

func twor(worker, object string) *v1alpha1.TemporalWorkerOwnedResource {
	return &v1alpha1.TemporalWorkerOwnedResource{
		ObjectMeta: metav1.ObjectMeta{Name: "r", Namespace: "ns"},
		Spec: v1alpha1.TemporalWorkerOwnedResourceSpec{
			WorkerRef: v1alpha1.WorkerReference{Name: worker},
			Object:    apiextensionsv1.JSON{Raw: []byte(object)},
		},
	}
}

const (
	goodHPA  = `{"apiVersion":"autoscaling/v2","kind":"HorizontalPodAutoscaler","spec":{"scaleTargetRef":null,"minReplicas":1,"maxReplicas":5}}`
	goodHPA2 = `{"apiVersion":"autoscaling/v2","kind":"HorizontalPodAutoscaler","spec":{"scaleTargetRef":null,"minReplicas":2,"maxReplicas":5}}`
	goodPDB  = `{"apiVersion":"policy/v1","kind":"PodDisruptionBudget","spec":{"minAvailable":1,"selector":{"matchLabels":null}}}`
)

// doubling40 doubles a string in a variable forty times (a TiB), as JSON.
var doubling40 = `{{ $x := \"ab\" }}` + strings.Repeat(`{{ $x = printf \"%s%s\" $x $x }}`, 40) + `{{ len $x }}`

// TestValidate is the whole table of rules that need no API call: each
// case lists the errors expected, as "<field>: <type>", in order.
func TestValidate(t *testing.T) {
	cases := []struct {
		name   string
		object string
		old    string // worker of the stored object on an update
		banned []string
		// lastApplied is kubectl's last-applied-configuration annotation.
		lastApplied string
		want        []string
	}{
		{name: "good HPA", object: goodHPA},
		{name: "good PDB", object: goodPDB},
		{name: "sentinels may be absent", object: `{"apiVersion":"v1","kind":"ConfigMap","data":{"a":"b"}}`},
		{name: "labels and annotations are fine", object: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"labels":{"a":"b"}}}`},
		{name: "minReplicas 2", object: `{"apiVersion":"x/v1","kind":"Y","spec":{"minReplicas":2}}`},
		{name: "no apiVersion", object: `{"kind":"HorizontalPodAutoscaler"}`,
			want: []string{"spec.object.apiVersion: Required value"}},
		{name: "empty apiVersion and kind", object: `{"apiVersion":"","kind":""}`,
			want: []string{"spec.object.apiVersion: Required value", "spec.object.kind: Required value"}},
		{name: "no kind", object: `{"apiVersion":"autoscaling/v2"}`,
			want: []string{"spec.object.kind: Required value"}},
		{name: "kind not a string", object: `{"apiVersion":"v1","kind":3}`,
			want: []string{"spec.object.kind: Invalid value"}},
		{name: "malformed apiVersion", object: `{"apiVersion":"a/b/c","kind":"X"}`,
			want: []string{"spec.object.apiVersion: Invalid value"}},
		{name: "metadata.name", object: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"}}`,
			want: []string{"spec.object.metadata.name: Forbidden"}},
		{name: "metadata.namespace", object: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"namespace":"x"}}`,
			want: []string{"spec.object.metadata.namespace: Forbidden"}},
		{name: "metadata not an object", object: `{"apiVersion":"v1","kind":"ConfigMap","metadata":"x"}`,
			want: []string{"spec.object.metadata: Invalid value"}},
		{name: "Deployment banned by default", object: `{"apiVersion":"apps/v1","kind":"Deployment"}`,
			want: []string{"spec.object.kind: Forbidden"}},
		{name: "banned in any group", object: `{"apiVersion":"example.com/v1","kind":"Job"}`,
			want: []string{"spec.object.kind: Forbidden"}},
		{name: "each default banned kind", object: `{"apiVersion":"batch/v1","kind":"CronJob"}`,
			want: []string{"spec.object.kind: Forbidden"}},
		{name: "banned list configured", object: `{"apiVersion":"v1","kind":"ConfigMap"}`, banned: []string{"ConfigMap"},
			want: []string{"spec.object.kind: Forbidden"}},
		{name: "nothing banned", object: `{"apiVersion":"apps/v1","kind":"Deployment"}`, banned: []string{}},
		{name: "RBAC kinds banned even when nothing else is", object: `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRoleBinding"}`, banned: []string{},
			want: []string{"spec.object.kind: Forbidden"}},
		{name: "RoleBinding banned", object: `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"RoleBinding"}`,
			want: []string{"spec.object.kind: Forbidden"}},
		{name: "a Role of another group is not RBAC", object: `{"apiVersion":"example.com/v1","kind":"Role"}`, banned: []string{}},
		{name: "minReplicas 0", object: `{"apiVersion":"autoscaling/v2","kind":"HorizontalPodAutoscaler","spec":{"minReplicas":0}}`,
			want: []string{"spec.object.spec.minReplicas: Invalid value"}},
		{name: "scaleTargetRef set", object: `{"apiVersion":"autoscaling/v2","kind":"HorizontalPodAutoscaler","spec":{"scaleTargetRef":{"kind":"Deployment","name":"x"}}}`,
			want: []string{"spec.object.spec.scaleTargetRef: Forbidden"}},
		{name: "matchLabels set", object: `{"apiVersion":"policy/v1","kind":"PodDisruptionBudget","spec":{"selector":{"matchLabels":{"a":"b"}}}}`,
			want: []string{"spec.object.spec.selector.matchLabels: Forbidden"}},
		{name: "matchLabels {} is a sentinel", object: `{"apiVersion":"policy/v1","kind":"PodDisruptionBudget","spec":{"selector":{"matchLabels":{}}}}`},
		{name: "scaleTargetRef {} is a sentinel", object: `{"apiVersion":"autoscaling/v2","kind":"HorizontalPodAutoscaler","spec":{"scaleTargetRef":{},"maxReplicas":5}}`},
		{name: "a sentinel with something in it", object: `{"apiVersion":"x/v1","kind":"Y","spec":{"scaleTargetRef":{"name":""}}}`,
			want: []string{"spec.object.spec.scaleTargetRef: Forbidden"}},
		{name: "a list is no sentinel", object: `{"apiVersion":"x/v1","kind":"Y","spec":{"matchLabels":[]}}`,
			want: []string{"spec.object.spec.matchLabels: Forbidden"}},
		// An HPA's metric selectors select series, not pods: the user's
		// own labels are accepted there, as the worker controller's
		// manifests write them.
		{name: "an HPA's external metric selector with the user's labels",
			object: `{"apiVersion":"autoscaling/v2","kind":"HorizontalPodAutoscaler","spec":{"maxReplicas":5,"metrics":[{"type":"Resource"},{"type":"External","external":{"metric":{"name":"m","selector":{"matchLabels":{"worker_type":"ActivityWorker","temporal_worker_build_id":"{{ .BuildID }}"}}}}}]}}`},
		{name: "an HPA's object and pods metric selectors with the user's labels",
			object: `{"apiVersion":"autoscaling/v2","kind":"HorizontalPodAutoscaler","spec":{"maxReplicas":5,"metrics":[{"type":"Object","object":{"metric":{"name":"m","selector":{"matchLabels":{"a":"b"}}}}},{"type":"Pods","pods":{"metric":{"name":"m","selector":{"matchLabels":{"a":"b"}}}}}]}}`},
		{name: "a metric selector's label that is no string",
			object: `{"apiVersion":"autoscaling/v2","kind":"HorizontalPodAutoscaler","spec":{"metrics":[{"type":"External","external":{"metric":{"name":"m","selector":{"matchLabels":{"a":1}}}}}]}}`,
			want:   []string{"spec.object.spec.metrics[0].external.metric.selector.matchLabels[a]: Invalid value"}},
		{name: "a metric selector's label with a broken template",
			object: `{"apiVersion":"autoscaling/v2","kind":"HorizontalPodAutoscaler","spec":{"metrics":[{"type":"External","external":{"metric":{"name":"m","selector":{"matchLabels":{"a":"{{ .Nope"}}}}}]}}`,
			want:   []string{"spec.object.spec.metrics[0].external.metric.selector.matchLabels[a]: Invalid value"}},
		{name: "the same path in another kind still selects pods",
			object: `{"apiVersion":"example.com/v1","kind":"Scaler","spec":{"metrics":[{"external":{"metric":{"selector":{"matchLabels":{"a":"b"}}}}}]}}`,
			want:   []string{"spec.object.spec.metrics[0].external.metric.selector.matchLabels: Forbidden"}},
		{name: "an HPA's other matchLabels stay sentinels",
			object: `{"apiVersion":"autoscaling/v2","kind":"HorizontalPodAutoscaler","spec":{"metrics":[{"type":"External","external":{"metric":{"name":"m"},"selector":{"matchLabels":{"a":"b"}}}}]}}`,
			want:   []string{"spec.object.spec.metrics[0].external.selector.matchLabels: Forbidden"}},
		// kubectl apply without --server-side drops every null, and records
		// the manifest in the last-applied annotation.
		{name: "client-side apply dropped the HPA's scaleTargetRef: filled in anyway",
			object:      `{"apiVersion":"autoscaling/v2","kind":"HorizontalPodAutoscaler","spec":{"maxReplicas":5}}`,
			lastApplied: `{"apiVersion":"temporal.io/v1alpha1","kind":"TemporalWorkerOwnedResource","spec":{"object":{"apiVersion":"autoscaling/v2","kind":"HorizontalPodAutoscaler","spec":{"scaleTargetRef":null,"maxReplicas":5}}}}`},
		{name: "client-side apply dropped the PDB's matchLabels: filled in anyway",
			object:      `{"apiVersion":"policy/v1","kind":"PodDisruptionBudget","spec":{"maxUnavailable":1,"selector":{}}}`,
			lastApplied: `{"spec":{"object":{"apiVersion":"policy/v1","kind":"PodDisruptionBudget","spec":{"maxUnavailable":1,"selector":{"matchLabels":null}}}}}`},
		{name: "client-side apply dropped a sentinel nothing fills in",
			object:      `{"apiVersion":"example.com/v1","kind":"Scaler","spec":{"target":{"x":1},"triggers":[{"selector":{}}]}}`,
			lastApplied: `{"spec":{"object":{"apiVersion":"example.com/v1","kind":"Scaler","spec":{"target":{"x":1,"scaleTargetRef":null},"triggers":[{"selector":{"matchLabels":null}}]}}}}`,
			want:        []string{"spec.object.spec.target.scaleTargetRef: Required value", "spec.object.spec.triggers[0].selector.matchLabels: Required value"}},
		{name: "client-side apply dropped an HPA's metric selector",
			object:      `{"apiVersion":"autoscaling/v2","kind":"HorizontalPodAutoscaler","spec":{"maxReplicas":5,"metrics":[{"type":"External","external":{"metric":{"name":"m","selector":{}}}}]}}`,
			lastApplied: `{"spec":{"object":{"apiVersion":"autoscaling/v2","kind":"HorizontalPodAutoscaler","spec":{"scaleTargetRef":null,"maxReplicas":5,"metrics":[{"type":"External","external":{"metric":{"name":"m","selector":{"matchLabels":null}}}}]}}}}`,
			want:        []string{"spec.object.spec.metrics[0].external.metric.selector.matchLabels: Required value"}},
		{name: "the paths that kinds need are not followed into lists",
			object:      `{"apiVersion":"keda.sh/v1alpha1","kind":"ScaledObject","spec":{},"items":[{"spec":{}}]}`,
			lastApplied: `{"spec":{"object":{"apiVersion":"keda.sh/v1alpha1","kind":"ScaledObject","spec":{"scaleTargetRef":null},"items":[{"spec":{"scaleTargetRef":null}}]}}}`,
			want:        []string{"spec.object.items[0].spec.scaleTargetRef: Required value"}},
		{name: "{} survives client-side apply",
			object:      `{"apiVersion":"example.com/v1","kind":"Scaler","spec":{"scaleTargetRef":{}}}`,
			lastApplied: `{"spec":{"object":{"apiVersion":"example.com/v1","kind":"Scaler","spec":{"scaleTargetRef":{}}}}}`},
		{name: "a null the API server kept",
			object:      `{"apiVersion":"example.com/v1","kind":"Scaler","spec":{"scaleTargetRef":null}}`,
			lastApplied: `{"spec":{"object":{"apiVersion":"example.com/v1","kind":"Scaler","spec":{"scaleTargetRef":null}}}}`},
		{name: "a last-applied object that no longer matches is no evidence",
			object:      `{"apiVersion":"example.com/v1","kind":"Scaler","data":{}}`,
			lastApplied: `{"spec":{"object":{"apiVersion":"example.com/v1","kind":"Scaler","spec":{"scaleTargetRef":null}}}}`},
		{name: "a last-applied annotation that is not JSON is ignored",
			object: `{"apiVersion":"example.com/v1","kind":"Scaler"}`, lastApplied: `{"spec":`},
		{name: "sentinel deep in a list", object: `{"apiVersion":"x/v1","kind":"Y","spec":{"triggers":[{"a":1},{"scaleTargetRef":"z"}]}}`,
			want: []string{"spec.object.spec.triggers[1].scaleTargetRef: Forbidden"}},
		{name: "templates that render for every version", object: `{"apiVersion":"v1","kind":"ConfigMap","data":{"a":"{{ .BuildID }}-{{ $.TemporalNamespace }}","b":"{{ with .DeploymentName }}{{ . }}{{ end }}"}}`},
		{name: "template that does not parse", object: `{"apiVersion":"v1","kind":"ConfigMap","data":{"a":"{{ .BuildID"}}`,
			want: []string{"spec.object.data.a: Invalid value"}},
		{name: "template naming an unknown field", object: `{"apiVersion":"v1","kind":"ConfigMap","data":{"a":"{{ if eq .BuildID \"x\" }}{{ .Namespace }}{{ end }}"}}`,
			want: []string{"spec.object.data.a: Invalid value"}},
		{name: "template with range", object: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"labels":{"a":"{{ range 3 }}x{{ end }}"}}}`,
			want: []string{"spec.object.metadata.labels.a: Invalid value"}},
		{name: "template doubling a value 40 times", object: `{"apiVersion":"v1","kind":"ConfigMap","data":{"a":"` + doubling40 + `"}}`,
			want: []string{"spec.object.data.a: Invalid value"}},
		{name: "template with a function that is not available", object: `{"apiVersion":"v1","kind":"ConfigMap","data":{"a":"{{ html .BuildID }}"}}`,
			want: []string{"spec.object.data.a: Invalid value"}},
		// Left to the controller, whose bounds stop it for that version.
		{name: "template doubling only for one build ID", object: `{"apiVersion":"v1","kind":"ConfigMap","data":{"a":"{{ if eq .BuildID \"v9\" }}` + doubling40 + `{{ end }}"}}`},
		{name: "labels not a map", object: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"labels":["a"]}}`,
			want: []string{"spec.object.metadata.labels: Invalid value"}},
		{name: "annotation not a string", object: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"annotations":{"a":1,"b":"c"}}}`,
			want: []string{"spec.object.metadata.annotations[a]: Invalid value"}},
		{name: "workerRef changed", object: goodHPA, old: "other",
			want: []string{"spec.workerRef.name: Invalid value"}},
		{name: "workerRef kept", object: goodHPA, old: "w"},
		{name: "not an object", object: `[1]`,
			want: []string{"spec.object: Invalid value"}},
		{name: "every error at once", object: `{"kind":"Pod","metadata":{"name":"a","namespace":"b"},"spec":{"minReplicas":0,"scaleTargetRef":{"kind":"Pod"},"selector":{"matchLabels":{"a":"b"}}}}`,
			old: "other",
			want: []string{"spec.workerRef.name: Invalid value", "spec.object.apiVersion: Required value", "spec.object.kind: Forbidden",
				"spec.object.metadata.name: Forbidden", "spec.object.metadata.namespace: Forbidden", "spec.object.spec.minReplicas: Invalid value",
				"spec.object.spec.scaleTargetRef: Forbidden", "spec.object.spec.selector.matchLabels: Forbidden"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			banned := DefaultBannedKinds
			if c.banned != nil {
				banned = c.banned
			}
			var old *v1alpha1.TemporalWorkerOwnedResource
			if c.old != "" {
				old = twor(c.old, goodHPA)
			}
			obj := twor("w", c.object)
			if c.lastApplied != "" {
				obj.Annotations = map[string]string{corev1.LastAppliedConfigAnnotation: c.lastApplied}
			}
			errs := Validate(obj, old, banned)
			var got []string
			for _, e := range errs {
				got = append(got, e.Field+": "+e.Type.String())
				if !strings.HasPrefix(e.Error(), e.Field+": ") {
					t.Errorf("message %q does not start with the field", e.Error())
				}
			}
			if strings.Join(got, "\n") != strings.Join(c.want, "\n") {
				t.Errorf("errors:\n  %s\nwant:\n  %s\n(all: %v)", strings.Join(got, "\n  "), strings.Join(c.want, "\n  "), errs)
			}
		})
	}
}

func TestObjectGVK(t *testing.T) {
	gvk, ok := ObjectGVK(twor("w", goodHPA))
	if !ok || gvk.Group != "autoscaling" || gvk.Version != "v2" || gvk.Kind != "HorizontalPodAutoscaler" {
		t.Errorf("ObjectGVK = %v, %v", gvk, ok)
	}
	if _, ok := ObjectGVK(twor("w", `{"kind":"X"}`)); ok {
		t.Error("ObjectGVK without apiVersion is ok")
	}
}

func TestSpecUnchanged(t *testing.T) {
	a := twor("w", `{"apiVersion":"v1","kind":"ConfigMap","data":{"a":"b"}}`)
	b := twor("w", `{"kind":"ConfigMap","data":{"a":"b"},"apiVersion":"v1"}`)
	b.Labels = map[string]string{"new": "label"}
	if !specUnchanged(a, b) {
		t.Error("the same object with keys reordered and new labels counts as a spec change")
	}
	if specUnchanged(a, twor("w", `{"apiVersion":"v1","kind":"ConfigMap","data":{"a":"c"}}`)) {
		t.Error("a changed object counts as unchanged")
	}
	if specUnchanged(a, twor("x", `{"apiVersion":"v1","kind":"ConfigMap","data":{"a":"b"}}`)) {
		t.Error("a changed workerRef counts as unchanged")
	}
}
