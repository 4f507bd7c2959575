// Package migrate turns the objects of Temporal's worker controller (the
// incumbent, v1.8.1) into Rainbow's: WorkerDeployment into
// TemporalWorkerDeployment, Connection into TemporalConnection and
// WorkerResourceTemplate into TemporalWorkerOwnedResource. The conversion
// is pure: it reads objects and returns objects and notes, so the migrate
// command can print it (a dry run, or manifests for a Git repository)
// before it changes anything. docs/migration-from-twc.md is the field
// table this follows.
package migrate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
)

// The incumbent's group is Rainbow's; its kinds are not.
const (
	KindWorkerDeployment       = "WorkerDeployment"
	KindConnection             = "Connection"
	KindWorkerResourceTemplate = "WorkerResourceTemplate"
)

// Note is a difference the conversion could not make invisible: a field
// dropped, or one whose meaning changes. Path names the incumbent's field.
type Note struct {
	Object string
	Path   string
	Text   string
}

func (n Note) String() string { return n.Object + ": " + n.Path + ": " + n.Text }

// Result is one converted object and what the conversion noted.
type Result struct {
	Object any
	Notes  []Note
}

// Convert converts one incumbent object by its kind. It fails on a kind it
// does not know, and on fields it has no counterpart for, naming them: a
// field silently dropped could change what the workers run.
func Convert(u *unstructured.Unstructured) (Result, error) {
	if gv := u.GetAPIVersion(); gv != v1alpha1.GroupVersion.String() {
		return Result{}, fmt.Errorf("%s %s: apiVersion %q is not the worker controller's %s", u.GetKind(), u.GetName(), gv, v1alpha1.GroupVersion)
	}
	switch u.GetKind() {
	case KindWorkerDeployment:
		return convertWorkerDeployment(u)
	case KindConnection:
		return convertConnection(u)
	case KindWorkerResourceTemplate:
		return convertTemplate(u)
	}
	return Result{}, fmt.Errorf("%s %s: not a kind of the worker controller's that Rainbow converts (%s, %s, %s)",
		u.GetKind(), u.GetName(), KindWorkerDeployment, KindConnection, KindWorkerResourceTemplate)
}

// converter carries one object's spec through renames and drops.
type converter struct {
	object string
	spec   map[string]any
	notes  []Note
}

func newConverter(u *unstructured.Unstructured) (*converter, error) {
	spec, ok := u.Object["spec"].(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%s %s/%s: no spec", u.GetKind(), u.GetNamespace(), u.GetName())
	}
	return &converter{object: u.GetKind() + " " + u.GetNamespace() + "/" + u.GetName(), spec: runtime.DeepCopyJSON(spec)}, nil
}

// move renames the field at from to to (dotted paths in spec); a value
// already at to is an error, since the two would have to be merged.
func (c *converter) move(from, to string) error {
	v, ok := take(c.spec, from)
	if !ok {
		return nil
	}
	if _, exists := get(c.spec, to); exists {
		return fmt.Errorf("%s: spec.%s and spec.%s are both set; keep one", c.object, from, to)
	}
	put(c.spec, to, v)
	return nil
}

// drop removes the field at path, noting why, if it is set.
func (c *converter) drop(path, why string) {
	if _, ok := take(c.spec, path); ok {
		c.notes = append(c.notes, Note{Object: c.object, Path: "spec." + path, Text: why})
	}
}

func (c *converter) note(path, text string) {
	c.notes = append(c.notes, Note{Object: c.object, Path: path, Text: text})
}

// decode puts the converted spec into out, refusing any field Rainbow's
// type lacks: those are the ones the conversion does not know.
func (c *converter) decode(out any) error {
	raw, err := json.Marshal(c.spec)
	if err != nil {
		return err
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.DisallowUnknownFields()
	if err := d.Decode(out); err != nil {
		return fmt.Errorf("%s: spec has a field Rainbow has no counterpart for, or a value of another type (%v); "+
			"see docs/migration-from-twc.md and change the object before converting it", c.object, err)
	}
	return nil
}

func convertWorkerDeployment(u *unstructured.Unstructured) (Result, error) {
	c, err := newConverter(u)
	if err != nil {
		return Result{}, err
	}
	if err := c.move("workerOptions.unsafeCustomBuildID", "workerOptions.customBuildID"); err != nil {
		return Result{}, err
	}
	if in, ok := get(c.spec, "rollout.gate.input"); ok {
		if _, isObject := in.(map[string]any); !isObject {
			return Result{}, fmt.Errorf("%s: spec.rollout.gate.input is %T; Rainbow passes the gate workflow a JSON object: wrap the value in one (for example {\"value\": ...})",
				c.object, in)
		}
	}
	if _, ok := get(c.spec, "progressDeadlineSeconds"); ok {
		c.note("spec.progressDeadlineSeconds", "the worker controller did not pass it to the versioned Deployments; Rainbow does, so Kubernetes now reports a version's Deployment as stalled after it")
	}
	if _, ok := get(c.spec, "workerOptions.customBuildID"); ok {
		c.note("spec.workerOptions.unsafeCustomBuildID", "now spec.workerOptions.customBuildID, used exactly as written (the worker controller cleaned and cut it)")
	}
	c.note("spec.template", "Rainbow computes other build IDs from the same template: the versions running now keep theirs only once their Deployments are handed over (migrate does this)")
	twd := &v1alpha1.TemporalWorkerDeployment{TypeMeta: metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "TemporalWorkerDeployment"}}
	twd.ObjectMeta = carriedMeta(u)
	if err := c.decode(&twd.Spec); err != nil {
		return Result{}, err
	}
	return Result{Object: twd, Notes: c.notes}, nil
}

func convertConnection(u *unstructured.Unstructured) (Result, error) {
	c, err := newConverter(u)
	if err != nil {
		return Result{}, err
	}
	if err := c.move("tls.serverName", "tlsServerName"); err != nil {
		return Result{}, err
	}
	if tls, ok := get(c.spec, "tls"); ok {
		if m, _ := tls.(map[string]any); len(m) == 0 {
			take(c.spec, "tls")
		}
	}
	if opt, ok := get(c.spec, "apiKeySecretRef.optional"); ok {
		take(c.spec, "apiKeySecretRef.optional")
		if opt == true {
			c.note("spec.apiKeySecretRef.optional", "dropped: Rainbow always needs the key it names, and reports a missing one in the connection's Ready condition")
		}
	}
	conn := &v1alpha1.TemporalConnection{TypeMeta: metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "TemporalConnection"}}
	conn.ObjectMeta = carriedMeta(u)
	if err := c.decode(&conn.Spec); err != nil {
		return Result{}, err
	}
	return Result{Object: conn, Notes: c.notes}, nil
}

func convertTemplate(u *unstructured.Unstructured) (Result, error) {
	c, err := newConverter(u)
	if err != nil {
		return Result{}, err
	}
	if err := c.move("temporalWorkerDeploymentRef", "workerDeploymentRef"); err != nil {
		return Result{}, err
	}
	if err := c.move("workerDeploymentRef", "workerRef"); err != nil {
		return Result{}, err
	}
	if err := c.move("template", "object"); err != nil {
		return Result{}, err
	}
	if obj, ok := c.spec["object"].(map[string]any); ok {
		c.notes = append(c.notes, writeMetricLabels(c.object, obj, u.GetNamespace(), workerRef(c.spec))...)
	}
	twor := &v1alpha1.TemporalWorkerOwnedResource{TypeMeta: metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "TemporalWorkerOwnedResource"}}
	twor.ObjectMeta = carriedMeta(u)
	if err := c.decode(&twor.Spec); err != nil {
		return Result{}, err
	}
	c.note("copies", "Rainbow names each version's copy differently: migrate replaces the worker controller's copies with Rainbow's, one version at a time")
	twor.Spec.Object.Raw = bytes.TrimSpace(twor.Spec.Object.Raw)
	return Result{Object: twor, Notes: c.notes}, nil
}

// The labels the worker controller adds to an HPA's external metric
// selectors, naming the version whose series the HPA reads
// (twc:internal/k8s/workerresourcetemplates.go:97-105, 191-226).
const (
	metricLabelDeployment = "temporal_worker_deployment_name"
	metricLabelBuildID    = "temporal_worker_build_id"
	metricLabelNamespace  = "temporal_namespace"
)

// writeMetricLabels writes into each external metric selector's
// matchLabels of an HPA the labels the worker controller would have added
// there, as templates Rainbow fills in per version: Rainbow adds nothing
// to a selector with labels, and reads {} there as the version's pod
// labels. The worker deployment's name is written as it is: the converted
// TWD keeps the default, <namespace>/<name>, which the worker controller's
// label spells <namespace>_<name>.
func writeMetricLabels(object string, obj map[string]any, namespace, worker string) []Note {
	if kind, _ := obj["kind"].(string); kind != "HorizontalPodAutoscaler" {
		return nil
	}
	metrics, _ := get(obj, "spec.metrics")
	list, _ := metrics.([]any)
	var notes []Note
	for i, m := range list {
		sel := asMap(m)
		labels, ok := get(sel, "external.metric.selector.matchLabels")
		if !ok {
			continue
		}
		written := map[string]any{}
		for k, v := range asMap(labels) {
			written[k] = v
		}
		written[metricLabelDeployment] = namespace + "_" + worker
		written[metricLabelBuildID] = "{{ .BuildID }}"
		written[metricLabelNamespace] = "{{ .TemporalNamespace }}"
		put(sel, "external.metric.selector.matchLabels", written)
		notes = append(notes, Note{Object: object, Path: fmt.Sprintf("spec.template.spec.metrics[%d].external.metric.selector.matchLabels", i),
			Text: "the labels the worker controller added here are written out (" + metricLabelDeployment + ", " + metricLabelBuildID + ", " + metricLabelNamespace + ")"})
	}
	return notes
}

// workerRef is the converted spec's worker name.
func workerRef(spec map[string]any) string {
	name, _ := get(spec, "workerRef.name")
	s, _ := name.(string)
	return s
}

// carriedMeta is the metadata a converted object keeps: its name,
// namespace, labels and annotations, without what the API server, kubectl
// or the worker controller wrote.
func carriedMeta(u *unstructured.Unstructured) metav1.ObjectMeta {
	m := metav1.ObjectMeta{Name: u.GetName(), Namespace: u.GetNamespace()}
	if l := u.GetLabels(); len(l) > 0 {
		m.Labels = maps.Clone(l)
	}
	a := maps.Clone(u.GetAnnotations())
	for k := range a {
		if k == "kubectl.kubernetes.io/last-applied-configuration" || strings.HasPrefix(k, "temporal.io/") {
			delete(a, k)
		}
	}
	if len(a) > 0 {
		m.Annotations = a
	}
	return m
}

func asMap(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

// get, take and put address a field by a dotted path.
func get(m map[string]any, path string) (any, bool) {
	v, ok, _ := unstructured.NestedFieldNoCopy(m, strings.Split(path, ".")...)
	return v, ok
}

func take(m map[string]any, path string) (any, bool) {
	v, ok := get(m, path)
	if ok {
		unstructured.RemoveNestedField(m, strings.Split(path, ".")...)
	}
	return v, ok
}

func put(m map[string]any, path string, v any) {
	_ = unstructured.SetNestedField(m, v, strings.Split(path, ".")...)
}
