---------------------------------------------------------------------------------------------------
-- lanes: the data structure of fair queues (tenant lanes, the ring, the counts), shared by
-- admission, replay, acks and the fair reads.
-- keys:  sluice:{Q}:stream (lane ''), sluice:{Q}:lane:T, sluice:{Q}:lanes, :lwait, :ring,
--        :deficit, :weights, :served, :wake, meta lane_depth / lane_wait
-- state: none
---------------------------------------------------------------------------------------------------

--[[ Fair queues (meta `fair` = 1, stream backend). Entries are kept per tenant in lanes: the
tenant T's lane is the stream sluice:{Q}:lane:T (entries carry `k` = T), drained by the queue's
consumer group; entries without a tenant stay in sluice:{Q}:stream, which is lane '' (so a
queue switched to fair keeps what waits in it, as the first lane). All in the queue's slot.
  sluice:{Q}:lanes   hash  T -> entries in lane T (waiting + in flight; '' is not in it: the
                           stream's XLEN counts it); meta `lane_depth` is their sum, so
                           depth = XLEN(stream) + lane_depth, kept by admit/replay/ack/dead only
  sluice:{Q}:lwait   hash  T -> entries of lane T not yet delivered ('' included while fair);
                           meta `lane_wait` sums the tenant lanes' (in flight = lane_depth -
                           lane_wait + the stream's pending)
  sluice:{Q}:ring    list  the lanes with undelivered entries, in round-robin order
  sluice:{Q}:deficit hash  T -> what lane T may still take in its turn (deficit round robin)
  sluice:{Q}:weights hash  T -> weight (default 1): entries per turn
  sluice:{Q}:served  hash  T -> entries delivered from lane T since it last held nothing (it
                           goes with the lane: an idle tenant keeps no state but its weight)
  sluice:{Q}:wake    list  at most one token: pushed when a lane gets its first undelivered
                           entry (or a take leaves backlog), popped by an idle worker's BLPOP
A lane's undelivered count only guides the order: a read that returns less than it asked for
proves the lane empty, and the lane leaves the ring then, whatever the count said. ]]
-- K:wake_up and K:ring_repair are key functions of a fair queue kept with the lanes (every
-- function calling them carries this module in its EVALSHA script).
-- Leaves the wake-up token of a fair queue (sluice:{Q}:wake holds at most one); a key of another
-- type there (never sluice's) is replaced, so it never fails a call that wrote before.
function KEY_FNS.wake_up(K)
    local n = r_pcall('LLEN', K.wake)
    if n ~= 0 then
        if l_type(n) == 'number' then
            return
        end
        r_call('DEL', K.wake)
    end
    r_call('RPUSH', K.wake, '1')
end
--[[ A fair queue's ring made whole again; returns the lanes put back. After every call the ring
holds each lane with entries undelivered (a field of lwait above 0) once: a lane joins it when its
count leaves 0 and leaves it with its field. A ring deleted or trimmed by hand (or a key of
another type there, deleted) would leave the lanes it held out of every read for good, as none
of them leaves 0 again. The lane reclaim pass asks at the start of each walk (two lengths); a
ring shorter than lwait is made whole: the lanes missing from it go to its back, and fields at 0
that no lane of it holds go. A ring of another type is left alone (its calls answer WRONGTYPE). ]]
function KEY_FNS.ring_repair(K)
    local have, want = r_pcall('LLEN', K.ring), r_pcall('HLEN', K.lwait)
    if l_type(have) ~= 'number' or l_type(want) ~= 'number' or have >= want then
        return 0
    end
    local in_ring, add, zero = {}, {}, {}
    for _, t in ipairs(r_call('LRANGE', K.ring, 0, -1)) do
        in_ring[t] = true
    end
    local all = r_call('HGETALL', K.lwait)
    for i = 1, #all, 2 do
        local t = all[i]
        if not in_ring[t] then
            local list = (COUNT.of(all[i + 1]) or 0) > 0 and add or zero
            list[#list + 1] = t
        end
    end
    for i = 1, #zero do
        r_call('HDEL', K.lwait, zero[i])
    end
    for i = 1, #add, 1000 do -- (unpack has a bound: the ring grows by 1,000 a command)
        r_call('RPUSH', K.ring, unpack(add, i, math.min(i + 999, #add)))
    end
    if #add > 0 then
        K:wake_up()
    end
    return #add
end

-- Counts entries just added to lanes (added: tenant -> n, order: the tenants in first-added
-- order), puts lanes that had nothing undelivered into the ring and leaves a wake-up token.
local function lanes_added(K, added, order)
    local depth, wait, woke = 0, 0, false
    for _, t in ipairs(order) do
        local c = added[t]
        if t ~= '' then
            COUNT.add(K.lanes, t, c)
            depth, wait = depth + c, wait + c
        end
        if COUNT.add(K.lwait, t, c) == c then
            redis.call('RPUSH', K.ring, t)
            woke = true
        end
    end
    if depth > 0 then
        COUNT.add(K.meta, 'lane_depth', depth)
        COUNT.add(K.meta, 'lane_wait', wait)
    end
    if woke then
        K:wake_up()
    end
end

-- Lane tn holds `gap` (> 0) undelivered entries its count does not have: counted again, and the
-- lane goes back into the ring (with a wake-up token) if it had left it. Two callers: the reclaim
-- pass over the lanes (a fair_grant whose worker died or lost its link before it read: the
-- lane's XLEN less its pending entries less its count; a grant another worker is reading just
-- now looks the same, and the lane is then counted too high for a while, which the grants that
-- follow use up, each read short and refunded) and fair_refund of grants whose read failed.
local function lane_recount(K, tn, gap)
    if gap <= 0 then
        return
    end
    if tn ~= '' then
        COUNT.add(K.meta, 'lane_wait', gap)
    end
    if COUNT.add(K.lwait, tn, gap) == gap then
        redis.call('RPUSH', K.ring, tn)
        K:wake_up()
    end
end

-- Counts n entries deleted from tenant lane t (ack, dead, clear: deleted before this). An empty
-- lane's stream goes (with its group, made again when the lane is next read) and its served
-- count: tenants come and go, their lanes with them, and an idle tenant keeps nothing. The
-- stream itself says it is empty: a count that reads 0 or less while entries are left (a count
-- written by hand, which COUNT.add reads as none, or one that drifted) is set to what is left,
-- never taken for an empty lane, whose stream would go with those entries. `later`: meta
-- `lane_depth` is left to the caller, which counts the returned number out of it once for
-- several lanes.
local function lane_removed(K, t, n, later)
    if t == '' or n <= 0 then
        return 0
    end
    if COUNT.add(K.lanes, t, -n) <= 0 then
        local left = redis.call('XLEN', K:lane(t))
        if left > 0 then
            redis.call('HSET', K.lanes, t, left)
        else
            redis.call('HDEL', K.lanes, t)
            redis.call('HDEL', K.served, t)
            redis.call('DEL', K:lane(t))
        end
    end
    if not later then
        COUNT.add(K.meta, 'lane_depth', -n)
    end
    return n
end

-- An admission's or replay's way into a fair queue: append(env, tenant, counted) adds to the
-- tenant's lane and notes it; finish() does the counting once for the whole call. The field `k`
-- keeps meaning "counted in the tenant's share" (counted): a lane's tenant is in its key.
local function fair_appender(K)
    local added, order = {}, {}
    local function append(env, tenant, counted)
        tenant = tenant or ''
        if not added[tenant] then
            added[tenant] = 0
            order[#order + 1] = tenant
        end
        added[tenant] = added[tenant] + 1
        if counted then
            return redis.call('XADD', K:lane(tenant), '*', 'm', env, 'k', tenant)
        end
        return redis.call('XADD', K:lane(tenant), '*', 'm', env)
    end
    local function finish()
        lanes_added(K, added, order)
    end
    return append, finish
end
