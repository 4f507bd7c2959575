package planner

import (
	"time"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/internal/planner/drain"
)

// Input is everything Plan decides from: the spec, what Kubernetes and
// Temporal report, and the time.
type Input struct {
	Now time.Time
	// Identity is the controller's Temporal identity.
	Identity string
	// DeploymentName is the Temporal worker deployment name. Only messages use it.
	DeploymentName string
	Spec           Spec
	// Deployments are the versioned Deployments the TWD owns, in any order.
	// Build IDs are unique; a repeated build ID after the first is ignored.
	Deployments []Deployment
	// Temporal is nil when the worker deployment could not be read. Plan then
	// assumes every version may have open workflows.
	Temporal *TemporalState
	// TemporalError, when Temporal is nil, gives a more specific reason and
	// message than TemporalStateFetchFailed (e.g. TemporalConnectionNotFound).
	TemporalError *Problem
	// Gate is the latest gate run observed, for any build ID; nil if none.
	Gate *GateRun
	// TargetHadCompleted: the TWD last reported this target as current
	// (rollout complete), or as taken away by someone else. If it is not
	// current now, someone else changed routing, and that is not undone.
	TargetHadCompleted bool
	// TargetSince is when the target became the target, or its Deployment
	// was last updated in place, if later (status); zero when status does
	// not say yet, which counts as now. Spec.ProgressDeadline counts from it.
	TargetSince time.Time
	// TargetShownReady: status shows Ready=True with this target current.
	// While reads fail for a moment, or Temporal applies some other
	// routing change, that stands.
	TargetShownReady bool
	// Server is the Temporal server the TWD's connection names now; zero
	// when the connection could not be resolved, and then no Deployment is
	// created, updated in place or synced.
	Server Server
	// Deletion is set once the TWD is being deleted: Plan then plans the
	// deletion steps instead of a rollout.
	Deletion *Deletion
	// Namespace and Name are the TWD's, which copies of owned resources
	// are named, labelled and placed after.
	Namespace, Name string
	// TemporalNamespace is spec.workerOptions.temporalNamespace, for the
	// templates of owned resources.
	TemporalNamespace string
	// OwnedResources are the TemporalWorkerOwnedResources naming the TWD,
	// sorted by name.
	OwnedResources []OwnedResource
	// BannedKinds are the kinds no copy may be, in any group (the
	// webhook's list); the RBAC kinds are banned whatever it says.
	BannedKinds []string
	// Drains are the versions' drain records from status.
	Drains []DrainRecord
	// ClaimedBy is set when an older TWD names the same Temporal worker
	// deployment (ClaimHolder): Plan then acts on nothing.
	ClaimedBy *Claimed
	// Pinned are this pass's listings of the versions DrainVersionsToList
	// named; a version missing here was not listed.
	Pinned []PinnedListing
	// Analysis is status.analysis and this pass's reads for it.
	Analysis AnalysisObserved
}

// Deletion is a deletion request and what spec.deletion asks of it.
type Deletion struct {
	// Object is the TWD's "namespace/name", for the commands messages give.
	Object string
	// RequestedAt is the TWD's deletion timestamp.
	RequestedAt time.Time
	Policy      v1alpha1.DeletionPolicy
	// MaxDrainWait bounds the WaitForDrain policy; 0 is no bound.
	MaxDrainWait time.Duration
	// StatusShowedVersions: the TWD's status ever reported a version that
	// Temporal may know.
	StatusShowedVersions bool
}

// Spec is the part of the TWD spec that rollout rules read.
type Spec struct {
	TargetBuildID string
	// AbortedBuildID is the build ID whose rollout a person aborted
	// (v1alpha1.AnnotationAbortRollout); it only counts while it is the
	// target.
	AbortedBuildID string
	// Replicas of the target. Nil: an autoscaler owns replicas.
	Replicas *int32
	Strategy v1alpha1.RolloutStrategy
	// Steps of a Progressive rollout, strictly increasing percentages.
	Steps []Step
	// GateWorkflowType is empty when there is no gate.
	GateWorkflowType string
	// GateTimeout bounds a gate run; 0 is no bound.
	GateTimeout time.Duration
	// GateInput is the gate's JSON input (spec.rollout.gate.input or
	// inputFrom), read only while the target's gate may start.
	GateInput      GateInput
	ScaledownDelay time.Duration
	DeleteDelay    time.Duration
	// MaxVersions is Temporal's per-deployment version limit; 0 = no limit.
	MaxVersions int
	// TemplateHash is the hash of the spec's pod template. The target's
	// Deployment is updated in place when it runs another one (only
	// possible with a custom build ID). Empty: no drift detection.
	TemplateHash string
	// GeneratedBuildID is the build ID generated from the spec's template.
	// A Deployment without a recorded hash whose build ID equals it was
	// made from this very template, so only the hash is recorded.
	GeneratedBuildID string
	// Drain is the drain deadline and the continue-as-new signal.
	Drain DrainSpec
	// ProgressDeadline bounds the wait for the target's workers
	// (spec.rollout.progressDeadline); 0 is no bound.
	ProgressDeadline time.Duration
	// ProgressDeadlineAbort scales a target that missed the deadline, and
	// never had traffic, to zero (spec.rollout.progressDeadlineAbort).
	ProgressDeadlineAbort bool
	// Paused holds routing that advances the rollout (spec.rollout.paused).
	Paused bool
	// AdoptionPending holds everything while the migrate command hands the
	// incumbent's Deployments over (v1alpha1.AnnotationAdoptionPending).
	AdoptionPending bool
	// Analysis is spec.rollout.analysis; nil without checks.
	Analysis *Analysis
	// TakeManagerFrom is the one other manager identity whose role the
	// controller takes (v1alpha1.AnnotationTakeManagerFrom); "" takes none.
	TakeManagerFrom string
}

// Deployment is one versioned Kubernetes Deployment.
type Deployment struct {
	BuildID string
	Name    string
	// UID is the Deployment's, for the owner references of owned copies.
	UID string
	// Replicas is spec.replicas.
	Replicas int32
	// Available: rolled out (observedGeneration current, updated == replicas)
	// and the Available condition is true.
	Available bool
	// ScaledDownAt is when the controller last scaled it to zero (an
	// annotation). It only counts while Replicas is 0.
	ScaledDownAt *time.Time
	// TemplateHash is the pod template hash it runs (an annotation); empty
	// for a Deployment made before hashes were recorded.
	TemplateHash string
	// Selector is its pod selector's labels ("k=v,k=v") when they are not
	// the ones the controller gives its own Deployments: an adopted
	// Deployment keeps its maker's selector for life. Empty otherwise. A
	// string keeps Deployment comparable.
	Selector string
	// MigratedHash: it records the template hash of the tool users migrate
	// from (temporal.io/pod-template-spec-hash), another algorithm than
	// ours, so it was made from a known template but cannot be compared.
	MigratedHash bool
	// Server is the Temporal server its workers were given.
	Server Server
	// ConnectionStale: the connection settings injected into its pods
	// (address, credentials) differ from the connection's now.
	ConnectionStale bool
	// SettingsStale: minReadySeconds or progressDeadlineSeconds differ
	// from the spec.
	SettingsStale bool
	// Rolling: a template change is still being rolled out (the Deployment
	// controller has not seen the latest spec, or pods of an older
	// template remain).
	Rolling bool
	// AvailableSince is when it last became available (its Available
	// condition's transition, whole seconds); zero when unknown.
	AvailableSince time.Time
	// CreatedAt is the Deployment's creation time; zero when unknown.
	CreatedAt time.Time
	// ReadyReplicas is status.readyReplicas, for messages.
	ReadyReplicas int32
}

// TemporalState is the worker deployment as Temporal describes it.
type TemporalState struct {
	// Exists is false when no worker has polled yet (or it was deleted).
	Exists               bool
	ManagerIdentity      string
	LastModifierIdentity string
	// CurrentBuildID is empty when unversioned workers are current.
	CurrentBuildID string
	// RampingBuildID is empty when nothing ramps.
	RampingBuildID string
	RampPercentage int32
	// RampChangedAt is the server's time of the last ramp change; step pauses
	// are measured from it.
	RampChangedAt time.Time
	// UnversionedPollers: unversioned workers still poll the task queues.
	UnversionedPollers bool
	// ReportsActivation: the server reports when it first routed each
	// version (TemporalVersion.FirstActivatedAt), so a version without that
	// time was never current or ramping.
	ReportsActivation bool
	// RoutingPropagating: Temporal accepted a routing change and is still
	// applying it to the task queues' partitions; until it has, new
	// workflows may still be routed as before.
	RoutingPropagating bool
	// RoutingChangedAt is the server's time of the last routing change
	// (current version, ramping version or percentage); zero if unknown.
	RoutingChangedAt time.Time
	// Versions are the registered versions, one per build ID.
	Versions []TemporalVersion
}

// TemporalVersion is one registered version.
type TemporalVersion struct {
	BuildID string
	Status  v1alpha1.VersionStatus
	// RegisteredAt is the version's create time in Temporal. Zero if unknown.
	RegisteredAt time.Time
	// DrainedSince is when drainage status last changed to drained.
	DrainedSince *time.Time
	CurrentSince *time.Time
	RampingSince *time.Time
	// LastCurrentAt is when it last became current; nil if it never was.
	LastCurrentAt *time.Time
	// FirstActivatedAt is when it first became current or ramping; nil if
	// it never did, or the server does not say (ReportsActivation).
	FirstActivatedAt *time.Time
	// DrainingSince is when it last stopped being current or ramping;
	// nil while it is, or if Temporal does not say.
	DrainingSince *time.Time
	// OwnDrainage is the version's own drainage where the controller
	// cross-checked a summary that kept it draining (DrainageToCrossCheck);
	// nil otherwise. A drained report here wins over the summary.
	OwnDrainage *OwnDrainage
	// Described: the version was described this pass (VersionsToDescribe
	// asked for it), so HasPollers and TaskQueuesReady are known; both are
	// false and mean nothing otherwise.
	Described bool
	// TaskQueuesReady: every task queue type of the version is registered.
	TaskQueuesReady bool
	HasPollers      bool
	// MissingTaskQueues, when described, are the task queues ("name (Type)")
	// the current version's workers poll and this version's do not, sorted.
	MissingTaskQueues []string
	// WorkflowTaskQueue is a workflow task queue its workers poll, where
	// the gate workflow runs; empty when it polls none or is not described.
	WorkflowTaskQueue string
	// Backlog is the number of tasks waiting in the version's task queues
	// (Temporal's approximate backlog counts, summed), nil when it was not
	// read recently. Only BacklogsToRead's versions need it.
	Backlog *int64
}

// mayHavePollers: a worker may still poll the version, or nobody asked.
func (tv TemporalVersion) mayHavePollers() bool { return !tv.Described || tv.HasPollers }

// Problem is a reason and message for a condition.
type Problem struct {
	Reason  string
	Message string
	// Since is when reads of the worker deployment began to fail, for a
	// TemporalStateFetchFailed; zero otherwise. Within TemporalOutageBound
	// of it the rollout is reported as waiting, not blocked.
	Since time.Time
	// Throttled: Temporal refused the read for load. A throttle is never
	// reported as blocked, however long it lasts.
	Throttled bool
}

// Result is what the controller should do, and the status to report.
// Actions are independent; the executor may run them in any order, except:
//   - BecomeManager must succeed before Routing is written;
//   - Kubernetes actions come before Temporal ones, and a Kubernetes write
//     that leaves the observation in doubt (a conflict, a vanished object,
//     no clear answer) cancels every Temporal write of the pass: the plan
//     was made from what that write shows may be stale, and the next pass
//     observes again.
type Result struct {
	CreateDeployment *CreateDeployment
	// UpdateDeployment updates the target's Deployment to the spec's
	// template in place, keeping its build ID.
	UpdateDeployment  *UpdateDeployment
	Scale             []Scale
	DeleteDeployments []DeleteDeployment
	// SyncDeployments bring versions on the connection's server up to
	// date with it and with the spec's Deployment settings.
	SyncDeployments []SyncDeployment
	// BecomeManager: set the worker deployment's manager identity to
	// Input.Identity before writing Routing.
	BecomeManager bool
	// Routing is at most one routing write per reconcile.
	Routing *Routing
	// DeleteTemporalVersions are build IDs to delete from Temporal.
	DeleteTemporalVersions []string
	// SkipDrainage: delete those versions even while Temporal reports them
	// draining (deletion only: the wait for drainage was decided already).
	SkipDrainage bool
	// DeleteWorkerDeployment deletes the worker deployment from Temporal.
	DeleteWorkerDeployment bool
	// RemoveFinalizer: the deletion is complete once the other actions
	// succeeded.
	RemoveFinalizer bool
	StartGate       *StartGate
	// OwnedResources are the owned resources with something to do.
	OwnedResources []OwnedResourceWork
	// CancelGate cancels a running gate whose version is no longer the
	// target (or whose gate the spec dropped).
	CancelGate *CancelGate
	// TerminateGate ends a gate run that is still running GateCancelGrace
	// after its cancellation was requested.
	TerminateGate *TerminateGate
	// DrainWork cancels, terminates or signals pinned workflows of
	// draining versions.
	DrainWork []DrainWork
	// AbortRollout: the analysis aborted the target's rollout; the
	// executor records it as a person's abort would be.
	AbortRollout *AbortRollout
	// Analysis is status.analysis after this pass; nil clears it.
	Analysis *AnalysisRecord
	// AnalysisResults are this pass's fresh verdicts, for the metrics.
	AnalysisResults []CheckOutcome
	// State says whether the rollout (or deletion) moves, is complete or
	// is blocked; Ready and Progressing say the same for people.
	State State
	// WaitsFor is set when only a person's change in Temporal moves the
	// plan on, and says what shows that change.
	WaitsFor PersonWait
	// Versions, sorted by build ID, for status.
	Versions []Version
	// RoutingPropagating: Temporal still applies a routing change, so
	// status keeps showing the routing (current, ramping, ramp) it showed
	// before: status promises what new workflows get.
	RoutingPropagating bool
	// TargetCompleted: see Report.
	TargetCompleted bool
	// Projected is the report once Temporal accepted Routing and
	// DeleteTemporalVersions; nil when the plan writes neither.
	Projected *Report
	// OwnedResourceStatus is each owned resource's status if every apply
	// and delete of OwnedResources succeeds; the executor records failures.
	OwnedResourceStatus []OwnedResourceStatus
	Ready               Condition
	Progressing         Condition
	Events              []Event
	// RequeueAfter is always positive.
	RequeueAfter time.Duration
}

// Acts: the plan changes something in Kubernetes or Temporal. Every action
// field of Result is listed here (a test checks it).
func (r Result) Acts() bool {
	return r.CreateDeployment != nil || r.UpdateDeployment != nil || len(r.Scale) > 0 || len(r.DeleteDeployments) > 0 ||
		len(r.SyncDeployments) > 0 || r.BecomeManager || r.Routing != nil || len(r.DeleteTemporalVersions) > 0 || r.StartGate != nil || r.CancelGate != nil ||
		r.TerminateGate != nil || r.DeleteWorkerDeployment || r.RemoveFinalizer || len(r.OwnedResources) > 0 || len(r.DrainWork) > 0 ||
		r.AbortRollout != nil
}

// ScaleReason says why a Deployment is scaled.
type ScaleReason string

const (
	// ScaleToSpec follows spec.replicas (target only).
	ScaleToSpec ScaleReason = "Spec"
	// ScaleRestore brings back workers the controller scaled to zero, for a
	// version that gets work again.
	ScaleRestore ScaleReason = "Restore"
	// ScaleRevive gives one worker back to a version someone else (an
	// autoscaler, a person) scaled to zero while work waits for it.
	ScaleRevive ScaleReason = "Revive"
	// ScaleSunset scales a finished version to zero. The executor records
	// the time in the ScaledDownAt annotation (even if already at zero).
	ScaleSunset ScaleReason = "Sunset"
	// ScaleAbort scales a target that missed spec.rollout.progressDeadline,
	// and never had traffic, to zero (spec.rollout.progressDeadlineAbort).
	ScaleAbort ScaleReason = "ProgressDeadline"
)

// Scale sets spec.replicas of a Deployment.
type Scale struct {
	Name     string
	BuildID  string
	Replicas int32
	Reason   ScaleReason
	// Revival is set for ScaleRevive: what status records about the
	// version once the scale is written.
	Revival *Revival
}

// DeleteDeployment deletes a Deployment that has been at zero for
// DeleteDelay, or any Deployment of a TWD being deleted (Running).
type DeleteDeployment struct {
	Name    string
	BuildID string
	Reason  string
	// Running: it may still have replicas; the executor refuses to delete
	// a Deployment with replicas otherwise.
	Running bool
}

// RoutingOp is the kind of routing write.
type RoutingOp string

const (
	// SetCurrent makes BuildID current. Temporal clears the ramp if BuildID was ramping.
	SetCurrent RoutingOp = "SetCurrent"
	// SetRamp ramps RampPercentage of new workflows to BuildID, replacing any other ramp.
	SetRamp RoutingOp = "SetRamp"
	// RemoveRamp removes the ramp, whatever version it is on.
	RemoveRamp RoutingOp = "RemoveRamp"
)

// Routing is one write to the worker deployment's routing config.
type Routing struct {
	Op             RoutingOp
	BuildID        string // SetCurrent, SetRamp
	RampPercentage int32  // SetRamp
}

// Version is one version as status reports it.
type Version struct {
	BuildID string
	// Status is empty when Temporal's state is unknown; the status writer
	// should then keep what it reported before.
	Status v1alpha1.VersionStatus
	// Deployment is the Deployment name, if one exists.
	Deployment     string
	Target         bool
	RampPercentage *int32
	CurrentSince   *time.Time
	RampingSince   *time.Time
	DrainedSince   *time.Time
	// Drain is the version's drain record if every DrainWork succeeds;
	// the executor adds what it did with DrainRecord.Done.
	Drain *DrainRecord
}

// Event reasons for actions. Warnings reuse the condition reasons.
const (
	EventCreateDeployment = "CreateDeployment"
	EventUpdateInPlace    = "UpdateInPlace"
	EventScale            = "Scale"
	EventScaleDown        = "ScaleDown"
	EventDeleteDeployment = "DeleteDeployment"
	EventBecomeManager    = "BecomeManager"
	EventTakeManagerRole  = "TakeManagerRole"
	EventPromote          = "Promote"
	EventRamp             = "Ramp"
	EventRemoveRamp       = "RemoveRamp"
	EventRolledBack       = "RolledBack"
	EventStartGate        = "StartGate"
	EventCancelGate       = "CancelGate"
	EventTerminateGate    = "TerminateGate"
	EventDeleteVersion    = "DeleteVersion"
	EventSyncConnection   = "UpdateConnection"
	EventCancelPinned     = drain.EventCancelPinned
	EventTerminatePinned  = drain.EventTerminatePinned
	EventSignalPinned     = drain.EventSignalPinned
	// EventDrainDeadlinePassed: drain.EventDrainDeadlinePassed.
	EventDrainDeadlinePassed = drain.EventDrainDeadlinePassed
)
