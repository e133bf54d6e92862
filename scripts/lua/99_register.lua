---------------------------------------------------------------------------------------------------
-- register: the functions Redis calls, with their flags. Not part of any EVALSHA script.
-- keys:  none
-- state: none
---------------------------------------------------------------------------------------------------

-- REGISTER (the loader cuts the text here for EVALSHA mode)
-- Flags. The functions that add work to a bucket (sluice_admit, sluice_list_admit,
-- sluice_replay, sluice_list_replay) are registered WITHOUT allow-oom on purpose: when Redis
-- is over maxmemory it refuses them with an OOM error before they run, so admission stops
-- instead of growing the bucket past maxmemory (the producer sees the refusal). Everything that
-- drains or moves work already admitted (ack, dead, retry, reclaim, touch, list_take, list_ack,
-- list_dead, list_recover, prune, and the reads of paced and fair queues: take, fair_take,
-- lane_ack, lane_reclaim) keeps allow-oom, so a full Redis can still be drained and memory
-- freed (take and fair_take write only their few bytes of rate state). sluice_group (may
-- create the stream and group), sluice_limit (adds limiter state) and sluice_fair_config only
-- grow memory and are refused under OOM as well.
-- A function that drains or moves admitted work: allowed under OOM (see above).
-- Every function is registered through entry() (see limit_api): below, `redis` is the loader's
-- API with a register_function that wraps each callback so.
local register_function = redis.register_function
local redis = {register_function = function(spec, fn)
    if fn == nil then -- the table form: {function_name = ..., callback = ..., flags = ...}
        spec.callback = entry(spec.callback)
        return register_function(spec)
    end
    return register_function(spec, entry(fn))
end}
local function drains(name, fn)
    redis.register_function{function_name = name, callback = fn, flags = {'allow-oom'}}
end

redis.register_function('sluice_admit', admit)
drains('sluice_ack', ack)
drains('sluice_dead', dead)
drains('sluice_retry', retry)
drains('sluice_reclaim', drain_reclaim)
drains('sluice_touch', touch)
redis.register_function('sluice_list_admit', list_admit)
drains('sluice_list_take', list_take)
drains('sluice_list_ack', list_ack)
drains('sluice_list_dead', list_dead)
drains('sluice_list_recover', list_recover)
redis.register_function('sluice_replay', replay)
redis.register_function('sluice_list_replay', list_replay)
drains('sluice_prune', prune)
redis.register_function('sluice_group', group)
redis.register_function{function_name = 'sluice_version', callback = version,
    flags = {'no-writes', 'allow-stale'}}
redis.register_function('sluice_limit', limit)
redis.register_function('sluice_admit2', admit2)
redis.register_function('sluice_list_admit2', list_admit2)
redis.register_function('sluice_limits_config', limits_config)
drains('sluice_take', take)
drains('sluice_fair_take', fair_take)
drains('sluice_lane_ack', lane_ack)
drains('sluice_lane_reclaim', lane_reclaim)
redis.register_function('sluice_fair_config', fair_config)
