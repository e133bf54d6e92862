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
Errors: SLUICECONFIG (a bad limit), NOGROUP, WRONGTYPE, a bad count or mode (named). ]]
-- What a worker's read starts from: the count asked for (ARGV[3]), the queue's key prefix (of
-- KEYS[2], meta), its limits in `scopes` (or an error reply) and Redis's time.
local function read_start(keys, args, scopes)
    local K = queue_keys_of(keys[2], 'meta')
    if slot_migrating(K) then -- limits, their state, lanes: derived
        return 0, K, slot_tryagain(K), 0
    end
    local n = args[3]
    if type(n) ~= 'string' or not s_match(n, '^%d+$') or #n > 15 then
        return 0, K, redis.error_reply('ERR the read\'s count ' ..
            s_format('%q', string.sub(tostring(n), 1, 20)) .. ' is not a whole number >= 0'), 0
    end
    local now = now_us()
    return n + 0, K, queue_limits(K, scopes, now), now
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

local take
do
    -- What a read may take now: n > 0, the rates to count it in, Redis's time and whether an
    -- `inflight` count is among the limits; or nil and the reply (paused, held back, an error).
    local function read_caps(keys, args)
        if redis.call('HGET', keys[2], 'paused') == '1' then
            return nil, paused_reply()
        end
        local n, _, lims, now = read_start(keys, args, POOL_SCOPES)
        if lims.err then
            return nil, lims
        end
        local counts, wait, rates, _, leased = false
        n, wait, rates, _, leased = pool_caps(lims, n, now, function()
            counts = true
            return redis.call('XPENDING', keys[1], args[1])[1]
        end)
        if not n then
            return nil, wait
        end
        if n <= 0 then
            return nil, {{}, math.ceil(wait / 1000), leased and 'lease' or ''}
        end
        return n, rates, now, counts
    end

    local function read(keys, args, n, rates, now)
        local r = redis.call('XREADGROUP', 'GROUP', args[1], args[2], 'COUNT', n, 'STREAMS',
            keys[1], '>')
        local got = r and r[1] and #r[1][2] or 0
        if got == 0 then
            return {{}, -1, last_delivered(keys[1], args[1]) or '0-0'}
        end
        rates_count(rates, now, got)
        return {r, 0, ''}
    end

    -- Counts n units in each rate and returns the reservation's token: "T0,N" then ",NAME:ALG"
    -- a rate (the rates to give back to, as they were at T0: a rate set since counted nothing).
    local function reserve(rates, now, n)
        local rec = {}
        for i, c in ipairs(rates) do
            rec[i] = lim_check(c[1], c[2], n, now)
        end
        local token = limit_fmt(now) .. ',' .. n
        for _, st in ipairs(rec) do
            local lim = st.lim
            lim_record(st, now, n)
            token = token .. ',' .. lim.name .. ':' .. lim.spec.alg
        end
        return {{}, 0, '', n, token}
    end

    -- Gives back k units of the reservation `token` in each rate it counted them in (as far
    -- as each can: see the refunds; none once the limits changed since); its reply: the group's
    -- last delivered id when none of the units was used, else ''.
    local function refund(keys, args)
        local K = queue_keys_of(keys[2], 'meta')
        if slot_migrating(K) then
            return slot_tryagain(K)
        end
        local token = args[5] or ''
        local t0, g, each = s_match(token, '^(%d+),(%d+)(.*)$')
        local k = s_match(tostring(args[3]), '^%d+$') and tonumber(args[3])
        -- (a token of the form before, ",NAME:ALG,VALUE" a rate, is refused here)
        if not t0 or not k or each:gsub(',[%w_%.%-]+:%a+', '') ~= '' then
            return redis.error_reply('SLUICECONFIG take refund: bad count ' ..
                s_format('%q', string.sub(tostring(args[3]), 1, 20)) .. ' or token ' ..
                s_format('%q', string.sub(token, 1, 40)) .. ' (a token of this version ' ..
                'is "T0,N" then ",NAME:ALG" a rate)')
        end
        local t0_text = t0 -- (the key's name: a number past 14 digits would print rounded)
        t0, g = t0 + 0, g + 0
        k = math.min(math.floor(k), g)
        if k > 0 then
            local lims, version = queue_limits(K, POOL_SCOPES)
            if lims.err then
                return lims
            end
            local now = now_us()
            -- (a version that is no count, written by hand: changed, as far as it can tell)
            if (version and (COUNT.of(version) or math.huge) or 0) < t0 then
                local counted, rates, ttl = {}, {}, 0
                for id in each:gmatch(',([^,]+)') do
                    counted[id] = true
                end
                for _, lim in ipairs(lims) do
                    local c = lim.spec
                    if lim.scope == 'drain' and counted[lim.name .. ':' .. c.alg] then
                        rates[#rates + 1], ttl = lim, math.max(ttl, c.p_ms)
                    end
                end
                -- once a grant: a rate gives nothing back past its period after the grant
                if #rates > 0 and not K:claim_refund(t0_text, '', ttl + 1000) then
                    return redis.error_reply('SLUICECONFIG take refund: the grant of token ' ..
                        s_format('%q', string.sub(token, 1, 40)) .. ' was given back already')
                end
                for _, lim in ipairs(rates) do
                    lim.spec.refund(lim.spec, lim.key, k, g, t0, now)
                end
            end
        end
        if k >= g then
            return last_delivered(keys[1], args[1]) or '0-0'
        end
        return ''
    end

    --[[ take (stream backend): a paced worker's read. Three forms:
    - the read (ARGV[4] absent; workers before the reserve form): reserves rate before it
      reads, as above: reply {entries, wait_ms, last_delivered_id}.
    - 'reserve': the same checks, reading nothing: the units it would read (up to n) are
      counted in every `drain` rate and granted; the worker reads them itself (XREADGROUP
      COUNT grant), so the entries never pass through Lua, and gives back what it did not get
      with 'refund'. reply {{}, 0, '', grant, token} (grant > 0); held back, paused or nothing
      granted: as the read's ({{}, wait_ms, 'lease' | 'paused' | ''}). With an `inflight`
      limit the read is made here, as the read form does (reply as its): a count of pending
      entries must be read and added to in one step, or two workers would both take the room.
    - 'refund': ARGV[3] = k, the granted units not read, ARGV[5] = the reserve's token; gives
      them back in each rate as far as it safely can (see the refunds in the limiter; nothing
      once the limits changed after the reserve); reply:
      the group's last delivered id when k is the whole grant (for XREAD BLOCK), else ''.
      A worker that dies between the reserve and the refund leaves its units counted: the
      rate under-delivers for as long as they count, it never over-admits.
    ]]
    function take(keys, args)
        local mode = args[4]
        if mode == 'refund' then
            return refund(keys, args)
        elseif mode and mode ~= 'reserve' then
            return redis.error_reply('ERR sluice_take: mode ' ..
                s_format('%q', string.sub(mode, 1, 20)) .. ' is not reserve or refund')
        end
        local n, rates, now, counts = read_caps(keys, args)
        if not n then
            return rates
        end
        if mode == 'reserve' and not counts then
            return reserve(rates, now, n)
        end
        return read(keys, args, n, rates, now)
    end
end
