-- Argo CD health of a Rainbow TemporalWorkerDeployment (temporal.io/v1alpha1).
--
-- Reads the conditions the controller writes (docs/conditions.md), and only
-- those written for the spec Argo CD applied (their observedGeneration):
--   Healthy      Ready=True (RolloutComplete): the target version is current
--   Degraded     blocked: Stalled=True, or Progressing=False with a reason
--                other than RolloutComplete (a failed gate, a missing
--                connection, Temporal unreachable, another manager, ...)
--   Suspended    waiting for a person: spec.rollout.paused holds the rollout
--                (Progressing reason Paused), or the strategy is Manual (in
--                git, or set by an older pause action) and the target waits
--                for promotion
--   Progressing  everything else: no status yet, a spec the controller has
--                not observed yet, workers starting, a gate running, a ramp
--
-- Plain Lua only (base and table libraries), as Argo CD runs it.

local function find(conditions, kind)
  if conditions == nil then
    return nil
  end
  for _, c in ipairs(conditions) do
    if c.type == kind then
      return c
    end
  end
  return nil
end

local function text(c)
  local reason = c.reason or ""
  if c.message == nil or c.message == "" then
    return reason
  end
  return reason .. ": " .. c.message
end

local generation = obj.metadata.generation
local st = obj.status
if st == nil or st.conditions == nil then
  return {status = "Progressing", message = "waiting for the Rainbow controller to write status"}
end
if generation ~= nil and st.observedGeneration ~= generation then
  return {status = "Progressing", message = "the Rainbow controller has not observed this spec (generation " .. generation .. ") yet"}
end

-- A condition only counts if it describes this generation.
local function current(kind)
  local c = find(st.conditions, kind)
  if c ~= nil and generation ~= nil and c.observedGeneration ~= nil and c.observedGeneration ~= generation then
    return nil
  end
  return c
end

local ready, progressing, stalled = current("Ready"), current("Progressing"), current("Stalled")

-- Blocked comes first: a blocked rollout is never Healthy.
if stalled ~= nil and stalled.status == "True" then
  return {status = "Degraded", message = text(stalled)}
end
if progressing ~= nil and progressing.status == "False" and progressing.reason ~= "RolloutComplete" then
  return {status = "Degraded", message = text(progressing)}
end

if ready ~= nil and ready.status == "True" then
  return {status = "Healthy", message = text(ready)}
end

if progressing == nil or progressing.status ~= "True" then
  return {status = "Progressing", message = "waiting for the Progressing condition of this generation"}
end

if progressing.reason == "Paused" then
  return {status = "Suspended", message = text(progressing)}
end

local strategy = "AllAtOnce"
if obj.spec ~= nil and obj.spec.rollout ~= nil and obj.spec.rollout.strategy ~= nil then
  strategy = obj.spec.rollout.strategy
end
if strategy == "Manual" and progressing.reason == "WaitingForPromotion" then
  -- Under Manual, WaitingForPromotion also covers a gate that has not
  -- passed yet; that is still progressing by itself.
  local gatePending = false
  if obj.spec.rollout.gate ~= nil then
    local target = st.targetVersion
    local gate = st.gate
    gatePending = target == nil or gate == nil or gate.buildID ~= target.buildID or gate.result ~= "Succeeded"
  end
  if not gatePending then
    local annotations = obj.metadata.annotations
    if annotations ~= nil and annotations["argocd.temporal.io/paused-strategy"] ~= nil then
      return {status = "Suspended", message = "paused (the pause action set spec.rollout.strategy to Manual; resume restores " ..
        annotations["argocd.temporal.io/paused-strategy"] .. "): " .. text(progressing)}
    end
    return {status = "Suspended", message = text(progressing)}
  end
end

return {status = "Progressing", message = text(progressing)}
