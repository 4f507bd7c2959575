-- pause: hold the rollout where it is by setting spec.rollout.paused. The
-- controller then makes no routing change that advances the rollout: a
-- ramp stays at its percentage, a version waiting for its workers or its
-- gate is not made current afterwards. Abort and a rollback still work.
-- Time paused counts towards the current step's pauseDuration.

if obj.metadata.deletionTimestamp ~= nil then
  error("the TemporalWorkerDeployment is being deleted; there is no rollout to pause")
end
if obj.spec.rollout == nil then
  obj.spec.rollout = {}
end
if (obj.spec.rollout.strategy or "AllAtOnce") == "Manual" then
  error("spec.rollout.strategy is Manual: the controller routes nothing anyway, so there is nothing to pause")
end
if obj.spec.rollout.paused == true then
  error("spec.rollout.paused is already true: nothing to pause")
end
obj.spec.rollout.paused = true
return obj
