-- abort: stop the rollout of the target version. Sets the annotation
-- temporal.io/abort-rollout to the target's build ID; the controller then
-- removes the ramp it set on that version, promotes nothing and starts no
-- gate, and reports Ready=False RolloutAborted (Degraded) until the
-- annotation goes (retry) or spec.template changes (a new target, such as
-- a rollback). New workflows go to the current version; the target's
-- workers keep running.

local ABORT = "temporal.io/abort-rollout"

if obj.metadata.deletionTimestamp ~= nil then
  error("the TemporalWorkerDeployment is being deleted; there is no rollout to abort")
end
local target = (obj.status or {}).targetVersion
if target == nil or target.buildID == nil or target.buildID == "" then
  error("status names no target version yet: nothing to abort")
end
if target.status == "Current" then
  error("version " .. target.buildID .. " is current already; to roll back, set spec.template back")
end
if obj.metadata.annotations == nil then
  obj.metadata.annotations = {}
end
obj.metadata.annotations[ABORT] = target.buildID
return obj
