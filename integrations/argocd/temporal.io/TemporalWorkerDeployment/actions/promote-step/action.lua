-- promote-step: end the current ramp step now. Sets the pauseDuration of the
-- step the target ramps at to 0s, so the controller moves to the next step
-- (or, after the last step, makes the target current) on its next
-- reconcile, after checking again that the target's workers poll.

local rollout = obj.spec.rollout
local st = obj.status
if rollout == nil or rollout.strategy ~= "Progressive" then
  error("promote-step needs spec.rollout.strategy Progressive")
end
if rollout.paused == true then
  error("spec.rollout.paused is true: resume first, or promote-full")
end
if st == nil or st.observedGeneration ~= obj.metadata.generation then
  error("the controller has not observed the latest spec yet; try again in a moment")
end
local target = st.targetVersion
if target == nil or target.status ~= "Ramping" or target.rampPercentage == nil then
  error("the target version is not ramping, so there is no step to end")
end
local found = false
for _, s in ipairs(rollout.steps or {}) do
  if s.rampPercentage == target.rampPercentage then
    s.pauseDuration = "0s"
    found = true
  end
end
if not found then
  error("the target ramps at a percentage that is not one of spec.rollout.steps; the controller moves on to the next step by itself")
end
return obj
