---------------------------------------------------------------------------------------------------
-- fair: the fair queue's read (fair_take, deficit round robin over the ring; fair_grant, the same
-- round answering counts for the worker to read, and fair_refund) and lane_ack.
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
behind it. Each call makes one round over the head of the ring (at most FAIR.MAX_VISITS lanes);
a lane's turn gives weight x ceil(n / lanes visited) entries, so a big read is filled by a few
lanes at once and a read of 1 takes 1 from each lane in turn. Only what was read is counted in the rates. Lanes are created with the
group (at id 0) the first time they are read.
KEYS[1] stream, KEYS[2] meta
ARGV[1] group, ARGV[2] consumer, ARGV[3] n (the worker's free slots)
reply: {{lane_1, entries_1, lane_2, entries_2, ...}, wait_ms}: lane = the tenant ('' the queue's
  stream), entries as XREADGROUP gives them. wait_ms: 0 something was read; > 0 every lane it
  looked at is held back by a rate or a lease until about then (at most FAIR.HELD_POLL_MS when
  there were more lanes than FAIR.MAX_HELD_VISITS), and a third element follows: 'lease' when an
  `inflight` or `inflight-tenant` count held one back (as take's), else ''; -1 nothing
  undelivered (an idle worker then waits with BLPOP on sluice:{Q}:wake). A paused queue (meta
  `paused`): {{}, PAUSE_POLL_MS, 'paused'}, as take's.
Cost: one XREADGROUP (and one HINCRBY) per lane visited, plus a fixed dozen calls (per 64 lanes
looked at when they are all held).
Errors: SLUICECONFIG (a bad limit), NOGROUP (the queue's group is missing), WRONGTYPE. ]]
-- MAX_VISITS: lanes one round visits at most; SPARE_VISITS: lanes a read may look at beyond n, to
-- pass over held ones; MAX_HELD_VISITS: lanes a read that finds only held ones looks at, at most;
-- HELD_POLL_MS: past those, it asks again this much later.
local FAIR = {MAX_VISITS = 64, SPARE_VISITS = 32, MAX_HELD_VISITS = 1024, HELD_POLL_MS = 10,
    RECOUNT_MS = 600000}

-- CMD KEY followed by the values of `list`, unless it is empty.
local function call_list(cmd, key, list)
    if #list > 0 then
        redis.call(cmd, key, unpack(list))
    end
end

--[[ fair_take in steps. One read is one round over the head of the ring; its state R:
  K, group, consumer, now      the queue's keys, the reader, Redis's time
  n                            free slots left; per: the per-lane limits (drain-tenant,
                               inflight-tenant); pool: the pool's rates to count the read in
  pending_of_stream()          the stream's entries in flight (one XPENDING, when asked)
  len, v, scale, weighted      the ring's length, lanes looked at per batch, the turn's scale,
                               whether any lane has a weight set
  visited, out, total          lanes visited, {lane, entries, ...} read, entries read
  held, leased                 the earliest time (us) a held lane may give (-1 none), whether a
                               count (a lease) held one
  gone, back, head, set_wait, set_credit, wait_dec   where each visited lane goes after the
                               round, its undelivered count and credit, what leaves lane_wait
  grant, stream_at             fair_grant: counts instead of reads; where out holds the
                               stream's count, if it was granted ]]

-- The start of a read: the pool's limits (`drain` rates, the `inflight` count) cap n. Returns R;
-- or nil and the reply to give now (an error, or the wait when the pool allows nothing).
local function fair_start(keys, args)
    local n, K, lims, now = read_start(keys, args, DRAIN_SCOPES)
    if lims.err then
        return nil, lims
    end
    local R = {K = K, group = args[1], consumer = args[2], now = now, out = {}, total = 0,
        wait_dec = 0, held = -1, set_wait = {}, set_credit = {}, gone = {}, back = {},
        head = nil, visited = 0}
    R.meta = redis.call('HMGET', keys[2], 'fair', 'lane_depth', 'lane_wait', 'paused')
    if R.meta[4] == '1' then
        return nil, paused_reply()
    end
    local stream_pending = nil
    function R.pending_of_stream()
        if not stream_pending then
            stream_pending = redis.call('XPENDING', keys[1], R.group)[1]
        end
        return stream_pending
    end
    local wait
    n, wait, R.pool, R.per, R.leased = pool_caps(lims, n, now, function()
        return R.pending_of_stream() + (COUNT.of(R.meta[2]) or 0) - (COUNT.of(R.meta[3]) or 0)
    end)
    if not n then
        return nil, wait
    end
    if n <= 0 then
        return nil, {{}, math.ceil(wait / 1000), R.leased and 'lease' or ''}
    end
    R.n = n
    for _, lim in ipairs(lims) do -- a count of entries in flight: see fair_grant
        R.counted = R.counted or lim.scope == 'inflight' or lim.scope == 'inflight-tenant'
    end
    return R
end

-- The round's size: one round over the head of the ring, at most FAIR.MAX_VISITS lanes and no
-- more than n can use (plus a few to pass over held lanes); a turn gives weight x scale entries:
-- n free slots spread over the lanes this round can reach (so a few lanes fill a big read at
-- once, and 1,000 lanes give a read of 2,000 32 each from the next 64; with n = 1 it is 1: one
-- entry a lane, in turn).
local function fair_plan(R)
    R.len = redis.call('LLEN', R.K.ring)
    R.v = math.min(R.len, FAIR.MAX_VISITS, R.n + FAIR.SPARE_VISITS)
    R.weighted = redis.call('EXISTS', R.K.weights) == 1
    R.scale = math.max(1, math.ceil(R.n / math.max(R.v, 1)))
end

-- The state of a batch of lanes of the ring, one call each: undelivered counts, credits, weights
-- (when any is set) and, under an `inflight-tenant` limit, entries held.
local function fair_batch(R, lanes)
    local b = {}
    b.waits = redis.call('HMGET', R.K.lwait, unpack(lanes))
    b.credits = redis.call('HMGET', R.K.deficit, unpack(lanes))
    b.weights = {}
    if R.weighted then
        b.weights = redis.call('HMGET', R.K.weights, unpack(lanes))
    end
    if R.grant then -- a lane never served since it last held nothing may have no group yet
        b.served = redis.call('HMGET', R.K.served, unpack(lanes))
    end
    for _, lim in ipairs(R.per) do
        if lim.scope == 'inflight-tenant' then
            b.depths = redis.call('HMGET', R.K.lanes, unpack(lanes))
        end
    end
    return b
end

-- What lane tn (the i-th of batch b) may give now: n capped by its `inflight-tenant` counts and
-- `drain-tenant` rates. Returns allow, hold (us until it may give one, when allow <= 0) and the
-- rates to count what it gives in; or nil and the error reply. A count that holds it sets
-- R.leased.
local function fair_lane_caps(R, b, i, tn)
    local allow, hold, checked = R.n, 0, {}
    for _, lim in ipairs(R.per) do
        if lim.scope == 'inflight-tenant' then
            local inflight
            if tn == '' then
                inflight = R.pending_of_stream()
            else
                inflight = (COUNT.of(b.depths[i]) or 0) - (COUNT.of(b.waits[i]) or 0)
            end
            allow, hold = lease_cap(lim.spec.n, inflight, allow, hold)
            R.leased = R.leased or allow <= 0
        else
            local key = lim.key .. tn
            allow, hold = rate_cap(lim, key, allow, hold, R.now)
            if not allow then
                return nil, hold
            end
            checked[#checked + 1] = {lim, key}
        end
    end
    return allow, hold, checked
end

-- Up to k entries of lane tn for the reader, as XREADGROUP gives them; a tenant lane's group is
-- created (at id 0) the first time the lane is read. Returns the reply or the error reply.
local function fair_read_lane(R, tn, k)
    local lk = R.K:lane(tn)
    local r = redis.pcall('XREADGROUP', 'GROUP', R.group, R.consumer, 'COUNT', k, 'STREAMS', lk,
        '>')
    if type(r) == 'table' and r.err then
        if tn == '' or not string.find(r.err, 'NOGROUP', 1, true) then
            return r
        end
        redis.call('XGROUP', 'CREATE', lk, R.group, '0', 'MKSTREAM')
        r = redis.call('XREADGROUP', 'GROUP', R.group, R.consumer, 'COUNT', k, 'STREAMS', lk, '>')
    end
    return r
end

-- What a grant gives lane tn (the i-th of batch b) of the k its turn allows: exactly what its
-- undelivered count says is there, no more; the lane's group is made (at id 0) when the lane was
-- never served since it last held nothing (the worker's XREADGROUP does not make one).
function FAIR.grant_lane(R, b, i, tn, k)
    local got = math.min(k, COUNT.of(b.waits[i]) or 0)
    if got > 0 and tn ~= '' and not b.served[i] then
        redis.pcall('XGROUP', 'CREATE', R.K:lane(tn), R.group, '0', 'MKSTREAM') -- or BUSYGROUP
    end
    return got
end

-- Lane tn's turn (the i-th of batch b, allowed `allow` now, its rates `checked`): a spent credit
-- gets weight x scale more; it gives up to min(allow, credit, n) (a grant: no more than its
-- count), counted in its rates and `served`; then it leaves the ring (nothing undelivered left),
-- keeps its turn (the read is full and credit is left) or goes to the back. Returns the read's
-- error reply, if any.
local function fair_turn(R, b, i, tn, allow, checked)
    local d = COUNT.of(b.credits[i]) or 0
    if d < 1 then -- (a weight is 1..1000: one below 1 would read a lane without bound, COUNT 0)
        d = d + math.max(1, COUNT.of(b.weights[i]) or 1) * R.scale
    end
    local k = math.min(allow, d, R.n)
    local r, got
    if R.grant then
        got = FAIR.grant_lane(R, b, i, tn, k)
    else
        r = fair_read_lane(R, tn, k)
        if type(r) == 'table' and r.err then
            return r
        end
        got = r and r[1] and #r[1][2] or 0
    end
    if got > 0 then
        R.out[#R.out + 1] = tn
        R.out[#R.out + 1] = R.grant and got or r[1][2]
        if tn == '' then
            R.stream_at = #R.out -- a grant of the stream's: fair_finish may add to it
        end
        R.total, R.n, d = R.total + got, R.n - got, d - got
        COUNT.add(R.K.served, tn, got)
        rates_count(checked, R.now, got)
    end
    local waits = COUNT.of(b.waits[i]) or 0
    local left = waits - got
    if tn ~= '' then -- a read past the lane's count got what a grant counted out (its reader
        R.wait_dec = R.wait_dec + math.min(got, waits) -- then reads short): counted once
    end
    if got < k or left <= 0 then -- nothing undelivered left: out of the ring
        R.gone[#R.gone + 1] = tn
        if tn ~= '' and left > 0 then
            R.wait_dec = R.wait_dec + left -- its count was more than its entries
        end
    else
        local set_wait = R.set_wait
        set_wait[#set_wait + 1], set_wait[#set_wait + 2] = tn, left
        if d >= 1 and R.n <= 0 then -- the read is full: its turn goes on next time
            local set_credit = R.set_credit
            R.head = tn
            set_credit[#set_credit + 1], set_credit[#set_credit + 2] = tn, d
        else
            R.back[#R.back + 1] = tn
        end
    end
    return nil
end

-- The round: the ring's lanes v at a time; a lane its limits hold is passed over (its turn goes
-- to the back), the others take their turn. While the round has read nothing (every lane it saw
-- was held or empty) it goes on with the next v, up to FAIR.MAX_HELD_VISITS: the reply then tells
-- when the first held lane may go, instead of a worker asking again at once, over and over.
-- Returns the error reply of a limit or a read, if any.
local function fair_round(R)
    while R.n > 0 and R.total == 0 and R.visited < R.len and R.visited < FAIR.MAX_HELD_VISITS do
        local lanes = redis.call('LRANGE', R.K.ring, R.visited, R.visited + R.v - 1)
        if #lanes == 0 then
            break
        end
        local b = fair_batch(R, lanes)
        for i, tn in ipairs(lanes) do
            if R.n <= 0 then
                break
            end
            R.visited = R.visited + 1
            local allow, hold, checked = fair_lane_caps(R, b, i, tn)
            if not allow then
                return hold
            end
            if allow <= 0 then -- passed over: its turn goes to the back
                R.back[#R.back + 1] = tn
                if R.held < 0 or hold < R.held then
                    R.held = hold
                end
            else
                local err = fair_turn(R, b, i, tn, allow, checked)
                if err then
                    return err
                end
            end
        end
    end
    return nil
end

-- The ring after the round: the lane whose turn goes on, the lanes not visited, then the lanes
-- visited (in the order they went), each with its count and credit.
local function fair_ring_write(R)
    if R.visited == 0 then
        return
    end
    local ring, lwait, deficit = R.K.ring, R.K.lwait, R.K.deficit
    redis.call('LPOP', ring, R.visited)
    if R.head then
        redis.call('LPUSH', ring, R.head)
    end
    local reset = {} -- a lane whose turn ended (or that left the ring) starts the next afresh
    for _, tn in ipairs(R.gone) do
        reset[#reset + 1] = tn
    end
    for _, tn in ipairs(R.back) do
        if tn ~= R.head then
            reset[#reset + 1] = tn
        end
    end
    call_list('RPUSH', ring, R.back)
    call_list('HDEL', lwait, R.gone)
    call_list('HSET', lwait, R.set_wait)
    call_list('HDEL', deficit, reset)
    call_list('HSET', deficit, R.set_credit)
end

-- The end of a read: lane_wait less what left it, the stream read as it comes when the queue is
-- not fair any more, and the reply; the pool's rates count what was read, and backlog left wakes
-- a peer.
local function fair_finish(R, keys)
    local len = R.len - #R.gone
    if R.wait_dec > 0 then
        COUNT.add(keys[2], 'lane_wait', -R.wait_dec)
    end
    if R.n > 0 and R.meta[1] ~= '1' and R.grant then -- not fair any more: the stream as it
        if R.stream_at then -- comes (what is not there is refunded), one grant for it
            R.out[R.stream_at] = R.out[R.stream_at] + R.n
        else
            R.out[#R.out + 1], R.out[#R.out + 2] = '', R.n
        end
        R.total = R.total + R.n
    elseif R.n > 0 and R.meta[1] ~= '1' then
        local r = redis.call('XREADGROUP', 'GROUP', R.group, R.consumer, 'COUNT', R.n, 'STREAMS',
            keys[1], '>')
        local got = r and r[1] and #r[1][2] or 0
        if got > 0 then
            R.out[#R.out + 1] = ''
            R.out[#R.out + 1] = r[1][2]
            R.total = R.total + got
        end
    end
    if R.total == 0 then
        local held = R.held
        if len > #R.back then -- lanes past FAIR.MAX_HELD_VISITS: soon, they may go
            local poll = FAIR.HELD_POLL_MS * 1000
            held = math.min(held < 0 and poll or held, poll)
        end
        if held >= 0 then
            return {{}, math.max(1, math.ceil(held / 1000)), R.leased and 'lease' or ''}
        end
        return {{}, -1}
    end
    rates_count(R.pool, R.now, R.total)
    if len > 0 then -- backlog left: wake a peer
        R.K:wake_up()
    end
    if R.grant then
        return {R.out, 0, '', string.format('%.0f', R.now)}
    end
    return {R.out, 0}
end

local function fair_take(keys, args, grant)
    local R, reply = fair_start(keys, args)
    if not R then
        return reply
    end
    R.grant = grant and not R.counted
    fair_plan(R)
    local err = fair_round(R)
    if err then
        return err
    end
    fair_ring_write(R)
    return fair_finish(R, keys)
end

--[[ fair_grant (fair queues): fair_take's choice without its reads, for a worker that reads the
lanes itself with XREADGROUP (entries come back as a command's reply, about 1.4 us a message less
Redis CPU than through a function's Lua tables). The same round, limits, ring, credits, counts,
rates and reply, but each lane's turn is granted no more than its undelivered count says it holds,
counted as read (its count, meta lane_wait, `served`, its `drain-tenant` rates and the pool's
`drain` rates), and the reply names counts instead of entries. A lane never served since it last
held nothing gets its group (at id 0) here.
KEYS[1] stream, KEYS[2] meta
ARGV[1] group, ARGV[2] consumer, ARGV[3] n (the worker's free slots)
reply: {{lane_1, count_1, lane_2, count_2, ...}, wait_ms[, 'lease' | '' | 'paused']} as fair_take's,
  and after a grant ({{...}, 0, '', TIME}) the grant's time (Redis's, in us: the `now` every
  rate counted the grant at, so a refund finds its window, block and log members); the worker reads
  each lane (the queue's stream for '') with XREADGROUP GROUP group consumer COUNT count_i
  STREAMS lane_i >, and gives what a lane gave less than its count back with fair_refund (with
  that time). A queue switched back from fair gets the stream ('') granted the rest of n.
Under an `inflight` or `inflight-tenant` count it reads in the function and replies as fair_take
(entries in place of counts): what is in flight is counted from the lanes' pending entries, and a
grant not read yet is not among them, so the count and the read must be one step (as take's
reserve). Besides, the reclaim pass over the lanes cannot tell a grant being read from one whose
worker died, and would count its entries again: the next grant would lease them twice.
Errors: as fair_take's. ]]
local function fair_grant(keys, args)
    return fair_take(keys, args, true)
end

--[[ fair_refund (fair queues): what lanes read after a fair_grant gave less than granted is given
back to the `drain` and `drain-tenant` rates, each as far as its algorithm safely can (the
limiter's refunds: gcra no more than the debt the grant can still hold, granted - elapsed / T
units, so a refund made long after its grant, or with a time from another server, gives back
less or nothing; fixed in the window of the grant; window while its block counts; log while its
units live; gate while it is still closed); none once the limits changed after the grant (what
a rate cannot give back errs toward delivering less, never more than a rate). A lane's
`drain-tenant` rates get its own units back, the pool's `drain` rates the lanes' together (the
granted counts of the lanes named: no more than the grant counted in them). `served` is lowered
for tenant lanes. The lanes' undelivered counts: `short` (the read came back with fewer entries:
the lane cleared, trimmed or read by another reader in between) leaves them as they are: a count
above what a lane holds is used up by the grants that follow, each read short and refunded,
where lowering it could lose entries admitted in between (a lane out of the ring with entries
waiting); `unread` (the read failed, so nothing of it was read) counts them again
(lane_recount; the stream's only while the queue is fair, as the grant counted them only then).
KEYS[1] stream, KEYS[2] meta
ARGV[1] short | unread, ARGV[2] the grant's time (us, from its reply: the time its rates counted
  the units at), ARGV[3..] triples: lane ('' the stream), count granted, count not read
  (1..granted)
reply: the units given back to the rates (summed over them). Errors: SLUICECONFIG (a bad limit),
a bad argument. ]]
local function fair_refund(keys, args)
    local unread = args[1] == 'unread'
    if #args < 5 or #args % 3 ~= 2 or not (unread or args[1] == 'short') then
        return redis.error_reply('ERR sluice_fair_refund takes short or unread, the grant\'s ' ..
            'time, then triples of lane, count granted, count not read')
    end
    if not s_match(args[2], '^%d+$') or #args[2] > 17 then
        return redis.error_reply('ERR sluice_fair_refund: the grant\'s time ' ..
            s_format('%q', string.sub(args[2], 1, 20)) .. ' is not a time in us')
    end
    for i = 3, #args, 3 do -- every triple checked before anything is written
        local k, c = tonumber(args[i + 1]), tonumber(args[i + 2])
        if not (k and c) or c < 1 or c % 1 ~= 0 or k < c or k % 1 ~= 0 then
            return redis.error_reply('ERR sluice_fair_refund: counts "' .. args[i + 1] .. '", "' ..
                args[i + 2] .. '" of lane ' .. (i / 3) .. ' are not whole numbers ' ..
                'granted >= not read >= 1')
        end
    end
    local K = queue_keys_of(keys[2], 'meta')
    if slot_migrating(K) then -- limits, their state, lanes: derived
        return slot_tryagain(K)
    end
    local now = now_us()
    local lims, version = queue_limits(K, DRAIN_SCOPES, now)
    if lims.err then
        return lims
    end
    local t0 = args[2] + 0
    -- the limits changed since (a version that is no count, written by hand, says so too):
    -- nothing goes back
    if (version and (COUNT.of(version) or math.huge) or 0) >= t0 then
        lims = {}
    end
    -- once a grant and kind: its rates give nothing back past their longest period after the
    -- grant; an `unread` recount is made within FAIR.RECOUNT_MS of the grant (later, the reclaim
    -- pass over the lanes has counted those entries again)
    local ttl = unread and FAIR.RECOUNT_MS or 0
    for _, lim in ipairs(lims) do
        ttl = math.max(ttl, lim.spec.p_ms or 0)
    end
    if unread and now - t0 > FAIR.RECOUNT_MS * 1000 then
        return 0
    end
    if not K:claim_refund(args[2], ':' .. args[1], ttl + 1000) then
        return redis.error_reply('ERR sluice_fair_refund: the ' .. args[1] .. ' refund of the ' ..
            'grant of ' .. args[2] .. ' was made already')
    end
    local granted, total, back = 0, 0, 0
    local fair = unread and redis.call('HGET', keys[2], 'fair') == '1'
    for i = 3, #args, 3 do
        local tn, k, c = args[i], tonumber(args[i + 1]), tonumber(args[i + 2])
        granted, total = granted + k, total + c
        for _, lim in ipairs(lims) do
            local spec = lim.spec
            if lim.scope == 'drain-tenant' then
                back = back + spec.refund(spec, lim.key .. tn, c, k, t0, now)
            end
        end
        if tn ~= '' and redis.call('HGET', K.served, tn) then
            COUNT.add(K.served, tn, -c)
        end
        if unread and (tn ~= '' or fair) then
            lane_recount(K, tn, c)
        end
    end
    for _, lim in ipairs(lims) do
        local spec = lim.spec
        if lim.scope == 'drain' then
            back = back + spec.refund(spec, lim.key, total, granted, t0, now)
        end
    end
    return back
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
    -- As ack per lane; the queue's counts (stats acked, meta lane_depth) once for the call, and
    -- written before an error (a lane's bad id) ends it, so they match the lanes settled.
    local meta = keys[3] or K.meta
    local batch = {K = K, counted = redis.call('HGET', meta, 'tenant_counts'), n = 0, removed = 0}
    local ok, err = pcall(function()
        for _, tn in ipairs(order) do
            ack({K:lane(tn), keys[2], keys[3]}, by[tn], true, batch)
        end
    end)
    if batch.removed > 0 then
        COUNT.add(meta, 'lane_depth', -batch.removed)
    end
    if batch.n > 0 then
        COUNT.add(keys[2], 'acked', batch.n)
    end
    if not ok then
        error(err, 0)
    end
    return batch.n
end
