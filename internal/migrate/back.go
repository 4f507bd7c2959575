package migrate

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/internal/workload"
)

// The way back: Rainbow's objects as the incumbent's. Fields Rainbow has
// and the incumbent does not are dropped with a note; a value the
// incumbent cannot express (another Temporal deployment name) is refused.

// toUnstructured is obj's JSON as a map, without the API server's fields.
func toUnstructured(obj any, kind string) (*unstructured.Unstructured, map[string]any, error) {
	raw, err := json.Marshal(obj)
	if err != nil {
		return nil, nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, nil, err
	}
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind(kind))
	spec, _ := m["spec"].(map[string]any)
	u.Object["spec"] = spec
	return u, spec, nil
}

// BackWorker converts a TemporalWorkerDeployment to a WorkerDeployment.
func BackWorker(twd *v1alpha1.TemporalWorkerDeployment) (*unstructured.Unstructured, []Note, error) {
	object := "TemporalWorkerDeployment " + key(twd.Namespace, twd.Name)
	if n := twd.Spec.WorkerOptions.DeploymentName; n != "" && n != twd.Namespace+"/"+twd.Name {
		return nil, nil, fmt.Errorf("%s: spec.workerOptions.deploymentName is %q; the worker controller always names it %s/%s, so its workers would register elsewhere",
			object, n, twd.Namespace, twd.Name)
	}
	u, spec, err := toUnstructured(twd, KindWorkerDeployment)
	if err != nil {
		return nil, nil, err
	}
	c := &converter{object: object, spec: spec}
	if err := c.move("workerOptions.customBuildID", "workerOptions.unsafeCustomBuildID"); err != nil {
		return nil, nil, err
	}
	take(c.spec, "workerOptions.deploymentName")
	for path, why := range map[string]string{
		"deploymentMetadata":            "the worker controller has no Deployment metadata of its own; it copies the pod template's annotations onto the Deployment",
		"rollout.deploymentStrategy":    "the worker controller leaves Kubernetes' default rolling update",
		"rollout.progressDeadline":      "the worker controller has no rollout deadline",
		"rollout.progressDeadlineAbort": "the worker controller has no rollout deadline",
		"rollout.paused":                "the worker controller cannot pause a rollout: use strategy Manual",
		"rollout.gate.timeout":          "the worker controller's gate run timeout is one hour",
		"sunset.maxDrainDuration":       "the worker controller never ends pinned workflows",
		"sunset.drainAction":            "the worker controller never ends pinned workflows",
		"sunset.continueAsNewSignal":    "the worker controller sends no signal",
		"deletion":                      "deleting a WorkerDeployment deletes its versions without waiting for them to drain",
	} {
		c.drop(path, "dropped: "+why)
	}
	u.SetNamespace(twd.Namespace)
	u.SetName(twd.Name)
	u.SetLabels(twd.Labels)
	u.SetAnnotations(userAnnotations(twd.Annotations))
	return u, c.notes, nil
}

// BackConnection converts a TemporalConnection to a Connection.
func BackConnection(conn *v1alpha1.TemporalConnection) (*unstructured.Unstructured, []Note, error) {
	u, spec, err := toUnstructured(conn, KindConnection)
	if err != nil {
		return nil, nil, err
	}
	c := &converter{object: "TemporalConnection " + key(conn.Namespace, conn.Name), spec: spec}
	if err := c.move("tlsServerName", "tls.serverName"); err != nil {
		return nil, nil, err
	}
	u.SetNamespace(conn.Namespace)
	u.SetName(conn.Name)
	u.SetLabels(conn.Labels)
	u.SetAnnotations(userAnnotations(conn.Annotations))
	return u, c.notes, nil
}

// BackOwned converts a TemporalWorkerOwnedResource to a
// WorkerResourceTemplate. Rainbow's template values ({{ .BuildID }}) mean
// nothing to the incumbent: such an object is refused.
func BackOwned(twor *v1alpha1.TemporalWorkerOwnedResource) (*unstructured.Unstructured, []Note, error) {
	u, spec, err := toUnstructured(twor, KindWorkerResourceTemplate)
	if err != nil {
		return nil, nil, err
	}
	c := &converter{object: "TemporalWorkerOwnedResource " + key(twor.Namespace, twor.Name), spec: spec}
	if err := c.move("workerRef", "workerDeploymentRef"); err != nil {
		return nil, nil, err
	}
	if err := c.move("object", "template"); err != nil {
		return nil, nil, err
	}
	if tpl, ok := c.spec["template"].(map[string]any); ok {
		dropMetricLabels(tpl)
	}
	if raw, _ := json.Marshal(c.spec["template"]); strings.Contains(string(raw), "{{") {
		return nil, nil, fmt.Errorf("%s: spec.object holds template values ({{ ... }}) that only Rainbow fills in; write the worker controller's form by hand", c.object)
	}
	u.SetNamespace(twor.Namespace)
	u.SetName(twor.Name)
	u.SetLabels(twor.Labels)
	u.SetAnnotations(userAnnotations(twor.Annotations))
	return u, c.notes, nil
}

// userAnnotations drops the annotations of Rainbow and of the switch.
func userAnnotations(a map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range a {
		if strings.HasPrefix(k, "temporal.io/") || k == "kubectl.kubernetes.io/last-applied-configuration" {
			continue
		}
		out[k] = v
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// Steps of the way back, in this order after the hold.
const (
	HoldWorker          StepKind = "HoldWorker"
	CreateIncumbentConn StepKind = "CreateConnectionBack"
	CreateIncumbent     StepKind = "CreateWorkerDeployment"
	ReturnDeployment    StepKind = "ReturnDeployment"
	ReturnOwned         StepKind = "ReturnOwnedResource"
	RetireTWD           StepKind = "RetireTemporalWorkerDeployment"
	RetireTConn         StepKind = "RetireTemporalConnection"
)

var backOrder = []StepKind{HoldWorker, CreateIncumbentConn, CreateIncumbent, ReturnDeployment, ReturnOwned, RetireTWD, RetireTConn}

// PlanBack decides the way back to the incumbent: each TWD is held first,
// so Rainbow's controller, running or not, changes nothing while its
// Deployments go back; then the incumbent's objects are made, the
// Deployments handed to them, and Rainbow's objects removed without their
// clean-up. Pure, like PlanSwitch.
func PlanBack(s Snapshot) Plan {
	var p Plan
	for _, d := range s.Controllers {
		if replicas(&d) > 0 || d.Status.Replicas > 0 {
			p.refuse("the worker controller already runs (Deployment %s/%s): it would act on its objects before their Deployments are handed back; scale it to zero, run migrate --back, then start it", d.Namespace, d.Name)
		}
	}
	for _, w := range s.Webhooks {
		p.refuse("the worker controller's admission webhook configuration %s exists without its controller, and would refuse the objects; delete it, or install the controller after migrate --back", w)
	}
	incumbent := map[string]bool{}
	for _, u := range s.WorkerDeployments {
		incumbent[key(u.GetNamespace(), u.GetName())] = true
	}
	conns := map[string]bool{}
	for _, u := range s.Connections {
		conns[key(u.GetNamespace(), u.GetName())] = true
	}
	templates := map[string]bool{}
	for _, u := range s.Templates {
		templates[key(u.GetNamespace(), u.GetName())] = true
	}
	usedConns := map[string]bool{}
	for i := range s.TWDs {
		twd := &s.TWDs[i]
		k := key(twd.Namespace, twd.Name)
		usedConns[key(twd.Namespace, twd.Spec.WorkerOptions.ConnectionRef.Name)] = true
		if twd.Annotations[v1alpha1.AnnotationAdoptionPending] == "" {
			p.step(Step{Kind: HoldWorker, Namespace: twd.Namespace, Name: twd.Name, Says: fmt.Sprintf(
				"hold TemporalWorkerDeployment %s (%s): Rainbow's controller changes nothing of it from now on", k, v1alpha1.AnnotationAdoptionPending)})
		}
		if !incumbent[k] {
			wd, notes, err := BackWorker(twd)
			if err != nil {
				p.refuse("%v", err)
				continue
			}
			p.Notes = append(p.Notes, notes...)
			p.step(Step{Kind: CreateIncumbent, Namespace: twd.Namespace, Name: twd.Name, Incumbent: wd,
				Says: fmt.Sprintf("create WorkerDeployment %s from the TemporalWorkerDeployment", k)})
		}
		for _, d := range s.Deployments {
			ref := metav1.GetControllerOf(&d)
			if d.Namespace != twd.Namespace || ref == nil || ref.UID != twd.UID {
				continue
			}
			p.step(Step{Kind: ReturnDeployment, Namespace: d.Namespace, Name: d.Name, Worker: twd.Name, Says: fmt.Sprintf(
				"hand Deployment %s/%s (build ID %s) to WorkerDeployment %s: its controller reference changes, its pod template and selector do not",
				d.Namespace, d.Name, d.Labels[workload.LabelBuildID], twd.Name)})
		}
		for j := range s.TWORs {
			t := &s.TWORs[j]
			if t.Namespace != twd.Namespace || t.Spec.WorkerRef.Name != twd.Name {
				continue
			}
			step := Step{Kind: ReturnOwned, Namespace: t.Namespace, Name: t.Name, Worker: twd.Name, IncumbentUID: string(t.UID), Says: fmt.Sprintf(
				"replace TemporalWorkerOwnedResource %s (and Rainbow's copies of it) with a WorkerResourceTemplate", key(t.Namespace, t.Name))}
			if !templates[key(t.Namespace, t.Name)] {
				wrt, notes, err := BackOwned(t)
				if err != nil {
					p.refuse("%v", err)
					continue
				}
				p.Notes = append(p.Notes, notes...)
				step.Incumbent = wrt
			}
			p.step(step)
		}
		p.step(Step{Kind: RetireTWD, Namespace: twd.Namespace, Name: twd.Name, IncumbentUID: string(twd.UID), Says: fmt.Sprintf(
			"remove TemporalWorkerDeployment %s without its clean-up (its finalizer goes), once it owns no Deployment", k)})
	}
	for i := range s.TemporalConnections {
		c := &s.TemporalConnections[i]
		k := key(c.Namespace, c.Name)
		if !usedConns[k] {
			continue
		}
		if !conns[k] {
			u, notes, err := BackConnection(c)
			if err != nil {
				p.refuse("%v", err)
				continue
			}
			p.Notes = append(p.Notes, notes...)
			p.step(Step{Kind: CreateIncumbentConn, Namespace: c.Namespace, Name: c.Name, Incumbent: u,
				Says: fmt.Sprintf("create Connection %s from the TemporalConnection", k)})
		}
		p.step(Step{Kind: RetireTConn, Namespace: c.Namespace, Name: c.Name, IncumbentUID: string(c.UID), Says: fmt.Sprintf(
			"remove TemporalConnection %s (its finalizer goes)", k)})
	}
	p.Notes = append(p.Notes, Note{Object: "Temporal", Path: "manager identity", Text: "Rainbow's identity stays the manager of each worker deployment, and the worker controller " +
		"takes the role only when it is empty: once this is done, unset it with your Temporal credentials (temporal worker deployment manager-identity unset --deployment-name <namespace>/<name>), then start the worker controller"})
	slices.SortStableFunc(p.Steps, func(a, b Step) int { return slices.Index(backOrder, a.Kind) - slices.Index(backOrder, b.Kind) })
	return p
}

// dropMetricLabels takes out of an HPA's external metric selectors the
// labels the worker controller adds itself (and refuses to find there),
// which the conversion wrote out.
func dropMetricLabels(obj map[string]any) {
	if kind, _ := obj["kind"].(string); kind != "HorizontalPodAutoscaler" {
		return
	}
	metrics, _ := get(obj, "spec.metrics")
	list, _ := metrics.([]any)
	for _, m := range list {
		labels, _ := get(asMap(m), "external.metric.selector.matchLabels")
		l := asMap(labels)
		for _, k := range []string{metricLabelDeployment, metricLabelBuildID, metricLabelNamespace} {
			delete(l, k)
		}
	}
}
