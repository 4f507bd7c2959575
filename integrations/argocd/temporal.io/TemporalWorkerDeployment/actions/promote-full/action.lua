-- promote-full: make the target current now, skipping the remaining ramp
-- steps. Switches spec.rollout.strategy to AllAtOnce (from Progressive, or
-- from a pause, which it ends: spec.rollout.paused false, or the annotation
-- of an older pause action removed). A gate still has to pass first.

local PAUSED = "argocd.temporal.io/paused-strategy"

local rollout = obj.spec.rollout
local annotations = obj.metadata.annotations
local pausedFrom = nil
if annotations ~= nil then
  pausedFrom = annotations[PAUSED]
end
local strategy = "AllAtOnce"
if rollout ~= nil and rollout.strategy ~= nil then
  strategy = rollout.strategy
end
local pausedField = rollout ~= nil and rollout.paused == true
local paused = strategy == "Manual" and (pausedFrom == "Progressive" or pausedFrom == "AllAtOnce")
if strategy ~= "Progressive" and not paused and not (pausedField and strategy == "AllAtOnce") then
  error("promote-full works on a Progressive rollout or one paused by the pause action; " ..
    "under Manual, promote in Temporal (temporal worker deployment set-current-version)")
end
if obj.metadata.deletionTimestamp ~= nil then
  error("the TemporalWorkerDeployment is being deleted")
end
rollout.strategy = "AllAtOnce"
if pausedField then
  rollout.paused = false
end
if paused then
  annotations[PAUSED] = nil
  -- Argo CD turns an empty table into an empty list and then keeps the old
  -- annotations; no annotations at all deletes the last one.
  if next(annotations) == nil then
    obj.metadata.annotations = nil
  end
end
return obj
