-- resume: undo pause. Puts back the strategy the pause action recorded
-- (Progressive or AllAtOnce) and removes the annotation. Under Progressive
-- the ramp goes on from its step; a step whose pauseDuration has passed
-- while paused moves on at once.

local PAUSED = "argocd.temporal.io/paused-strategy"

local annotations = obj.metadata.annotations
local from = nil
if annotations ~= nil then
  from = annotations[PAUSED]
end
if obj.spec.rollout == nil or obj.spec.rollout.strategy ~= "Manual" or (from ~= "Progressive" and from ~= "AllAtOnce") then
  error("not paused by the pause action (spec.rollout.strategy Manual and annotation " .. PAUSED ..
    "): a Manual rollout from git is promoted in Temporal (temporal worker deployment set-current-version)")
end
obj.spec.rollout.strategy = from
annotations[PAUSED] = nil
-- Argo CD turns an empty table into an empty list and then keeps the old
-- annotations; no annotations at all deletes the last one.
if next(annotations) == nil then
  obj.metadata.annotations = nil
end
return obj
