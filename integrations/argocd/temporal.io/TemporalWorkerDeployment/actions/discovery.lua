-- Which Rainbow rollout actions Argo CD offers for a TemporalWorkerDeployment.
-- Each action edits spec.rollout (docs/cd-tools.md#actions); an
-- action that cannot do anything useful in the object's current state is
-- offered disabled.

local PAUSED = "argocd.temporal.io/paused-strategy"
local ABORT = "temporal.io/abort-rollout"

local rollout = obj.spec.rollout or {}
local strategy = rollout.strategy or "AllAtOnce"
local annotations = obj.metadata.annotations or {}
local pausedFrom = annotations[PAUSED]
local abortedBuild = annotations[ABORT]
local pausedField = rollout.paused == true
local deleting = obj.metadata.deletionTimestamp ~= nil

local st = obj.status or {}
local observed = st.observedGeneration ~= nil and st.observedGeneration == obj.metadata.generation
local target = st.targetVersion

local ready = false
if st.conditions ~= nil then
  for _, c in ipairs(st.conditions) do
    if c.type == "Ready" and c.status == "True" then
      ready = true
    end
  end
end
local rolling = observed and not ready and not deleting

-- promote-step: only while the target ramps at one of the steps and the
-- step's pause has not been cut to zero already.
local atStep = false
if strategy == "Progressive" and not pausedField and observed and target ~= nil and target.status == "Ramping" and rollout.steps ~= nil then
  for _, s in ipairs(rollout.steps) do
    if s.rampPercentage == target.rampPercentage and s.pauseDuration ~= "0s" then
      atStep = true
    end
  end
end

-- paused: spec.rollout.paused, or an older pause action's Manual strategy.
local pausedLegacy = strategy == "Manual" and (pausedFrom == "Progressive" or pausedFrom == "AllAtOnce")
local resumable = pausedField or pausedLegacy
local promotable = strategy == "Progressive" or (pausedField and strategy == "AllAtOnce") or pausedLegacy

-- abort: while the target, not current yet, is not aborted already. Not
-- under Manual: the controller writes no routing there, so it could not
-- remove a ramp (retry, or resume first).
local aborted = target ~= nil and abortedBuild ~= nil and abortedBuild == target.buildID
local abortable = rolling and strategy ~= "Manual" and target ~= nil and target.buildID ~= nil and target.status ~= "Current" and not aborted

local actions = {}
actions["pause"] = {disabled = deleting or strategy == "Manual" or pausedField}
actions["resume"] = {disabled = deleting or not resumable}
actions["promote-step"] = {disabled = not atStep or deleting or aborted}
actions["promote-full"] = {disabled = not rolling or not promotable or aborted}
actions["abort"] = {disabled = not abortable}
actions["retry"] = {disabled = deleting or abortedBuild == nil}
return actions
