package v1alpha1

// AnnotationAbortRollout on a TemporalWorkerDeployment names a target build
// ID whose rollout is aborted: new workflows stay on the current version
// until the annotation goes or the template changes (a new target).
const AnnotationAbortRollout = "temporal.io/abort-rollout"

// FinalizerCleanup holds a TemporalWorkerDeployment until its workers and
// its versions in Temporal are gone. Removing it by hand gives up on that.
const FinalizerCleanup = "temporal.io/worker-deployment-cleanup"

// Condition types of a TemporalWorkerDeployment. Ready and Progressing
// follow the conventions kstatus, Helm, Argo CD and Flux understand.
const (
	// ConditionReady is True when the target version is current in Temporal.
	ConditionReady = "Ready"
	// ConditionProgressing is True while a rollout moves, False when it is
	// done (RolloutComplete) or blocked (an error reason).
	ConditionProgressing = "Progressing"
	// ConditionReconciling is kstatus' "in progress": True while the
	// controller works towards the spec (the same reasons as Progressing).
	ConditionReconciling = "Reconciling"
	// ConditionStalled is kstatus' "failed": True while the rollout is
	// blocked until someone or something outside acts, so that Flux and
	// Helm 4 stop waiting at once.
	ConditionStalled = "Stalled"
)

// Condition reasons. The error reasons appear on both Ready and Progressing.
const (
	ReasonRolloutComplete     = "RolloutComplete"
	ReasonWaitingForPollers   = "WaitingForPollers"
	ReasonWaitingForPromotion = "WaitingForPromotion"
	ReasonRamping             = "Ramping"
	// ReasonPaused: spec.rollout.paused holds the rollout; the target gets
	// no further traffic until it is false again.
	ReasonPaused = "Paused"
	// ReasonWaitingForTemporal: the rollout waits on Temporal, not on a
	// person: reads throttled or failing for less than the outage bound,
	// or a routing change Temporal accepted and is still applying to the
	// task queues (until then new workflows may go by the old routing).
	ReasonWaitingForTemporal = "WaitingForTemporal"

	ReasonTemporalConnectionNotFound   = "TemporalConnectionNotFound"
	ReasonAuthSecretInvalid            = "AuthSecretInvalid"
	ReasonTemporalClientCreationFailed = "TemporalClientCreationFailed"
	ReasonTemporalStateFetchFailed     = "TemporalStateFetchFailed"
	ReasonPlanGenerationFailed         = "PlanGenerationFailed"
	ReasonPlanExecutionFailed          = "PlanExecutionFailed"

	// ReasonTooManyVersions: Temporal's version limit is reached and the
	// new version waits until older ones drain.
	ReasonTooManyVersions = "TooManyVersions"
	// ReasonManagedByOtherIdentity: another identity holds the worker
	// deployment's manager role; the controller does not write routing.
	ReasonManagedByOtherIdentity = "ManagedByOtherIdentity"
	// ReasonRoutingChangedExternally: someone else changed routing away
	// from the target; the controller leaves it as they set it.
	ReasonRoutingChangedExternally = "RoutingChangedExternally"
	// ReasonGateFailed: the gate workflow failed on the target version.
	ReasonGateFailed = "GateFailed"
	// ReasonGateCannotStart: the gate workflow cannot start on the target:
	// its input cannot be read, or its workers poll no workflow task queue.
	ReasonGateCannotStart = "GateCannotStart"
	// ReasonTemporalServerChanged: the connection now names another
	// Temporal server than the one the target version's workers use; they
	// are not moved, since workflows pinned to them run on the old one.
	ReasonTemporalServerChanged = "TemporalServerChanged"
	// ReasonDeleting: the TemporalWorkerDeployment is being deleted and the
	// controller is removing its versions from Temporal.
	ReasonDeleting = "Deleting"
	// ReasonRolloutAborted: the annotation AnnotationAbortRollout names the
	// target; it gets no traffic and the ramp the controller set is removed.
	ReasonRolloutAborted = "RolloutAborted"
	// ReasonAnalysisFailed: a check of spec.rollout.analysis failed more
	// than its failureLimit times in a row (the Event's reason; the
	// condition says RolloutAborted).
	ReasonAnalysisFailed = "AnalysisFailed"
	// ReasonAnalysisInconclusive: a check could not decide (too few
	// samples, or Temporal could not be read); the step holds.
	ReasonAnalysisInconclusive = "AnalysisInconclusive"
	// ReasonProgressDeadlineExceeded: the target's workers did not become
	// available and poll every task queue within
	// spec.rollout.progressDeadline, and it never had traffic.
	ReasonProgressDeadlineExceeded = "ProgressDeadlineExceeded"
	// ReasonWorkerDeploymentClaimed: an older TemporalWorkerDeployment
	// names the same Temporal worker deployment (server, namespace and
	// name); this one changes nothing in Temporal and runs no workers.
	ReasonWorkerDeploymentClaimed = "WorkerDeploymentClaimed"
)

// Reasons of a TemporalConnection's Ready condition. A connection that
// cannot be used reports ReasonAuthSecretInvalid,
// ReasonTemporalClientCreationFailed, ReasonUnsupportedServerVersion or
// ReasonAddressNotAllowed.
const (
	// ReasonReachable: the server answered a health check with the
	// configured credentials.
	ReasonReachable = "Reachable"
	// ReasonDeletionBlocked: the connection is being deleted but
	// TemporalWorkerDeployments still name it.
	ReasonDeletionBlocked = "DeletionBlocked"
	// ReasonUnsupportedServerVersion: the server is older than the
	// controller supports. TemporalWorkerDeployments using the connection
	// report it too, and change nothing in Temporal or in their workers.
	ReasonUnsupportedServerVersion = "UnsupportedServerVersion"
	// ReasonAddressNotAllowed: spec.hostPort is outside the controller's
	// --allowed-temporal-hosts, so it does not connect there (nor do its
	// workers). TemporalWorkerDeployments using the connection report it too.
	ReasonAddressNotAllowed = "AddressNotAllowed"
)
