package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// RolloutStrategy says how traffic moves to a new version.
// +kubebuilder:validation:Enum=Manual;AllAtOnce;Progressive
type RolloutStrategy string

const (
	// StrategyManual registers versions but never changes routing.
	StrategyManual RolloutStrategy = "Manual"
	// StrategyAllAtOnce makes the target version current as soon as it is ready.
	StrategyAllAtOnce RolloutStrategy = "AllAtOnce"
	// StrategyProgressive ramps traffic through the steps, then makes it current.
	StrategyProgressive RolloutStrategy = "Progressive"
)

// TemporalWorkerDeploymentSpec is the desired worker and how to roll it out.
type TemporalWorkerDeploymentSpec struct {
	// Replicas of the target version. Nil leaves replicas to an autoscaler:
	// the controller then never sets them after creating a Deployment.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Replicas *int32 `json:"replicas,omitempty"`

	// Template is the worker pod template. Its hash is part of the build ID,
	// so a change starts a new version.
	Template corev1.PodTemplateSpec `json:"template"`

	// MinReadySeconds is passed to each versioned Deployment.
	// +optional
	// +kubebuilder:validation:Minimum=0
	MinReadySeconds int32 `json:"minReadySeconds,omitempty"`

	// ProgressDeadlineSeconds is passed to each versioned Deployment.
	// +optional
	// +kubebuilder:validation:Minimum=1
	ProgressDeadlineSeconds *int32 `json:"progressDeadlineSeconds,omitempty"`

	// DeploymentMetadata are labels and annotations for each versioned
	// Deployment object itself (the template's go on its pods). Changing
	// them restarts no pod.
	// +optional
	DeploymentMetadata DeploymentMetadata `json:"deploymentMetadata,omitempty"`

	// WorkerOptions says which Temporal server and namespace the workers use.
	WorkerOptions WorkerOptions `json:"workerOptions"`

	// Rollout says how traffic moves to a new version.
	// +optional
	// +kubebuilder:default={strategy: AllAtOnce}
	Rollout RolloutSpec `json:"rollout,omitempty"`

	// Sunset says how long drained versions are kept.
	// +optional
	// +kubebuilder:default={}
	Sunset SunsetSpec `json:"sunset,omitempty"`

	// Deletion says what deleting this object does to workflows that still
	// run on its versions.
	// +optional
	Deletion DeletionSpec `json:"deletion,omitempty"`
}

// WorkerOptions connects the workers to Temporal.
// +kubebuilder:validation:XValidation:rule="self.temporalNamespace == oldSelf.temporalNamespace",message="spec.workerOptions.temporalNamespace is immutable: its versions live in the old namespace; create a new TemporalWorkerDeployment instead",fieldPath=".temporalNamespace"
// +kubebuilder:validation:XValidation:rule="has(self.deploymentName) == has(oldSelf.deploymentName) && (!has(self.deploymentName) || self.deploymentName == oldSelf.deploymentName)",message="spec.workerOptions.deploymentName is immutable: its versions live in the old worker deployment; create a new TemporalWorkerDeployment instead",fieldPath=".deploymentName"
type WorkerOptions struct {
	// ConnectionRef names the TemporalConnection in this namespace.
	ConnectionRef ConnectionReference `json:"connectionRef"`

	// TemporalNamespace is the Temporal namespace the workers poll.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=255
	TemporalNamespace string `json:"temporalNamespace"`

	// DeploymentName is the Temporal worker deployment name. Defaults to
	// "<kubernetes namespace>/<name>". Temporal forbids "." and ":" in it.
	// +optional
	// +kubebuilder:validation:MaxLength=255
	// +kubebuilder:validation:Pattern=`^[^.:]+$`
	DeploymentName string `json:"deploymentName,omitempty"`

	// CustomBuildID is optional: leave it unset and the build ID is derived
	// from the pod template, so every template change is a new version.
	// When set, it is the build ID, and a template change that keeps it
	// (a logging fix, an env var, a resource limit) updates the running
	// version's Deployment in place instead of starting a new version.
	// WARNING: you must change it whenever the workflow code changes in a
	// way that is not replay-compatible; otherwise pinned workflows replay
	// on the new code and fail with non-determinism errors.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-zA-Z0-9]([a-zA-Z0-9._-]*[a-zA-Z0-9])?$`
	CustomBuildID string `json:"customBuildID,omitempty"`
}

// ConnectionReference names a TemporalConnection in the same namespace.
type ConnectionReference struct {
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// RolloutSpec configures how a new version is promoted.
// +kubebuilder:validation:XValidation:rule="self.strategy != 'Progressive' || (has(self.steps) && size(self.steps) > 0)",message="rollout.steps is required when rollout.strategy is Progressive",fieldPath=".steps"
// +kubebuilder:validation:XValidation:rule="!has(self.steps) || self.steps.map(s, s.rampPercentage).isSorted()",message="rollout.steps[].rampPercentage must be strictly increasing",fieldPath=".steps"
// +kubebuilder:validation:XValidation:rule="!has(self.steps) || self.steps.all(a, self.steps.exists_one(b, b.rampPercentage == a.rampPercentage))",message="rollout.steps[].rampPercentage must be strictly increasing (no repeated values)",fieldPath=".steps"
// +kubebuilder:validation:XValidation:rule="!has(self.analysis) || self.strategy == 'Progressive'",message="spec.rollout.analysis needs spec.rollout.strategy Progressive: it judges ramp steps",fieldPath=".analysis"
// +kubebuilder:validation:XValidation:rule="!has(self.steps) || self.strategy == 'Progressive' || self.steps.all(s, !has(s.gate))",message="spec.rollout.steps[].gate needs spec.rollout.strategy Progressive: only its ramp steps run gates",fieldPath=".steps"
type RolloutSpec struct {
	// Strategy is Manual, AllAtOnce or Progressive.
	// +kubebuilder:default=AllAtOnce
	Strategy RolloutStrategy `json:"strategy,omitempty"`

	// Steps of a Progressive rollout: each ramps the given share of new
	// workflows to the target for pauseDuration, then the target becomes
	// current.
	// +optional
	// +kubebuilder:validation:MaxItems=20
	// +listType=atomic
	Steps []RolloutStep `json:"steps,omitempty"`

	// DeploymentStrategy is the rolling update of each versioned
	// Deployment: how its pods are replaced when the controller changes its
	// template in place (a custom build ID's update, a new connection). A
	// new version always gets a Deployment of its own.
	// +optional
	DeploymentStrategy *DeploymentStrategy `json:"deploymentStrategy,omitempty"`

	// Gate is a workflow run pinned to the target version before it gets
	// any traffic. If it fails, the rollout stops and routing stays on (or
	// goes back to) the last good version.
	// +optional
	Gate *GateWorkflow `json:"gate,omitempty"`

	// ProgressDeadline bounds how long a new version may take to get
	// workers that poll Temporal: its pods available and polling every
	// task queue, counted from when it became the target (or its
	// Deployment was created or updated in place, if later). Past it,
	// while the version has never had traffic, the rollout is reported
	// failed: Ready=False, Stalled=True, reason ProgressDeadlineExceeded.
	// Pauses, gates and waiting for a person do not count.
	// +optional
	// +kubebuilder:default="10m"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('10s') && duration(self) <= duration('168h')",message="spec.rollout.progressDeadline must be between 10s and 168h (7 days)"
	ProgressDeadline *metav1.Duration `json:"progressDeadline,omitempty"`

	// ProgressDeadlineAbort: once the deadline has passed, scale the
	// failed version's Deployment to zero (it never had traffic) and
	// treat its rollout as aborted, until spec.template changes or the
	// deadline is raised. Traffic stays where it is either way.
	// +optional
	ProgressDeadlineAbort bool `json:"progressDeadlineAbort,omitempty"`

	// Paused holds the rollout where it is: no new ramp step, no
	// promotion. The target still gets its Deployment and workers, a gate
	// already running finishes, other versions keep their workers, and a
	// rollback to a recently current version and an abort still happen.
	// Progressing reports reason Paused. Resume by setting it to false
	// (kubectl rainbow resume NAME).
	// +optional
	Paused bool `json:"paused,omitempty"`

	// Analysis judges a Progressive rollout from Temporal's own records
	// while the target ramps: no step advances and nothing is promoted
	// while a check fails or is inconclusive, and a check failing more
	// than its failureLimit times in a row aborts the rollout
	// (RolloutAborted): the ramp is removed and the target keeps its
	// workers for its pinned workflows.
	// +optional
	Analysis *AnalysisSpec `json:"analysis,omitempty"`
}

// AnalysisCheckKind is what a check measures.
// +kubebuilder:validation:Enum=WorkflowFailureRate;WorkflowTaskFailures;BacklogAge;Prometheus
type AnalysisCheckKind string

const (
	// CheckWorkflowFailureRate: the share of workflows that started on the
	// target since it got traffic and closed Failed, TimedOut or
	// Terminated, among those that closed (Temporal's visibility).
	CheckWorkflowFailureRate AnalysisCheckKind = "WorkflowFailureRate"
	// CheckWorkflowTaskFailures: the share of the target's workflows that
	// are stuck on a workflow task failing or timing out again and again
	// (a non-determinism error, a panic), as Temporal's
	// TemporalReportedProblems search attribute marks them.
	CheckWorkflowTaskFailures AnalysisCheckKind = "WorkflowTaskFailures"
	// CheckBacklogAge: the age of the oldest task waiting in the target's
	// task queues (Temporal's task queue statistics).
	CheckBacklogAge AnalysisCheckKind = "BacklogAge"
	// CheckPrometheus: the value of a PromQL query, from the Prometheus
	// server the manager is configured with (--analysis-prometheus-url).
	CheckPrometheus AnalysisCheckKind = "Prometheus"
)

// AnalysisCompare names what a failure rate is compared with.
// +kubebuilder:validation:Enum=Current
type AnalysisCompare string

// CompareCurrent compares with the current version's rate over the same window.
const CompareCurrent AnalysisCompare = "Current"

// AnalysisSpec lists the checks of a Progressive rollout.
// +kubebuilder:validation:XValidation:rule="self.checks.all(a, self.checks.exists_one(b, b.name == a.name))",message="spec.rollout.analysis.checks[].name must be unique",fieldPath=".checks"
type AnalysisSpec struct {
	// Checks are judged together; each passes, fails or is inconclusive.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=10
	// +listType=atomic
	Checks []AnalysisCheck `json:"checks"`
	// Interval between evaluations (each costs reads of Temporal's
	// visibility store, see docs/analysis.md).
	// +optional
	// +kubebuilder:default="30s"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('5s') && duration(self) <= duration('1h')",message="spec.rollout.analysis.interval must be between 5s and 1h"
	Interval *metav1.Duration `json:"interval,omitempty"`
	// DryRun evaluates and reports (status, Events, metrics) what would
	// abort, and aborts nothing: failing checks hold no step either.
	// +optional
	DryRun bool `json:"dryRun,omitempty"`
}

// AnalysisCheck is one check of a rollout analysis.
// +kubebuilder:validation:XValidation:rule="self.kind != 'WorkflowFailureRate' || (has(self.maxPercent) != has(self.compare))",message="spec.rollout.analysis.checks[]: a WorkflowFailureRate check needs exactly one of maxPercent and compare",fieldPath=".maxPercent"
// +kubebuilder:validation:XValidation:rule="self.kind != 'BacklogAge' || (has(self.maxAge) && !has(self.maxPercent) && !has(self.compare) && !has(self.marginPercent))",message="spec.rollout.analysis.checks[]: a BacklogAge check needs maxAge, and takes no maxPercent, compare or marginPercent",fieldPath=".maxAge"
// +kubebuilder:validation:XValidation:rule="self.kind != 'WorkflowFailureRate' || !has(self.maxAge)",message="spec.rollout.analysis.checks[].maxAge is for BacklogAge checks only",fieldPath=".maxAge"
// +kubebuilder:validation:XValidation:rule="!has(self.marginPercent) || has(self.compare)",message="spec.rollout.analysis.checks[].marginPercent needs compare",fieldPath=".marginPercent"
// +kubebuilder:validation:XValidation:rule="self.kind != 'WorkflowTaskFailures' || (has(self.maxPercent) && !has(self.compare) && !has(self.maxAge))",message="spec.rollout.analysis.checks[]: a WorkflowTaskFailures check needs maxPercent, and takes no compare or maxAge",fieldPath=".maxPercent"
// +kubebuilder:validation:XValidation:rule="(self.kind == 'Prometheus') == has(self.prometheus)",message="spec.rollout.analysis.checks[].prometheus: a Prometheus check needs prometheus (a query and max or min), and only a Prometheus check takes it",fieldPath=".prometheus"
// +kubebuilder:validation:XValidation:rule="self.kind != 'Prometheus' || !has(self.maxPercent)",message="spec.rollout.analysis.checks[].maxPercent is for WorkflowFailureRate checks: a Prometheus check takes its bounds in prometheus.max and prometheus.min",fieldPath=".maxPercent"
// +kubebuilder:validation:XValidation:rule="self.kind != 'Prometheus' || !has(self.compare)",message="spec.rollout.analysis.checks[].compare is for WorkflowFailureRate checks: a Prometheus check takes its bounds in prometheus.max and prometheus.min",fieldPath=".compare"
// +kubebuilder:validation:XValidation:rule="self.kind != 'Prometheus' || !has(self.maxAge)",message="spec.rollout.analysis.checks[].maxAge is for BacklogAge checks only",fieldPath=".maxAge"
type AnalysisCheck struct {
	// Name identifies the check in status, Events and metrics.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`
	// Kind is WorkflowFailureRate, WorkflowTaskFailures, BacklogAge or
	// Prometheus.
	Kind AnalysisCheckKind `json:"kind"`
	// Prometheus is a Prometheus check's query and bounds.
	// +optional
	Prometheus *PrometheusCheck `json:"prometheus,omitempty"`
	// MaxPercent fails a WorkflowFailureRate or WorkflowTaskFailures check
	// whose rate is above it.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	MaxPercent *int32 `json:"maxPercent,omitempty"`
	// Compare: Current fails a WorkflowFailureRate check whose rate is
	// above the current version's over the same window plus marginPercent.
	// +optional
	Compare AnalysisCompare `json:"compare,omitempty"`
	// MarginPercent is the percentage points the target's rate may exceed
	// the current version's by.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	MarginPercent *int32 `json:"marginPercent,omitempty"`
	// MaxAge fails a BacklogAge check whose oldest waiting task is older.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	MaxAge *metav1.Duration `json:"maxAge,omitempty"`
	// MinSamples is the fewest closed workflows of the target (and, with
	// compare, of the current version) a WorkflowFailureRate check
	// decides on, or workflows on the target a WorkflowTaskFailures check
	// decides on; below it the check is inconclusive and holds the step.
	// +optional
	// +kubebuilder:default=20
	// +kubebuilder:validation:Minimum=1
	MinSamples int32 `json:"minSamples,omitempty"`
	// FailureLimit is how many evaluations in a row may fail before the
	// rollout aborts: 0 aborts at the first failure.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	FailureLimit int32 `json:"failureLimit,omitempty"`
}

// PrometheusCheck is a PromQL query whose value must stay within bounds.
// +kubebuilder:validation:XValidation:rule="has(self.max) || has(self.min)",message="spec.rollout.analysis.checks[].prometheus needs max or min (or both)",fieldPath=".max"
type PrometheusCheck struct {
	// Query is a PromQL instant query that must answer one value (a
	// scalar, or a vector of one sample: aggregate with sum, max, ...).
	// It may substitute, as {{ .Field }}, the fields .BuildID,
	// .CurrentBuildID, .DeploymentName (Temporal's worker deployment),
	// .Namespace, .Name and .Window (the time since the target started
	// ramping, e.g. 95s); no other template syntax.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	Query string `json:"query"`
	// Max fails the check when the value is above it (equal passes).
	// +optional
	// +kubebuilder:validation:Pattern=`^-?[0-9]+(\.[0-9]+)?$`
	// +kubebuilder:validation:MaxLength=32
	Max *string `json:"max,omitempty"`
	// Min fails the check when the value is below it (equal passes).
	// +optional
	// +kubebuilder:validation:Pattern=`^-?[0-9]+(\.[0-9]+)?$`
	// +kubebuilder:validation:MaxLength=32
	Min *string `json:"min,omitempty"`
}

// DeploymentMetadata is metadata for the versioned Deployment objects.
// Keys under temporal.io/ are the controller's.
type DeploymentMetadata struct {
	// +optional
	// +kubebuilder:validation:XValidation:rule="self.all(k, !k.startsWith('temporal.io/'))",message="spec.deploymentMetadata.labels: keys under temporal.io/ are the controller's"
	Labels map[string]string `json:"labels,omitempty"`
	// +optional
	// +kubebuilder:validation:XValidation:rule="self.all(k, !k.startsWith('temporal.io/'))",message="spec.deploymentMetadata.annotations: keys under temporal.io/ are the controller's"
	Annotations map[string]string `json:"annotations,omitempty"`
}

// DeploymentStrategy is the RollingUpdate of a versioned Deployment.
// +kubebuilder:validation:XValidation:rule="!has(self.maxSurge) || !has(self.maxUnavailable) || !(string(self.maxSurge) in ['0', '0%'] && string(self.maxUnavailable) in ['0', '0%'])",message="spec.rollout.deploymentStrategy: maxSurge and maxUnavailable cannot both be 0"
type DeploymentStrategy struct {
	// MaxSurge is how many pods above the desired count an update may
	// start, a number or a percentage (Kubernetes' default: 25%).
	// +optional
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 : self.matches('^[0-9]+%$')",message="must be a non-negative number or a percentage such as 25%"
	MaxSurge *intstr.IntOrString `json:"maxSurge,omitempty"`
	// MaxUnavailable is how many pods below the desired count an update may
	// go, a number or a percentage (Kubernetes' default: 25%).
	// +optional
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 : self.matches('^[0-9]+%$')",message="must be a non-negative number or a percentage such as 25%"
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable,omitempty"`
}

// RolloutStep is one ramp of a Progressive rollout.
type RolloutStep struct {
	// RampPercentage of new workflow executions sent to the target.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=99
	RampPercentage int32 `json:"rampPercentage"`
	// PauseDuration is how long the ramp holds, measured from the time
	// Temporal recorded the ramp.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	PauseDuration metav1.Duration `json:"pauseDuration"`
	// Gate is a workflow run pinned to the target once this step's ramp
	// is set. The step does not end (next ramp or promotion) until it
	// succeeds, whatever its pause; if it fails or times out, the rollout
	// is aborted and its ramp removed.
	// +optional
	Gate *GateWorkflow `json:"gate,omitempty"`
}

// GateWorkflow is a workflow that must succeed before a version gets traffic.
// +kubebuilder:validation:XValidation:rule="!(has(self.input) && has(self.inputFrom))",message="gate.input and gate.inputFrom are mutually exclusive: set one",fieldPath=".inputFrom"
type GateWorkflow struct {
	// WorkflowType the target version's workers register.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=255
	WorkflowType string `json:"workflowType"`
	// Input is the workflow's input, a JSON object.
	// +optional
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	Input *apiextensionsv1.JSON `json:"input,omitempty"`
	// InputFrom reads the JSON input from a ConfigMap or Secret key.
	// +optional
	InputFrom *GateInputSource `json:"inputFrom,omitempty"`
	// Timeout bounds the gate run (its workflow execution timeout): a gate
	// that has not finished by then fails, and the rollout stops.
	// +optional
	// +kubebuilder:default="1h"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	Timeout *metav1.Duration `json:"timeout,omitempty"`
}

// GateInputSource selects a ConfigMap or Secret key holding JSON.
// +kubebuilder:validation:XValidation:rule="has(self.configMapKeyRef) != has(self.secretKeyRef)",message="gate.inputFrom needs exactly one of configMapKeyRef and secretKeyRef"
type GateInputSource struct {
	// +optional
	ConfigMapKeyRef *corev1.ConfigMapKeySelector `json:"configMapKeyRef,omitempty"`
	// +optional
	SecretKeyRef *corev1.SecretKeySelector `json:"secretKeyRef,omitempty"`
}

// DrainAction is what happens to the pinned workflows still open on a
// version that has been draining longer than spec.sunset.maxDrainDuration.
// +kubebuilder:validation:Enum=DryRun;Cancel;Terminate
type DrainAction string

const (
	// DrainDryRun only reports them: a count in status, an Event and a
	// metric. Nothing is sent to the workflows.
	DrainDryRun DrainAction = "DryRun"
	// DrainCancel requests their cancellation: each workflow's code sees
	// it and decides how to end (cleanup, compensation).
	DrainCancel DrainAction = "Cancel"
	// DrainTerminate terminates them: they end at once, and no workflow
	// code runs.
	DrainTerminate DrainAction = "Terminate"
)

// ContinueAsNewSignal is the signal that asks a pinned workflow to continue
// as new, so that its next run starts on the current version.
type ContinueAsNewSignal struct {
	// Name is the signal name the workflows handle.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=255
	Name string `json:"name"`
	// Input is the signal's single argument, any JSON value; unset sends
	// none.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	Input *apiextensionsv1.JSON `json:"input,omitempty"`
}

// SunsetSpec says how long drained versions are kept, and what is done
// about workflows that keep a version draining.
// +kubebuilder:validation:XValidation:rule="!has(self.drainAction) || has(self.maxDrainDuration)",message="spec.sunset.drainAction needs spec.sunset.maxDrainDuration",fieldPath=".drainAction"
type SunsetSpec struct {
	// ScaledownDelay is how long a version is kept running after Temporal
	// reports it drained, for queries on closed workflows.
	// +optional
	// +kubebuilder:default="1h"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	ScaledownDelay *metav1.Duration `json:"scaledownDelay,omitempty"`
	// DeleteDelay is how long after scaling to zero the version is deleted,
	// in Kubernetes and in Temporal.
	// +optional
	// +kubebuilder:default="24h"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	DeleteDelay *metav1.Duration `json:"deleteDelay,omitempty"`
	// MaxDrainDuration bounds how long a version may drain: once it has
	// been neither current nor ramping for this long, drainAction applies
	// to the pinned workflows still open on it. Unset (the default): no
	// bound, a version drains as long as its workflows run.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	MaxDrainDuration *metav1.Duration `json:"maxDrainDuration,omitempty"`
	// DrainAction is DryRun (the default: only report them), Cancel or
	// Terminate. The reason recorded in each workflow's history names
	// this object and the bound.
	// +optional
	DrainAction DrainAction `json:"drainAction,omitempty"`
	// ContinueAsNewSignal is sent once to each pinned workflow run on a
	// draining version, so that workflows written to handle it continue
	// as new onto the current version. Unset: no signal.
	// +optional
	ContinueAsNewSignal *ContinueAsNewSignal `json:"continueAsNewSignal,omitempty"`
}

// DeletionPolicy says when the workers of a deleted TemporalWorkerDeployment go.
// +kubebuilder:validation:Enum=WaitForDrain;Immediate
type DeletionPolicy string

const (
	// DeletionWaitForDrain keeps every version's workers until Temporal
	// reports it drained, so pinned workflows finish where they started.
	DeletionWaitForDrain DeletionPolicy = "WaitForDrain"
	// DeletionImmediate deletes the workers as soon as new workflows are
	// routed away; open pinned workflows wait for workers that never come.
	DeletionImmediate DeletionPolicy = "Immediate"
)

// DeletionSpec bounds how long a deletion waits for open workflows.
type DeletionSpec struct {
	// Policy is WaitForDrain (the default) or Immediate. It may be changed
	// while the object is being deleted, to stop waiting.
	// +optional
	Policy DeletionPolicy `json:"policy,omitempty"`
	// MaxDrainWait bounds WaitForDrain, counted from the deletion request:
	// after it the workers are deleted even if workflows are still open.
	// Unset waits until every version is drained.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	MaxDrainWait *metav1.Duration `json:"maxDrainWait,omitempty"`
}

// VersionStatus is where a version stands in Temporal.
// +kubebuilder:validation:Enum=NotRegistered;Inactive;Ramping;Current;Draining;Drained;Unknown
type VersionStatus string

const (
	VersionNotRegistered VersionStatus = "NotRegistered"
	VersionInactive      VersionStatus = "Inactive"
	VersionRamping       VersionStatus = "Ramping"
	VersionCurrent       VersionStatus = "Current"
	VersionDraining      VersionStatus = "Draining"
	VersionDrained       VersionStatus = "Drained"
	// VersionUnknown: Temporal reports neither a status nor drainage for a
	// registered version. It may have open workflows, so it keeps its workers.
	VersionUnknown VersionStatus = "Unknown"
)

// WorkerVersion is the observed state of one version.
type WorkerVersion struct {
	BuildID string        `json:"buildID"`
	Status  VersionStatus `json:"status"`
	// Deployment is the versioned Deployment's name, if it exists.
	// +optional
	Deployment string `json:"deployment,omitempty"`
	// TaskQueues the version's workers poll, as registered in Temporal.
	// +optional
	// +listType=atomic
	TaskQueues []string `json:"taskQueues,omitempty"`
	// +optional
	HealthySince *metav1.Time `json:"healthySince,omitempty"`
	// +optional
	RampingSince *metav1.Time `json:"rampingSince,omitempty"`
	// +optional
	RampPercentage *int32 `json:"rampPercentage,omitempty"`
	// CompletedAt, on the target, is when its rollout completed: it
	// became current, or someone else changed routing after it had
	// traffic. From then on, the target losing its traffic is someone
	// else's routing change, which the controller does not undo.
	// +optional
	CompletedAt *metav1.Time `json:"completedAt,omitempty"`
	// TargetSince, on the target, is when this build became the target:
	// spec.rollout.progressDeadline counts from it.
	// +optional
	TargetSince *metav1.Time `json:"targetSince,omitempty"`
	// +optional
	DrainedSince *metav1.Time `json:"drainedSince,omitempty"`
	// UpdatedInPlaceAt is when the controller last rolled this version's
	// Deployment to a changed pod template that kept the custom build ID.
	// +optional
	UpdatedInPlaceAt *metav1.Time `json:"updatedInPlaceAt,omitempty"`
	// UpdatedInPlaceReason says why that update happened.
	// +optional
	UpdatedInPlaceReason string `json:"updatedInPlaceReason,omitempty"`
	// Drain is what the controller found and did about the pinned
	// workflows of a draining version (spec.sunset.maxDrainDuration and
	// continueAsNewSignal).
	// +optional
	Drain *VersionDrain `json:"drain,omitempty"`
	// Revival is the controller's latest revival of this version: someone
	// else (an autoscaler, a person) had scaled its Deployment to zero
	// while Temporal could still hand it work and tasks waited for it, so
	// the controller gave it a worker back.
	// +optional
	Revival *VersionRevival `json:"revival,omitempty"`
}

// VersionRevival records the controller's latest revival of a version
// someone else had scaled to zero (docs/autoscaling.md).
type VersionRevival struct {
	// At is when the controller scaled the Deployment back up.
	At metav1.Time `json:"at"`
	// FromReplicas is the Deployment's spec.replicas the controller found:
	// someone else's zero.
	FromReplicas int32 `json:"fromReplicas"`
	// Replicas is what the controller set it to: one worker, for the
	// version's autoscaler (if any) to take over from.
	Replicas int32 `json:"replicas"`
	// VersionStatus is the version's status in Temporal at that time.
	VersionStatus VersionStatus `json:"versionStatus"`
	// Backlog is how many tasks waited in the version's task queues;
	// absent when the backlog could not be read, which counts as tasks
	// waiting.
	// +optional
	Backlog *int64 `json:"backlog,omitempty"`
	// Count is how many times the controller revived this version. A count
	// that keeps growing means something keeps scaling it to zero while
	// work waits for it.
	Count int32 `json:"count"`
	// Message says why, as the Scale Event does.
	Message string `json:"message"`
}

// VersionDrain reports the drain deadline and the continue-as-new signal of
// one version. Counts are of workflow runs, for the version's current drain.
type VersionDrain struct {
	// DrainingSince is when the version stopped being current or ramping,
	// as Temporal reports it.
	// +optional
	DrainingSince *metav1.Time `json:"drainingSince,omitempty"`
	// SeenAt is when the controller first saw this drain, by its own
	// clock. The deadline counts from the later of drainingSince and
	// seenAt, so a controller clock ahead of Temporal's never brings it
	// forward.
	// +optional
	SeenAt *metav1.Time `json:"seenAt,omitempty"`
	// Deadline is the later of drainingSince and seenAt, plus
	// spec.sunset.maxDrainDuration.
	// +optional
	Deadline *metav1.Time `json:"deadline,omitempty"`
	// ListedAt is when its open pinned workflows were last listed.
	// +optional
	ListedAt *metav1.Time `json:"listedAt,omitempty"`
	// PinnedWorkflows is how many pinned workflows were open then.
	// +optional
	PinnedWorkflows int32 `json:"pinnedWorkflows,omitempty"`
	// Overdue is how many of them were open past the deadline: what
	// DryRun reports, and what Cancel and Terminate act on.
	// +optional
	Overdue int32 `json:"overdue,omitempty"`
	// CancelRequested counts the runs whose cancellation was requested.
	// +optional
	CancelRequested int32 `json:"cancelRequested,omitempty"`
	// Terminated counts the runs terminated.
	// +optional
	Terminated int32 `json:"terminated,omitempty"`
	// Signalled counts the runs sent the continue-as-new signal.
	// +optional
	Signalled int32 `json:"signalled,omitempty"`
	// Pending is how many runs that listing found still to be cancelled,
	// terminated or signalled, beyond what one pass may do: the next pass
	// goes on with them.
	// +optional
	Pending int32 `json:"pending,omitempty"`
	// LastActionAt is when a run was last cancelled, terminated or
	// signalled.
	// +optional
	LastActionAt *metav1.Time `json:"lastActionAt,omitempty"`
	// StoppedRuns and SignalledRuns are bookkeeping: short hashes of the
	// latest runs cancelled or terminated, and signalled, so that each run
	// gets each at most once, also across restarts of the controller.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=100
	StoppedRuns []string `json:"stoppedRuns,omitempty"`
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=100
	SignalledRuns []string `json:"signalledRuns,omitempty"`
}

// GateStatus records the gate workflow run for the target version.
type GateStatus struct {
	BuildID    string `json:"buildID"`
	WorkflowID string `json:"workflowID"`
	RunID      string `json:"runID,omitempty"`
	// Result is Running, Succeeded, Failed or Cancelled (the run was for
	// a version that stopped being the target).
	Result string `json:"result"`
	// +optional
	Message string `json:"message,omitempty"`
	// CancelRequestedAt is when the controller requested the cancellation
	// of the run, nobody needing its verdict any more; a run still running
	// 30s later is terminated.
	// +optional
	CancelRequestedAt *metav1.Time `json:"cancelRequestedAt,omitempty"`
	// Step is the rampPercentage of the ramp step whose gate this run is
	// (spec.rollout.steps[].gate); absent for spec.rollout.gate.
	// +optional
	Step int32 `json:"step,omitempty"`
	// StartedAt is when the run started: a step gate that failed before
	// the step's ramp was set again (a retry) runs anew.
	// +optional
	StartedAt *metav1.Time `json:"startedAt,omitempty"`
}

// AnalysisResult is a check's verdict.
type AnalysisResult string

const (
	AnalysisPassed       AnalysisResult = "Passed"
	AnalysisFailed       AnalysisResult = "Failed"
	AnalysisInconclusive AnalysisResult = "Inconclusive"
)

// AnalysisStatus is the latest evaluation of a target's analysis.
type AnalysisStatus struct {
	BuildID string `json:"buildID"`
	// EvaluatedAt is when Temporal was last read for the checks.
	// +optional
	EvaluatedAt *metav1.Time `json:"evaluatedAt,omitempty"`
	// WindowStart is when the target last started ramping: only
	// workflows started since count.
	// +optional
	WindowStart *metav1.Time `json:"windowStart,omitempty"`
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=10
	Checks []AnalysisCheckStatus `json:"checks,omitempty"`
	// Aborted is the evidence the rollout was aborted on (which check,
	// its values, the window); empty while it was not.
	// +optional
	Aborted string `json:"aborted,omitempty"`
	// AbortedAt is when the analysis aborted the rollout; a retry (the
	// annotation removed) starts counting afresh.
	// +optional
	AbortedAt *metav1.Time `json:"abortedAt,omitempty"`
}

// AnalysisCheckStatus is one check's latest verdict and evidence.
type AnalysisCheckStatus struct {
	Name   string         `json:"name"`
	Result AnalysisResult `json:"result"`
	// ConsecutiveFailures counts failed evaluations in a row.
	// +optional
	ConsecutiveFailures int32 `json:"consecutiveFailures,omitempty"`
	// Message is the evidence: values, bound and window.
	// +optional
	Message string `json:"message,omitempty"`
}

// TemporalWorkerDeploymentStatus is the observed state.
type TemporalWorkerDeploymentStatus struct {
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// TargetVersion is the version built from the current spec.
	// +optional
	TargetVersion *WorkerVersion `json:"targetVersion,omitempty"`
	// CurrentVersion receives new workflows by default.
	// +optional
	CurrentVersion *WorkerVersion `json:"currentVersion,omitempty"`
	// RampingVersion receives a share of new workflows, when it is not the target.
	// +optional
	RampingVersion *WorkerVersion `json:"rampingVersion,omitempty"`
	// DeprecatedVersions are older versions still known to Kubernetes or Temporal.
	// +optional
	// +listType=atomic
	DeprecatedVersions []WorkerVersion `json:"deprecatedVersions,omitempty"`
	// Gate is the latest gate workflow run.
	// +optional
	Gate *GateStatus `json:"gate,omitempty"`
	// Analysis is the latest evaluation of spec.rollout.analysis for the
	// target, and the evidence of an abort.
	// +optional
	Analysis *AnalysisStatus `json:"analysis,omitempty"`
	// Conditions: Ready and Progressing, for kubectl wait and CD tools.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// TemporalWorkerDeployment runs a Temporal worker as one Deployment per
// version and rolls traffic between versions with Worker Versioning.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=twd
// +kubebuilder:validation:XValidation:rule="!self.metadata.name.contains('.') || (has(self.spec.workerOptions.deploymentName) && size(self.spec.workerOptions.deploymentName) > 0)",message="Temporal forbids '.' in worker deployment names: rename the TemporalWorkerDeployment or set spec.workerOptions.deploymentName",fieldPath=".spec.workerOptions.deploymentName"
// +kubebuilder:printcolumn:name="Current",type=string,JSONPath=`.status.currentVersion.buildID`
// +kubebuilder:printcolumn:name="Target",type=string,JSONPath=`.status.targetVersion.buildID`
// +kubebuilder:printcolumn:name="Ramp",type=number,JSONPath=`.status.targetVersion.rampPercentage`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type TemporalWorkerDeployment struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   TemporalWorkerDeploymentSpec   `json:"spec"`
	Status TemporalWorkerDeploymentStatus `json:"status,omitempty"`
}

// TemporalWorkerDeploymentList is a list of TemporalWorkerDeployments.
// +kubebuilder:object:root=true
type TemporalWorkerDeploymentList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []TemporalWorkerDeployment `json:"items"`
}

func init() {
	SchemeBuilder.Register(&TemporalWorkerDeployment{}, &TemporalWorkerDeploymentList{})
}
