-- pause: hold the rollout where it is by switching spec.rollout.strategy to
-- Manual. The controller then changes no routing: a ramp stays at its
-- percentage, a version waiting for its workers or its gate is not made
-- current afterwards. The strategy it replaced is kept in an annotation for
-- resume. Time paused counts towards the current step's pauseDuration.

local PAUSED = "argocd.temporal.io/paused-strategy"

if obj.metadata.deletionTimestamp ~= nil then
  error("the TemporalWorkerDeployment is being deleted; there is no rollout to pause")
end
if obj.spec.rollout == nil then
  obj.spec.rollout = {}
end
local strategy = obj.spec.rollout.strategy or "AllAtOnce"
if strategy == "Manual" then
  error("spec.rollout.strategy is already Manual: nothing to pause")
end
if obj.metadata.annotations == nil then
  obj.metadata.annotations = {}
end
obj.metadata.annotations[PAUSED] = strategy
obj.spec.rollout.strategy = "Manual"
return obj
