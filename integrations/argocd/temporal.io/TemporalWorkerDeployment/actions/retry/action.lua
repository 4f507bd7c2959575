-- retry: undo abort. Removes the annotation temporal.io/abort-rollout, so
-- the controller takes the target's rollout up again under its strategy.

local ABORT = "temporal.io/abort-rollout"

local annotations = obj.metadata.annotations
if annotations == nil or annotations[ABORT] == nil then
  error("no rollout was aborted (annotation " .. ABORT .. ")")
end
annotations[ABORT] = nil
-- As in resume: no annotations at all deletes the last one.
if next(annotations) == nil then
  obj.metadata.annotations = nil
end
return obj
