---------------------------------------------------------------------------------------------------
-- fair: the fair queue's read (fair_take, deficit round robin over the ring) and lane_ack.
-- keys:  sluice:{Q}:stream, :meta, :stats; derived: :lane:T, :lanes, :lwait, :ring, :deficit,
--        :weights, :served, :wake, :tdepth, :limits, :qlim:...
-- state: none
---------------------------------------------------------------------------------------------------

--[[ fair_take (fair queues, and a queue switched back from fair while its lanes drain): a
worker's read. Serves the lanes of the ring in deficit round robin: a lane whose turn comes gets
its weight (sluice:{Q}:weights, default 1) added to its deficit and gives up to that many
entries, so over time each lane with backlog gets its weight's share of the reads whatever its
backlog. Before it reads, as sluice_take: the pool's `drain` rates and `inflight` count cap n;
per lane, `drain-tenant` rates and `inflight-tenant` counts cap what the lane may give now - a
lane over them is passed over (its turn moves to the back) without holding back the lanes
behind it. Each call makes one round over the head of the ring (at most FAIR_MAX_VISITS lanes);
a lane's turn gives weight x ceil(n / lanes visited) entries, so a big read is filled by a few
lanes at once and a read of 1 takes 1 from each lane in turn. Only what was read is counted in the rates. Lanes are created with the
group (at id 0) the first time they are read.
KEYS[1] stream, KEYS[2] meta
ARGV[1] group, ARGV[2] consumer, ARGV[3] n (the worker's free slots)
reply: {{lane_1, entries_1, lane_2, entries_2, ...}, wait_ms}: lane = the tenant ('' the queue's
  stream), entries as XREADGROUP gives them. wait_ms: 0 something was read; > 0 every lane it
  looked at is held back by a rate or a lease until about then (at most FAIR_HELD_POLL_MS when
  there were more lanes than FAIR_MAX_HELD_VISITS), and a third element follows: 'lease' when an
  `inflight` or `inflight-tenant` count held one back (as take's), else ''; -1 nothing
  undelivered (an idle worker then waits with BLPOP on sluice:{Q}:wake).
Cost: one XREADGROUP (and one HINCRBY) per lane visited, plus a fixed dozen calls (per 64 lanes
looked at when they are all held).
Errors: SLUICECONFIG (a bad limit), NOGROUP (the queue's group is missing), WRONGTYPE. ]]
local FAIR_MAX_VISITS = 64

-- CMD KEY followed by the values of `list`, unless it is empty.
local function call_list(cmd, key, list)
    if #list > 0 then
        redis.call(cmd, key, unpack(list))
    end
end
local FAIR_SPARE_VISITS = 32 -- lanes a read may look at beyond n, to pass over held ones
local FAIR_MAX_HELD_VISITS = 1024 -- lanes a read that finds only held ones looks at, at most
local FAIR_HELD_POLL_MS = 10 -- past those, it asks again this much later

local function fair_take(keys, args)
    local n, K, lims, now = read_start(keys, args, DRAIN_SCOPES)
    if lims.err then
        return lims
    end
    local group, consumer = args[1], args[2]
    local meta = redis.call('HMGET', keys[2], 'fair', 'lane_depth', 'lane_wait')
    local stream_pending = nil
    local function pending_of_stream()
        if not stream_pending then
            stream_pending = redis.call('XPENDING', keys[1], group)[1]
        end
        return stream_pending
    end
    local wait, pool, per, leased
    n, wait, pool, per, leased = pool_caps(lims, n, now, function()
        return pending_of_stream() + (tonumber(meta[2]) or 0) - (tonumber(meta[3]) or 0)
    end)
    if not n then
        return wait
    end
    if n <= 0 then
        return {{}, math.ceil(wait / 1000), leased and 'lease' or ''}
    end
    local ring, lwait, deficit = K.ring, K.lwait, K.deficit
    local len = redis.call('LLEN', ring)
    -- one round over the head of the ring: at most FAIR_MAX_VISITS lanes, and no more than n
    -- can use (plus a few to pass over held lanes); the state of those lanes in one call each
    local v = math.min(len, FAIR_MAX_VISITS, n + FAIR_SPARE_VISITS)
    local weighted = redis.call('EXISTS', K.weights) == 1
    -- a turn gives weight x scale entries: n free slots spread over the lanes this round can
    -- reach (so a few lanes fill a big read at once, and 1,000 lanes give a read of 2,000 32
    -- each from the next 64; with n = 1 it is 1: one entry a lane, in turn)
    local scale = math.max(1, math.ceil(n / math.max(v, 1)))
    local out, total, wait_dec, held = {}, 0, 0, -1
    local set_wait, set_credit, gone, back = {}, {}, {}, {}
    local head, visited = nil, 0
    -- the round takes v lanes at a time; while it has read nothing (every lane it saw was held
    -- or empty) it goes on with the next v, up to FAIR_MAX_HELD_VISITS: the reply then tells
    -- when the first held lane may go, instead of a worker asking again at once, over and over
    while n > 0 and total == 0 and visited < len and visited < FAIR_MAX_HELD_VISITS do
        local lanes = redis.call('LRANGE', ring, visited, visited + v - 1)
        if #lanes == 0 then
            break
        end
        -- the state of these lanes, in one call each
        local waits = redis.call('HMGET', lwait, unpack(lanes))
        local credits = redis.call('HMGET', deficit, unpack(lanes))
        local weights, depths = {}, nil
        if weighted then
            weights = redis.call('HMGET', K.weights, unpack(lanes))
        end
        for _, lim in ipairs(per) do
            if lim.scope == 'inflight-tenant' then
                depths = redis.call('HMGET', K.lanes, unpack(lanes))
            end
        end
        for i, tn in ipairs(lanes) do
            if n <= 0 then
                break
            end
            visited = visited + 1
            local allow, lane_hold, checked = n, 0, {}
            for _, lim in ipairs(per) do
                if lim.scope == 'inflight-tenant' then
                    local inflight
                    if tn == '' then
                        inflight = pending_of_stream()
                    else
                        inflight = (tonumber(depths[i]) or 0) - (tonumber(waits[i]) or 0)
                    end
                    allow, lane_hold = lease_cap(lim.spec.n, inflight, allow, lane_hold)
                    leased = leased or allow <= 0
                else
                    local key = lim.key .. tn
                    allow, lane_hold = rate_cap(lim, key, allow, lane_hold, now)
                    if not allow then
                        return lane_hold
                    end
                    checked[#checked + 1] = {lim, key}
                end
            end
            if allow <= 0 then -- passed over: its turn goes to the back
                back[#back + 1] = tn
                if held < 0 or lane_hold < held then
                    held = lane_hold
                end
            else
                local d = tonumber(credits[i]) or 0
                if d < 1 then
                    d = d + (weights[i] and tonumber(weights[i]) or 1) * scale
                end
                local k = math.min(allow, d, n)
                local lk = K:lane(tn)
                local r = redis.pcall('XREADGROUP', 'GROUP', group, consumer, 'COUNT', k, 'STREAMS',
                    lk, '>')
                if type(r) == 'table' and r.err then
                    if tn == '' or not string.find(r.err, 'NOGROUP', 1, true) then
                        return r
                    end
                    redis.call('XGROUP', 'CREATE', lk, group, '0', 'MKSTREAM')
                    r = redis.call('XREADGROUP', 'GROUP', group, consumer, 'COUNT', k, 'STREAMS', lk,
                        '>')
                end
                local got = r and r[1] and #r[1][2] or 0
                if got > 0 then
                    out[#out + 1] = tn
                    out[#out + 1] = r[1][2]
                    total, n, d = total + got, n - got, d - got
                    redis.call('HINCRBY', K.served, tn, got)
                    rates_count(checked, now, got)
                end
                local left = (tonumber(waits[i]) or 0) - got
                if tn ~= '' then
                    wait_dec = wait_dec + got
                end
                if got < k or left <= 0 then -- nothing undelivered left: out of the ring
                    gone[#gone + 1] = tn
                    if tn ~= '' and left > 0 then
                        wait_dec = wait_dec + left -- its count was more than its entries
                    end
                else
                    set_wait[#set_wait + 1], set_wait[#set_wait + 2] = tn, left
                    if d >= 1 and n <= 0 then -- the read is full: its turn goes on next time
                        head = tn
                        set_credit[#set_credit + 1], set_credit[#set_credit + 2] = tn, d
                    else
                        back[#back + 1] = tn
                    end
                end
            end
        end
    end
    -- the ring after the round: the lane whose turn goes on, the lanes not visited, then the
    -- lanes visited (in the order they went), each with its count and credit
    if visited > 0 then
        redis.call('LPOP', ring, visited)
        if head then
            redis.call('LPUSH', ring, head)
        end
        local reset = {} -- a lane whose turn ended (or that left the ring) starts the next afresh
        for _, tn in ipairs(gone) do
            reset[#reset + 1] = tn
        end
        for _, tn in ipairs(back) do
            if tn ~= head then
                reset[#reset + 1] = tn
            end
        end
        call_list('RPUSH', ring, back)
        call_list('HDEL', lwait, gone)
        call_list('HSET', lwait, set_wait)
        call_list('HDEL', deficit, reset)
        call_list('HSET', deficit, set_credit)
    end
    len = len - #gone
    if wait_dec > 0 then
        redis.call('HINCRBY', keys[2], 'lane_wait', -wait_dec)
    end
    if n > 0 and meta[1] ~= '1' then -- not fair any more: the stream is read as it comes
        local r = redis.call('XREADGROUP', 'GROUP', group, consumer, 'COUNT', n, 'STREAMS',
            keys[1], '>')
        local got = r and r[1] and #r[1][2] or 0
        if got > 0 then
            out[#out + 1] = ''
            out[#out + 1] = r[1][2]
            total = total + got
        end
    end
    if total == 0 then
        if len > #back then -- lanes past FAIR_MAX_HELD_VISITS: soon, they may go
            held = math.min(held < 0 and FAIR_HELD_POLL_MS * 1000 or held, FAIR_HELD_POLL_MS * 1000)
        end
        if held >= 0 then
            return {{}, math.max(1, math.ceil(held / 1000)), leased and 'lease' or ''}
        end
        return {{}, -1}
    end
    rates_count(pool, now, total)
    if len > 0 and redis.call('LLEN', K.wake) == 0 then -- backlog left: wake a peer
        redis.call('RPUSH', K.wake, 1)
    end
    return {out, 0}
end

--[[ lane_ack (fair queues): ack for entries of several lanes in one call (as ack, per lane).
KEYS[1] stream, KEYS[2] stats, KEYS[3] meta (optional)
ARGV[1] group, ARGV[2..] pairs: lane ('' the stream), entry id
reply: the number of entries that were pending (acked now). Errors: as ack. ]]
local function lane_ack(keys, args)
    if #args < 3 or #args % 2 ~= 1 then
        return redis.error_reply('ERR sluice_lane_ack takes a group and pairs of lane, id')
    end
    local K = queue_keys_of(keys[2], 'stats')
    local by, order = {}, {}
    for i = 2, #args, 2 do
        local tn = args[i]
        if not by[tn] then
            by[tn] = {args[1]}
            order[#order + 1] = tn
        end
        by[tn][#by[tn] + 1] = args[i + 1]
    end
    if slot_migrating(K) then -- meta, lanes, counts: derived; they must all be here
        local list = {K.meta, K.lanes}
        for _, tn in ipairs(order) do
            list[#list + 1] = K:lane(tn) -- '': the stream, KEYS[1]
        end
        if #order == 1 and order[1] == '' then
            list[2] = K.stream -- no tenant lane: `lanes` is not touched
        end
        local err = slot_keys_here(K, list)
        if not err and redis.call('HGET', K.meta, 'tenant_counts') then
            err = slot_keys_here(K, {K.tdepth})
        end
        if err then
            return err
        end
    end
    local n = 0
    for _, tn in ipairs(order) do
        n = n + ack({K:lane(tn), keys[2], keys[3]}, by[tn], true)
    end
    return n
end
