---------------------------------------------------------------------------------------------------
-- register: the functions Redis calls, with their flags, and the modules each function's
-- EVALSHA script carries. Not part of any EVALSHA script.
-- keys:  none
-- state: none
---------------------------------------------------------------------------------------------------

--[[ The EVALSHA form of each function (servers without FUNCTION, or when forced): a script of
the modules the function needs, in library order, then `return entry(<local>)(KEYS, ARGV)`.
scripts.c builds it from the line "-- @needs <local>: <modules>" below (and the "-- @module"
lines the build puts before each module), so a call re-creates only what it uses. A module may
be cut in parts by "-- @module NAME" lines of its own, each listed where it is needed: base's
field reads (base_fields), key tables (base_keys) and slot-migration check (base_slots), which
sluice_limit and the list functions leave out, and the limiter's refunds (limiter_refund), which
only the reads that give units back (pacing, fair) carry. A module needs the modules whose
locals it names; test_lua_scripts checks that no script names a local it does not define, and
that a script calling a refund carries limiter_refund (it defines no local). ]]
-- @needs admit: base base_keys base_slots capacity lanes limiter queue_limits admission
-- @needs admit2: base base_keys base_slots capacity lanes limiter queue_limits admission
-- @needs list_admit: base base_keys base_slots capacity lanes limiter queue_limits admission
-- @needs list_admit2: base base_keys base_slots capacity lanes limiter queue_limits admission
-- @needs ack: base base_fields base_keys base_slots share lanes stream
-- @needs dead: base base_fields base_keys base_slots share lanes stream
-- @needs retry: base base_fields base_keys base_slots share lanes stream
-- @needs touch: base base_fields base_keys base_slots share lanes stream
-- @needs prune: base base_fields base_keys base_slots share lanes stream
-- @needs group: base base_fields base_keys base_slots share lanes stream
-- @needs drain_reclaim: base base_fields base_keys base_slots share lanes stream limiter limiter_refund queue_limits pacing reclaim
-- @needs lane_reclaim: base base_fields base_keys base_slots share lanes stream limiter limiter_refund queue_limits pacing reclaim
-- @needs list_take: base list
-- @needs list_ack: base list
-- @needs list_dead: base list
-- @needs list_recover: base list
-- @needs replay: base base_fields base_keys base_slots capacity lanes replay
-- @needs list_replay: base base_fields base_keys base_slots capacity lanes replay
-- @needs clear: base base_fields base_keys base_slots share lanes list clear
-- @needs list_clear: base base_fields base_keys base_slots share lanes list clear
-- @needs version: base
-- @needs limit: base limiter standalone
-- @needs limits_config: base base_keys base_slots limiter queue_limits config
-- @needs fair_config: base base_keys base_slots limiter queue_limits config
-- @needs take: base base_fields base_keys base_slots limiter limiter_refund queue_limits pacing
-- @needs fair_take: base base_fields base_keys base_slots share lanes stream limiter limiter_refund queue_limits pacing fair
-- @needs lane_ack: base base_fields base_keys base_slots share lanes stream limiter limiter_refund queue_limits pacing fair
-- @needs fair_grant: base base_fields base_keys base_slots share lanes stream limiter limiter_refund queue_limits pacing fair
-- @needs fair_refund: base base_fields base_keys base_slots share lanes stream limiter limiter_refund queue_limits pacing fair

-- Flags. The functions that add work to a bucket (sluice_admit, sluice_list_admit,
-- sluice_replay, sluice_list_replay) are registered WITHOUT allow-oom on purpose: when Redis
-- is over maxmemory it refuses them with an OOM error before they run, so admission stops
-- instead of growing the bucket past maxmemory (the producer sees the refusal). Everything that
-- drains or moves work already admitted (ack, dead, retry, reclaim, touch, list_take, list_ack,
-- list_dead, list_recover, prune, clear, list_clear, and the reads of paced and fair queues:
-- take, fair_take, fair_grant, fair_refund, lane_ack, lane_reclaim) keeps allow-oom, so a full
-- Redis can still be drained and memory freed (take and fair_take write only their few bytes of
-- rate state). sluice_group (may create the stream and group), sluice_limit (adds limiter state)
-- and sluice_fair_config only grow memory and are refused under OOM as well.
-- A function that drains or moves admitted work: allowed under OOM (see above).
-- Every function is registered through entry() (see on_fresh_state): below, `redis` is the
-- loader's API with a register_function that wraps each callback so.
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
drains('sluice_fair_grant', fair_grant)
drains('sluice_fair_refund', fair_refund)
redis.register_function('sluice_fair_config', fair_config)
drains('sluice_clear', clear)
drains('sluice_list_clear', list_clear)
