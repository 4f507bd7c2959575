// Package planner decides, from observed state, what the Rainbow controller
// does next for one TemporalWorkerDeployment. Plan is pure: no clients, no
// clock, no randomness; the caller observes, Plan decides, the caller acts.
//
// The rules, in the order Plan applies them to the target version:
//
//   - First of all: a TWD that an older one outranks for its Temporal worker
//     deployment (Input.ClaimedBy, decided by ClaimHolder) acts on nothing,
//     in Temporal or Kubernetes, and reports WorkerDeploymentClaimed; being
//     deleted, it only lets its finalizer go, once no Deployment of its own
//     is left.
//   - The target gets a Deployment (spec.replicas, or 1 for an autoscaler to
//     take over), unless Temporal's version limit is reached and no version
//     can be deleted to make room (TooManyVersions). Only the target follows
//     spec.replicas; older versions keep theirs until sunset.
//   - A target Deployment that runs another template than the spec is
//     updated in place; one that records no hash of ours is not restarted
//     for it when its build ID was generated from the template or it carries
//     the migrated tool's temporal.io/pod-template-spec-hash: ours is recorded.
//   - Without Temporal's state nothing is routed, scaled down or deleted.
//     Reads that Temporal throttles, or that fail for less than
//     TemporalOutageBound (Input.TemporalError.Since), leave the rollout
//     moving (WaitingForTemporal), or complete if status showed the target
//     Ready (Input.TargetShownReady); only reads failing longer block it
//     (TemporalStateFetchFailed), so that no CD tool fails a rollout that
//     goes on a moment later.
//   - Traffic goes only to a version whose Deployment is available and whose
//     workers poll every task queue (WaitingForPollers until then). For 10s
//     after the Deployment became available Temporal is looked at every
//     200ms for them, then less often as the wait drags on.
//   - Routing is never written while another identity manages the worker
//     deployment (checked before the workers, which then need no look);
//     we claim the manager identity before our first write.
//   - A target that lost its traffic recently, by someone else's routing
//     change, is left as they set it (RoutingChangedExternally); one that
//     Temporal never routed lost nothing, even while Temporal reports it
//     draining for a workflow pinned to it by an override (its gate). If we made
//     that change and the target was current before, it becomes current at
//     once, skipping gate and steps (rollback).
//   - A target whose rollout a person aborted (the annotation
//     temporal.io/abort-rollout names it) gets no traffic: the ramp we set
//     on it goes (not under Manual), nothing is promoted, no gate starts
//     (RolloutAborted), until the annotation goes or the target changes.
//   - A gate workflow must succeed on the target before it gets traffic; if
//     it fails the rollout stops and the target's ramp is removed.
//   - A gate run nobody needs (its version is not the target, the spec
//     dropped the gate, the TWD is deleted) is cancelled, and terminated if
//     it still runs GateCancelGrace (30s) after the request, timed from
//     the request's time in status (GateRun.CancelRequestedAt), so across
//     restarts; such a run gives no verdict. One run at a time: the next
//     gate starts, and a deletion removes its finalizer, once it has ended.
//   - While Temporal still applies an accepted routing change to the task
//     queues' partitions (TemporalState.RoutingPropagating), the target
//     becomes neither Ready nor shown at a new ramp, status keeps the
//     routing it showed (Result.RoutingPropagating), and no version is
//     scaled down or deleted (a partition may still route to it). Ready,
//     the current version and the ramp in status mean that Temporal
//     applies them to new workflows. A report still standing
//     TemporalOutageBound after the change is taken as stale: Temporal was
//     seen to keep it for good.
//   - Manual never writes routing, AllAtOnce makes the target current,
//     Progressive ramps through the steps (each pause timed from Temporal's
//     ramp change time) and then makes it current. The first version of a
//     deployment becomes current directly. A ramp on another version is
//     removed before a version is made current.
//   - Other versions keep their workers while Temporal routes work to them
//     or may (current, ramping, draining, unknown). Drained versions are
//     scaled to zero after scaledownDelay, inactive ones scaledownDelay after
//     they were superseded, never-registered ones at once; Deployments are
//     deleted deleteDelay after reaching zero, and Temporal versions once
//     their Deployment is gone and nothing polls them; a version that may
//     still show its workers' polls is looked at again 20 s after, starting
//     from the pass that deletes its Deployment.
//   - A version that the worker deployment's summary has shown draining for
//     5 minutes is described itself, at most every 5 minutes
//     (DrainageToCrossCheck): the summary is a copy that was seen to stay
//     draining for good under load. A version with a Deployment is looked
//     at when its cross-check falls due. The version's own drained report then
//     counts for that draining episode; its own draining report, or a
//     routing change, leaves the summary's word.
//   - A Deployment at zero replicas that the controller did not scale down
//     (no scaled-down-at annotation: an autoscaler or a person did) is never
//     taken for drained: only Temporal's drainage retires a version. When
//     Temporal may hand its version work (current, ramping, draining,
//     unknown) and tasks wait in its task queues (TemporalVersion.Backlog;
//     a backlog not read counts as waiting), it gets one replica back
//     (ScaleRevive, during a deletion's wait too) for its autoscaler to take
//     over, and status records when, from what and why (Scale.Revival);
//     with no task waiting an autoscaler's scale-to-zero stands, so the two
//     never pull apart. Replicas an autoscaler owns are otherwise
//     never changed.
//   - A Deployment whose workers were given another Temporal server than the
//     connection names now (namespace IDs differ; without both, the address
//     differs) is never moved, scaled down or deleted: its drainage there is
//     unknown. A target on the old server blocks the rollout
//     (TemporalServerChanged) until a new version is rolled out.
//   - Every version with running workers (any Deployment but those the
//     controller scaled to zero at sunset) gets one copy of each
//     TemporalWorkerOwnedResource, rendered by internal/ownedresource and
//     applied when missing, changed, failed or ten minutes old. Copies of
//     sunset versions, of an earlier kind or name, and of a deleted owned
//     resource are deleted, but only what the executor reads under a
//     recorded name and DeleteRefusal finds to be the controller's copy
//     (labels, the version's Deployment as controller owner, namespaced,
//     in the namespace, a kind not banned): status is no proof. A copy
//     that cannot be rendered keeps the previous one and is reported for
//     its version alone; so does every version of an owned resource that
//     ApplyRefusal refuses (a banned or cluster-scoped kind, another
//     namespace), which applies nothing. An owned
//     autoscaler (scaleTargetRef: null) owns the versions' replicas:
//     spec.replicas then only sizes a new Deployment.
//   - Every other Deployment follows the connection (a changed address or
//     credentials roll its pods, draining versions included) and the
//     spec's Deployment settings, unless another action touches it in the
//     same pass.
//   - Pinned workflows are only ever acted on in a version that Temporal
//     reports draining (routing config and its own status agree), that is
//     not the target, whose workers use the connection's server, whose
//     drain start Temporal reports, while nobody else manages the worker
//     deployment and the TWD is not being deleted; never without
//     Temporal's state. DrainVersionsToList names those whose open pinned
//     workflows the caller lists (visibility): when first draining, when
//     the deadline passes, when runs were left pending, and otherwise
//     every quarter of the drain so far (30s to 10m).
//   - Past spec.sunset.maxDrainDuration (counted from Temporal's drain
//     start or the controller's first sight of the drain, whichever is
//     later, so a controller clock ahead of the server's never ends
//     workflows early), Cancel requests and Terminate ends, with a reason for the
//     history, each listed run not cancelled or terminated before;
//     DryRun only counts them in status (an Event when the count changes).
//   - spec.sunset.continueAsNewSignal goes to each listed run of a
//     draining version not signalled before; past a deadline that cancels
//     or terminates, no more signals.
//   - At most 20 runs are acted on per pass, and passes that act are at
//     least 10s apart; status remembers the latest runs acted on (hashed),
//     so none gets the same action twice, across restarts too.
//
// Once the TWD is being deleted (Input.Deletion), Plan plans its removal
// instead, one step per call: routing moves to unversioned workers (ramp
// first); under WaitForDrain each version keeps its workers until Temporal
// reports it drained or spec.deletion.maxDrainWait has passed; then every
// Deployment goes, each version once nothing polls it, the worker
// deployment, and the finalizer. Without Temporal's state nothing is
// deleted; another manager's routing is never touched (see planDeletion).
//
// Ready is true iff the target is current, Temporal has applied that to
// every task queue partition, and its Deployment runs the spec's template
// (a custom build ID's in-place update, or a changed connection, has rolled). Plan asks to be called again in
// a second while it waits on Temporal, at the exact time of the next step or
// sunset deadline, and otherwise within a minute.
package planner
