-- resume: undo pause by setting spec.rollout.paused to false. Under
-- Progressive the ramp goes on from its step; a step whose pauseDuration
-- has passed while paused moves on at once. A rollout paused by an older
-- pause action (strategy Manual, the strategy it replaced in an
-- annotation) gets that strategy back.

local PAUSED = "argocd.temporal.io/paused-strategy"

local rollout = obj.spec.rollout
if rollout ~= nil and rollout.paused == true then
  rollout.paused = false
  return obj
end
local annotations = obj.metadata.annotations
local from = nil
if annotations ~= nil then
  from = annotations[PAUSED]
end
if rollout == nil or rollout.strategy ~= "Manual" or (from ~= "Progressive" and from ~= "AllAtOnce") then
  error("not paused (spec.rollout.paused is not true): a Manual rollout from git is promoted in Temporal " ..
    "(temporal worker deployment set-current-version)")
end
rollout.strategy = from
annotations[PAUSED] = nil
-- Argo CD turns an empty table into an empty list and then keeps the old
-- annotations; no annotations at all deletes the last one.
if next(annotations) == nil then
  obj.metadata.annotations = nil
end
return obj
