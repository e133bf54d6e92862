---------------------------------------------------------------------------------------------------
-- standalone: sluice_limit, the limiter's call for the standalone limiter (sluice-limit and the
-- C API's sluice_limit): its checks of N limits at once, and its shortcuts. The
-- calling convention and what each algorithm promises: the comment at the top of the limiter. A
-- call of fixed limits only, of log limits only or of gates only is served without per-limit
-- states (a call of gates only reads no clock).
-- keys:  the caller's (sluice:{NS}:lim:KEY)
-- state: scratch tables reused call after call (the specs, states, log and fixed counts of a call)
---------------------------------------------------------------------------------------------------

--[[ sluice_limit's usual call, every limit a log and weight 1 (a global and a per-category
limit, say): the general path's commands and answer, without its state and its two calls per
limit. ]]
local LIMIT_SCRATCH_MAX = 16 -- the most limits of a call whose scratch tables are kept
local fixed_counts, fixed_live, fixed_added -- scratch, call after call (fixed_counts: a log's too)

local function log_limits(cs, keys, nl, now)
    local counts, ok, left, full = fixed_counts, true, 2 ^ 53, 0
    if nl > LIMIT_SCRATCH_MAX then
        counts = {}
    end
    log_foreign = false
    for i = 1, nl do
        local c = cs[i]
        local count = log_count(c, keys[i], now, 1)
        local after = c.n - count - 1
        counts[i] = count
        if after < 0 then
            ok = false
        elseif after < left then
            left = after
        end
        if c.p > full then
            full = c.p
        end
    end
    if not ok then -- as limit's refused answer: the refusing limit with the largest retry-after
        local by, retry, left0, full0 = 0, 0, 2 ^ 53, 0
        for i = 1, nl do
            local c, key, count = cs[i], keys[i], counts[i]
            local l = c.n - count
            if l < 1 then
                l = 0
                local r = log_retry(c, key, count, 1, now)
                if by == 0 or r > retry then
                    by, retry = i, r
                end
            end
            if l < left0 then
                left0 = l
            end
            local f = log_full(c, key, count, now)
            if f > full0 then
                full0 = f
            end
        end
        return {0, by, left0, m_ceil(retry / 1000), m_ceil(full0 / 1000)}
    end
    local score = now_str()
    if score ~= member_score then
        member_score, member0 = score, score .. ':0'
    end
    if log_foreign then -- a key of another type among them (rare): each is checked
        for i = 1, nl do
            foreign_clear(keys[i], 'zset')
        end
    end
    for i = 1, nl do
        local c, key = cs[i], keys[i]
        if r_call('ZADD', key, 'NX', score, member0) == 1 then
            r_call('PEXPIRE', key, c.ttl)
        else -- "<now>:0" taken in this microsecond: the general record takes the next name
            log_record(c, nil, key, 1, now)
        end
    end
    return {1, 0, left, 0, m_ceil(full / 1000)}
end

--[[ sluice_limit's call of fixed limits only: the general path's answer, without its states and
its two calls per limit (fixed limits never share a key). Each window is counted first (INCRBY,
the one command of the common case) and taken back when a limit refuses (DECRBY, or DEL of a
key the INCRBY made), so a refused call leaves every key as it found it. ]]

local function fixed_limits(cs, keys, nl, w, now)
    local counts, live, added = fixed_counts, fixed_live, fixed_added
    if nl > LIMIT_SCRATCH_MAX then
        counts, live, added = {}, {}, {}
    end
    local ok, by, retry, wt = true, 0, 0, limit_fmt(w)
    local rem, full, rem0, full0 = 2 ^ 53, 0, 2 ^ 53, 0 -- as limit's: after, and as things are
    for i = 1, nl do
        local c = cs[i]
        local base, ends = fixed_base(c, now)
        local n, lv, v = 0, false, r_pcall('INCRBY', keys[i], wt)
        if l_type(v) == 'table' then -- not an integer string: an old layout's hash, or foreign
            n, lv = fixed_upgrade(c, keys[i], now, base, ends)
            v = lv and r_call('INCRBY', keys[i], wt)
        elseif v > w and v >= base + w and v < base + 2147483648 then
            n, lv = v - base - w, true
        end
        counts[i], live[i], added[i] = n, lv, v
        local left = c.n - n
        if left - w < rem then
            rem = left - w
        end
        if ends > full then
            full = ends
        end
        if left < w then
            ok, left = false, 0
            if by == 0 or ends > retry then
                by, retry = i, ends
            end
        end
        if left < rem0 then
            rem0 = left
        end
        if n > 0 and ends > full0 then
            full0 = ends
        end
    end
    if not ok then
        for i = 1, nl do
            local v = added[i]
            if v == w then -- the INCRBY made the key
                r_call('DEL', keys[i])
            elseif v then
                r_call('DECRBY', keys[i], wt)
            end
        end
        return {0, by, rem0, m_ceil(retry / 1000), m_ceil(full0 / 1000)}
    end
    for i = 1, nl do
        if not live[i] then
            fixed_record(cs[i], nil, keys[i], w, now)
        end
    end
    return {1, 0, rem, 0, m_ceil(full / 1000)}
end

--[[ sluice_limit's call of gates only: the general path's answer, without its states. A gate is
closed while its key holds '1' with a TTL; a key without a TTL, or holding anything else, reads
as an open gate as in gate_check and is overwritten when the call passes. One gate is closed at
once when open (SET NX GET PX, the one command of the common case, where a check and a record take
PTTL and SET; a key found holding '1' is asked its PTTL). Several are read first (PTTL) and
closed (SET PX) when all are open: a refused call writes nothing and undoes nothing (closing each
at once took a SET and a DEL for every open gate of a refused call, and a call of several gates is
refused more often than one of one). Of those with a TTL only the one that would answer (the
longest PTTL) is asked whether it holds '1' (GET), and the next one when it does not: a refused
call of several gates reads one value, not every closed gate's. ]]
local function gate_limits(cs, keys, nl, w)
    local redo, ttls = fixed_live, fixed_counts -- the texts to write when the call passes; PTTLs
    if nl > LIMIT_SCRATCH_MAX then
        redo, ttls = {}, {}
    end
    local by, retry, full = 0, -1, 0
    for i = 1, nl do
        local c, key = cs[i], keys[i]
        local ms, text = c.gate_ms, c.gate_text
        if w ~= 1 then
            ms = limit_ceil_ratio(w, c.p_ms, c.n)
            text = limit_fmt(ms)
        end
        local ttl = -1
        if nl == 1 then
            local v = r_pcall('SET', key, '1', 'NX', 'GET', 'PX', text)
            if v == '1' then
                ttl = r_call('PTTL', key)
            end
            redo[i] = v and text -- none: the SET made it
        else
            ttl = r_call('PTTL', key)
            redo[i] = text
        end
        ttls[i] = ttl
        if ttl > retry then -- the longest PTTL, the first on a tie
            by, retry = i, ttl
        end
        if ms > full then
            full = ms
        end
    end
    -- a key with a TTL holding another value or type reads as open: the next longest answers
    while by > 0 and nl > 1 and r_pcall('GET', keys[by]) ~= '1' do
        ttls[by] = -1
        by, retry = 0, -1
        for i = 1, nl do
            if ttls[i] > retry then
                by, retry = i, ttls[i]
            end
        end
    end
    if by > 0 then -- closed: retry-after PTTL + 1 ms (Redis expires a key after its time);
        -- remaining 0 (a gate is closed); full again when the last one opens
        return {0, by, 0, retry + 1, retry + 1}
    end
    for i = 1, nl do
        if redo[i] then
            r_call('SET', keys[i], '1', 'PX', redo[i])
        end
    end
    return {1, 0, 0, 0, full}
end

-- sluice_limit's specs and states, reused call after call (a call sets what it reads); a call
-- of more limits than LIMIT_SCRATCH_MAX makes its own.
local limit_specs, limit_states

-- Whether `key` of limit c was given by an earlier limit of the call, which only window limits
-- of different PERIOD:PRECISION may share: the check for calls of many limits (a few are
-- compared pair by pair). seen: key -> 'window' or 'other', and key .. ' ' .. a window's tag.
local function limit_dup(seen, key, c)
    local kind = c.alg == 'window' and 'window' or 'other'
    local tag = kind == 'window' and key .. ' ' .. c.pre
    if (seen[key] and (kind == 'other' or seen[key] == 'other')) or (tag and seen[tag]) then
        return true
    end
    seen[key] = kind
    if tag then
        seen[tag] = true
    end
    return false
end

local function limit(keys, args)
    local nl = #keys
    if nl < 1 or #args ~= nl + 1 then
        return redis.error_reply('SLUICECONFIG sluice_limit takes N keys, a weight and N specs' ..
            ' (got ' .. nl .. ' keys and ' .. #args .. ' arguments)')
    end
    local w = 1
    if args[1] ~= '1' then
        w = limit_int(args[1], 1, LIMIT_MAX_COUNT)
        if not w then
            return redis.error_reply('SLUICECONFIG weight ' ..
                s_format('%q', string.sub(tostring(args[1]), 1, 40)) ..
                ' is not an integer 1..1000000000')
        end
    end
    local cs, sts = limit_specs, limit_states
    if nl > LIMIT_SCRATCH_MAX then
        cs, sts = {}, {}
    end
    local seen = nl > 8 and {} or nil
    local windows, never, nlogs, alg = false, nil, 0, nil -- alg: every limit's, else false
    local parsed = spec_memo.map
    for i = 1, nl do
        local c = parsed[args[i + 1]]
        if not c then
            c = limit_spec_parsed(i, args[i + 1])
            if c.err then
                return c
            end
        end
        local key, dup = keys[i], false
        if seen then
            dup = limit_dup(seen, key, c)
        else
            for j = 1, i - 1 do
                if keys[j] == key and not (c.window and cs[j].window and c.pre ~= cs[j].pre) then
                    dup = true
                    break
                end
            end
        end
        if dup then
            return redis.error_reply('SLUICECONFIG key ' .. key .. ' is given twice (limit ' ..
                i .. '); only window limits of different PERIOD:PRECISION may share a key')
        end
        cs[i] = c
        local a = c.alg
        if a ~= alg then
            alg = i == 1 and a
        end
        if a == 'window' then
            windows = true
        elseif a == 'log' then
            nlogs = nlogs + 1
        end
        if w > c.n and not never then
            never = i
        end
    end
    if never then -- the first limit whose COUNT is below the weight
        return {-1, never, 0, -1, 0}
    end
    if w * nlogs > LOG_MAX_UNITS then
        return redis.error_reply('SLUICECONFIG weight ' .. w .. ' in ' .. nlogs ..
            ' log limit(s) is ' .. limit_fmt(w * nlogs) .. ' units; a call counts at most ' ..
            LOG_MAX_UNITS .. ' in log limits (a sorted-set member each): use gcra or window' ..
            ' for heavier requests')
    end
    if alg == 'log' and w == 1 then
        return log_limits(cs, keys, nl, now_us(true))
    elseif alg == 'fixed' then
        return fixed_limits(cs, keys, nl, w, now_us())
    elseif alg == 'gate' then
        return gate_limits(cs, keys, nl, w)
    end
    -- every limit checked: the figures of both answers are gathered as they come
    local now = now_us(nlogs > 0)
    local ok, by, retry = true, 0, 0
    local rem, full = 2 ^ 53, 0 -- allowed: smallest left, longest until full (after)
    local rem0, full0 = 2 ^ 53, 0 -- refused: the same as things are now
    for i = 1, nl do
        local c, st = cs[i], sts[i]
        if not st then
            st = limit_state()
            sts[i] = st
        end
        local pass, left, f, left_after, f_after = c.check(c, st, keys[i], w, now)
        if pass == nil then
            return left
        end
        if left_after < rem then
            rem = left_after
        end
        if f_after > full then
            full = f_after
        end
        if not pass then
            ok, left = false, 0
            if by == 0 or st.retry > retry then
                by, retry = i, st.retry
            end
        end
        if left < rem0 then
            rem0 = left
        end
        if f == false then -- an algorithm that reads it only when the call is refused
            st.refill = true
        else
            st.refill = false
            if f > full0 then
                full0 = f
            end
        end
    end
    if not ok then -- counted nowhere; the refusing limit with the largest retry-after
        for i = 1, nl do
            local c, st = cs[i], sts[i]
            if st.refill then
                local f = c.refill(c, st, keys[i], now)
                if f > full0 then
                    full0 = f
                end
            end
        end
        return {0, by, rem0, m_ceil(retry / 1000), m_ceil(full0 / 1000)}
    end
    for i = 1, nl do
        local c = cs[i]
        c.record(c, sts[i], keys[i], w, now)
    end
    if windows then -- a hash shared by windows lives as long as its longest window needs
        local ttl, how = {}, {}
        for i = 1, nl do
            local c, st, key = cs[i], sts[i], keys[i]
            if c.alg == 'window' then
                local ms = window_ttl(c, st, now)
                if (ttl[key] or 0) < ms then
                    ttl[key] = ms
                end
                if (how[key] or TTL_KEPT) < st.ttl then
                    how[key] = st.ttl
                end
            end
        end
        for key, ms in pairs(ttl) do
            window_expire(key, ms, how[key] or TTL_KEPT)
        end
    end
    return {1, 0, rem, 0, m_ceil(full / 1000)}
end

-- sluice_limit's scratch on a fresh Lua state.
on_fresh_state(function()
    fixed_counts, fixed_live, fixed_added = {}, {}, {}
    limit_specs, limit_states = {}, {}
end)
