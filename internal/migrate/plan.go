package migrate

import (
	"fmt"
	"maps"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/internal/buildid"
	"github.com/rainbow-deploy/rainbow/internal/workload"
)

// The incumbent's marks (twc:internal/k8s/deployments.go:229-307,
// twc:internal/controller/worker_controller.go:51-55).
const (
	LabelIncumbentWorker     = "temporal.io/deployment-name"
	FinalizerIncumbent       = "temporal.io/delete-protection"
	FinalizerIncumbentRename = "temporal.io/migration-guard"
	// LabelIncumbentApp names the incumbent controller's own pods
	// (twc:helm/temporal-worker-controller/templates/_helpers.tpl:18).
	LabelIncumbentApp = "app.kubernetes.io/name"
	IncumbentApp      = "temporal-worker-controller"
)

// IncumbentWebhooks are the names of the incumbent's admission webhooks
// (twc:helm/temporal-worker-controller/templates/webhook.yaml:34,69):
// while their configuration outlives the controller, no
// WorkerResourceTemplate can be deleted.
var IncumbentWebhooks = []string{"vworkerresourcetemplate.kb.io", "vworkerdeployment.kb.io"}

// gitOpsMarks are labels and annotations Argo CD and Flux put on what they
// apply: a synced repository would recreate or prune the old objects.
var gitOpsMarks = []string{"argocd.argoproj.io/tracking-id", "argocd.argoproj.io/instance", "kustomize.toolkit.fluxcd.io/name", "helm.toolkit.fluxcd.io/name"}

// Snapshot is what the switch reads, with the user's credentials.
type Snapshot struct {
	WorkerDeployments, Connections, Templates []unstructured.Unstructured
	// Deployments are those in scope with a build ID label.
	Deployments         []appsv1.Deployment
	TWDs                []v1alpha1.TemporalWorkerDeployment
	TemporalConnections []v1alpha1.TemporalConnection
	TWORs               []v1alpha1.TemporalWorkerOwnedResource
	// Controllers are the incumbent's controller Deployments found.
	Controllers []appsv1.Deployment
	// Webhooks are the incumbent's webhook configurations found.
	Webhooks []string
	// Unchecked are preflight checks the user may not make (RBAC).
	Unchecked []string
	// IncumbentIdentity is --incumbent-identity: the manager identity to
	// take over where a WorkerDeployment's status does not record one.
	IncumbentIdentity string
	// GitOpsPaused is --gitops-paused: the user paused the sync of every
	// application that holds these objects.
	GitOpsPaused bool
}

// StepKind is one kind of change the switch makes, in this order.
type StepKind string

const (
	CreateConnection StepKind = "CreateConnection"
	CreateWorker     StepKind = "CreateWorker"
	AdoptDeployment  StepKind = "AdoptDeployment"
	ReplaceTemplate  StepKind = "ReplaceTemplate"
	RetireWorker     StepKind = "RetireWorkerDeployment"
	RetireConnection StepKind = "RetireConnection"
	FinishAdoption   StepKind = "FinishAdoption"
)

var stepOrder = []StepKind{CreateConnection, CreateWorker, AdoptDeployment, ReplaceTemplate, RetireWorker, RetireConnection, FinishAdoption}

// Step is one change, with what it needs. Objects are the converted ones.
type Step struct {
	Kind      StepKind
	Namespace string
	// Name is the object the step changes: the connection, worker,
	// Deployment, template or incumbent object.
	Name string
	// Worker is the TWD a Deployment or template belongs to.
	Worker string
	// Connection, TWD or TWOR to create.
	Connection *v1alpha1.TemporalConnection
	TWD        *v1alpha1.TemporalWorkerDeployment
	TWOR       *v1alpha1.TemporalWorkerOwnedResource
	// Incumbent is the worker controller's object to create (the way back).
	Incumbent *unstructured.Unstructured
	// IncumbentUID is the incumbent object's UID: a step never acts on an
	// object of the same name made since the plan.
	IncumbentUID string
	Says         string
}

// Plan is the whole switch: refusals stop it before any change.
type Plan struct {
	Refusals []string
	Notes    []Note
	Steps    []Step
}

// PlanSwitch decides the switch from a snapshot. It is pure, so a dry run
// prints exactly what a run does, and a run interrupted half-way plans only
// what is left when run again.
func PlanSwitch(s Snapshot) Plan {
	var p Plan
	p.preflight(s)
	twds := map[string]*v1alpha1.TemporalWorkerDeployment{}
	for i := range s.TWDs {
		twds[key(s.TWDs[i].Namespace, s.TWDs[i].Name)] = &s.TWDs[i]
	}
	conns := map[string]*v1alpha1.TemporalConnection{}
	for i := range s.TemporalConnections {
		conns[key(s.TemporalConnections[i].Namespace, s.TemporalConnections[i].Name)] = &s.TemporalConnections[i]
	}
	twors := map[string]bool{}
	for _, t := range s.TWORs {
		twors[key(t.Namespace, t.Name)] = true
	}

	for i := range s.Connections {
		u := &s.Connections[i]
		k := key(u.GetNamespace(), u.GetName())
		if c, ok := conns[k]; ok {
			if c.Annotations[v1alpha1.AnnotationAdoptedFrom] == "" {
				p.refuse("TemporalConnection %s exists and was not converted from the worker controller's Connection of that name: rename or remove one of them", k)
			}
		} else if r, err := Convert(u); err != nil {
			p.refuse("%v", err)
		} else {
			conn := r.Object.(*v1alpha1.TemporalConnection)
			mark(&conn.ObjectMeta)
			p.Notes = append(p.Notes, r.Notes...)
			p.step(Step{Kind: CreateConnection, Namespace: conn.Namespace, Name: conn.Name, Connection: conn,
				Says: fmt.Sprintf("create TemporalConnection %s from the worker controller's Connection", k)})
		}
	}

	for i := range s.WorkerDeployments {
		u := &s.WorkerDeployments[i]
		ns, name := u.GetNamespace(), u.GetName()
		k := key(ns, name)
		if checkGitOps(u) && !s.GitOpsPaused {
			p.refuse("WorkerDeployment %s was applied by a GitOps tool (%s): pause its automatic sync and pruning, run migrate again with --gitops-paused, "+
				"then commit the converted manifests (migrate -o yaml prints them) and resume", k, gitOpsMark(u))
		}
		twd, made := twds[k]
		switch {
		case made && twd.Annotations[v1alpha1.AnnotationAdoptedBuildID] == "" && twd.Annotations[v1alpha1.AnnotationAdoptionPending] == "":
			p.refuse("TemporalWorkerDeployment %s exists and was not converted from the worker controller's WorkerDeployment of that name: "+
				"if it is a leftover of the worker controller's own rename (finalizer %s), finish that first (docs/migration-from-twc.md)", k, FinalizerIncumbentRename)
			continue
		case !made:
			r, err := Convert(u)
			if err != nil {
				p.refuse("%v", err)
				continue
			}
			twd = r.Object.(*v1alpha1.TemporalWorkerDeployment)
			p.Notes = append(p.Notes, r.Notes...)
			adoptAnnotations(twd, u, s.IncumbentIdentity, &p)
			p.step(Step{Kind: CreateWorker, Namespace: ns, Name: name, TWD: twd, Says: fmt.Sprintf(
				"create TemporalWorkerDeployment %s, held (%s) until its Deployments are handed over; it keeps build ID %q while its template is unchanged%s",
				k, v1alpha1.AnnotationAdoptionPending, twd.Annotations[v1alpha1.AnnotationAdoptedBuildID], takeOverSays(twd))})
		}
		for _, d := range s.Deployments {
			ref := metav1.GetControllerOf(&d)
			if d.Namespace != ns || ref == nil || ref.Kind != KindWorkerDeployment || ref.Name != name || string(ref.UID) != string(u.GetUID()) {
				continue
			}
			p.step(Step{Kind: AdoptDeployment, Namespace: ns, Name: d.Name, Worker: name, IncumbentUID: string(u.GetUID()), Says: fmt.Sprintf(
				"hand Deployment %s/%s (build ID %s, %d replicas) to TemporalWorkerDeployment %s: its controller reference and the label %s change, its pod template and selector do not, so no pod restarts",
				ns, d.Name, d.Labels[workload.LabelBuildID], replicas(&d), name, workload.LabelWorker)})
		}
		for j := range s.Templates {
			t := &s.Templates[j]
			if t.GetNamespace() != ns || templateWorker(t) != name {
				continue
			}
			tk := key(ns, t.GetName())
			if twors[tk] {
				p.refuse("TemporalWorkerOwnedResource %s exists next to the WorkerResourceTemplate of that name: remove one of them", tk)
				continue
			}
			r, err := Convert(t)
			if err != nil {
				p.refuse("%v", err)
				continue
			}
			twor := r.Object.(*v1alpha1.TemporalWorkerOwnedResource)
			mark(&twor.ObjectMeta)
			p.Notes = append(p.Notes, r.Notes...)
			p.step(Step{Kind: ReplaceTemplate, Namespace: ns, Name: t.GetName(), Worker: name, TWOR: twor, IncumbentUID: string(t.GetUID()), Says: fmt.Sprintf(
				"replace WorkerResourceTemplate %s with TemporalWorkerOwnedResource %s: the worker controller's copies go with it, Rainbow's copies come once the adoption finishes (no autoscaler for those seconds: replicas stay)", tk, tk)})
		}
		p.step(Step{Kind: RetireWorker, Namespace: ns, Name: name, IncumbentUID: string(u.GetUID()), Says: fmt.Sprintf(
			"remove WorkerDeployment %s without its clean-up: its finalizer %s goes and it is deleted with propagationPolicy Orphan, once it owns no Deployment", k, FinalizerIncumbent)})
		p.step(Step{Kind: FinishAdoption, Namespace: ns, Name: name, Says: fmt.Sprintf(
			"remove %s from TemporalWorkerDeployment %s: Rainbow's controller takes over", v1alpha1.AnnotationAdoptionPending, k)})
	}
	// A TWD left held by an interrupted run is finished too.
	for _, t := range s.TWDs {
		if t.Annotations[v1alpha1.AnnotationAdoptionPending] != "" && !hasIncumbent(s.WorkerDeployments, t.Namespace, t.Name) {
			p.step(Step{Kind: FinishAdoption, Namespace: t.Namespace, Name: t.Name, Says: fmt.Sprintf(
				"remove %s from TemporalWorkerDeployment %s: Rainbow's controller takes over", v1alpha1.AnnotationAdoptionPending, key(t.Namespace, t.Name))})
		}
	}
	for i := range s.Connections {
		u := &s.Connections[i]
		p.step(Step{Kind: RetireConnection, Namespace: u.GetNamespace(), Name: u.GetName(), IncumbentUID: string(u.GetUID()), Says: fmt.Sprintf(
			"remove the worker controller's Connection %s (its finalizer %s goes)", key(u.GetNamespace(), u.GetName()), FinalizerIncumbent)})
	}
	slices.SortStableFunc(p.Steps, func(a, b Step) int { return order(a.Kind) - order(b.Kind) })
	return p
}

func (p *Plan) preflight(s Snapshot) {
	for _, d := range s.Controllers {
		if replicas(&d) > 0 || d.Status.Replicas > 0 {
			p.refuse("the worker controller still runs (Deployment %s/%s, %d replicas): two controllers would fight over the same Temporal worker deployments. "+
				"Uninstall its controller release first (helm uninstall temporal-worker-controller -n %s); keep its CRD release", d.Namespace, d.Name, replicas(&d), d.Namespace)
		}
	}
	for _, w := range s.Webhooks {
		p.refuse("the worker controller's admission webhook configuration %s still exists, and refuses every change to its objects without its controller: "+
			"uninstall its controller release (helm uninstall removes it), or delete the configuration", w)
	}
	for _, u := range s.Unchecked {
		p.Notes = append(p.Notes, Note{Object: "preflight", Path: u, Text: "could not be checked with your permissions; check it yourself"})
	}
	for _, t := range s.TWDs {
		if slices.Contains(t.Finalizers, FinalizerIncumbentRename) {
			p.refuse("TemporalWorkerDeployment %s carries the worker controller's finalizer %s: it is a leftover of that controller's own rename from TemporalWorkerDeployment to WorkerDeployment; "+
				"finish that rename (or delete the leftover and remove the finalizer) before switching", key(t.Namespace, t.Name), FinalizerIncumbentRename)
		}
	}
}

// adoptAnnotations make the converted TWD keep the running target and take
// the incumbent's manager role, and hold it until the handover is done.
func adoptAnnotations(twd *v1alpha1.TemporalWorkerDeployment, u *unstructured.Unstructured, identity string, p *Plan) {
	a := maps.Clone(twd.Annotations)
	if a == nil {
		a = map[string]string{}
	}
	a[v1alpha1.AnnotationAdoptionPending] = "true"
	target, _, _ := unstructured.NestedString(u.Object, "status", "targetVersion", "buildID")
	if target == "" {
		target, _, _ = unstructured.NestedString(u.Object, "status", "currentVersion", "buildID")
	}
	if target != "" {
		a[v1alpha1.AnnotationAdoptedBuildID] = target
		// The hash is written from the object as stored, once created.
	}
	manager, _, _ := unstructured.NestedString(u.Object, "status", "managerIdentity")
	if manager == "" {
		manager = identity
	}
	if manager != "" {
		a[v1alpha1.AnnotationTakeManagerFrom] = manager
	} else {
		p.Notes = append(p.Notes, Note{Object: "WorkerDeployment " + key(u.GetNamespace(), u.GetName()), Path: "status.managerIdentity",
			Text: "empty: Rainbow takes the manager role only from an identity it is told; pass --incumbent-identity, or Rainbow reports ManagedByOtherIdentity until the role is handed over"})
	}
	twd.Annotations = a
}

func takeOverSays(twd *v1alpha1.TemporalWorkerDeployment) string {
	if m := twd.Annotations[v1alpha1.AnnotationTakeManagerFrom]; m != "" {
		return fmt.Sprintf(", and takes the manager role from %q", m)
	}
	return ""
}

// mark records on a converted object that it came from the incumbent, so a
// run again recognises its own work.
func mark(m *metav1.ObjectMeta) {
	if m.Annotations == nil {
		m.Annotations = map[string]string{}
	}
	m.Annotations[v1alpha1.AnnotationAdoptedFrom] = v1alpha1.IncumbentName
}

func templateWorker(u *unstructured.Unstructured) string {
	for _, f := range []string{"workerDeploymentRef", "temporalWorkerDeploymentRef"} {
		if n, _, _ := unstructured.NestedString(u.Object, "spec", f, "name"); n != "" {
			return n
		}
	}
	return ""
}

func checkGitOps(u *unstructured.Unstructured) bool { return gitOpsMark(u) != "" }

func gitOpsMark(u *unstructured.Unstructured) string {
	for _, k := range gitOpsMarks {
		if _, ok := u.GetLabels()[k]; ok {
			return "label " + k
		}
		if _, ok := u.GetAnnotations()[k]; ok {
			return "annotation " + k
		}
	}
	return ""
}

func hasIncumbent(list []unstructured.Unstructured, ns, name string) bool {
	return slices.ContainsFunc(list, func(u unstructured.Unstructured) bool { return u.GetNamespace() == ns && u.GetName() == name })
}

func replicas(d *appsv1.Deployment) int32 {
	if d.Spec.Replicas == nil {
		return 1
	}
	return *d.Spec.Replicas
}

func order(k StepKind) int { return slices.Index(stepOrder, k) }

func key(ns, name string) string { return ns + "/" + name }

func (p *Plan) refuse(format string, args ...any) {
	p.Refusals = append(p.Refusals, fmt.Sprintf(format, args...))
}

func (p *Plan) step(s Step) { p.Steps = append(p.Steps, s) }

// Manifests are the converted objects as a Git repository should hold them:
// without the hold, which only the switch itself needs. A TWD keeps its
// adoption annotations (its build ID, the manager to take over), and its
// template hash is filled in, as the switch writes it.
func (p Plan) Manifests() []any {
	var out []any
	for _, s := range p.Steps {
		switch {
		case s.Connection != nil:
			out = append(out, s.Connection)
		case s.TWD != nil:
			twd := s.TWD.DeepCopy()
			delete(twd.Annotations, v1alpha1.AnnotationAdoptionPending)
			if twd.Annotations[v1alpha1.AnnotationAdoptedBuildID] != "" {
				twd.Annotations[v1alpha1.AnnotationAdoptedTemplateHash] = buildid.TemplateHash(&twd.Spec.Template)
			}
			out = append(out, twd)
		case s.TWOR != nil:
			out = append(out, s.TWOR)
		case s.Incumbent != nil:
			out = append(out, s.Incumbent.Object)
		}
	}
	return out
}
