---------------------------------------------------------------------------------------------------
-- capacity: the admission rule of both backends (a capacity, how many fit, the rejections).
-- keys:  sluice:{Q}:meta (capacity, backend, list_depth, limits, per_tenant, fair, lane_depth),
--        sluice:{Q}:stats (rejected, acked)
-- state: the last capacity text parsed and its value (a cache of a pure function)
---------------------------------------------------------------------------------------------------

-- A capacity is an integer 0..2^53 written in decimal digits, nothing else (no sign, point,
-- exponent, hex, inf or nan): the rule every reader applies (sluice_capacity_parse in C).
-- 0 is a closed bucket: everything is rejected as full. The last text parsed is kept with its
-- value (a queue's capacity is read call after call, and its pattern match is a third of a
-- plain admission's Lua).
local capacity_memo = {false, nil}
local function parse_capacity(s)
    if s == capacity_memo[1] then
        return capacity_memo[2]
    end
    local raw = s
    if type(s) ~= 'string' or #s == 0 or #s > 16 or not string.match(s, '^%d+$') then
        return nil
    end
    -- compared as text: doubles cannot tell 2^53 from 2^53 + 1
    s = string.gsub(s, '^0+(%d)', '%1')
    if #s == 16 and s > '9007199254740992' then
        return nil
    end
    capacity_memo[1], capacity_memo[2] = raw, tonumber(s)
    return capacity_memo[2]
end

-- The settings of a queue that admits or replays, read with one HMGET of its meta hash:
-- the capacity in force (meta's `capacity`, else the caller's default) and the list depth.
-- Everything is checked before anything is written, so a bad capacity never admits part of a
-- batch. The backend a queue was created with is recorded (`backend`) by its first admission;
-- a client of the other backend is refused instead of silently splitting the queue in two
-- (docs/faults.md B19). Returns capacity, list depth (0 for streams), or an error reply.
local function queue_settings(meta, default, backend)
    local v, depth, limits, share, fair, lanes -- a stream has no list_depth, a list no lanes
    if backend == 'stream' then
        v = r_call('HMGET', meta, 'capacity', 'backend', 'limits', 'per_tenant', 'fair',
            'lane_depth')
        depth, limits, share, fair, lanes = false, v[3], v[4], v[5], v[6]
    else
        v = redis.call('HMGET', meta, 'capacity', 'backend', 'list_depth', 'limits', 'per_tenant')
        depth, limits, share = v[3], v[4], v[5]
    end
    local raw = v[1] or default
    local cap = parse_capacity(raw)
    if cap == nil then
        return redis.error_reply('SLUICECONFIG invalid capacity ' .. string.format('%q',
            string.sub(tostring(raw), 1, 40)) .. ' in ' .. meta ..
            ' (an integer 0..9007199254740992)')
    end
    if not v[2] then -- HSETNX: what a producer's ACL allows on meta (docs/guarantees.md, Least privilege)
        redis.call('HSETNX', meta, 'backend', backend)
    elseif v[2] ~= backend then
        return redis.error_reply('SLUICECONFIG ' .. meta .. ' is a ' .. v[2] ..
            ' queue; this client uses the ' .. backend .. ' backend')
    end
    -- the optional fields are mostly absent: converted only when there
    return cap, depth and COUNT.of(depth) or 0, limits and COUNT.of(limits) or 0,
        share and COUNT.of(share) or 0, fair == '1', lanes and COUNT.of(lanes) or 0
end

-- Callers of the first admission functions (sluice_admit, sluice_list_admit) know nothing of
-- limits: once a queue has some, they are refused rather than let past them.
local function refuse_v1(meta)
    return redis.error_reply('SLUICECONFIG ' .. meta .. ' has rate limits; this client ' ..
        'predates them (it calls sluice_admit, limits need sluice_admit2)')
end

-- How many of n envelopes fit: the admission rule, in one place for both backends.
local function room(cap, depth, n)
    local take = cap - depth
    if take > n then
        return n
    elseif take < 0 then
        return 0
    end
    return take
end

-- Counts rejections and puts the `acked` counter into reply[5] (for the drain-rate estimate
-- behind Retry-After) when there were any. A tentative call's are not counted: the producer
-- tries another partition, which counts the message's final outcome.
local function count_rejected(stats, rejected, reply, tentative)
    if rejected > 0 then
        if not tentative then
            COUNT.add(stats, 'rejected', rejected)
        end
        reply[5] = COUNT.get(stats, 'acked') or 0
    end
end
