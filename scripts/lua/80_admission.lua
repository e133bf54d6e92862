---------------------------------------------------------------------------------------------------
-- admission: admit2 and list_admit2 (limits, shares, fair lanes, idempotency), and the first
-- admission calls admit and list_admit on top of them.
-- keys:  sluice:{Q}:stream or :list, :meta, :stats, :idem:KEY; derived: :limits, :qlim:...,
--        :tdepth, the lanes
-- state: the stream a plain admission appends to (append_stream, set by admit2 before each call)
---------------------------------------------------------------------------------------------------

-- ARGV[3] of admit2: the stride (1, or 3 for tenant, client, envelope) and whether the call is
-- tentative ('1t', '3t'); nil for anything else.
local function admit_stride(a)
    if a == '1' then -- the usual stride: no conversion
        return 1, false
    end
    local tentative = a == '1t' or a == '3t'
    local stride = to_number(tentative and string.sub(a, 1, 1) or a)
    return (stride == 1 or stride == 3) and stride or nil, tentative
end

--[[ The admission loop of admit2 and list_admit2. Messages are ARGV[4..] in the stride of
ARGV[3] (see admit2); `append(envelope)` queues one and returns its id. Each message is
checked against the limits first (a limited message never takes room, and never stops the next
message of another tenant or client), then admitted while depth < capacity, else full.
Returns the reply: {admitted, depth_after, capacity, 0, acked, outcome_1, ..., outcome_n} with
outcome_i the id (admitted), 0 (full) or {limit name, retry_after_ms, COUNT, PERIOD_MS}
(limited). ]]
local EMPTY = {} -- never written

local function admit_each(keys, args, cap, depth, nlimits, append, share, K)
    local stride, tentative = admit_stride(args[3])
    local n = stride and (#args - 3) / stride
    if (stride ~= 1 and stride ~= 3) or n < 1 or n ~= m_floor(n) then
        return redis.error_reply('SLUICECONFIG sluice_admit2 takes a capacity, a TTL, a stride ' ..
            '(1 or 3) and per message an envelope (1) or tenant, client, envelope (3)')
    end
    -- a tenant names keys and lanes, and clients hold it as a C string: no NUL byte in it
    for i = 1, stride == 3 and n or 0 do
        local t = args[1 + i * 3]
        if t:find('\0', 1, true) then
            return redis.error_reply('SLUICECONFIG tenant ' .. s_format('%q', t:sub(1, 40)) ..
                ' of message ' .. i .. ' has a NUL byte')
        end
    end
    local lims, now = EMPTY, 0 -- K: the queue's keys, for limits and shares only
    if K == nil and (nlimits > 0 or share > 0) then
        K = queue_keys_of(keys[2], 'meta')
    end
    if nlimits > 0 then
        now = now_us()
        lims = queue_limits(K, ADMISSION_SCOPES, now)
        if lims.err then
            return lims
        end
    end
    local reply = {0, depth, cap, 0, -1, 0} -- the first outcome's slot made with it (n >= 1)
    local admitted, full, limited = 0, 0, 0
    if #lims == 0 and share == 0 then -- no limits, no share: the plain admission
        local take = room(cap, depth, n)
        for i = 1, take do -- the tenant (stride 3) only places the entry in a fair queue
            reply[5 + i] = append(args[3 + i * stride], stride == 3 and args[1 + i * stride] or nil,
                false)
        end
        for i = take + 1, n do
            reply[5 + i] = 0
        end
        admitted, full, depth = take, n - take, depth + take
    elseif n == 1 and share == 0 and lims.queue_only then
        -- one message under limits of scope queue only (a producer's usual call): the batch of
        -- one message, each limit's state kept by its place in the list (no batch bookkeeping)
        local nl, refused = #lims, nil
        local sts = nl <= BATCH_POOL_MAX and the_batch.one or {}
        for j = 1, nl do
            local lim, st = lims[j], sts[j] or limit_state()
            sts[j] = st
            local err = lim_check_one(lim, st, lim.key, now)
            if err then
                batch_finish(sts, j - 1, now, true)
                return err
            end
            if st.avail <= 0 then
                refused = refused or {}
                refused[#refused + 1] = st
            end
        end
        if refused then
            limited = 1
        elseif depth < cap then
            for j = 1, nl do
                sts[j].used = 1
            end
            reply[6] = append(args[3 + stride], stride == 3 and args[4] or '', false)
            admitted, depth = 1, depth + 1
        else
            full = 1 -- reply[6] is 0
        end
        batch_finish(sts, nl, now)
        if refused then
            reply[6] = batch_refused(refused, now, keys[3])
        end
    else
        local tk, held = nil, nil -- the share: entries each tenant holds
        if share > 0 then
            tk, held = K.tdepth, {}
        end
        local counting = false
        local b = batch_new(lims, now)
        local refusals = nil -- message index -> its exhausted limit states
        for i = 1, n do
            local env = 3 + i * stride -- the envelope; tenant and client before it (stride 3)
            local t, c = '', ''
            if stride == 3 then
                t, c = args[env - 2], args[env - 1]
            end
            local sts, refused, err = batch_check(b, t, c)
            if err then
                batch_finish(b.order, b.n, now, true)
                return err
            end
            if share > 0 and not held[t] then
                held[t] = COUNT.get(tk, t) or 0
            end
            if refused then
                limited = limited + 1
                refusals = refusals or {}
                refusals[i] = refused
            elseif depth < cap and (share == 0 or held[t] < share) then
                for j = 1, #lims do -- sts holds this message's states in its first #lims
                    local st = sts[j]
                    st.used = st.used + 1
                end
                if share > 0 then
                    held[t] = held[t] + 1
                    COUNT.add(tk, t, 1)
                    if not counting then -- acks read entries for their tenant from now on
                        redis.call('HSETNX', keys[2], 'tenant_counts', 1)
                        counting = true
                    end
                    reply[5 + i] = append(args[env], t, true)
                else
                    reply[5 + i] = append(args[env], t, false)
                end
                depth = depth + 1
                admitted = admitted + 1
            else
                full = full + 1
                reply[5 + i] = 0
            end
        end
        batch_finish(b.order, b.n, now)
        -- each limited message: the refusing limit with the largest retry-after
        for i, refused in pairs(refusals or EMPTY) do
            reply[5 + i] = batch_refused(refused, now, keys[3])
        end
    end
    reply[1], reply[2] = admitted, depth
    if admitted > 0 then -- as text: a Lua number argument goes through Redis's '%.17g'
        local n = admitted == 1 and '1' or limit_fmt(admitted)
        if l_type(r_pcall('HINCRBY', keys[3], 'admitted', n)) ~= 'number' then
            COUNT.add(keys[3], 'admitted', n) -- (a count that is none: see COUNT)
        end
    end
    if limited > 0 then
        COUNT.add(keys[3], 'limited', limited)
    end
    count_rejected(keys[3], full, reply, tentative)
    return reply
end

-- While the queue's slot migrates: nil when every key an admission derives is on this node
-- (the limits hash, each limit state its messages use, the share counts, the fair lanes and their
-- hashes), else TRYAGAIN; nothing is written either way.
local function admit_keys_here(keys, args, nlimits, share, fair)
    local K = queue_keys_of(keys[2], 'meta')
    local stride = admit_stride(args[3]) or 1 -- admit_each refuses a bad one
    local list = {}
    if share > 0 then
        list[#list + 1] = K.tdepth
    end
    if fair then
        for _, k in ipairs({'lanes', 'lwait', 'ring', 'wake'}) do
            list[#list + 1] = K[k]
        end
    end
    local err = slot_keys_here(K, nlimits > 0 and {K.limits} or EMPTY)
    if err then
        return err
    end
    local lims = nlimits > 0 and queue_limits(K, ADMISSION_SCOPES) or EMPTY
    if lims.err then
        return lims
    end
    for env = 4, #args, stride do -- ARGV[env] starts a message: tenant, client, envelope
        local t, c = '', ''
        if stride == 3 then
            t, c = args[env], args[env + 1]
        end
        for _, lim in ipairs(lims) do
            local v = lim.scope == 'tenant' and t or lim.scope == 'client' and c or ''
            list[#list + 1] = lim.key .. v
        end
        if fair then
            list[#list + 1] = K:lane(t)
        end
    end
    return slot_keys_here(K, list)
end

-- Appends an entry to the stream append_stream (set by admit2 before its call: no closure made
-- per call), with its tenant when the entry counts in a share.
local append_stream
local function stream_append(env, tenant, counted)
    if counted then
        return r_call('XADD', append_stream, '*', 'm', env, 'k', tenant)
    end
    return r_call('XADD', append_stream, '*', 'm', env)
end
on_fresh_state(function()
    append_stream = ''
end)

--[[ admit2 (stream backend; data model 2 of admission: limits and per-message outcomes)
KEYS[1] stream, KEYS[2] meta, KEYS[3] stats, KEYS[4] idempotency key (optional)
ARGV[1] default capacity, ARGV[2] idempotency TTL ms (with KEYS[4]: exactly one message)
ARGV[3] stride: 1 (ARGV[4..] are envelopes; no tenant, no client key) or 3 (ARGV[4..] are
triples: tenant ('' none), client key ('' none), envelope); 1t or 3t: the same, tentative (the
producer tries another partition for a message full here, so `rejected` does not count it:
each message is counted once, where its final outcome is decided)
reply: {admitted, depth_after, capacity, duplicate(0|1), acked, outcome_1, ..., outcome_n}
  outcome: the entry id (admitted), 0 (full), or {limit, retry_after_ms, COUNT, PERIOD_MS}
  (refused by that limit; retry_after_ms rounded up). A duplicate replies {1, depth,
  capacity, 1, -1, id}. Limit state keys sluice:{Q}:qlim:NAME:ALG:VALUE are derived here (same
  hash tag as KEYS). Errors: SLUICECONFIG (capacity, backend, a bad limit in sluice:{Q}:limits or
  arguments), WRONGTYPE. ]]
local function admit2(keys, args, v1)
    local cap, _, nlimits, share, fair, lane_depth = queue_settings(keys[2], args[1], 'stream')
    if l_type(cap) == 'table' then
        return cap
    end
    if v1 and nlimits > 0 then
        return refuse_v1(keys[2])
    end
    local K = nil -- the queue's keys, made once for what derives keys
    if nlimits > 0 or share > 0 or fair then
        K = queue_keys_of(keys[2], 'meta')
        if slot_migrating(K) then
            local err = admit_keys_here(keys, args, nlimits, share, fair)
            if err then
                return err
            end
        end
    end
    local depth = r_call('XLEN', keys[1]) + lane_depth
    if keys[4] then
        local seen = redis.call('GET', keys[4])
        if seen then
            return {1, depth, cap, 1, -1, seen}
        end
    end
    local append, finish = stream_append, nil
    if fair then
        append, finish = fair_appender(K)
    else
        append_stream = keys[1]
    end
    local reply = admit_each(keys, args, cap, depth, nlimits, append, share, K)
    if finish then
        finish()
    end
    if keys[4] and reply[1] == 1 then
        redis.call('SET', keys[4], reply[6], 'PX', args[2])
    end
    return reply
end

--[[ list_admit2 (list backend): as admit2; elements "<seq>:<envelope>" as list_admit. ]]
local function list_admit2(keys, args, v1)
    local cap, depth, nlimits, share = queue_settings(keys[2], args[1], 'list')
    if type(cap) == 'table' then
        return cap
    end
    if share > 0 then
        return redis.error_reply('SLUICECONFIG ' .. keys[2] .. ': a per-tenant share needs ' ..
            'the stream backend')
    end
    if v1 and nlimits > 0 then
        return refuse_v1(keys[2])
    end
    if nlimits > 0 and slot_migrating(queue_keys_of(keys[2], 'meta')) then
        local err = admit_keys_here(keys, args, nlimits, 0, false)
        if err then
            return err
        end
    end
    local elems = {}
    local seq = COUNT.get(keys[2], 'list_seq') or 0
    local reply = admit_each(keys, args, cap, depth, nlimits, function(env)
        seq = seq + 1
        local id = limit_fmt(seq)
        elems[#elems + 1] = id .. ':' .. env
        return id
    end, 0)
    if #elems > 0 then
        redis.call('LPUSH', keys[1], unpack(elems))
        redis.call('HSET', keys[2], 'list_seq', limit_fmt(seq))
        COUNT.add(keys[2], 'list_depth', #elems)
    end
    return reply
end

--[[ admit (stream backend)
KEYS[1] stream, KEYS[2] meta, KEYS[3] stats, KEYS[4] idempotency key (optional)
ARGV[1] default capacity (used when meta has no `capacity`)
ARGV[2] idempotency TTL in ms (only with KEYS[4]; exactly one envelope then)
ARGV[3..] envelopes, appended in order while depth < capacity; the rest are rejected
reply: {admitted, depth_after, capacity, duplicate(0|1), acked, id_1, ..., id_admitted}
The first admission call, kept for existing clients; it runs admit2 (so the two cannot drift)
and is refused once the queue has rate limits.
`acked` is the stats counter when something was rejected (for the drain-rate estimate behind
Retry-After), else -1. A duplicate (the idempotency key was seen within its TTL) replies
{1, depth, capacity, 1, -1, id} without appending. ]]
-- ARGV of admit/list_admit as admit2 takes them: no tenant, no client.
local function v1_args(args)
    local t = {args[1], args[2], '1'}
    for i = 3, #args do
        t[i + 1] = args[i]
    end
    return t
end

-- admit2's reply as the first call gave it: the ids of the admitted prefix.
local function v1_reply(r)
    if r.err or r[4] == 1 then
        return r
    end
    local out = {r[1], r[2], r[3], r[4], r[5]}
    for i = 1, r[1] do
        out[5 + i] = r[5 + i]
    end
    return out
end

local function admit(keys, args)
    return v1_reply(admit2(keys, v1_args(args), true))
end

--[[ list_admit (list backend). Depth = waiting + in flight is kept in meta field
`list_depth`: it changes only here and in list_ack/list_dead, so a crash cannot leak it.
Elements are "<seq>:<envelope>"; seq is the message id.
KEYS[1] list, KEYS[2] meta, KEYS[3] stats
ARGV as admit. reply as admit. ]]
local function list_admit(keys, args)
    return v1_reply(list_admit2(keys, v1_args(args), true))
end
