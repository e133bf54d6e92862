---------------------------------------------------------------------------------------------------
-- reclaim: redeliveries within the drain limits - drain_reclaim (the stream) and
-- lane_reclaim (a fair queue's tenant lanes).
-- keys:  sluice:{Q}:stream, :stats; derived: :meta, :limits, :qlim:..., :lanes, :lwait, :lane:T
-- state: none
---------------------------------------------------------------------------------------------------

--[[ A redelivery takes drain units as a read does (docs/faults.md F35): a reclaim pass claims
no more than the queue's `drain` rates allow now (and, from a fair queue's lane, its tenant's
`drain-tenant` rates, which fair_take applies to the lane) and counts what it claimed in them, so
retried and reclaimed entries never take the pool past its drain limits. `inflight` is not checked: a
reclaimed entry was in flight already. A queue without drain limits pays one HGET a pass. ]]
local RECLAIM_SCOPES = {drain = true, ['drain-tenant'] = true}

-- Caps n by the pool's `drain` rates (pool) and lane tn's `drain-tenant` rates (tn not nil).
-- Returns n, wait (us: when the next unit is allowed, if none is) and the rates to count the
-- claimed entries in; or nil, the error reply.
local function claim_caps(lims, pool, tn, n, now)
    local wait, rates = 0, {}
    for _, lim in ipairs(lims) do
        local key = lim.scope == 'drain' and pool and lim.key or nil
        if lim.scope == 'drain-tenant' and tn then
            key = lim.key .. tn
        end
        if key then
            n, wait = rate_cap(lim, key, n, wait, now)
            if not n then
                return nil, wait
            end
            rates[#rates + 1] = {lim, key}
        end
    end
    return n, wait, rates
end

-- The drain limits a reclaim pass honours, the time, and the lane of the queue's stream ('' on
-- a fair queue, whose fair_take reads the stream as lane '': nil on a plain one). Meta `drain`
-- says first whether there are any (an HGET a worker's ACL grants: HGETALL only when there are).
-- While the queue's slot migrates the pass waits: TRYAGAIN, as for the reads (slot_migrating).
local function claim_start(K)
    if slot_migrating(K) then -- meta, limits, their state and lanes: derived
        return slot_tryagain(K), 0, nil
    end
    if (COUNT.get(K.meta, 'drain') or 0) <= 0 then
        return {}, 0, nil
    end
    local now = now_us()
    local lims = queue_limits(K, RECLAIM_SCOPES, now)
    local fair = nil
    for _, lim in ipairs(lims) do
        if lim.scope == 'drain-tenant' and fair == nil then
            fair = redis.call('HGET', K.meta, 'fair') == '1'
        end
    end
    return lims, now, fair and '' or nil
end

--[[ reclaim with drain limits (the function sluice_reclaim): as reclaim, claiming at most what
the drain limits allow. reply: as reclaim's; when they allow nothing now while an entry is due,
a fourth element: the ms until they allow the next unit (the worker gives that unit to its next
pass before its next read, so redeliveries are not starved by new reads). ]]
local function drain_reclaim(keys, args)
    local lims, now, tn = claim_start(queue_keys_of(keys[2], 'stats'))
    if lims.err then
        return lims
    elseif #lims == 0 then
        return reclaim(keys, args)
    end
    local n, wait, rates = claim_caps(lims, true, tn, tonumber(args[5]) or 0, now)
    if not n then
        return wait
    end
    if n <= 0 then
        local due = redis.call('XPENDING', keys[1], args[1], 'IDLE', args[3], '-', '+', 1)
        return {args[4], {}, {}, #due > 0 and math.max(1, math.ceil(wait / 1000)) or 0}
    end
    local r = reclaim(keys, {args[1], args[2], args[3], args[4], tostring(n)})
    if #r[2] > 0 then
        rates_count(rates, now, #r[2])
    end
    return r
end

--[[ lane_reclaim (fair queues): reclaim for the tenant lanes (the stream goes through reclaim).
Walks sluice:{Q}:lanes with HSCAN; a lane with entries in flight (entries > undelivered) is
reclaimed as reclaim does (from its start, up to what is left of the count), within the drain
limits as drain_reclaim: the pool's `drain` rates cap the whole pass, a lane's `drain-tenant`
rates its own part (a lane they hold is passed over until a later pass). A lane holding more
than its count and its entries in flight say (XLEN > undelivered + pending: a grant never read)
is counted again (lane_recount).
KEYS[1] stream, KEYS[2] stats
ARGV[1] group, ARGV[2] consumer, ARGV[3] min idle ms, ARGV[4] HSCAN cursor ('0' to start),
ARGV[5] count
reply: {next_cursor ('0': the walk is complete), {lane, entries (as reclaim's), ...}}; when the
count runs out inside a batch the cursor does not move (the batch is looked at again). When the
pool's rates allow nothing now: {ARGV[4], {}, ms until they allow the next unit}. ]]
local function lane_reclaim(keys, args)
    local K = queue_keys_of(keys[2], 'stats')
    local lims, now = claim_start(K)
    if lims.err then
        return lims
    end
    if args[4] == '0' then -- a walk starts: lanes a ring lost by hand rejoin it
        K:ring_repair()
    end
    local budget, wait, pool = claim_caps(lims, true, nil, tonumber(args[5]) or 0, now)
    if not budget then
        return wait
    end
    if budget <= 0 and #pool > 0 then
        return {args[4], {}, math.max(1, math.ceil(wait / 1000))}
    end
    local claimed = 0
    local scan = redis.call('HSCAN', K.lanes, args[4], 'COUNT', 32)
    local out, cursor = {}, scan[1]
    for i = 1, #scan[2], 2 do
        local tn = scan[2][i]
        if budget <= 0 then
            cursor = args[4]
            break
        end
        local waits = COUNT.get(K.lwait, tn) or 0
        if (COUNT.of(scan[2][i + 1]) or 0) > waits then
            local r = redis.pcall('XPENDING', K:lane(tn), args[1])
            if type(r) == 'table' and not r.err then
                lane_recount(K, tn, redis.call('XLEN', K:lane(tn)) - waits - r[1])
            end
            local k, err, rates = budget, nil, {}
            if type(r) == 'table' and not r.err and r[1] > 0 then
                k, err, rates = claim_caps(lims, false, tn, budget, now)
                if not k then
                    return err
                end
            end
            if type(r) == 'table' and not r.err and r[1] > 0 and k > 0 then
                local c = reclaim({K:lane(tn), keys[2]},
                    {args[1], args[2], args[3], '0-0', tostring(k)})
                if #c[2] > 0 then
                    out[#out + 1] = tn
                    out[#out + 1] = c[2]
                    budget = budget - #c[2]
                    claimed = claimed + #c[2]
                    rates_count(rates, now, #c[2])
                end
            end
        end
    end
    if claimed > 0 then
        rates_count(pool, now, claimed)
    end
    return {cursor, out}
end
