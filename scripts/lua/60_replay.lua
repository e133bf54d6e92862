---------------------------------------------------------------------------------------------------
-- replay: dead letters back into the queue, for both backends.
-- keys:  sluice:{Q}:dead, :stream or :list, :meta, :stats; derived: :tdepth and the lanes
-- state: none
---------------------------------------------------------------------------------------------------

-- The `m` field of dead letter `id`: its body, '' when it has none, nil when the letter is gone.
local function dead_body(dead, id)
    local e = redis.call('XRANGE', dead, id, id)
    if not e[1] then
        return nil
    end
    return field_m(e[1][2]) or '', field(e[1][2], 'k'), field(e[1][2], 'lane')
end

-- The loop of replay and list_replay. `depth` is the bucket's depth now; append(body) queues
-- one body. Outcome codes follow the counters' order: 0 replayed, 1 not fit, 2 skipped,
-- 3 missing.
local function replay_letters(keys, args, cap, depth, append, fits)
    local counts = {0, 0, 0, 0}
    local outcomes = {}
    for i = 2, #args do
        local body, tenant, lane = dead_body(keys[4], args[i])
        local o = 1
        if body == nil then
            o = 3
        elseif body == '' then
            o = 2
        elseif depth < cap and (not fits or fits(tenant)) then
            append(body, tenant, lane)
            redis.call('XDEL', keys[4], args[i])
            depth = depth + 1
            o = 0
        end
        counts[o + 1] = counts[o + 1] + 1
        outcomes[i - 1] = o
    end
    if counts[1] > 0 then
        COUNT.add(keys[3], 'admitted', counts[1])
    end
    return {counts[1], counts[2], counts[3], counts[4], depth, cap, outcomes}
end

--[[ replay (stream backend): put dead letters back into the queue, in order, while they fit,
and delete exactly the replayed ones from the dead stream - one atomic step, so a lost
connection cannot leave a letter both queued and dead. A letter that does not fit is not a
rejection: `rejected` does not move.
KEYS[1] stream, KEYS[2] meta, KEYS[3] stats, KEYS[4] dead
ARGV[1] default capacity (used when meta has no `capacity`), ARGV[2..] dead-letter ids
reply: {replayed, not_fit, skipped, missing, depth_after, capacity, outcomes}; skipped letters
have an empty body (stay dead), missing ones are not in the dead stream; outcomes[i] tells what
happened to ARGV[1 + i]: 0 replayed, 1 not fit (stays dead), 2 skipped, 3 missing.
errors: SLUICECONFIG (an invalid capacity, or meta records the list backend; nothing written),
ERR (a dead-letter id that is not a stream id), WRONGTYPE (KEYS[1] or KEYS[4] is not a stream,
KEYS[2] or KEYS[3] not a hash) ]]
local function replay(keys, args)
    local K = queue_keys_of(keys[2], 'meta')
    if slot_migrating(K) then -- tdepth, lanes: derived (see slot_migrating)
        return slot_tryagain(K)
    end
    local cap, _, _, share, fair, lane_depth = queue_settings(keys[2], args[1], 'stream')
    if type(cap) == 'table' then
        return cap
    end
    local tk = K.tdepth
    local fair_append, finish
    if fair then
        fair_append, finish = fair_appender(K)
    end
    local r = replay_letters(keys, args, cap, redis.call('XLEN', keys[1]) + lane_depth,
        function(body, tenant, lane)
            if tenant then -- admitted under a share: counted again in its tenant's
                COUNT.add(tk, tenant, 1)
            end
            if fair_append then -- back into its lane (a letter of a tenant lane names it)
                fair_append(body, tenant or lane, tenant ~= nil)
            elseif tenant then
                redis.call('XADD', keys[1], '*', 'm', body, 'k', tenant)
            else
                redis.call('XADD', keys[1], '*', 'm', body)
            end
        end, function(tenant)
            return share == 0 or not tenant or
                (COUNT.get(tk, tenant) or 0) < share
        end)
    if finish then
        finish()
    end
    return r
end

--[[ list_replay (list backend): replay onto the list, as list_admit appends.
KEYS[1] list, KEYS[2] meta, KEYS[3] stats, KEYS[4] dead
ARGV as replay. reply as replay.
errors: SLUICECONFIG (an invalid capacity, or meta records the stream backend; nothing
written), ERR (a dead-letter id that is not a stream id), WRONGTYPE (KEYS[1] is not a list,
KEYS[4] not a stream, KEYS[2] or KEYS[3] not a hash) ]]
local function list_replay(keys, args)
    local cap, depth = queue_settings(keys[2], args[1], 'list')
    if type(cap) == 'table' then
        return cap
    end
    return replay_letters(keys, args, cap, depth, function(body)
        local seq = COUNT.add(keys[2], 'list_seq', 1)
        redis.call('LPUSH', keys[1], tostring(seq) .. ':' .. body)
        COUNT.add(keys[2], 'list_depth', 1)
    end)
end
