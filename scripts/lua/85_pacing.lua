---------------------------------------------------------------------------------------------------
-- pacing: the drain side's limits (drain rates, inflight counts) and the paced read take.
-- keys:  sluice:{Q}:stream, :meta (paused); derived: :limits, :qlim:NAME:ALG:
-- state: none
---------------------------------------------------------------------------------------------------

-- The drain side's checks, shared by take and fair_take. A count (inflight, inflight-tenant)
-- caps n by its room; at none left, the caller asks again INFLIGHT_POLL_MS later. Returns n, wait.
local function lease_cap(limit, inflight, n, wait)
    if limit - inflight < n then
        n = limit - inflight
        if n <= 0 and wait < INFLIGHT_POLL_MS * 1000 then
            wait = INFLIGHT_POLL_MS * 1000
        end
    end
    return n, wait
end

-- A rate (drain, drain-tenant) at `key`: caps n by what it allows now, raises wait (us) to when
-- it allows the next unit if it allows none. Returns n, wait; or nil, the error reply.
local function rate_cap(lim, key, n, wait, now)
    local st, err = lim_check(lim, key, 1, now)
    if err then
        return nil, err
    end
    local left = st.ok and st.left or 0
    if left < n then
        n = left
    end
    if not st.ok and st.retry > wait then
        wait = st.retry
    end
    return n, wait
end

-- Counts `got` units read in each rate of `checked` ({{lim, key}, ...}): it fits, it was just
-- checked.
local function rates_count(checked, now, got)
    local rec = {}
    for _, c in ipairs(checked) do
        rec[#rec + 1] = lim_check(c[1], c[2], got, now)
    end
    for _, st in ipairs(rec) do
        lim_record(st, now, got)
    end
end

--[[ take (stream backend): a paced worker's read. Reserves rate before it reads: asks for up to
n entries, gets what every `drain` limit and the `inflight` limit allow now, reads that many with
XREADGROUP (never BLOCK inside a function) and counts in the drain limits only what it read. So
no entry is read that may not be processed yet: nothing is put back, no delivery is counted,
nothing is dead-lettered because of a rate. In flight = the group's pending entries (XPENDING):
acks, dead letters and retries end a lease, and a dead worker's entries count until they are
reclaimed and done, so a crash never leaks one.
KEYS[1] stream, KEYS[2] meta
ARGV[1] group, ARGV[2] consumer, ARGV[3] n (the worker's free slots)
reply: {entries (as XREADGROUP gives them, or {}), wait_ms, last_delivered_id}
  paused (meta `paused` = 1): {{}, PAUSE_POLL_MS, 'paused'}, nothing read;
  entries read: wait_ms 0; held back by a rate: wait_ms = when the next unit is allowed;
  held back by `inflight`: wait_ms at least INFLIGHT_POLL_MS and 'lease' in place of the id (a
  worker asks again as soon as it settles an entry of its own); nothing to read: wait_ms -1 and
  the group's last delivered id, for XREAD BLOCK ... STREAMS stream ID to wait on without
  reading.
Errors: SLUICECONFIG (a bad limit), NOGROUP, WRONGTYPE. ]]
-- What a worker's read starts from: the count asked for (ARGV[3]), the queue's key prefix (of
-- KEYS[2], meta), its limits in `scopes` (or an error reply) and Redis's time.
local function read_start(keys, args, scopes)
    local K = queue_keys_of(keys[2], 'meta')
    if slot_migrating(K) then -- limits, their state, lanes: derived
        return 0, K, slot_tryagain(K), 0
    end
    local now = now_us()
    return tonumber(args[3]) or 0, K, queue_limits(K, scopes, now), now
end

-- The pool's limits before a read: `drain` rates and the `inflight` count (in_flight() gives the
-- entries in flight now) cap n. Returns n, wait (us), the rates to count what is read in, the
-- per-tenant limits left for the lanes and whether `inflight` left no room; or nil, the error.
local function pool_caps(lims, n, now, in_flight)
    local wait, rates, per, leased = 0, {}, {}, false
    for _, lim in ipairs(lims) do
        if lim.scope == 'inflight' then
            n, wait = lease_cap(lim.spec.n, in_flight(), n, wait)
            leased = leased or n <= 0
        elseif lim.scope == 'drain' then
            local key = lim.key
            n, wait = rate_cap(lim, key, n, wait, now)
            if not n then
                return nil, wait
            end
            rates[#rates + 1] = {lim, key}
        else
            per[#per + 1] = lim
        end
    end
    return n, wait, rates, per, leased
end

--[[ A paused queue (meta `paused` = 1, `sluice-admin pause`): the reads give nothing and tell
the worker so; it asks again PAUSE_POLL_MS later (admission goes on until the bucket is full;
acks, dead letters and reclaims are not reads). ]]
local PAUSE_POLL_MS = 1000
local function paused_reply()
    return {{}, PAUSE_POLL_MS, 'paused'}
end

local function take(keys, args)
    if redis.call('HGET', keys[2], 'paused') == '1' then
        return paused_reply()
    end
    local n, _, lims, now = read_start(keys, args, POOL_SCOPES)
    if lims.err then
        return lims
    end
    local wait, rates, _, leased
    n, wait, rates, _, leased = pool_caps(lims, n, now, function()
        return redis.call('XPENDING', keys[1], args[1])[1]
    end)
    if not n then
        return wait
    end
    if n <= 0 then
        return {{}, math.ceil(wait / 1000), leased and 'lease' or ''}
    end
    local r = redis.call('XREADGROUP', 'GROUP', args[1], args[2], 'COUNT', n, 'STREAMS',
        keys[1], '>')
    local got = r and r[1] and #r[1][2] or 0
    if got == 0 then
        local last = '0-0'
        for _, g in ipairs(redis.call('XINFO', 'GROUPS', keys[1])) do
            if field(g, 'name') == args[1] then
                last = field(g, 'last-delivered-id')
            end
        end
        return {{}, -1, last}
    end
    rates_count(rates, now, got)
    return {r, 0, ''}
end
