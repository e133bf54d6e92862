---------------------------------------------------------------------------------------------------
-- config: the only writers of a queue's fair mode, lane weights and limits.
-- keys:  sluice:{Q}:stream, :meta, :limits; derived: :lwait, :ring, :wake, :deficit, :weights,
--        :lanes
-- state: none
---------------------------------------------------------------------------------------------------

--[[ fair_config: switches a queue to fair or back, and sets lane weights.
KEYS[1] stream, KEYS[2] meta
ARGV 'on' | 'off' | 'weight' TENANT W (1..1000; 1 is the default and removes the setting)
reply: {fair (1|0), tenant lanes holding entries, lanes with undelivered entries}
on: the entries waiting undelivered in the stream (XLEN - the group's pending: acked entries are
deleted) become lane '', first in the ring; nothing moves. off: lane '' leaves the ring (the
stream is read as before); the tenant lanes keep being served until they are empty.
Errors: SLUICECONFIG (a list queue, a bad weight or tenant). ]]
local FAIR_MAX_WEIGHT = 1000

local function fair_config(keys, args)
    local K = queue_keys_of(keys[2], 'meta')
    if slot_migrating(K) then -- lanes, ring, weights: derived
        return slot_tryagain(K)
    end
    local op = args[1]
    local v = redis.call('HMGET', keys[2], 'backend', 'fair', 'group')
    if v[1] == 'list' then
        return redis.error_reply('SLUICECONFIG ' .. keys[2] .. ' is a list queue: fair queues ' ..
            'need the stream backend')
    end
    if op == 'on' then
        if v[2] ~= '1' then
            local undelivered = redis.call('XLEN', keys[1])
            if v[3] and undelivered > 0 then
                local p = redis.pcall('XPENDING', keys[1], v[3])
                if type(p) == 'table' and not p.err then
                    undelivered = undelivered - p[1]
                end
            end
            redis.call('HDEL', K.lwait, '')
            redis.call('LREM', K.ring, 0, '')
            if undelivered > 0 then
                redis.call('HSET', K.lwait, '', undelivered)
                redis.call('LPUSH', K.ring, '')
                redis.call('RPUSH', K.wake, 1)
                redis.call('LTRIM', K.wake, 0, 0)
            end
            redis.call('HSET', keys[2], 'fair', 1)
        end
    elseif op == 'off' then
        redis.call('HDEL', keys[2], 'fair')
        redis.call('HDEL', K.lwait, '')
        redis.call('HDEL', K.deficit, '')
        redis.call('LREM', K.ring, 0, '')
    elseif op == 'weight' then
        local tn, w = args[2], limit_int(args[3], 1, FAIR_MAX_WEIGHT)
        if type(tn) ~= 'string' or not w then
            return redis.error_reply('SLUICECONFIG weight ' ..
                string.format('%q', string.sub(tostring(args[3]), 1, 40)) ..
                ' is not an integer 1..' .. FAIR_MAX_WEIGHT)
        end
        if w == 1 then
            redis.call('HDEL', K.weights, tn)
        else
            redis.call('HSET', K.weights, tn, w)
        end
    else
        return redis.error_reply('SLUICECONFIG fair_config: on, off or weight')
    end
    return {redis.call('HGET', keys[2], 'fair') == '1' and 1 or 0,
        redis.call('HLEN', K.lanes), redis.call('LLEN', K.ring)}
end

--[[ limits_config: the only writer of a queue's limits, so that meta `limits` always counts
them and every spec is valid before anyone admits with it.
KEYS[1] sluice:{Q}:limits, KEYS[2] meta
ARGV 'set' NAME SCOPE SPEC | 'del' NAME
reply: the number of limits now configured. Errors: SLUICECONFIG naming the bad value (a drain or
inflight scope on a list queue too). ]]
local function limits_config(keys, args)
    local op, name = args[1], args[2]
    if type(name) ~= 'string' or #name > 64 or not string.match(name, LIMIT_NAME_PATTERN) then
        return redis.error_reply('SLUICECONFIG limit name ' ..
            string.format('%q', string.sub(tostring(name), 1, 80)) ..
            ' is not 1..64 of A-Z a-z 0-9 _ . -')
    end
    if op == 'set' then
        local scope = args[3]
        if not ADMISSION_SCOPES[scope] and not DRAIN_SCOPES[scope] then
            return redis.error_reply('SLUICECONFIG scope ' ..
                string.format('%q', string.sub(tostring(scope), 1, 40)) ..
                ' is not one of queue, tenant, client, drain, drain-tenant, inflight, ' ..
                'inflight-tenant')
        end
        if COUNT_SCOPES[scope] then
            if not limit_int(args[4], 1, LIMIT_MAX_COUNT) then
                return redis.error_reply('SLUICECONFIG ' .. scope ..
                    ' takes a count 1..1000000000, not ' ..
                    string.format('%q', string.sub(tostring(args[4]), 1, 40)))
            end
        else
            local l = limit_spec(1, args[4])
            if l.err then
                return l
            end
        end
        -- list workers read with LMOVE, past any limit: refused rather than ignored
        -- (docs/faults.md B32)
        if DRAIN_SCOPES[scope] and redis.call('HGET', keys[2], 'backend') == 'list' then
            return redis.error_reply('SLUICECONFIG ' .. keys[2] .. ' is a list queue: ' .. scope ..
                ' limits need the stream backend')
        end
        redis.call('HSET', keys[1], name, scope .. ' ' .. args[4])
    elseif op == 'del' then
        redis.call('HDEL', keys[1], name)
    else
        return redis.error_reply('SLUICECONFIG limits_config: set or del')
    end
    -- admission reads `limits`, workers `drain`: each learns with one field whether to look
    local raw = redis.call('HGETALL', keys[1])
    local adm, drn = 0, 0
    for i = 2, #raw, 2 do
        local scope = string.match(raw[i], '^(%S+)')
        if DRAIN_SCOPES[scope] then
            drn = drn + 1
        else
            adm = adm + 1
        end
    end
    -- and every reader that the hash changed: a new version (see queue_limits)
    now_us(true) -- the clock's text too (a version is its text)
    redis.call('HSET', keys[2], 'limits', adm, 'drain', drn, 'limits_v', now_text)
    return #raw / 2
end
