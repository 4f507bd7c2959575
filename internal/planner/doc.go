// Package planner decides, from observed state, what the Rainbow controller
// does next for one TemporalWorkerDeployment. Plan is pure: no clients, no
// clock, no randomness; the caller observes, Plan decides, the caller acts.
// Timings are named constants (requeue.go, and next to their rule);
// docs/concepts.md gives their values and where each rule lives.
//
// The rules, in the order Plan applies them (and where each lives):
//
//   - A TWD that an older one outranks for its worker deployment (ClaimHolder)
//     acts on nothing and reports WorkerDeploymentClaimed (in claim.go).
//   - While the migrate command hands the incumbent's Deployments over
//     (AdoptionPending) nothing is created, scaled, routed or deleted (in adoption.go).
//   - The manager role is taken from the one identity the TWD names
//     (TakeManagerFrom, the incumbent's), with an Event; that identity's
//     routing counts as ours (in adoption.go, plan.go).
//   - The target gets a Deployment (spec.replicas, or 1 for an autoscaler) once
//     the connection resolves, unless the version limit leaves no room (in target.go).
//   - A target Deployment running another template is updated in place; one
//     made from the same template without our hash only gets the hash (in target.go).
//   - Without Temporal's state nothing is routed, scaled down or deleted; reads
//     failing under TemporalOutageBound, or throttled, only wait (in target.go).
//   - Traffic goes only to a version whose Deployment is available and whose
//     workers poll every task queue (WaitingForPollers) (in target.go).
//     What the routing pass reads first, and why: Temporal refuses a write
//     to a version it does not know, or to one that has not registered a
//     task queue of the current version holding a backlog or recent tasks;
//     it checks no pollers (a version made by CreateWorkerDeploymentVersion
//     has none, one registered long ago may have lost them) and skips idle
//     queues. So observe describes the target (its registered queues,
//     against all of the current version's, remembered from that
//     version's own describe when it was made current, so no describe of
//     it precedes the write), then reads its pollers over every type
//     (DescribeTaskQueue; Temporal caches the answer 5 s, an empty one
//     too, so it is asked only once the version is registered). The
//     describe is kept: Temporal answers it late while the registration
//     settles (about 1.3 s after the first poll here), and writes made
//     before that were seen to leave Temporal reporting the change
//     IN_PROGRESS for good, holding status and retirement of each later
//     change for TemporalOutageBound (docs/performance.md, issue 30).
//   - A target that never had traffic and whose workers still do not poll
//     past spec.rollout.progressDeadline is blocked (ProgressDeadlineExceeded),
//     and with progressDeadlineAbort scaled to zero; nothing routed is
//     touched (in deadline.go).
//   - Routing is never written while another identity manages the worker
//     deployment; we claim the manager role before our first write (in target.go, plan.go).
//   - A target someone else took traffic from is left as they set it
//     (RoutingChangedExternally); our own such change is a rollback (in promotion.go).
//   - A rollout a person aborted (temporal.io/abort-rollout) gets no traffic
//     and no gate until the annotation goes or the target changes (in target.go).
//   - A gate workflow, on the target's workflow task queue, must succeed before
//     it gets traffic (GateCannotStart without one or its input) (in gate.go).
//   - A gate run nobody needs is cancelled, then terminated after
//     GateCancelGrace (in gate.go).
//   - While Temporal still applies a routing change to the task queues'
//     partitions, nothing is retired and status keeps the routing it showed,
//     or the one it read applied when this pass changed it (in propagation.go,
//     and the controller's status).
//   - While a Progressive target ramps, spec.rollout.analysis judges it
//     from Temporal's records (AnalysisToRead says when observe reads, at
//     most once per interval; Judge gives each kind's verdict: failure
//     rate, workflows stuck on a failing workflow task, backlog age): no step ends and nothing is promoted while a
//     check fails or is inconclusive (too few samples, a failed read); a
//     check failing more than its failureLimit times in a row aborts the
//     rollout as the annotation does (AbortRollout, AnalysisFailed), with
//     the evidence in status; dryRun only reports. An evaluation the
//     namespace's read budget deferred records nothing and ends no step
//     (it would end on a verdict older than an interval); it asks again
//     when its reservation has room. Only one that may end the step
//     (AnalysisRead.EndsStep: pause over, step gate succeeded, not paused,
//     no dry run) waits in line for the budget; the others, which can
//     only abort, take what nobody waits for (in analysis.go).
//   - While a Progressive target ramps at a step that names a gate
//     (spec.rollout.steps[].gate), that gate runs on the target's workflow
//     task queue (one run at a time; GateWanted says which observe reads);
//     the step does not end, whatever its pause, until it succeeded, and
//     one that cannot start holds the step with a message. A failed or
//     timed-out step gate aborts the rollout as a failed analysis does
//     (AbortRollout, Warning GateFailed); a run that failed before the
//     step's ramp was last set (a retry) runs again (in stepgate.go).
//   - A paused rollout (spec.rollout.paused) gets no further ramp step and no
//     promotion once its gate passed; everything else goes on: the target's
//     Deployment, rollbacks, aborts, sunsets, drains (in promotion.go).
//   - Manual never routes, AllAtOnce makes the target current, Progressive
//     ramps through the steps, timed from Temporal's ramp change time; a
//     step whose ramp Temporal still applies does not end, whatever its
//     pause: under load applying a ramp took longer than a short pause, and
//     the next ramp followed before any partition routed by the last (in promotion.go).
//   - Other versions keep their workers while Temporal may route to them;
//     drained and inactive ones are scaled down, then deleted (in sunset.go).
//   - A summary that keeps a version draining is cross-checked against the
//     version's own drainage; only its own "drained" wins (in drain/crosscheck.go).
//   - A version someone else scaled to zero while tasks wait for it gets one
//     replica back (ScaleRevive); autoscalers' replicas are not touched (in revive.go).
//   - A Deployment on another Temporal server than the connection's is never
//     moved, scaled down or deleted; a target there blocks (in connection.go).
//   - Versions with running workers get a copy of each owned resource; only
//     provable copies are deleted (ApplyRefusal, DeleteRefusal) (in package owned).
//   - Other Deployments follow the connection and the spec's Deployment
//     settings (SyncDeployments) (in connection.go).
//   - Pinned workflows of a version Temporal reports draining get the drain
//     deadline's Cancel or Terminate and the continue-as-new signal (in package drain).
//
// Once the TWD is being deleted (Input.Deletion), Plan plans its removal
// instead, one step per call (in deletion.go). Ready is true iff the target
// is current everywhere and its pods run the spec's template and the
// connection's settings (in conditions.go); Result.Projected is the report
// once Temporal accepts the plan's routing (in projection.go).
package planner
