---------------------------------------------------------------------------------------------------
-- limiter: the limiter engine - spec parsing and the five algorithms' check, record and refill,
-- used by the standalone limiter's sluice_limit (the standalone module) and by queue limits.
-- keys:  the caller's (sluice:{NS}:lim:KEY for sluice-limit; sluice:{Q}:qlim:... for queue limits)
-- state: caches of pure functions of their input (parsed specs, gcra values last written,
--        numbers formatted last, the clock's last reading as text)
---------------------------------------------------------------------------------------------------

--[[ limit: the limiter engine. One request is checked against several limits at once and
counted in all of them, or in none.

FCALL sluice_limit N key_1 .. key_N weight spec_1 .. spec_N
  weight  the cost of the request, a decimal integer 1..1000000000
  spec_i  the limit kept in key_i:
            gcra:COUNT:PERIOD_MS          burst of COUNT, then COUNT per PERIOD (GCRA)
            window:COUNT:PERIOD_MS:PRECISION_MS   sliding window in sub-buckets of PRECISION
            log:COUNT:PERIOD_MS           exact sliding window, one sorted-set member per unit
            fixed:COUNT:PERIOD_MS         fixed windows aligned to the clock (epoch multiples)
            gate:COUNT:PERIOD_MS          one unit every PERIOD/COUNT: a request of weight w
                                          closes the gate for w*PERIOD/COUNT ms (rounded up)
          COUNT 1..1000000000, PERIOD_MS 1..31622400000 (366 days), PRECISION_MS 1..PERIOD_MS
          with PERIOD_MS/PRECISION_MS <= 1000. Anything else is an error reply
          `SLUICECONFIG limit <i> "<spec>": <why>`, before anything is read or written.
reply: {allowed, limited_by, remaining, retry_after_ms, reset_ms}
  allowed         1 allowed and counted in every limit; 0 refused, nothing counted anywhere;
                  -1 never: the weight exceeds the COUNT of limit `limited_by`, so it can never
                  pass (then remaining 0, retry_after_ms -1, reset_ms 0; nothing is read)
  limited_by      0 when allowed, else the 1-based index of the refusing limit with the largest
                  retry-after (the first of them on a tie)
  remaining       the smallest remaining among all limits: after counting when allowed; when
                  refused the current one, 0 for each refusing limit
  retry_after_ms  0 when allowed, else the largest retry-after of the refusing limits, rounded
                  up: the same call made that much later passes if nothing else arrives
  reset_ms        the longest time, rounded up, until every limit is back to full capacity

Time is the server's (TIME), in integer microseconds. Every limit is checked first with reads
only; writes happen only when all of them pass, so a refused call writes nothing. Every key
written has a TTL (>= 1 ms) that outlives its state, so idle keys disappear: set with the state,
or left as it is where the TTL set before already lasts long enough (a fixed window counting in
the window it holds, a window counting in the block it counted in last). A key may
appear twice only for `window` limits of different PERIOD:PRECISION (they share one hash);
otherwise a repeated key is a SLUICECONFIG error. A key holding something else than its
algorithm's state (another algorithm's, after a key's algorithm changed) reads as empty and is
replaced when the call is counted: it never fails a call. The units a call counts in log limits
(weight x log limits) are at most LOG_MAX_UNITS (500), else a SLUICECONFIG error.

What each algorithm promises (T = PERIOD/COUNT):
  gcra    value "TAT COUNT PERIOD_MS" (TAT whole) or "TAT_INT TAT_FRAC COUNT PERIOD_MS": the
          theoretical arrival time (integer and fractional microseconds, so T need not be
          whole; the first layout whenever the fraction is 0, as it stays where T is a whole
          number of microseconds) and the limit it was written with; both are read.
          Passes when TAT + w*T - PERIOD <= now; never more than COUNT in a burst. A changed
          COUNT or PERIOD rescales the outstanding debt (TAT - now) by T_new / T_old, capped
          at the new PERIOD, and the first check writes it back with its TTL (so retry-after
          and reset never pass the new PERIOD, and the key lives as long as its debt).
          remaining = units that would pass now; reset = TAT - now.
  window  hash fields "P:PREC:" (running total), "P:PREC:l" (last block), "P:PREC:<block>"
          (units counted in block floor(now/PREC)). A unit counts until its block is
          ceil(P/PREC) blocks old, i.e. between P - PREC and P after it was made: at most
          COUNT in any window of P - PREC; retry-after is exact to that block granularity.
          Expired blocks are deleted when a request is counted (at most ceil(P/PREC) HDELs).
  log     sorted set, one member "<now_us>:<j>" per unit with score now_us. Exact: at most
          COUNT units in any window of PERIOD. Costs O(w) per counted request (w <= 500, see
          above) and O(COUNT) memory; expired members are removed when a request is checked.
  fixed   an integer TAG * 2^31 + count (TAG = k mod 2^21), TTL the window's end: at most COUNT
          per clock-aligned window [k*P, (k+1)*P) (so up to 2*COUNT across a boundary);
          retry-after = end of window. An old layout's hash {s, c} is converted in place.
  gate    a string with a TTL: passes only when the key is absent (a key without a TTL, which
          sluice never writes, counts as absent and is overwritten); then SET PX
          ceil(w*P/COUNT). remaining 1 while the gate is open, 0 while closed (so 0 right after
          a pass); retry-after = PTTL + 1 ms (Redis expires a key after, not at, its time). ]]

-- Redis's clock in microseconds: every limit's time comes from here, never from a client.
-- The same instant is kept as decimal text (now_str), made of TIME's two strings without
-- formatting a number: a log's score and member are that text. A call of log limits makes the
-- text first and its number from it (digits + 0: tonumber converts twice, through a C call);
-- any other gets its number by arithmetic on TIME's strings and the text only when asked: 0.14
-- us less a gcra or fixed call (scripts/bench-loop gcra1, fixed1), which never need the text.
local PAD6 = {'00000', '0000', '000', '00', '0', ''}
local now_n, now_text, now_t -- (set by the limiter's initialiser, as every state below)
local function now_us(text)
    local t = r_call('TIME')
    if text then -- a call of log limits: the text first, its number from it
        local u = t[2]
        now_text = t[1] .. PAD6[#u] .. u
        now_n = now_text + 0
    else
        now_t, now_text = t, false
        now_n = t[1] * 1000000 + t[2]
    end
    return now_n
end

-- The last reading of the clock (now_us) as decimal text.
local function now_str()
    if not now_text then
        local u = now_t[2]
        now_text = now_t[1] .. PAD6[#u] .. u
    end
    return now_text
end

local LIMIT_MAX_COUNT = 1000000000
local LIMIT_MAX_PERIOD_MS = 366 * 86400000
local LIMIT_MAX_BLOCKS = 1000
-- The units one sluice_limit call may count in log limits (weight x log limits): a log writes a
-- sorted-set member per unit, 1 to 3 us each, so a call stays near a millisecond.
local LOG_MAX_UNITS = 500

-- A decimal integer lo..hi (digits only), or nil.
local function limit_int(s, lo, hi)
    if type(s) ~= 'string' or #s == 0 or #s > 15 or not s_match(s, '^%d+$') then
        return nil
    end
    local n = to_number(s)
    if n < lo or n > hi then
        return nil
    end
    return n
end

-- '%d' where it prints integers up to 2^53 exactly (a 64-bit long: cheaper than '%.0f'); set
-- by the initialiser (the string library is not there while the library loads).
local int_format
--[[ Numbers formatted last, and their texts (a format costs 0.25 us, '%.17g' 0.45 us): [1], [2]
the last number limit_fmt was asked for; [3], [4] the last fractional TAT gcra wrote and its
text with the space before it (a key's debt after an idle spell is w*T: the same fraction call
after call); [5], [6] the last block a window read (a block lasts PRECISION) and [9], [10] the
window (parsed spec) that read it last and its field "P:PREC:<block>"; [7], [8] the last TTL
(ms) gcra wrote (a hot key's) and
.ttl the texts of the TTLs gcra wrote, a memo of 1,024 (a TTL is its debt in ms, below a second
for limits of periods up to a second, which a thousand keys spread over: 0.1 us a gcra limit,
scripts/bench-loop gcra1..3). One table: the library's main chunk is near Lua's limit of 200
locals. ]]
local fmt_last

-- An integer (< 2^53) as decimal text. The clock's last reading and the last number asked for
-- are kept: the limits of one call often write the same numbers. Numbers go to Redis as this
-- text: a Lua number argument is converted by Redis with '%.17g', 0.4-0.6 us a command, where
-- this costs 0.2 us (1, the usual weight, nothing).
local function limit_fmt(n)
    if n == now_n then
        return now_str()
    elseif n == 1 then
        return '1'
    end
    local last = fmt_last
    if n ~= last[1] then
        last[1], last[2] = n, s_format(int_format, n)
    end
    return last[2]
end

-- floor(a / b) for integers 0 <= a < 2^53, b > 0, exactly (no rounding of a / b).
local function limit_floor_div(a, b)
    return (a - m_fmod(a, b)) / b
end

-- ceil(w * p / n) for integers w, p, n > 0, exactly while w * p < 2^53.
local function limit_ceil_ratio(w, p, n)
    local x = w * p
    if x >= 9007199254740992 then
        return m_ceil(x / n)
    end
    local r = m_fmod(x, n)
    local q = (x - r) / n
    if r > 0 then
        q = q + 1
    end
    return q
end

local LIMIT_ALGS = {gcra = 3, window = 4, log = 3, fixed = 3, gate = 3}
local LIMIT_ENGINES -- alg -> {check, record, refill, refund}, below the engines

local function limit_spec_error(i, s, why)
    return redis.error_reply('SLUICECONFIG limit ' .. i .. ' ' ..
        s_format('%q', string.sub(tostring(s), 1, 80)) .. ': ' .. why)
end

-- Parses spec i; returns a table {alg, n, p (us), p_ms, prec (us), prec_ms, blocks, its
-- engine's check / record / refill and the texts it writes} or an error reply. One pattern
-- match on the hot path; the error paths say what is wrong. A spec is never written after
-- this: what a check finds goes into a state (limit_state).
local function limit_spec(i, s)
    local alg, sn, sp, sprec = s_match(s, '^(%a+):(%d+):(%d+):?(%d*)$')
    local want = LIMIT_ALGS[alg]
    if not want then
        alg = s_match(s, '^(%a+):')
        if not LIMIT_ALGS[alg] then
            return limit_spec_error(i, s, 'the algorithm is one of gcra, window, log, fixed, gate')
        end
        want = LIMIT_ALGS[alg]
        sn = nil
    end
    if not sn or (want == 4) ~= (sprec ~= '') then
        if want == 4 then
            return limit_spec_error(i, s, 'expected window:COUNT:PERIOD_MS:PRECISION_MS')
        end
        return limit_spec_error(i, s, 'expected ' .. alg .. ':COUNT:PERIOD_MS')
    end
    local n = limit_int(sn, 1, LIMIT_MAX_COUNT)
    if not n then
        return limit_spec_error(i, s, 'COUNT is an integer 1..1000000000')
    end
    local p_ms = limit_int(sp, 1, LIMIT_MAX_PERIOD_MS)
    if not p_ms then
        return limit_spec_error(i, s, 'PERIOD_MS is an integer 1..31622400000 (366 days)')
    end
    local e = LIMIT_ENGINES[alg]
    -- every field is there from the start: no rehash
    local l = {alg = alg, n = n, p_ms = p_ms, p = p_ms * 1000, prec = 0, prec_ms = 0, blocks = 0,
        check = e[1], record = e[2], refill = e[3], refund = e[4], tail = ' ' .. n .. ' ' .. p_ms,
        ttl = limit_fmt(p_ms + 1), window = want == 4, pre = '', pre_l = '', gate_ms = 0,
        gate_text = ''}
    if alg == 'gate' then -- a gate's interval for weight 1, the usual weight
        l.gate_ms = limit_ceil_ratio(1, p_ms, n)
        l.gate_text = limit_fmt(l.gate_ms)
    end
    if want == 4 then
        local prec_ms = limit_int(sprec, 1, p_ms)
        if not prec_ms then
            return limit_spec_error(i, s, 'PRECISION_MS is an integer 1..PERIOD_MS')
        end
        l.blocks = m_ceil(p_ms / prec_ms)
        if l.blocks > LIMIT_MAX_BLOCKS then
            return limit_spec_error(i, s, 'PERIOD_MS / PRECISION_MS is at most 1000')
        end
        l.prec_ms = prec_ms
        l.prec = prec_ms * 1000
        l.pre = p_ms .. ':' .. prec_ms .. ':'
        l.pre_l = l.pre .. 'l'
    end
    return l
end

--[[ Parsed specs by their text, so a call does not parse its limits again: a parse is a pure
function of the text, so keeping it between calls changes no result (and nothing is kept but
parses: a spec is only read). At most 256 texts (a memo, see memo_put). ]]
local spec_memo

-- Spec text s parsed, shared: read it, never write it (or the error reply naming limit i).
local function limit_spec_parsed(i, s)
    local c = spec_memo.map[s]
    if not c then
        c = limit_spec(i, s)
        if c.err then
            return c
        end
        memo_put(spec_memo, s, c)
    end
    return c
end

-- What one check of a limit finds (see below), with every field there from the start. The
-- admission's batches add key, lim, avail, used and rt (see batch_state).
local function limit_state()
    return {ok = false, left = 0, retry = 0, refill = false, count = 0, debt = 0, b = 0,
        field = '', bt = '', cur = false, expired = false, ttl = 0, live = false, s = 0,
        interval = 0, key = '', lim = false, avail = 0, used = 0, rt = false, foreign = false}
end

-- Each check(c, st, key, w, now) reads the state of limit c (a parsed spec) at time `now` (us)
-- for weight w and returns: ok (it passes), left / full (units left, us until full: as things
-- are now; full is false where only refill(c, st, key, now) reads it, when a call is refused),
-- left_after / full_after (the same once w is counted, when it passes). In st it sets retry
-- (us, when it does not pass) and what its record(c, st, key, w, now) needs. A key holding
-- something else reads as empty (st.foreign: the record replaces it). A check writes nothing,
-- but for gcra state written under another COUNT or PERIOD, restated once in this limit's terms.

-- A key that holds another algorithm's state (or anything else: a key the limiter does not
-- own) reads as empty, so a changed algorithm or a stray key never fails a call; its record
-- replaces it. EMPTY_STATE is such a read's reply (never written).
local EMPTY_STATE = {}

-- Deletes a key found holding another type than `want` when the call is counted (a call of two
-- window limits on one hash checks both before recording either: only the first deletes).
local function foreign_clear(key, want)
    if r_call('TYPE', key).ok ~= want then
        r_call('DEL', key)
    end
end

-- Whole units of interval t that fit in period p with debt d outstanding (float noise aside).
local function gcra_units(p, t, d)
    local x = (p - d) / t
    x = m_floor(x + x * 1e-12 + 1e-9)
    if x < 0 then
        return 0
    end
    return x
end

--[[ The gcra values this library wrote last, by key: {text, TAT_INT, TAT_FRAC, COUNT,
PERIOD_MS}. A value read back that is the very text written is not parsed again: a parse is a
function of the text, and these are its numbers (TAT_FRAC printed with '%.17g' reads back as
the same double). At most 32 keys, the first written since the cache started over: it starts
over every 10,000 writes, so that keys that became hot get in (numbers, not locals: the main
chunk is at Lua's limit of 200 locals). A key not in a full cache is not added: a cache that
took in every key, on calls spread over a thousand keys, cost each call 1 us of its 8 (more
than the parse it saves), and saves a hot key 0.6 us. What is kept here is in the Lua heap,
which Redis's collector steps through on every call of any function: a thousand keys kept cost
every sluice_limit call 1.4 % more instructions. ]]
local gcra_seen, gcra_seen_n, gcra_writes

local gcra_record

-- A gcra value (or nil): TAT_INT, TAT_FRAC, COUNT, PERIOD_MS, or nil when it is not one. Two
-- layouts: "TAT COUNT PERIOD_MS" (a whole TAT) and "TAT_INT TAT_FRAC COUNT PERIOD_MS".
local function gcra_parse(c, key, v)
    if l_type(v) ~= 'string' then -- none, or another type's WRONGTYPE (pcall's error table)
        return nil
    end
    local e = gcra_seen[key]
    if e and e[1] == v then
        return e[2], e[3], e[4], e[5]
    end
    -- the usual value, a whole TAT written with this very limit: its rest is the limit's tail
    -- (one string compare), its TAT digits (+ 0 converts)
    local ti, rest = s_match(v, '^(%-?%d+)( .+)$')
    if not ti then
        return nil
    end
    if rest == c.tail then
        return ti + 0, 0, c.n, c.p_ms
    end
    -- a fractional TAT (" TAT_FRAC" then the tail), or either layout under another limit
    local tf, tl = s_match(rest, '^ ([%d%.eE%-%+]+)(.*)$')
    local n0, p0 = c.n, c.p_ms
    if not tf then
        return nil
    elseif tl ~= c.tail then
        n0, p0 = s_match(tl, '^ (%d+) (%d+)$')
        if not n0 then -- "TAT COUNT PERIOD_MS": what matched as the fraction is COUNT
            n0, p0, tf = s_match(tf, '^%d+$'), s_match(tl, '^ (%d+)$'), '0'
        end
        n0, p0 = to_number(n0), to_number(p0)
        if not (n0 and p0) or n0 < 1 or p0 < 1 or n0 > LIMIT_MAX_COUNT or
            p0 > LIMIT_MAX_PERIOD_MS then
            return nil
        end
    end
    tf = to_number(tf)
    if not tf then
        return nil
    end
    return ti + 0, tf, n0, p0
end

local function gcra_check(c, st, key, w, now)
    local p = c.p
    local t = p / c.n
    local debt = 0
    -- anything but gcra state (another algorithm's, a no-scripts counter) reads as none, and
    -- the record's SET replaces it
    local ti, tf, n0, p0 = gcra_parse(c, key, r_pcall('GET', key))
    if ti then
        debt = (ti - now) + tf
        -- a TAT no clock gives (past 2^52 us, inf; nan: inf and -inf parts) reads as none: as
        -- the clock gone back it would refuse every call for as long as the key holds it
        if not (debt >= 0) or ti >= 4503599627370496 then
            debt = 0
        elseif n0 ~= c.n or p0 ~= c.p_ms then
            -- the debt in this limit's intervals, never more than its period (a full burst):
            -- written back at once, so that its TTL lasts as long as it (a refused call counts
            -- nothing; it only restates what the key holds in this limit's terms)
            debt = debt * t / (p0 * 1000 / n0)
            if debt > p then
                debt = p
            end
            st.debt = debt
            gcra_record(c, st, key, 0, now)
        elseif debt > p then -- the clock went back
            debt = p
        end
    end
    -- float noise is far below one emission interval (P*1e-12 <= T/1000)
    local after = debt + w * t
    st.retry, st.debt = after - p, after
    return after - p <= p * 1e-12, gcra_units(p, t, debt), debt, gcra_units(p, t, after), after
end

function gcra_record(c, st, key, w, now)
    local debt = st.debt
    local whole = m_floor(debt)
    local frac = debt - whole
    local last = fmt_last
    local ttl = m_ceil(debt / 1000) + 1
    if ttl ~= last[7] then -- the last one (a hot key's), else the memo
        local texts = last.ttl
        last[7], last[8] = ttl, texts.map[ttl] or memo_put(texts, ttl, s_format(int_format, ttl))
    end
    local tt, v = last[8], nil
    if frac == 0 then -- a whole TAT: "TAT COUNT PERIOD_MS"
        v = limit_fmt(now + whole) .. c.tail
    else -- "TAT_INT TAT_FRAC COUNT PERIOD_MS" (the fraction's text with its space before it)
        if frac ~= last[3] then
            last[3], last[4] = frac, ' ' .. s_format('%.17g', frac)
        end
        v = limit_fmt(now + whole) .. last[4] .. c.tail
    end
    r_call('SET', key, v, 'PX', tt)
    gcra_writes = gcra_writes + 1
    if gcra_writes >= 10000 then
        gcra_seen, gcra_seen_n, gcra_writes = {}, 0, 0
    end
    local e = gcra_seen[key]
    if not e then
        if gcra_seen_n >= 32 then
            return
        end
        e = {}
        gcra_seen[key], gcra_seen_n = e, gcra_seen_n + 1
    end
    e[1], e[2], e[3], e[4], e[5] = v, now + whole, frac, c.n, c.p_ms
end

-- A window's hash: its running total, its last block and the current block's count are read
-- together; a record writes the three back with one HSET. Its TTL (see window_expire): st.ttl
-- is TTL_FRESH for a hash without this window's state (it may have no TTL yet), TTL_RAISE for
-- one that has it, TTL_KEPT when the last block written is this one: the TTL set then already
-- lasts until this block expires.
local TTL_KEPT, TTL_RAISE, TTL_FRESH = 0, 1, 2

local function window_check(c, st, key, w, now)
    local pre, nb, prec = c.pre, c.blocks, c.prec
    local b = limit_floor_div(now, prec)
    local last = fmt_last
    if b ~= last[5] then
        last[5], last[6], last[9] = b, s_format(int_format, b), false
    end
    local bt, field = last[6], last[10]
    if c ~= last[9] then -- the block's field of another window than the last one
        field = pre .. bt
        last[9], last[10] = c, field
    end
    local v = r_pcall('HMGET', key, pre, c.pre_l, field)
    local foreign = v.err ~= nil -- not a hash: read as empty, deleted by the record
    if foreign then
        v = EMPTY_STATE
    end
    st.foreign = foreign
    local total = COUNT.of(v[1]) or 0
    local last = b -- the usual case: the same block as the last unit counted
    if v[2] ~= bt then
        last = to_number(v[2])
        -- a block no clock gives (not whole, negative, past 2^52, NaN, inf) reads as none: its
        -- neighbours would round to it and the loops below over them never end
        if last and not (last == m_floor(last) and last >= 0 and last < 4503599627370496) then
            last = nil
        end
    end
    local cur = COUNT.of(v[3]) or 0
    local expired = false
    if last == nil then
        total = 0
    else
        if last > b then -- the clock went back: keep counting in the newest block
            b, cur = last, false -- its count: not read, the record adds to it
            bt = limit_fmt(b)
            field = pre .. bt
        end
        local lo, hi = last - nb + 1, b - nb
        if hi >= last then -- everything fell out of the window
            hi = last
            total = 0
        end
        if hi >= lo then
            expired = {}
            for k = lo, hi do
                expired[#expired + 1] = pre .. limit_fmt(k)
            end
            if total > 0 then
                for _, n in ipairs(r_call('HMGET', key, unpack(expired))) do
                    total = total - (COUNT.of(n) or 0)
                end
            end
        end
        if total < 0 then
            total = 0
        end
    end
    st.b, st.bt, st.field, st.cur, st.expired, st.count = b, bt, field, cur, expired, total
    if last == nil then
        st.ttl = TTL_FRESH
    elseif last == b then
        st.ttl = TTL_KEPT
    else
        st.ttl = TTL_RAISE
    end
    local full = 0
    if total > 0 then
        full = (last + nb) * prec - now
    end
    local n = c.n
    if total + w <= n then
        return true, n - total, full, n - total - w, (b + nb) * prec - now
    end
    -- the oldest live blocks expire first: block k at (k + nb) * prec
    local need = total + w - n
    st.retry = full
    local fields = {}
    for k = b - nb + 1, last do
        fields[#fields + 1] = pre .. limit_fmt(k)
    end
    local counts = r_call('HMGET', key, unpack(fields))
    local freed = 0
    for i = 1, #fields do
        freed = freed + (COUNT.of(counts[i]) or 0)
        if freed >= need then
            st.retry = (b - nb + i + nb) * prec - now
            break
        end
    end
    return false, n - total, full, n - total - w, (b + nb) * prec - now
end

local function window_record(c, st, key, w, now)
    if st.foreign then
        foreign_clear(key, 'hash')
    end
    if st.expired then
        r_call('HDEL', key, unpack(st.expired))
    end
    if st.cur then
        r_call('HSET', key, st.field, limit_fmt(st.cur + w), c.pre, limit_fmt(st.count + w),
            c.pre_l, st.bt)
    else
        COUNT.add(key, st.field, limit_fmt(w))
        r_call('HSET', key, c.pre, limit_fmt(st.count + w), c.pre_l, st.bt)
    end
end

-- The TTL (ms) a window's hash needs once its block st.b is counted.
local function window_ttl(c, st, now)
    local ms = m_ceil(((st.b + c.blocks) * c.prec - now) / 1000)
    if ms < 1 then
        return 1
    end
    return ms
end

-- Lengthens the TTL of a window's hash to ms (windows of other periods may share it and need
-- longer) as st.ttl says: a hash that held this window's state has a TTL (PEXPIRE GT), a new
-- one may have none, where GT would never set one (PTTL first).
local function window_expire(key, ms, how)
    if how == TTL_RAISE then
        r_call('PEXPIRE', key, limit_fmt(ms), 'GT')
    elseif how == TTL_FRESH and r_call('PTTL', key) < ms then
        r_call('PEXPIRE', key, limit_fmt(ms))
    end
end

-- Trims the log at key to the units that count at `now` (a unit made at s counts while
-- now < s + P, and is removed at the first call after) and returns how many there are. A key
-- that is not a sorted set counts 0 and sets log_foreign (its record deletes it). When w more
-- units do not fit, units scored where no clock is (past 2^52 us, inf: written by hand) are
-- removed too, or they would count forever (the usual call, which fits, pays nothing for it).
local log_foreign

local function log_count(c, key, now, w)
    local bound = now - c.p
    local text = fmt_last[2] -- limit_fmt(bound), inline: limits of one period share it
    if bound ~= fmt_last[1] then
        text = limit_fmt(bound)
    end
    if l_type(r_pcall('ZREMRANGEBYSCORE', key, '-inf', text)) == 'table' then
        log_foreign = true
        return 0
    end
    local count = r_call('ZCARD', key)
    if count + w > c.n and r_call('ZREMRANGEBYSCORE', key, '(4503599627370496', '+inf') > 0 then
        count = r_call('ZCARD', key)
    end
    return count
end

-- A refused call's retry-after (us): when the (count + w - COUNT)-th oldest unit expires.
local function log_retry(c, key, count, w, now)
    local k = count + w - c.n - 1
    local r = r_call('ZRANGE', key, k, k, 'WITHSCORES')
    return to_number(r[2]) + c.p - now
end

-- Until the newest of count units expires (us): read only when a call is refused, an allowed
-- one knows it.
local function log_full(c, key, count, now)
    if count == 0 then
        return 0
    end
    local r = r_call('ZRANGE', key, -1, -1, 'WITHSCORES')
    return to_number(r[2]) + c.p - now
end

local function log_check(c, st, key, w, now)
    log_foreign = false
    local count = log_count(c, key, now, w)
    st.foreign = log_foreign
    local n, p = c.n, c.p
    st.count = count
    if count + w <= n then -- until full: log_refill reads it if the call is refused
        return true, n - count, false, n - count - w, p
    end
    st.retry = log_retry(c, key, count, w, now)
    return false, n - count, false, n - count - w, p
end

local function log_refill(c, st, key, now)
    return log_full(c, key, st.count, now)
end

local member_score, member0 -- the last score's first member name, "<score>:0"

local function log_record(c, st, key, w, now)
    local score = now_str() -- limit_fmt(now), inline
    if now ~= now_n then
        score = limit_fmt(now)
    end
    if score ~= member_score then
        member_score, member0 = score, score .. ':0'
    end
    -- members "<now>:<j>" are unique: a name already taken in this microsecond (by another
    -- call, or another limit of this call on the same key) is skipped by NX and j moves on
    if st and st.foreign then
        foreign_clear(key, 'zset')
    end
    local j, need = 0, w
    if w == 1 and r_call('ZADD', key, 'NX', score, member0) == 1 then
        need, j = 0, 1 -- the usual case: one unit, one command
    end
    while need > 0 do
        local batch = need
        if batch > 500 then
            batch = 500
        end
        local cmd = {'ZADD', key, 'NX'}
        for _ = 1, batch do
            cmd[#cmd + 1] = score
            cmd[#cmd + 1] = score .. ':' .. j
            j = j + 1
        end
        need = need - r_call(unpack(cmd))
    end
    r_call('PEXPIRE', key, c.ttl)
end

-- A fixed window is one integer at its key: TAG * 2^31 + count, TAG the window's index
-- (floor(now / P)) modulo 2^21, so a count left from another window (a key outliving its
-- window's end by its TTL's rounding, or written for another period) reads as empty: windows stay
-- aligned to the clock, exactly as the hash {s, c} they replace. INCRBY counts in place; counts are
-- at most COUNT + weight < 2^31 and values below 2^52, exact in a Lua number.

-- The value a window holding `now` starts from (its tag, count 0) and the us until it ends.
local function fixed_base(c, now)
    local into = m_fmod(now, c.p)
    return m_fmod((now - into) / c.p, 2097152) * 2147483648, c.p - into
end

-- A key not holding a string: an old layout's hash {s = window start us, c = count} of the window
-- holding `now` is converted in place (its count kept, its TTL the window's end), so no window
-- resets on an upgrade; anything else reads as empty (SET replaces it when a call is counted).
-- Gives the count and whether the key now holds this window's counter.
local function fixed_upgrade(c, key, now, base, ends)
    local v = r_pcall('HMGET', key, 's', 'c')
    if v.err or to_number(v[1]) ~= now - (c.p - ends) then
        return 0, false
    end
    local n = COUNT.of(v[2]) or 0
    r_call('SET', key, limit_fmt(base + n), 'PX', limit_fmt(m_ceil(ends / 1000)))
    return n, true
end

-- Reads the units counted in the window holding `now` (but for an old layout's conversion):
-- st.live when the key holds that window's counter.
local function fixed_check(c, st, key, w, now)
    local base, ends = fixed_base(c, now)
    local n, live, v = 0, false, r_pcall('GET', key)
    if l_type(v) == 'table' then
        n, live = fixed_upgrade(c, key, now, base, ends)
    else
        v = to_number(v) -- (a fraction, written by hand, reads as empty: counts are whole)
        if v and v >= base and v < base + 2147483648 and v == m_floor(v) then
            n, live = v - base, true
        end
    end
    st.count, st.live, st.retry = n, live, ends
    local full = 0
    if n > 0 then
        full = ends
    end
    return n + w <= c.n, c.n - n, full, c.n - n - w, ends
end

-- Counts w units in a window: INCRBY in the window the key holds (its TTL, the window's end, was
-- set with the window's first unit), else the window's first units with that TTL (st nil: a key
-- known not to hold this window).
local function fixed_record(c, st, key, w, now)
    if st and st.live then
        -- (a count in no integer's text, "5.0" or " 5", which INCRBY refuses: SET, as read)
        if l_type(r_pcall('INCRBY', key, limit_fmt(w))) == 'number' then
            return
        end
        w = w + m_ceil(st.count)
    end
    local base, ends = fixed_base(c, now)
    r_call('SET', key, limit_fmt(base + w), 'PX', limit_fmt(m_ceil(ends / 1000)))
end

local function gate_check(c, st, key, w, now)
    local ttl = r_call('PTTL', key)
    local interval = limit_ceil_ratio(w, c.p_ms, c.n)
    st.interval = interval
    -- a closed gate holds '1'; another algorithm's key read as an open gate (SET replaces it)
    if ttl < 0 or r_pcall('GET', key) ~= '1' then
        return true, 1, 0, 0, interval * 1000
    end
    st.retry = (ttl + 1) * 1000
    return false, 0, st.retry, 0, interval * 1000
end

local function gate_record(c, st, key, w, now)
    r_call('SET', key, '1', 'PX', limit_fmt(st.interval))
end

LIMIT_ENGINES = {
    gcra = {gcra_check, gcra_record},
    window = {window_check, window_record},
    log = {log_check, log_record, log_refill},
    fixed = {fixed_check, fixed_record},
    gate = {gate_check, gate_record},
}

-- The limiter's state on a fresh Lua state: empty caches and scratch tables, the clock not read.
on_fresh_state(function()
    now_n, now_text, now_t = nil, '', false
    int_format = s_format('%d', 9007199254740992) == '9007199254740992' and '%d' or '%.0f'
    member_score, member0 = nil, ''
    spec_memo = {map = {}, n = 0, max = 256}
    gcra_seen, gcra_seen_n, gcra_writes = {}, 0, 0
    fmt_last = {-1, '', 0, ' 0', -1, '', -1, '', false, '', ttl = {map = {}, n = 0, max = 1024}}
    log_foreign = false
end)

-- @module limiter_refund
-- (a part of the limiter, to the file's end, that only the EVALSHA scripts of the reads carry:
-- new state and definitions go above it; see the register module)
--[[ Refunds: units a reservation counted and did not use (a paced read's reserve, sluice_take
'reserve'; a fair read's grant, sluice_fair_grant), given back. refund(c, key, k, g, t0, now): k
of the g units counted at t0 (us, the `now` the record was made with; g may be given lower than
the units counted, never higher: a refund then gives back less); returns the units given back.
A unit is given back only where that is safe: the limit then admits no more than had the
reservation counted g - k. Where it no longer can be (the window it was counted in has ended, its
units expired, the gate reopened), less or nothing is: the limit under-delivers until those units
expire, it never admits more than it allows. The limit must be the one the units were counted
under (the callers give nothing back once the limits changed since t0). Nothing goes back for a
t0 after now (a time from another server, or made up: none of its units was counted yet).
  gcra    a time bound, sound whatever was counted or given back since: the debt (TAT - now)
          with the units and the debt had they not been counted differ by k x T after t0, and
          that difference only shrinks once the smaller debt has run out (no sooner than
          (g - k) x T after t0), by at most one T per T of time; so the debt is cut by
          min(k x T, g x T - (now - t0)) (all k at once after the reservation, then less, none
          g x T after it), never below none (TAT never behind now: an empty key). Nothing for
          a key that is gone (expired: its debt ran out), holds another algorithm's state, or
          was written under another COUNT or PERIOD (its debt restated). Returns the whole
          units the cut holds.
  fixed   the window the units were counted in is the current one: its count less k.
  window  the block the units were counted in still counts: that block and the total less k.
  log     the units not expired yet: k of the members scored t0 removed.
  gate    the gate the reservation closed is still closed (1 ms to spare, by g units' time
          from t0): its time left is cut by k units' time, floor(k x P / COUNT) ms (a gate
          grants one unit: opened). ]]
do
    LIMIT_ENGINES.gcra[4] = function(c, key, k, g, t0, now)
        local t = c.p / c.n
        local cut = math.min(k * t, g * t - (now - t0)) -- the time taken off the debt (us)
        if cut <= 0 or now < t0 then
            return 0
        end
        local v = r_pcall('GET', key)
        local st = limit_state()
        gcra_check(c, st, key, 0, now)
        if st.debt <= 0 or r_pcall('GET', key) ~= v then -- gone, or restated: nothing
            return 0
        end
        local back = gcra_units(math.min(cut, st.debt), t, 0)
        st.debt = st.debt - cut
        if st.debt <= 0 then
            r_call('DEL', key)
        else
            gcra_record(c, st, key, 0, now)
        end
        return back
    end
    LIMIT_ENGINES.fixed[4] = function(c, key, k, g, t0, now)
        local base = fixed_base(c, t0)
        if now < t0 or now - t0 >= c.p or fixed_base(c, now) ~= base then
            return 0
        end
        local n = to_number(r_pcall('GET', key))
        if not n or n < base or n >= base + 2147483648 then
            return 0
        end
        if n - base < k then
            k = n - base
        end
        if k > 0 and l_type(r_pcall('DECRBY', key, limit_fmt(k))) ~= 'number' then
            return 0 -- a count in no integer's text (see fixed_record): nothing given back
        end
        return k
    end
    LIMIT_ENGINES.window[4] = function(c, key, k, g, t0, now)
        local nb, pre = c.blocks, c.pre
        local b0 = limit_floor_div(t0, c.prec)
        if now < t0 or b0 <= limit_floor_div(now, c.prec) - nb then
            return 0 -- its units count no more
        end
        local f = pre .. limit_fmt(b0)
        local h = r_pcall('HMGET', key, f, pre, c.pre_l)
        if h.err then
            return 0
        end
        local cnt, total, last = COUNT.of(h[1]), COUNT.of(h[2]), to_number(h[3])
        if not (cnt and total and last) or b0 <= last - nb then
            return 0 -- taken out of the total already
        end
        k = math.min(k, cnt, total)
        if k > 0 then
            r_call('HSET', key, f, limit_fmt(cnt - k), pre, limit_fmt(total - k))
        end
        return k
    end
    LIMIT_ENGINES.log[4] = function(c, key, k, g, t0, now)
        if now < t0 or now - t0 >= c.p then
            return 0
        end
        local s, back = limit_fmt(t0), 0
        while back < k do
            local m = r_pcall('ZRANGEBYSCORE', key, s, s, 'LIMIT', 0, math.min(k - back, 500))
            if l_type(m) ~= 'table' or m.err or #m == 0 then
                break
            end
            r_call('ZREM', key, unpack(m))
            back = back + #m
        end
        return back
    end
    -- (the gate's time shortened by floor(k x P / COUNT) ms, not set from g: a g given lower
    -- than the reservation's then only makes the check of the first line stricter)
    LIMIT_ENGINES.gate[4] = function(c, key, k, g, t0, now)
        if now < t0 or now + 1000 >= t0 + limit_ceil_ratio(g, c.p_ms, c.n) * 1000 or
            r_pcall('GET', key) ~= '1' then
            return 0
        end
        local ttl, x = r_call('PTTL', key), k * c.p_ms
        if ttl < 0 then
            return 0
        end
        if x < 9007199254740992 then
            ttl = ttl - limit_floor_div(x, c.n)
        else
            ttl = ttl - m_floor(x / c.n) + 1
        end
        if ttl < 1 then
            r_call('DEL', key)
        else
            r_call('PEXPIRE', key, limit_fmt(ttl))
        end
        return k
    end
end
