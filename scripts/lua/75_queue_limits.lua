---------------------------------------------------------------------------------------------------
-- queue limits: a queue's configured limits, read (and parsed once per change) for admission
-- and the drain side, and the per-key batches an admission counts in.
-- keys:  sluice:{Q}:limits (NAME -> "SCOPE SPEC"), sluice:{Q}:meta (limits_v: the limits'
--        version), sluice:{Q}:qlim:NAME:ALG:VALUE (state)
-- state: the parsed limits by limits key (a cache of the hash's text), the admission batch's
--        state tables reused call after call
---------------------------------------------------------------------------------------------------

--[[ Limits on a queue: configured in the hash sluice:{Q}:limits (name -> "SCOPE SPEC", SPEC as
for sluice_limit), counted in sluice:{Q}:meta `limits` (so admission learns with the HMGET it
already makes whether there are any), state in sluice:{Q}:qlim:NAME:ALG:VALUE (K:qlim) where
VALUE is '' for scopes `queue` and `drain`, the envelope's tenant for `tenant` and
`drain-tenant` (also '' for a message without one), the caller's key for `client`. The
algorithm is part of the name, so a limit set again with another one starts afresh and never
meets the old one's state; `qlim:` keeps it apart from the standalone limiter's
sluice:{NS}:lim:KEY whatever NS and KEY are. ]]
local ADMISSION_SCOPES = {queue = true, tenant = true, client = true}
local DRAIN_SCOPES = {drain = true, inflight = true, ['drain-tenant'] = true,
    ['inflight-tenant'] = true}
local POOL_SCOPES = {drain = true, inflight = true} -- what a plain (not fair) queue honours
local COUNT_SCOPES = {inflight = true, ['inflight-tenant'] = true} -- a count, not a rate
-- a worker held back by `inflight` asks again when an entry of its own is settled (the reply
-- says 'lease'), else this much later: idle workers do not poll for a unit another one holds
local INFLIGHT_POLL_MS = 1000
local LIMIT_NAME_PATTERN = '^[%w_%.%-]+$'

--[[ The limits of a queue as they were last read, by the scopes asked for and the limits key:
{raw = the HGETALL reply, out = the list made of it, v = meta `limits_v` then, t = when (us)}.
sluice_limits_config, the only writer of the hash, sets meta `limits_v` to a new value (Redis's
time in us, as text) with every change: a call that finds the version it read with the list,
within a second of that read, takes the list without reading the hash (one HGET of the version
instead of the HGETALL). Else (a queue configured before the version, a call without the time,
a second gone by) the hash is read; a read that gets the same reply (the same strings, compared
as Lua compares strings: by content) takes the same list, so it is parsed and sorted only when
it changed. A hash written directly, not through the function, is so seen within a second. At
most QUEUE_LIMITS_MAX keys; past that it starts over. ]]
local QUEUE_LIMITS_MAX = 64
local queue_limits_cache, queue_limits_cached -- (set by this module's initialiser)

-- The limits of a queue in `scopes`: {{name, scope, spec table, key}, ...} in name order (an
-- `inflight` or `inflight-tenant` limit's spec is its count: {n = N}, its key ''; a rate's key
-- is the prefix of its state keys (K:qlim), the value follows). Shared between calls: read
-- it, never write it. `now`: Redis's time in us (now_us()), or nil to read the hash whatever
-- the version says. Also returns the version (meta `limits_v`: when the limits last changed,
-- us, as text; false for limits never set through sluice_limits_config).
local function queue_limits(K, scopes, now)
    local limits_key = K.limits
    local by_scopes = queue_limits_cache[scopes]
    if not by_scopes then
        by_scopes = {}
        queue_limits_cache[scopes] = by_scopes
    end
    local hit = by_scopes[limits_key]
    local v = r_call('HGET', K.meta, 'limits_v') or false
    if hit and v and hit.v == v and now and now >= hit.t and now - hit.t < 1000000 then
        return hit.out, v
    end
    local raw = r_call('HGETALL', limits_key)
    if hit and #hit.raw == #raw then
        local same, old = true, hit.raw
        for i = 1, #raw do
            if raw[i] ~= old[i] then
                same = false
                break
            end
        end
        if same then
            hit.v, hit.t = v, now or -math.huge
            return hit.out, v
        end
    end
    local out = {queue_only = true} -- queue_only: every limit of scope queue (admission's usual)
    for i = 1, #raw, 2 do
        local scope, spec = s_match(raw[i + 1], '^(%S+) (%S+)$')
        if scope and scopes[scope] then
            local l, key = nil, ''
            if COUNT_SCOPES[scope] then
                l = {n = COUNT.of(spec) or 0}
            else
                l = limit_spec_parsed(raw[i], spec) -- shared: never written
                if l.err then
                    return l
                end
                key = K:qlim(raw[i], l.alg)
            end
            out[#out + 1] = {name = raw[i], scope = scope, spec = l, key = key}
            if scope ~= 'queue' then
                out.queue_only = false
            end
        end
    end
    table.sort(out, function(a, b) return a.name < b.name end)
    if queue_limits_cached >= QUEUE_LIMITS_MAX then
        queue_limits_cache, queue_limits_cached = {}, 0
        by_scopes = {}
        queue_limits_cache[scopes] = by_scopes
    end
    if not hit then
        queue_limits_cached = queue_limits_cached + 1
    end
    by_scopes[limits_key] = {raw = raw, out = out, v = v, t = now or -math.huge}
    return out, v
end

-- Checks limit `lim` at `key` for w units into state st (a fresh one when nil) and notes lim
-- and key in it; returns the state and the error reply, if any.
local function lim_check(lim, key, w, now, st)
    local c = lim.spec
    st = st or limit_state()
    st.lim, st.key = lim, key
    local ok, left = c.check(c, st, key, w, now)
    if ok == nil then
        return st, left
    end
    st.ok, st.left = ok, left
    return st
end

-- Counts w units in state st (checked for them by lim_check); a window's hash lives as long as
-- its window needs.
local function lim_record(st, now, w)
    local c, key = st.lim.spec, st.key
    c.record(c, st, key, w, now)
    if c.alg == 'window' and st.ttl ~= TTL_KEPT then
        window_expire(key, window_ttl(c, st, now), st.ttl)
    end
end

--[[ The limits of one admission batch, counted per state key: each key is read once (how many
units it allows now), its units are handed out to the messages in order, and it is recorded
once with their total at the end: the same as checking and counting message by message at one
`now`, for the cost of one read and one write per key instead of per message. A fixed window
is read by counting the unit its check asks for (as sluice_limit counts one): one INCRBY, topped
up at the end when more messages used it, taken back when none did (DECRBY; DEL of a key the
INCRBY made), where a GET and an INCRBY were. A limit of scope queue has one state for every
message, kept by the limit's place in the list; only tenant and client states are found by their
key (a map). The state tables are kept for the next call in the batch's `pool`. ]]
local BATCH_POOL_MAX = 16 -- states kept for the next call (a call may need more)
local the_batch

-- Checks limit `lim` at `key` for one unit into state st (st.ok; st.avail: the units it allows
-- now, 0 when none) and notes lim and key in it, a fixed window by counting the unit (see above:
-- st.taken, the value its INCRBY made; a key holding no integer, an old layout's hash or another
-- type, is read by its check as usual); gives the error reply, if any.
local function lim_check_one(lim, st, key, now)
    local c = lim.spec
    st.lim, st.key, st.used, st.rt = lim, key, 0, false
    if c.alg == 'fixed' then
        local v = r_pcall('INCRBY', key, '1')
        if l_type(v) == 'number' then
            local base, ends = fixed_base(c, now)
            local n, live = 0, false
            if v > 1 and v >= base + 1 and v < base + 2147483648 then -- this window's counter
                n, live = v - base - 1, true
            end
            st.count, st.live, st.retry, st.taken = n, live, ends, v
            st.ok, st.avail = n < c.n, c.n - n
            return nil
        end
    end
    st.taken = false
    local ok, left = c.check(c, st, key, 1, now)
    if ok == nil then
        return left
    end
    st.ok, st.left, st.avail = ok, left, ok and left or 0
    return nil
end

-- The batch of this call: the one table, emptied of the last call's states (the state tables
-- themselves are used again, up to BATCH_POOL_MAX; after a call of more, its tables are let go).
local function batch_new(lims, now)
    local b = the_batch
    local order, sts = b.order, b.sts
    if b.n > BATCH_POOL_MAX then
        b.states, b.order = {}, {}
    else
        if b.keyed then -- a tenant's or a client's state: found by its key
            local states = b.states
            for i = 1, b.n do
                states[order[i].key] = nil
            end
        end
        for i = 1, b.n do
            order[i] = nil
        end
    end
    for i = 1, b.nl do
        sts[i] = false
    end
    b.lims, b.now, b.n, b.nl, b.keyed = lims, now, 0, #lims, false
    return b
end

-- A state of limit `lim` at `key`, checked for one unit, counted in the batch's order; or nil
-- and the error reply.
local function batch_state(b, lim, key)
    local n = b.n + 1
    local st = b.pool[n]
    if not st then
        st = limit_state()
        if n <= BATCH_POOL_MAX then
            b.pool[n] = st
        end
    end
    local err = lim_check_one(lim, st, key, b.now)
    if err then
        return nil, err
    end
    b.order[n], b.n = st, n
    return st
end

-- The states a message of (tenant, client) needs, and the exhausted ones among them (nil when
-- it passes them all).
local function batch_check(b, tenant, client)
    local sts, refused = b.sts, nil -- reused: a message's states are used before the next
    local lims = b.lims
    for i = 1, b.nl do
        local lim = lims[i]
        local scope, st, err = lim.scope, sts[i], nil
        if scope ~= 'queue' then
            local value = scope == 'tenant' and tenant or client
            local key = value == '' and lim.key or lim.key .. value
            st = b.states[key]
            if not st then
                st, err = batch_state(b, lim, key)
                if err then
                    return nil, nil, err
                end
                b.states[key], b.keyed = st, true
            end
            sts[i] = st
        elseif not st then -- a limit of scope queue: one state for all messages
            st, err = batch_state(b, lim, lim.key)
            if err then
                return nil, nil, err
            end
            sts[i] = st
        end
        if st.used >= st.avail then
            refused = refused or {}
            refused[#refused + 1] = st
        end
    end
    return sts, refused
end

-- Records the units of states order[1..n] (checked at `now`, st.used each); then the
-- retry-after of an exhausted state is the time until one more unit fits after what this batch
-- took. `abort`: the call ends in an error; nothing is recorded, the fixed windows' units taken
-- back.
local function batch_finish(order, n, now, abort)
    for i = 1, n do
        local st = order[i]
        local used, v = not abort and st.used or 0, st.taken
        if v then -- a fixed window: its INCRBY counted one unit (v, the value it made)
            if used == 0 then
                if v == 1 then -- the INCRBY made the key
                    r_call('DEL', st.key)
                else
                    r_call('DECRBY', st.key, '1')
                end
            elseif not st.live then -- the window's first units (the key: none, or an earlier's)
                fixed_record(st.lim.spec, nil, st.key, used, now)
            elseif used > 1 then
                r_call('INCRBY', st.key, limit_fmt(used - 1))
            end
        elseif used > 0 then
            -- checked for one unit at the same time: what one unit records; more, checked again
            if used > 1 then
                lim_check(st.lim, st.key, used, now, st)
            end
            lim_record(st, now, used)
        end
    end
end

-- A message refused by the exhausted states `refused` (checked at `now`): counted in `stats` as
-- limited by the one with the largest retry-after, and its outcome {limit name, retry_after_ms,
-- COUNT, PERIOD_MS}. Its states' counts are recorded (batch_finish): each is free to check again.
local function batch_refused(refused, now, stats)
    local worst, retry = nil, -1
    for _, st in ipairs(refused) do
        if not st.rt then
            lim_check(st.lim, st.key, 1, now, st)
            st.rt = st.ok and 0 or st.retry
        end
        if st.rt > retry then
            worst, retry = st.lim, st.rt
        end
    end
    COUNT.add(stats, 'limited:' .. worst.name, '1')
    return {worst.name, m_ceil(retry / 1000), worst.spec.n, worst.spec.p_ms}
end

-- The queue limits' state on a fresh Lua state: no limits read yet, an empty batch.
on_fresh_state(function()
    queue_limits_cache, queue_limits_cached = {}, 0
    the_batch = {lims = false, now = 0, states = {}, order = {}, n = 0, sts = {}, nl = 0,
        pool = {}, keyed = false, one = {}} -- one: the states of a one-message admission
end)
