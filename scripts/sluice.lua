#!lua name=sluice
--[[
sluice server-side library, data model version 1.

The single source of every atomic operation sluice performs. It is embedded into the binaries
at build time and loaded with FUNCTION LOAD (Redis 7); on servers without functions each
function is run as a script with EVALSHA (the loader appends `return entry(fn)(KEYS, ARGV)` to the
text above the REGISTER marker and drops the shebang line).

Every key a function touches is passed in KEYS; all keys of one queue share the hash tag {Q}.
Counters live in sluice:{Q}:stats (admitted, rejected, acked, retried, dead, reclaimed).
Never bound the stream with MAXLEN: it would drop admitted work silently.
]]

local VERSION = '1:@LIBRARY_HASH@' -- data model 1, then the hash of this file

-- A capacity is an integer 0..2^53 written in decimal digits, nothing else (no sign, point,
-- exponent, hex, inf or nan): the rule every reader applies (sluice_capacity_parse in C).
-- 0 is a closed bucket: everything is rejected as full.
local MAX_CAPACITY_TEXT = '9007199254740992'
local function parse_capacity(s)
    if type(s) ~= 'string' or #s == 0 or #s > 16 or not string.match(s, '^%d+$') then
        return nil
    end
    -- compared as text: doubles cannot tell 2^53 from 2^53 + 1
    s = string.gsub(s, '^0+(%d)', '%1')
    if #s == 16 and s > MAX_CAPACITY_TEXT then
        return nil
    end
    return tonumber(s)
end

-- The settings of a queue that admits or replays, read with one HMGET of its meta hash:
-- the capacity in force (meta's `capacity`, else the caller's default) and the list depth.
-- Everything is checked before anything is written, so a bad capacity never admits part of a
-- batch. The backend a queue was created with is recorded (`backend`) by its first admission;
-- a client of the other backend is refused instead of silently splitting the queue in two
-- (docs/faults.md B19). Returns capacity, list depth (0 for streams), or an error reply.
local function queue_settings(meta, default, backend)
    local v = redis.call('HMGET', meta, 'capacity', 'backend', 'list_depth', 'limits', 'per_tenant',
        'fair', 'lane_depth')
    local raw = v[1] or default
    local cap = parse_capacity(raw)
    if cap == nil then
        return redis.error_reply('SLUICECONFIG invalid capacity ' .. string.format('%q',
            string.sub(tostring(raw), 1, 40)) .. ' in ' .. meta ..
            ' (an integer 0..9007199254740992)')
    end
    if not v[2] then -- HSETNX: what a producer's ACL allows on meta (docs/guarantees.md, Least privilege)
        redis.call('HSETNX', meta, 'backend', backend)
    elseif v[2] ~= backend then
        return redis.error_reply('SLUICECONFIG ' .. meta .. ' is a ' .. v[2] ..
            ' queue; this client uses the ' .. backend .. ' backend')
    end
    return cap, tonumber(v[3]) or 0, tonumber(v[4]) or 0, tonumber(v[5]) or 0, v[6] == '1',
        tonumber(v[7]) or 0
end

-- Callers of the first admission functions (sluice_admit, sluice_list_admit) know nothing of
-- limits: once a queue has some, they are refused rather than let past them.
local function refuse_v1(meta)
    return redis.error_reply('SLUICECONFIG ' .. meta .. ' has rate limits; this client ' ..
        'predates them (it calls sluice_admit, limits need sluice_admit2)')
end

-- A field of a stream entry's field list (flat name, value, ...), or nil.
local function field(fields, name)
    for i = 1, #fields, 2 do
        if fields[i] == name then
            return fields[i + 1]
        end
    end
    return nil
end

-- The `m` field (the envelope).
local function field_m(fields)
    return field(fields, 'm')
end

--[[ A tenant's share of the bucket (meta `per_tenant` = M, stream backend): no tenant holds more
than M entries, waiting + in flight. sluice:{Q}:tdepth counts per tenant the entries admitted
while a share was set; those entries carry their tenant in the field `k`, and an entry's count
goes when the entry goes (ack, dead), in the same function call: exact through crashes, and a
share switched on or off later never makes a count drift. ]]
local function tdepth_key(prefix)
    return prefix .. 'tdepth'
end

-- Lowers the count of the tenant of entry `e` ({id, fields}) when it carries one. A count at 0
-- is removed when the caller may (HDEL is not in the worker's ACL of earlier versions).
local function tdepth_release_entry(tk, e)
    local t = field(e[2], 'k')
    if t and redis.call('HINCRBY', tk, t, -1) <= 0 and
        (not redis.acl_check_cmd or redis.acl_check_cmd('HDEL', tk, t)) then
        redis.call('HDEL', tk, t)
    end
end

-- The same for the entries `ids` of `stream` (the queue's stream or a lane), before they are
-- deleted. Only queues that ever counted tenants (meta `tenant_counts`, set by the first counted
-- admission; the caller read it: `counted`) read the entries.
local function tdepth_release(prefix, stream, ids, counted)
    if not counted then
        return
    end
    local tk = tdepth_key(prefix)
    for _, id in ipairs(ids) do
        local e = redis.call('XRANGE', stream, id, id)
        if e[1] then
            tdepth_release_entry(tk, e[1])
        end
    end
end

-- How many of n envelopes fit: the admission rule, in one place for both backends.
local function room(cap, depth, n)
    local take = cap - depth
    if take > n then
        return n
    elseif take < 0 then
        return 0
    end
    return take
end

-- Counts rejections and puts the `acked` counter into reply[5] (for the drain-rate estimate
-- behind Retry-After) when there were any. A tentative call's are not counted: the producer
-- tries another partition, which counts the message's final outcome.
local function count_rejected(stats, rejected, reply, tentative)
    if rejected > 0 then
        if not tentative then
            redis.call('HINCRBY', stats, 'rejected', rejected)
        end
        reply[5] = tonumber(redis.call('HGET', stats, 'acked')) or 0
    end
end

--[[ Keys a function derives, and slot migrations. KEYS holds the keys a client names (stream,
meta, stats, ...); the rest a function derives from the queue's prefix and what it reads there
(the limits hash and limit state, the share counts, fair lanes and their hashes), all under the
queue's hash tag {Q}. On one node, or while the queue's slot stays on its node, that is the
same. While the slot migrates it is not: Redis checks the declared keys before a call runs (ASK
when they have all moved, TRYAGAIN when some have), but a derived key it finds missing fails
the call where it stands ("non local key", after what it already wrote), and on the importing
node a derived key still on the source reads as empty. So a function that will derive keys first
asks whether its slot is migrating - one EXISTS of two keys that never exist: refused inside a
script on the source (a missing key may have moved) and on the importing node (a multi-key
command naming a missing key), 0 anywhere else - and while it is, runs only if every key it
derives is on this node (EXISTS each, as Redis checks declared keys), else answers TRYAGAIN
before it writes anything: the answer Redis gives a multi-key call it cannot serve, which
clients retry within their deadline. Admissions and acks check their keys so; the worker's reads,
lane reclaim and the admin calls, which derive many, answer TRYAGAIN for the whole migration. Plain
admissions and acks derive nothing and pay nothing; the others pay the one EXISTS (an ACL
without EXISTS gets HGET, which sees the source side only, and every check fails). Only Redis's
own refusal of a key in a cluster ("Script attempted to access a non local key...", or the
cluster is down) says so: any other error - an ACL's, worded "NOPERM ..." or "The user executing
the script can't run this command" by Redis version - is not a migration. ]]
local function cluster_refused(r)
    return type(r) == 'table' and r.err ~= nil and
        string.find(r.err, 'Script attempted', 1, true) ~= nil
end
local function slot_migrating(prefix)
    local a, b = prefix .. 'migrating?', prefix .. 'migrating?2'
    local r = redis.pcall('EXISTS', a, b)
    if type(r) == 'table' and r.err ~= nil and not cluster_refused(r) then
        r = redis.pcall('HGET', a, 'x') -- this user may not run EXISTS
    end
    return cluster_refused(r)
end

local function slot_tryagain(prefix)
    return redis.error_reply('TRYAGAIN ' .. prefix .. '* is being migrated to another node ' ..
        '(this call derives keys Redis cannot route until the migration ends)')
end

-- While the slot migrates: nil when every key of `list` is on this node, else TRYAGAIN.
local function slot_keys_here(prefix, list)
    for _, k in ipairs(list) do
        if redis.pcall('EXISTS', k) ~= 1 then
            return slot_tryagain(prefix)
        end
    end
    return nil
end

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
local function lane_key(prefix, t)
    if t == '' then
        return prefix .. 'stream'
    end
    return prefix .. 'lane:' .. t
end

-- The tenant of a lane key: '' for the queue's stream, nil for a key of another queue.
local function lane_tenant(prefix, key)
    if key == prefix .. 'stream' then
        return ''
    elseif string.sub(key, 1, #prefix + 5) == prefix .. 'lane:' then
        return string.sub(key, #prefix + 6)
    end
    return nil
end

-- Counts entries just added to lanes (added: tenant -> n, order: the tenants in first-added
-- order), puts lanes that had nothing undelivered into the ring and leaves a wake-up token.
local function lanes_added(prefix, added, order)
    local depth, wait, woke = 0, 0, false
    for _, t in ipairs(order) do
        local c = added[t]
        if t ~= '' then
            redis.call('HINCRBY', prefix .. 'lanes', t, c)
            depth, wait = depth + c, wait + c
        end
        if redis.call('HINCRBY', prefix .. 'lwait', t, c) == c then
            redis.call('RPUSH', prefix .. 'ring', t)
            woke = true
        end
    end
    if depth > 0 then
        redis.call('HINCRBY', prefix .. 'meta', 'lane_depth', depth)
        redis.call('HINCRBY', prefix .. 'meta', 'lane_wait', wait)
    end
    if woke and redis.call('LLEN', prefix .. 'wake') == 0 then
        redis.call('RPUSH', prefix .. 'wake', 1)
    end
end

-- Counts n entries deleted from tenant lane t (ack, dead). An empty lane's stream goes (with
-- its group, made again when the lane is next read) and its served count: tenants come and go,
-- their lanes with them, and an idle tenant keeps nothing.
local function lane_removed(prefix, t, n)
    if t == '' or n <= 0 then
        return
    end
    if redis.call('HINCRBY', prefix .. 'lanes', t, -n) <= 0 then
        redis.call('HDEL', prefix .. 'lanes', t)
        redis.call('HDEL', prefix .. 'served', t)
        redis.call('DEL', lane_key(prefix, t))
    end
    redis.call('HINCRBY', prefix .. 'meta', 'lane_depth', -n)
end

-- An admission's or replay's way into a fair queue: append(env, tenant, counted) adds to the
-- tenant's lane and notes it; finish() does the counting once for the whole call. The field `k`
-- keeps meaning "counted in the tenant's share" (counted): a lane's tenant is in its key.
local function fair_appender(prefix)
    local added, order = {}, {}
    local function append(env, tenant, counted)
        tenant = tenant or ''
        if not added[tenant] then
            added[tenant] = 0
            order[#order + 1] = tenant
        end
        added[tenant] = added[tenant] + 1
        if counted then
            return redis.call('XADD', lane_key(prefix, tenant), '*', 'm', env, 'k', tenant)
        end
        return redis.call('XADD', lane_key(prefix, tenant), '*', 'm', env)
    end
    local function finish()
        lanes_added(prefix, added, order)
    end
    return append, finish
end


--[[ ack (stream backend): acknowledge and delete in one step, so depth never leaks.
KEYS[1] stream (or a lane of a fair queue), KEYS[2] stats, KEYS[3] meta (optional: derived when
absent, which costs the slot check below on every call)
ARGV[1] group, ARGV[2..] entry ids
reply: number of ids that were pending (acked now); ids acked earlier (after a reclaim by
another worker) count 0 and are not deleted twice. A missing stream or group acks nothing (0).
A lane, or a queue that counts tenants, derives keys (tdepth, lanes): while its slot migrates
they must be on this node, else TRYAGAIN (see slot_migrating); `checked`: the caller (lane_ack)
checked already.
errors: ERR (an id that is not a stream id, or no id at all), WRONGTYPE (KEYS[1] is not a
stream, KEYS[2] not a hash), TRYAGAIN (nothing written) ]]
local function ack(keys, args, checked)
    local prefix = string.sub(keys[2], 1, -6) -- "sluice:{Q}:" of "...stats"
    local lane = lane_tenant(prefix, keys[1]) or ''
    if not keys[3] and not checked then
        if slot_migrating(prefix) then
            return slot_tryagain(prefix)
        end
        checked = true
    end
    local counted = redis.call('HGET', keys[3] or prefix .. 'meta', 'tenant_counts')
    if (counted or lane ~= '') and not checked and slot_migrating(prefix) then
        local list = {} -- derived: they must all be here
        if counted then
            list[1] = tdepth_key(prefix)
        end
        if lane ~= '' then
            list[#list + 1] = prefix .. 'lanes'
        end
        local err = slot_keys_here(prefix, list)
        if err then
            return err
        end
    end
    local ids = {}
    for i = 2, #args do
        ids[#ids + 1] = args[i]
    end
    local n = redis.call('XACK', keys[1], args[1], unpack(ids))
    tdepth_release(prefix, keys[1], ids, counted)
    local d = redis.call('XDEL', keys[1], unpack(ids))
    lane_removed(prefix, lane, d)
    if n > 0 then
        redis.call('HINCRBY', keys[2], 'acked', n)
    end
    return n
end

--[[ dead (stream backend): move one entry to the dead stream with its reason, then ack + delete.
KEYS[1] stream (or a lane of a fair queue), KEYS[2] dead, KEYS[3] stats
ARGV[1] group, ARGV[2] id, ARGV[3] consumer, ARGV[4] delivery count, ARGV[5] reason
reply: 1 if the entry still had a body, 0 if it had been deleted (it is acked either way).
errors: ERR (ARGV[2] is not a stream id; checked by the XRANGE before anything is written),
WRONGTYPE (KEYS[1] or KEYS[2] is not a stream, KEYS[3] not a hash) ]]
local function dead(keys, args)
    local e = redis.call('XRANGE', keys[1], args[2], args[2])
    local body, tenant = '', nil
    if e[1] then
        body = field_m(e[1][2]) or ''
        tenant = field(e[1][2], 'k')
    end
    local prefix = string.sub(keys[3], 1, -6)
    local lane = lane_tenant(prefix, keys[1])
    if (tenant or (lane and lane ~= '')) and slot_migrating(prefix) then
        return slot_tryagain(prefix) -- tdepth, lanes: derived (see slot_migrating)
    end
    local letter = {'XADD', keys[2], '*', 'id', args[2], 'm', body, 'deliveries', args[4],
        'consumer', args[3], 'reason', args[5]}
    if tenant then -- kept with the letter, so a replay counts it in its tenant's share again
        letter[#letter + 1], letter[#letter + 2] = 'k', tenant
        tdepth_release_entry(tdepth_key(prefix), e[1])
    end
    if lane and lane ~= '' then -- and a replay puts it back into its lane
        letter[#letter + 1], letter[#letter + 2] = 'lane', lane
    end
    redis.call(unpack(letter))
    redis.call('XACK', keys[1], args[1], args[2])
    lane_removed(prefix, lane_tenant(prefix, keys[1]) or '', redis.call('XDEL', keys[1], args[2]))
    redis.call('HINCRBY', keys[3], 'dead', 1)
    if e[1] then
        return 1
    end
    return 0
end

--[[ retry (stream backend): leave the entry pending but make it look idle for
(visibility timeout - backoff) ms, so any worker's reclaim pass takes it after `backoff` ms.
KEYS[1] stream, KEYS[2] stats
ARGV[1] group, ARGV[2] consumer, ARGV[3] id, ARGV[4] idle ms to set
reply: 1 if the entry was still pending, else 0
errors: NOGROUP (the stream or the group is missing), ERR (a malformed id or idle time),
WRONGTYPE (KEYS[1] is not a stream, KEYS[2] not a hash) ]]
local function retry(keys, args)
    local r = redis.call('XCLAIM', keys[1], args[1], args[2], 0, args[3], 'IDLE', args[4],
        'JUSTID')
    if #r > 0 then -- an entry no longer pending (acked after a reclaim) was not retried
        redis.call('HINCRBY', keys[2], 'retried', 1)
    end
    return #r
end

--[[ reclaim (stream backend): claim entries idle longer than the visibility timeout.
KEYS[1] stream, KEYS[2] stats
ARGV[1] group, ARGV[2] consumer, ARGV[3] min idle ms, ARGV[4] start id, ARGV[5] count
reply: {next_cursor, {{id, body_or_false, deliveries}, ...}, {deleted ids}}
`deliveries` counts the claim just made (an entry read 3 times reports 4). The counts come from
one XPENDING with the filter XAUTOCLAIM applies (IDLE min, from the same start, same COUNT), read
before the claim and plus one; an entry it did not list (it became idle between the two calls,
or deleted entries filled the COUNT) is looked up on its own. Cost: one XPENDING + one
XAUTOCLAIM, O(COUNT) (plus O(log N) per looked-up entry).
errors: NOGROUP (the stream or the group is missing), WRONGTYPE (KEYS[1] is not a stream,
KEYS[2] not a hash), ERR (a malformed min idle, start id or count) ]]
local function reclaim(keys, args)
    local seen = {}
    for _, p in ipairs(redis.call('XPENDING', keys[1], args[1], 'IDLE', args[3], args[4], '+',
        args[5])) do
        seen[p[1]] = p[4] + 1
    end
    local r = redis.call('XAUTOCLAIM', keys[1], args[1], args[2], args[3], args[4], 'COUNT',
        args[5])
    local out = {}
    for i, e in ipairs(r[2]) do
        local body = false
        if e[2] then
            body = field_m(e[2]) or false
        end
        local count = seen[e[1]]
        if count == nil then
            local p = redis.call('XPENDING', keys[1], args[1], e[1], e[1], 1)
            count = 1
            if p[1] then
                count = p[1][4]
            end
        end
        out[i] = {e[1], body, count}
    end
    if #out > 0 then
        redis.call('HINCRBY', keys[2], 'reclaimed', #out)
    end
    return {r[1], out, r[3] or {}}
end

-- A stream id "<ms>-<seq>" as two decimal texts without leading zeros, or nil for anything else
-- (the parts may exceed 2^53, so they are compared as text).
local function stream_id_parts(id)
    local ms, seq = string.match(id, '^(%d+)%-(%d+)$')
    if not ms or #ms > 20 or #seq > 20 then
        return nil
    end
    return (string.gsub(ms, '^0+(%d)', '%1')), (string.gsub(seq, '^0+(%d)', '%1'))
end

-- Compares two decimal texts without leading zeros: -1, 0 or 1.
local function decimal_cmp(a, b)
    if #a ~= #b then
        return #a < #b and -1 or 1
    elseif a == b then
        return 0
    end
    return a < b and -1 or 1
end

-- Stream id order of two parsed ids {ms, seq}: true when a comes before b.
local function stream_id_less(a, b)
    local c = decimal_cmp(a[1], b[1])
    if c == 0 then
        c = decimal_cmp(a[2], b[2])
    end
    return c < 0
end

--[[ touch (stream backend): the owner's heartbeat for long jobs. Re-claims (JUSTID, which
resets idle time without counting a delivery) each id still owned by `consumer`.
KEYS[1] stream
ARGV[1] group, ARGV[2] consumer, ARGV[3..] ids
reply: the ids no longer owned by `consumer` (another worker took them), in ARGV order
Which ids the consumer owns is read with one XPENDING over [smallest id, largest id] filtered
by consumer, COUNT #ids + 1000 (the consumer's other pending entries in that range count
too); when that reply is full, or an id is not of the form <ms>-<seq>, the ids it did not list
are checked one XPENDING each. Then one XCLAIM ... JUSTID re-claims all the owned ids.
Cost: 2 calls, O(#ids + pending entries of the consumer in the range), in the usual case.
errors: NOGROUP (the stream or the group is missing), WRONGTYPE (KEYS[1] is not a stream),
ERR (an id that is not a stream id) ]]
local function touch(keys, args)
    local lo, hi, lo_id, hi_id
    local one_by_one = false
    for i = 3, #args do
        local ms, seq = stream_id_parts(args[i])
        if not ms then
            one_by_one = true
        else
            local p = {ms, seq}
            if not lo or stream_id_less(p, lo) then
                lo, lo_id = p, args[i]
            end
            if not hi or stream_id_less(hi, p) then
                hi, hi_id = p, args[i]
            end
        end
    end
    local owned = {}
    if lo then
        local limit = #args - 2 + 1000
        local r = redis.call('XPENDING', keys[1], args[1], lo_id, hi_id, limit, args[2])
        for _, p in ipairs(r) do
            owned[p[1]] = true
        end
        one_by_one = one_by_one or #r >= limit
    end
    local lost, claim, queued = {}, {}, {}
    for i = 3, #args do
        local id = args[i]
        local ms, seq = stream_id_parts(id)
        local mine = ms and owned[ms .. '-' .. seq]
        if not mine and one_by_one then
            mine = redis.call('XPENDING', keys[1], args[1], id, id, 1, args[2])[1] ~= nil
        end
        if mine then
            if not queued[id] then
                queued[id] = true
                claim[#claim + 1] = id
            end
        else
            lost[#lost + 1] = id
        end
    end
    for i = 1, #claim, 1000 do -- one call unless more than 1000 ids (Lua's unpack limit)
        local cmd = {'XCLAIM', keys[1], args[1], args[2], 0}
        for j = i, math.min(i + 999, #claim) do
            cmd[#cmd + 1] = claim[j]
        end
        cmd[#cmd + 1] = 'JUSTID'
        redis.call(unpack(cmd))
    end
    return lost
end


--[[ list_take (list backend): move up to ARGV[1] elements into the consumer's processing list.
KEYS[1] list, KEYS[2] processing list, KEYS[3] procs set
reply: the elements, oldest first
errors: ERR (ARGV[1] is not a number: a Lua error, before anything is moved), WRONGTYPE
(KEYS[1] or KEYS[2] is not a list, KEYS[3] not a set) ]]
local function list_take(keys, args)
    local out = {}
    for i = 1, tonumber(args[1]) do
        local e = redis.call('LMOVE', keys[1], keys[2], 'RIGHT', 'LEFT')
        if not e then
            break
        end
        out[i] = e
    end
    redis.call('SADD', keys[3], keys[2])
    return out
end

-- Lowers the list backend's depth counter by n, never below 0: an element pushed by someone
-- else (not through list_admit) was never counted, and must not make the bucket admit one
-- more than its capacity forever after (docs/faults.md B17).
local function list_depth_sub(meta, n)
    local depth = tonumber(redis.call('HGET', meta, 'list_depth')) or 0
    if n > depth then
        n = depth
    end
    if n > 0 then
        redis.call('HINCRBY', meta, 'list_depth', -n)
    end
end

--[[ list_ack (list backend): remove processed elements from the processing list.
KEYS[1] processing list, KEYS[2] meta, KEYS[3] stats
ARGV[1..] elements
reply: number removed
Each element removes its occurrence nearest the tail (the oldest taken), as LREM -1 does; an
element given twice removes two equal occurrences. Elements are "<seq>:<envelope>" with a
unique seq, so equal elements are the same job. Cost, with B = #ARGV and L = the list length:
a batch of fewer than LIST_ACK_REBUILD_MIN (16) is removed with one LREM each: at most 15 scans
of the list, O(B * L) (each LREM stops at its element: acks of the oldest jobs, near the tail,
scan little). A larger batch reads the list once (LRANGE), keeps the others in order and writes
them back (LTRIM 1 0 empties the list, then RPUSH in runs of 1000): O(L + B), one pass over the
list whatever B is; a batch of 1000 on a list of 2000 is 3 + 1 calls instead of 1000 LREMs of
up to 2000 steps each. The rebuild needs LRANGE, LTRIM and RPUSH on KEYS[1]; a user whose ACL
lacks them (set up for the LREM-only version) gets the LREM path, slower but not refused.
Either way `list_depth` drops and `acked` grows by exactly the number removed.
errors: WRONGTYPE (KEYS[1] is not a list, KEYS[2] or KEYS[3] not a hash) ]]
local LIST_ACK_REBUILD_MIN = 16

-- Whether the caller's ACL lets list_ack rewrite list `key` (always on servers without
-- redis.acl_check_cmd, before Redis 7).
local function list_rewrite_allowed(key)
    local check = redis.acl_check_cmd
    return check == nil or (check('LRANGE', key, '0', '-1') and check('LTRIM', key, '1', '0') and
        check('RPUSH', key, 'x'))
end

local function list_ack(keys, args)
    local n = 0
    if #args < LIST_ACK_REBUILD_MIN or not list_rewrite_allowed(keys[1]) then
        for i = 1, #args do
            n = n + redis.call('LREM', keys[1], -1, args[i])
        end
    else
        local want = {}
        for i = 1, #args do
            want[args[i]] = (want[args[i]] or 0) + 1
        end
        local all = redis.call('LRANGE', keys[1], 0, -1)
        local drop = {}
        for i = #all, 1, -1 do -- from the tail, as LREM -1 goes
            local c = want[all[i]]
            if c and c > 0 then
                want[all[i]] = c - 1
                drop[i] = true
                n = n + 1
            end
        end
        if n > 0 then
            local rest = {}
            for i = 1, #all do
                if not drop[i] then
                    rest[#rest + 1] = all[i]
                end
            end
            redis.call('LTRIM', keys[1], 1, 0) -- empties it: the key is gone
            for i = 1, #rest, 1000 do
                redis.call('RPUSH', keys[1], unpack(rest, i, math.min(i + 999, #rest)))
            end
        end
    end
    if n > 0 then
        list_depth_sub(keys[2], n)
        redis.call('HINCRBY', keys[3], 'acked', n)
    end
    return n
end

--[[ list_dead (list backend): move one element from the processing list to the dead stream.
KEYS[1] processing list, KEYS[2] dead, KEYS[3] meta, KEYS[4] stats
ARGV[1] element, ARGV[2] consumer, ARGV[3] delivery count, ARGV[4] reason
reply: 1 if removed, else 0
errors: WRONGTYPE (KEYS[1] is not a list: nothing written; KEYS[2] not a stream or KEYS[3],
KEYS[4] not a hash: after the LREM, so the element is gone but not dead-lettered) ]]
local function list_dead(keys, args)
    -- everything that can fail comes before the LREM: a script that fails after a write
    -- keeps the write, and the element would vanish
    local id, body = '', args[1]
    local sep = string.find(args[1], ':', 1, true)
    if sep then -- "<seq>:<envelope>"; a foreign element is dead-lettered whole, id ''
        id, body = string.sub(args[1], 1, sep - 1), string.sub(args[1], sep + 1)
    end
    local n = redis.call('LREM', keys[1], -1, args[1])
    if n == 0 then
        return 0
    end
    redis.call('XADD', keys[2], '*', 'id', id, 'm', body, 'deliveries', args[3],
        'consumer', args[2], 'reason', args[4])
    list_depth_sub(keys[3], 1)
    redis.call('HINCRBY', keys[4], 'dead', 1)
    return 1
end

--[[ list_recover (list backend): put a dead consumer's processing list back at the head of
the queue (oldest first) and forget it.
KEYS[1] list, KEYS[2] processing list, KEYS[3] procs set
reply: number of elements moved
errors: WRONGTYPE (KEYS[1] or KEYS[2] is not a list, KEYS[3] not a set) ]]
local function list_recover(keys, args)
    local n = 0
    while redis.call('LMOVE', keys[2], keys[1], 'RIGHT', 'RIGHT') do
        n = n + 1
    end
    redis.call('SREM', keys[3], keys[2])
    return n
end

-- The `m` field of dead letter `id`: its body, '' when it has none, nil when the letter is gone.
local function dead_body(dead, id)
    local e = redis.call('XRANGE', dead, id, id)
    if not e[1] then
        return nil
    end
    return field_m(e[1][2]) or '', field(e[1][2], 'k'), field(e[1][2], 'lane')
end

-- The loop of replay and list_replay. `depth` is the bucket's depth now; append(body) queues
-- one body. Outcome codes follow the counters' order: 0 replayed, 1 not fit, 2 skipped,
-- 3 missing.
local function replay_letters(keys, args, cap, depth, append, fits)
    local counts = {0, 0, 0, 0}
    local outcomes = {}
    for i = 2, #args do
        local body, tenant, lane = dead_body(keys[4], args[i])
        local o = 1
        if body == nil then
            o = 3
        elseif body == '' then
            o = 2
        elseif depth < cap and (not fits or fits(tenant)) then
            append(body, tenant, lane)
            redis.call('XDEL', keys[4], args[i])
            depth = depth + 1
            o = 0
        end
        counts[o + 1] = counts[o + 1] + 1
        outcomes[i - 1] = o
    end
    if counts[1] > 0 then
        redis.call('HINCRBY', keys[3], 'admitted', counts[1])
    end
    return {counts[1], counts[2], counts[3], counts[4], depth, cap, outcomes}
end

--[[ replay (stream backend): put dead letters back into the queue, in order, while they fit,
and delete exactly the replayed ones from the dead stream - one atomic step, so a lost
connection cannot leave a letter both queued and dead. A letter that does not fit is not a
rejection: `rejected` does not move.
KEYS[1] stream, KEYS[2] meta, KEYS[3] stats, KEYS[4] dead
ARGV[1] default capacity (used when meta has no `capacity`), ARGV[2..] dead-letter ids
reply: {replayed, not_fit, skipped, missing, depth_after, capacity, outcomes}; skipped letters
have an empty body (stay dead), missing ones are not in the dead stream; outcomes[i] tells what
happened to ARGV[1 + i]: 0 replayed, 1 not fit (stays dead), 2 skipped, 3 missing.
errors: SLUICECONFIG (an invalid capacity, or meta records the list backend; nothing written),
ERR (a dead-letter id that is not a stream id), WRONGTYPE (KEYS[1] or KEYS[4] is not a stream,
KEYS[2] or KEYS[3] not a hash) ]]
local function replay(keys, args)
    local prefix = string.sub(keys[2], 1, -5)
    if slot_migrating(prefix) then -- tdepth, lanes: derived (see slot_migrating)
        return slot_tryagain(prefix)
    end
    local cap, _, _, share, fair, lane_depth = queue_settings(keys[2], args[1], 'stream')
    if type(cap) == 'table' then
        return cap
    end
    local tk = tdepth_key(prefix)
    local fair_append, finish
    if fair then
        fair_append, finish = fair_appender(prefix)
    end
    local r = replay_letters(keys, args, cap, redis.call('XLEN', keys[1]) + lane_depth,
        function(body, tenant, lane)
            if tenant then -- admitted under a share: counted again in its tenant's
                redis.call('HINCRBY', tk, tenant, 1)
            end
            if fair_append then -- back into its lane (a letter of a tenant lane names it)
                fair_append(body, tenant or lane, tenant ~= nil)
            elseif tenant then
                redis.call('XADD', keys[1], '*', 'm', body, 'k', tenant)
            else
                redis.call('XADD', keys[1], '*', 'm', body)
            end
        end, function(tenant)
            return share == 0 or not tenant or
                (tonumber(redis.call('HGET', tk, tenant)) or 0) < share
        end)
    if finish then
        finish()
    end
    return r
end

--[[ list_replay (list backend): replay onto the list, as list_admit appends.
KEYS[1] list, KEYS[2] meta, KEYS[3] stats, KEYS[4] dead
ARGV as replay. reply as replay.
errors: SLUICECONFIG (an invalid capacity, or meta records the stream backend; nothing
written), ERR (a dead-letter id that is not a stream id), WRONGTYPE (KEYS[1] is not a list,
KEYS[4] not a stream, KEYS[2] or KEYS[3] not a hash) ]]
local function list_replay(keys, args)
    local cap, depth = queue_settings(keys[2], args[1], 'list')
    if type(cap) == 'table' then
        return cap
    end
    return replay_letters(keys, args, cap, depth, function(body)
        local seq = redis.call('HINCRBY', keys[2], 'list_seq', 1)
        redis.call('LPUSH', keys[1], tostring(seq) .. ':' .. body)
        redis.call('HINCRBY', keys[2], 'list_depth', 1)
    end)
end

--[[ prune (stream backend): delete a consumer only if it has no pending entry, checked in the
same atomic step (XGROUP DELCONSUMER would drop its pending entries from the group: they would
hold capacity with no worker able to claim them; a WATCH cannot guard it, XREADGROUP does not
touch watched keys).
KEYS[1] stream
ARGV[1] group, ARGV[2] consumer
reply: 1 deleted (or it did not exist), 0 kept (it has pending entries)
errors: NOGROUP (the stream or the group is missing), WRONGTYPE (KEYS[1] is not a stream) ]]
local function prune(keys, args)
    if #redis.call('XPENDING', keys[1], args[1], '-', '+', 1, args[2]) > 0 then
        return 0
    end
    redis.call('XGROUP', 'DELCONSUMER', keys[1], args[1], args[2])
    return 1
end

--[[ group (stream backend): joins the queue's one consumer group, creating it (at id 0, with
MKSTREAM) on first use, and registers the consumer, so a worker that has not read yet is
visible (consumers --prune does not call its entries doomed). One group per queue: each group
acknowledges and deletes what it was given, so with two groups which of them sees an entry
would be a matter of timing. The group is recorded in meta (`group`); a worker of another
group is refused (docs/faults.md B19). To move a queue to another group name: stop its
workers, XGROUP DESTROY the old group and HDEL meta group.
KEYS[1] stream, KEYS[2] meta
ARGV[1] group, ARGV[2] consumer
reply: 1 group created, 0 it existed
errors: SLUICECONFIG (another group, or a list queue), WRONGTYPE (KEYS[1] is not a stream,
KEYS[2] not a hash), and any XGROUP CREATE error other than BUSYGROUP ]]
local function group(keys, args)
    local recorded = redis.call('HGET', keys[2], 'group')
    local other = recorded
    if not recorded then -- a queue from before the record: look at its groups
        local gs = redis.pcall('XINFO', 'GROUPS', keys[1])
        if type(gs) == 'table' and not gs.err then
            for _, g in ipairs(gs) do
                for i = 1, #g, 2 do
                    if g[i] == 'name' and g[i + 1] ~= args[1] then
                        other = g[i + 1]
                    end
                end
            end
        end
    end
    if other and other ~= args[1] then
        return redis.error_reply('SLUICECONFIG ' .. keys[1] .. ' is drained by group "' ..
            other .. '"; one group per queue (see sluice_group in docs/data-model.md)')
    end
    if redis.call('HGET', keys[2], 'backend') == 'list' then
        return redis.error_reply('SLUICECONFIG ' .. keys[2] .. ' is a list queue')
    end
    local created = 1
    local r = redis.pcall('XGROUP', 'CREATE', keys[1], args[1], '0', 'MKSTREAM')
    if type(r) == 'table' and r.err then
        if not string.find(r.err, 'BUSYGROUP', 1, true) then
            return r
        end
        created = 0
    end
    if not recorded then
        redis.call('HSETNX', keys[2], 'group', args[1])
    end
    redis.call('XGROUP', 'CREATECONSUMER', keys[1], args[1], args[2])
    return created
end

--[[ version: KEYS none; reply: the library version string; errors: none ]]
local function version(keys, args)
    return VERSION
end

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
  gcra    value "TAT_INT TAT_FRAC COUNT PERIOD_MS": the theoretical arrival time (integer and
          fractional microseconds, so T need not be whole) and the limit it was written with.
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
  fixed   hash {s = window start us, c = count}: at most COUNT per clock-aligned window
          [k*P, (k+1)*P) (so up to 2*COUNT across a boundary); retry-after = end of window.
  gate    a string with a TTL: passes only when the key is absent (a key without a TTL, which
          sluice never writes, counts as absent and is overwritten); then SET PX
          ceil(w*P/COUNT). remaining 1 while the gate is open, 0 while closed (so 0 right after
          a pass); retry-after = PTTL + 1 ms (Redis expires a key after, not at, its time). ]]

--[[ The limiter's runtime API in upvalues. A function's globals (redis, tonumber, math, ...) are
looked up through the globals table's metatable on every use, which costs a short hot path more
than some of its calls; an upvalue is one step. redis.call, tonumber and math are not there
while the library loads, so every function sets them on its first call: each is called through
entry() (registered so, and the EVALSHA form of each function calls it so), whichever function
a fresh Lua state (new server, restart, failover, FUNCTION LOAD) runs first. The string
functions come from the strings' metatable, there at load. ]]
local r_call, r_pcall, to_number, l_type, m_floor, m_ceil, m_fmod = nil, nil, nil, nil, nil, nil,
    nil
local s_format, s_match = ('').format, ('').match
local function limit_api()
    r_call, r_pcall, to_number, l_type = redis.call, redis.pcall, tonumber, type
    m_floor, m_ceil, m_fmod = math.floor, math.ceil, math.fmod
end

-- fn as called by Redis: with the runtime API set first.
local function entry(fn)
    return function(keys, args)
        if not r_call then
            limit_api()
        end
        return fn(keys, args)
    end
end

-- Redis's clock in microseconds: every limit's time comes from here, never from a client.
-- The same instant is kept as decimal text (now_text), made of TIME's two strings without
-- formatting a number: a log's score and member are that text. (Digits + 0 is the cheapest
-- conversion: tonumber converts twice, through a C call.)
local PAD6 = {'00000', '0000', '000', '00', '0', ''}
local now_n, now_text = nil, ''
local function now_us()
    local t = r_call('TIME')
    local u = t[2]
    now_text = t[1] .. PAD6[#u] .. u
    now_n = now_text + 0
    return now_n
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
-- on first use (the string library is not there while the library loads).
local int_format = nil
local memo_n, memo_text = nil, ''

-- An integer (< 2^53) as decimal text. The clock's last reading and the last number asked for
-- are kept: the limits of one call often write the same numbers.
local function limit_fmt(n)
    if n == now_n then
        return now_text
    elseif n ~= memo_n then
        if not int_format then
            int_format = s_format('%d', 9007199254740992) == '9007199254740992' and '%d' or
                '%.0f'
        end
        memo_n, memo_text = n, s_format(int_format, n)
    end
    return memo_text
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
local LIMIT_ENGINES -- alg -> {check, record, refill}, below the engines

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
        check = e[1], record = e[2], refill = e[3], tail = ' ' .. n .. ' ' .. p_ms,
        ttl = limit_fmt(p_ms + 1), window = want == 4, pre = '', pre_l = ''}
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
parses: a spec is only read). At most SPEC_CACHE_MAX texts; past that it starts over. ]]
local SPEC_CACHE_MAX = 256
local spec_cache, spec_cached = {}, 0

-- Spec text s parsed, shared: read it, never write it (or the error reply naming limit i).
local function limit_spec_parsed(i, s)
    local c = spec_cache[s]
    if not c then
        c = limit_spec(i, s)
        if c.err then
            return c
        end
        if spec_cached >= SPEC_CACHE_MAX then
            spec_cache, spec_cached = {}, 0
        end
        spec_cache[s], spec_cached = c, spec_cached + 1
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
the same double). At most GCRA_SEEN_MAX keys; past that it starts over. What is kept here is
in the Lua heap, which Redis's collector steps through on every call of any function: a
thousand keys kept cost every sluice_limit call 1.4 % more instructions; a few hot ones pay. ]]
local GCRA_SEEN_MAX = 32
local gcra_seen, gcra_seen_n = {}, 0

local gcra_record

-- A gcra value (or nil): TAT_INT, TAT_FRAC, COUNT, PERIOD_MS, or nil when it is not one.
local function gcra_parse(c, key, v)
    if l_type(v) ~= 'string' then -- none, or another type's WRONGTYPE (pcall's error table)
        return nil
    end
    local e = gcra_seen[key]
    if e and e[1] == v then
        return e[2], e[3], e[4], e[5]
    end
    local ti, tf, tail = s_match(v, '^(%-?%d+) ([%d%.eE%-%+]+)( %d+ %d+)$')
    local n0, p0 = c.n, c.p_ms -- the usual case: written with this very limit
    if tail ~= c.tail then
        n0, p0 = s_match(tail or '', '^ (%d+) (%d+)$')
        n0, p0 = to_number(n0), to_number(p0)
    end
    ti = to_number(ti)
    if tf == '0' then
        tf = 0
    else
        tf = to_number(tf)
    end
    if not (ti and tf and n0 and p0) or n0 < 1 or p0 < 1 then
        return nil
    end
    return ti, tf, n0, p0
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
        if debt < 0 then
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
    local ftext = '0'
    if frac ~= 0 then
        ftext = s_format('%.17g', frac)
    end
    local v = limit_fmt(now + whole) .. ' ' .. ftext .. c.tail
    r_call('SET', key, v, 'PX', m_ceil(debt / 1000) + 1)
    local e = gcra_seen[key]
    if not e then
        if gcra_seen_n >= GCRA_SEEN_MAX then
            gcra_seen, gcra_seen_n = {}, 0
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
    local bt = limit_fmt(b)
    local field = pre .. bt
    local v = r_pcall('HMGET', key, pre, c.pre_l, field)
    local foreign = v.err ~= nil -- not a hash: read as empty, deleted by the record
    if foreign then
        v = EMPTY_STATE
    end
    st.foreign = foreign
    local total = to_number(v[1]) or 0
    local last = b -- the usual case: the same block as the last unit counted
    if v[2] ~= bt then
        last = to_number(v[2])
    end
    local cur = to_number(v[3]) or 0
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
                    total = total - (to_number(n) or 0)
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
        freed = freed + (to_number(counts[i]) or 0)
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
        r_call('HSET', key, st.field, st.cur + w, c.pre, st.count + w, c.pre_l, st.bt)
    else
        r_call('HINCRBY', key, st.field, w)
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
        r_call('PEXPIRE', key, ms, 'GT')
    elseif how == TTL_FRESH and r_call('PTTL', key) < ms then
        r_call('PEXPIRE', key, ms)
    end
end

-- Trims the log at key to the units that count at `now` (a unit made at s counts while
-- now < s + P, and is removed at the first call after) and returns how many there are. A key
-- that is not a sorted set counts 0 and sets log_foreign (its record deletes it).
local log_foreign = false

local function log_count(c, key, now)
    local bound = now - c.p
    local text = memo_text -- limit_fmt(bound), inline: limits of one period share it
    if bound ~= memo_n then
        text = limit_fmt(bound)
    end
    if l_type(r_pcall('ZREMRANGEBYSCORE', key, '-inf', text)) == 'table' then
        log_foreign = true
        return 0
    end
    return r_call('ZCARD', key)
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
    local count = log_count(c, key, now)
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

local member_score, member0 = nil, '' -- the last score's first member name, "<score>:0"

local function log_record(c, st, key, w, now)
    local score = now_text -- limit_fmt(now), inline
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

--[[ sluice_limit's usual call, every limit a log and weight 1 (a global and a per-category
limit, say): the general path's commands and answer, without its state and its two calls per
limit. ]]
local LIMIT_SCRATCH_MAX = 16 -- the most limits of a call whose scratch tables are kept
local log_counts = {} -- scratch, call after call

local function log_limits(cs, keys, nl, now)
    local counts, ok, left, full = log_counts, true, 2 ^ 53, 0
    if nl > LIMIT_SCRATCH_MAX then
        counts = {}
    end
    log_foreign = false
    for i = 1, nl do
        local c = cs[i]
        local count = log_count(c, keys[i], now)
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
    if now_text ~= member_score then
        member_score, member0 = now_text, now_text .. ':0'
    end
    if log_foreign then -- a key of another type among them (rare): each is checked
        for i = 1, nl do
            foreign_clear(keys[i], 'zset')
        end
    end
    for i = 1, nl do
        local c, key = cs[i], keys[i]
        if r_call('ZADD', key, 'NX', now_text, member0) == 1 then
            r_call('PEXPIRE', key, c.ttl)
        else -- "<now>:0" taken in this microsecond: the general record takes the next name
            log_record(c, nil, key, 1, now)
        end
    end
    return {1, 0, left, 0, m_ceil(full / 1000)}
end

-- A fixed window's hash {s, c}. A record in the window the hash already holds writes the count
-- alone: its start and its TTL (the window's end) were written with the window's first unit.
local function fixed_check(c, st, key, w, now)
    local p = c.p
    local s = limit_floor_div(now, p) * p
    local v = r_pcall('HMGET', key, 's', 'c')
    local foreign = v.err ~= nil -- not a hash: read as empty, deleted by the record
    if foreign then
        v = EMPTY_STATE
    end
    st.foreign = foreign
    local n = 0
    local live = to_number(v[1]) == s
    if live then
        n = to_number(v[2]) or 0
    end
    local ends = s + p - now
    st.s, st.count, st.live, st.retry = s, n, live, ends
    local full = 0
    if n > 0 then
        full = ends
    end
    return n + w <= c.n, c.n - n, full, c.n - n - w, ends
end

local function fixed_record(c, st, key, w, now)
    if st.live then
        r_call('HSET', key, 'c', st.count + w)
        return
    end
    if st.foreign then
        foreign_clear(key, 'hash')
    end
    r_call('HSET', key, 's', limit_fmt(st.s), 'c', limit_fmt(st.count + w))
    r_call('PEXPIRE', key, m_ceil((st.s + c.p - now) / 1000))
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

-- sluice_limit's specs and states, reused call after call (a call sets what it reads); a call
-- of more limits than LIMIT_SCRATCH_MAX makes its own.
local limit_specs, limit_states = {}, {}

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
    local windows, never, logs, nlogs = false, nil, w == 1, 0
    for i = 1, nl do
        local c = spec_cache[args[i + 1]]
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
        if c.window then
            windows = true
        end
        if w > c.n and not never then
            never = i
        end
        if c.alg ~= 'log' then
            logs = false
        else
            nlogs = nlogs + 1
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
    if logs then
        return log_limits(cs, keys, nl, now_us())
    end
    -- every limit checked: the figures of both answers are gathered as they come
    local now = now_us()
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
--[[ Limits on a queue: configured in the hash sluice:{Q}:limits (name -> "SCOPE SPEC", SPEC as
for sluice_limit), counted in sluice:{Q}:meta `limits` (so admission learns with the HMGET it
already makes whether there are any), state in sluice:{Q}:qlim:NAME:ALG:VALUE (qlim_key) where
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

-- The state key of queue limit NAME of algorithm ALG, less its VALUE (which follows): built
-- here and nowhere else (the C side's twin is sluice_key_queue_limit). prefix: "sluice:{Q}:".
local function qlim_key(prefix, name, alg)
    return prefix .. 'qlim:' .. name .. ':' .. alg .. ':'
end

--[[ The limits of a queue as they were last read, by the scopes asked for and the limits key:
{raw = the HGETALL reply, out = the list made of it}. A read that gets the same reply (the
same strings, compared as Lua compares strings: by content) takes the same list, so the
hash is read on every call but parsed and sorted only when it changed. At most
QUEUE_LIMITS_MAX keys; past that it starts over. ]]
local QUEUE_LIMITS_MAX = 64
local queue_limits_cache, queue_limits_cached = {}, 0

-- The limits of a queue in `scopes`: {{name, scope, spec table, key}, ...} in name order (an
-- `inflight` or `inflight-tenant` limit's spec is its count: {n = N}, its key ''; a rate's key
-- is the prefix of its state keys (qlim_key), the value follows). Shared between calls: read
-- it, never write it.
local function queue_limits(limits_key, scopes)
    local raw = r_call('HGETALL', limits_key)
    local by_scopes = queue_limits_cache[scopes]
    if not by_scopes then
        by_scopes = {}
        queue_limits_cache[scopes] = by_scopes
    end
    local hit = by_scopes[limits_key]
    if hit and #hit.raw == #raw then
        local same, old = true, hit.raw
        for i = 1, #raw do
            if raw[i] ~= old[i] then
                same = false
                break
            end
        end
        if same then
            return hit.out
        end
    end
    local prefix = string.sub(limits_key, 1, -7) -- "sluice:{Q}:" of "...limits"
    local out = {}
    for i = 1, #raw, 2 do
        local scope, spec = s_match(raw[i + 1], '^(%S+) (%S+)$')
        if scope and scopes[scope] then
            local l, key = nil, ''
            if COUNT_SCOPES[scope] then
                l = {n = to_number(spec) or 0}
            else
                l = limit_spec_parsed(raw[i], spec) -- shared: never written
                if l.err then
                    return l
                end
                key = qlim_key(prefix, raw[i], l.alg)
            end
            out[#out + 1] = {name = raw[i], scope = scope, spec = l, key = key}
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
    by_scopes[limits_key] = {raw = raw, out = out}
    return out
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
`now`, for the cost of one read and one write per key instead of per message. ]]
local BATCH_POOL_MAX = 16 -- states kept for the next call (a call may need more)
local batch_pool = {}
local the_batch = {lims = false, now = 0, states = {}, order = {}, n = 0, sts = {}, nl = 0}

-- The batch of this call: the one table, emptied of the last call's states (the state tables
-- themselves are used again, up to BATCH_POOL_MAX; after a call of more, its tables are let go).
local function batch_new(lims, now)
    local b = the_batch
    local states, order, sts = b.states, b.order, b.sts
    if b.n > BATCH_POOL_MAX then
        b.states, b.order = {}, {}
    else
        for i = 1, b.n do
            states[order[i].key], order[i] = nil, nil
        end
    end
    for i = 1, b.nl do
        sts[i] = false
    end
    b.lims, b.now, b.n, b.nl = lims, now, 0, #lims
    return b
end

local function batch_state(b, lim, value)
    local key = value == '' and lim.key or lim.key .. value
    local st = b.states[key]
    if not st then
        local n = b.n + 1
        st = batch_pool[n]
        if not st then
            st = limit_state()
            if n <= BATCH_POOL_MAX then
                batch_pool[n] = st
            end
        end
        local _, err = lim_check(lim, key, 1, b.now, st)
        if err then
            return nil, err
        end
        st.used, st.rt = 0, false
        st.avail = st.ok and st.left or 0
        b.states[key], b.order[n], b.n = st, st, n
    end
    return st
end

-- The states a message of (tenant, client) needs, and the exhausted ones among them (nil when
-- it passes them all).
local function batch_check(b, tenant, client)
    local sts, refused = b.sts, nil -- reused: a message's states are used before the next
    local lims = b.lims
    for i = 1, #lims do
        local lim = lims[i]
        local scope, st = lim.scope, sts[i]
        if scope ~= 'queue' or not st then -- a limit of scope queue: one state for all messages
            local value, err = ''
            if scope == 'tenant' then
                value = tenant
            elseif scope == 'client' then
                value = client
            end
            st, err = batch_state(b, lim, value)
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

-- Records every state's units; then the retry-after of an exhausted state is the time until
-- one more unit fits after what this batch took.
local function batch_finish(b)
    local order = b.order
    for i = 1, b.n do
        local st = order[i]
        if st.used > 0 then
            -- checked for one unit at the same time: what one unit records; more, checked again
            if st.used > 1 then
                lim_check(st.lim, st.key, st.used, b.now, st)
            end
            lim_record(st, b.now, st.used)
        end
    end
end

local function batch_retry(b, st)
    if not st.rt then
        lim_check(st.lim, st.key, 1, b.now, st) -- its count is recorded: the state is free
        st.rt = st.ok and 0 or st.retry
    end
    return st.rt
end

-- ARGV[3] of admit2: the stride (1, or 3 for tenant, client, envelope) and whether the call is
-- tentative ('1t', '3t'); nil for anything else.
local function admit_stride(a)
    local tentative = a == '1t' or a == '3t'
    local stride = tonumber(tentative and string.sub(a, 1, 1) or a)
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

local function admit_each(keys, args, cap, depth, nlimits, append, share)
    local stride, tentative = admit_stride(args[3])
    local n = stride and (#args - 3) / stride
    if (stride ~= 1 and stride ~= 3) or n < 1 or n ~= math.floor(n) then
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
    local lims, now, prefix = EMPTY, 0, string.sub(keys[2], 1, -5) -- "sluice:{Q}:" of "...meta"
    if nlimits > 0 then
        lims = queue_limits(prefix .. 'limits', ADMISSION_SCOPES)
        if lims.err then
            return lims
        end
        now = now_us()
    end
    local reply = {0, depth, cap, 0, -1}
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
    else
        local tk, held = nil, nil -- the share: entries each tenant holds
        if share > 0 then
            tk, held = tdepth_key(prefix), {}
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
                return err
            end
            if share > 0 and not held[t] then
                held[t] = tonumber(redis.call('HGET', tk, t)) or 0
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
                    redis.call('HINCRBY', tk, t, 1)
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
        batch_finish(b)
        -- each limited message: the refusing limit with the largest retry-after
        for i, refused in pairs(refusals or EMPTY) do
            local worst, retry = nil, -1
            for _, st in ipairs(refused) do
                local r = batch_retry(b, st)
                if r > retry then
                    worst, retry = st.lim, r
                end
            end
            redis.call('HINCRBY', keys[3], 'limited:' .. worst.name, 1)
            reply[5 + i] = {worst.name, math.ceil(retry / 1000), worst.spec.n, worst.spec.p_ms}
        end
    end
    reply[1], reply[2] = admitted, depth
    if admitted > 0 then
        redis.call('HINCRBY', keys[3], 'admitted', admitted)
    end
    if limited > 0 then
        redis.call('HINCRBY', keys[3], 'limited', limited)
    end
    count_rejected(keys[3], full, reply, tentative)
    return reply
end

-- While the queue's slot migrates: nil when every key an admission derives is on this node
-- (the limits hash, each limit state its messages use, the share counts, the fair lanes and their
-- hashes), else TRYAGAIN; nothing is written either way.
local function admit_keys_here(keys, args, nlimits, share, fair)
    local prefix = string.sub(keys[2], 1, -5)
    local stride = admit_stride(args[3]) or 1 -- admit_each refuses a bad one
    local list = {}
    if share > 0 then
        list[#list + 1] = tdepth_key(prefix)
    end
    if fair then
        for _, k in ipairs({'lanes', 'lwait', 'ring', 'wake'}) do
            list[#list + 1] = prefix .. k
        end
    end
    local err = slot_keys_here(prefix, nlimits > 0 and {prefix .. 'limits'} or EMPTY)
    if err then
        return err
    end
    local lims = nlimits > 0 and queue_limits(prefix .. 'limits', ADMISSION_SCOPES) or EMPTY
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
            list[#list + 1] = lane_key(prefix, t)
        end
    end
    return slot_keys_here(prefix, list)
end

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
    if type(cap) == 'table' then
        return cap
    end
    if v1 and nlimits > 0 then
        return refuse_v1(keys[2])
    end
    if (nlimits > 0 or share > 0 or fair) and slot_migrating(string.sub(keys[2], 1, -5)) then
        local err = admit_keys_here(keys, args, nlimits, share, fair)
        if err then
            return err
        end
    end
    local depth = redis.call('XLEN', keys[1]) + lane_depth
    if keys[4] then
        local seen = redis.call('GET', keys[4])
        if seen then
            return {1, depth, cap, 1, -1, seen}
        end
    end
    local append, finish
    if fair then
        append, finish = fair_appender(string.sub(keys[2], 1, -5))
    else
        append = function(env, tenant, counted)
            if counted then
                return redis.call('XADD', keys[1], '*', 'm', env, 'k', tenant)
            end
            return redis.call('XADD', keys[1], '*', 'm', env)
        end
    end
    local reply = admit_each(keys, args, cap, depth, nlimits, append, share)
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
    if nlimits > 0 and slot_migrating(string.sub(keys[2], 1, -5)) then
        local err = admit_keys_here(keys, args, nlimits, 0, false)
        if err then
            return err
        end
    end
    local elems = {}
    local seq = tonumber(redis.call('HGET', keys[2], 'list_seq')) or 0
    local reply = admit_each(keys, args, cap, depth, nlimits, function(env)
        seq = seq + 1
        local id = limit_fmt(seq)
        elems[#elems + 1] = id .. ':' .. env
        return id
    end, 0)
    if #elems > 0 then
        redis.call('LPUSH', keys[1], unpack(elems))
        redis.call('HSET', keys[2], 'list_seq', limit_fmt(seq))
        redis.call('HINCRBY', keys[2], 'list_depth', #elems)
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
  entries read: wait_ms 0; held back by a rate: wait_ms = when the next unit is allowed;
  held back by `inflight`: wait_ms at least INFLIGHT_POLL_MS and 'lease' in place of the id (a
  worker asks again as soon as it settles an entry of its own); nothing to read: wait_ms -1 and
  the group's last delivered id, for XREAD BLOCK ... STREAMS stream ID to wait on without
  reading.
Errors: SLUICECONFIG (a bad limit), NOGROUP, WRONGTYPE. ]]
-- What a worker's read starts from: the count asked for (ARGV[3]), the queue's key prefix (of
-- KEYS[2], meta), its limits in `scopes` (or an error reply) and Redis's time.
local function read_start(keys, args, scopes)
    local prefix = string.sub(keys[2], 1, -5)
    if slot_migrating(prefix) then -- limits, their state, lanes: derived
        return 0, prefix, slot_tryagain(prefix), 0
    end
    return tonumber(args[3]) or 0, prefix, queue_limits(prefix .. 'limits', scopes), now_us()
end

-- The pool's limits before a read: `drain` rates and the `inflight` count (in_flight() gives the
-- entries in flight now) cap n. Returns n, wait (us), the rates to count what is read in, the
-- per-tenant limits left for the lanes and whether `inflight` left no room; or nil, the error.
local function pool_caps(lims, prefix, n, now, in_flight)
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

local function take(keys, args)
    local n, prefix, lims, now = read_start(keys, args, POOL_SCOPES)
    if lims.err then
        return lims
    end
    local wait, rates, _, leased
    n, wait, rates, _, leased = pool_caps(lims, prefix, n, now, function()
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
    local n, prefix, lims, now = read_start(keys, args, DRAIN_SCOPES)
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
    n, wait, pool, per, leased = pool_caps(lims, prefix, n, now, function()
        return pending_of_stream() + (tonumber(meta[2]) or 0) - (tonumber(meta[3]) or 0)
    end)
    if not n then
        return wait
    end
    if n <= 0 then
        return {{}, math.ceil(wait / 1000), leased and 'lease' or ''}
    end
    local ring, lwait, deficit = prefix .. 'ring', prefix .. 'lwait', prefix .. 'deficit'
    local len = redis.call('LLEN', ring)
    -- one round over the head of the ring: at most FAIR_MAX_VISITS lanes, and no more than n
    -- can use (plus a few to pass over held lanes); the state of those lanes in one call each
    local v = math.min(len, FAIR_MAX_VISITS, n + FAIR_SPARE_VISITS)
    local weighted = redis.call('EXISTS', prefix .. 'weights') == 1
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
            weights = redis.call('HMGET', prefix .. 'weights', unpack(lanes))
        end
        for _, lim in ipairs(per) do
            if lim.scope == 'inflight-tenant' then
                depths = redis.call('HMGET', prefix .. 'lanes', unpack(lanes))
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
                local lk = lane_key(prefix, tn)
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
                    redis.call('HINCRBY', prefix .. 'served', tn, got)
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
    if len > 0 and redis.call('LLEN', prefix .. 'wake') == 0 then -- backlog left: wake a peer
        redis.call('RPUSH', prefix .. 'wake', 1)
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
    local prefix = string.sub(keys[2], 1, -6)
    local by, order = {}, {}
    for i = 2, #args, 2 do
        local tn = args[i]
        if not by[tn] then
            by[tn] = {args[1]}
            order[#order + 1] = tn
        end
        by[tn][#by[tn] + 1] = args[i + 1]
    end
    if slot_migrating(prefix) then -- meta, lanes, counts: derived; they must all be here
        local list = {prefix .. 'meta', prefix .. 'lanes'}
        for _, tn in ipairs(order) do
            list[#list + 1] = lane_key(prefix, tn) -- '': the stream, KEYS[1]
        end
        if #order == 1 and order[1] == '' then
            list[2] = prefix .. 'stream' -- no tenant lane: `lanes` is not touched
        end
        local err = slot_keys_here(prefix, list)
        if not err and redis.call('HGET', prefix .. 'meta', 'tenant_counts') then
            err = slot_keys_here(prefix, {tdepth_key(prefix)})
        end
        if err then
            return err
        end
    end
    local n = 0
    for _, tn in ipairs(order) do
        n = n + ack({lane_key(prefix, tn), keys[2], keys[3]}, by[tn], true)
    end
    return n
end

--[[ A redelivery takes drain units as a read does (P15): a reclaim pass claims no more than the
queue's `drain` rates allow now (and, from a fair queue's lane, its tenant's `drain-tenant`
rates, which fair_take applies to the lane) and counts what it claimed in them, so retried and
reclaimed entries never take the pool past its drain limits. `inflight` is not checked: a
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
local function claim_start(prefix)
    if slot_migrating(prefix) then -- meta, limits, their state and lanes: derived
        return slot_tryagain(prefix), 0, nil
    end
    if (tonumber(redis.call('HGET', prefix .. 'meta', 'drain')) or 0) <= 0 then
        return {}, 0, nil
    end
    local lims = queue_limits(prefix .. 'limits', RECLAIM_SCOPES)
    local fair = nil
    for _, lim in ipairs(lims) do
        if lim.scope == 'drain-tenant' and fair == nil then
            fair = redis.call('HGET', prefix .. 'meta', 'fair') == '1'
        end
    end
    return lims, now_us(), fair and '' or nil
end

--[[ reclaim with drain limits (the function sluice_reclaim): as reclaim, claiming at most what
the drain limits allow. reply: as reclaim's; when they allow nothing now while an entry is due,
a fourth element: the ms until they allow the next unit (the worker gives that unit to its next
pass before its next read, so redeliveries are not starved by new reads). ]]
local function drain_reclaim(keys, args)
    local lims, now, tn = claim_start(string.sub(keys[2], 1, -6))
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
rates its own part (a lane they hold is passed over until a later pass).
KEYS[1] stream, KEYS[2] stats
ARGV[1] group, ARGV[2] consumer, ARGV[3] min idle ms, ARGV[4] HSCAN cursor ('0' to start),
ARGV[5] count
reply: {next_cursor ('0': the walk is complete), {lane, entries (as reclaim's), ...}}; when the
count runs out inside a batch the cursor does not move (the batch is looked at again). When the
pool's rates allow nothing now: {ARGV[4], {}, ms until they allow the next unit}. ]]
local function lane_reclaim(keys, args)
    local prefix = string.sub(keys[2], 1, -6)
    local lims, now = claim_start(prefix)
    if lims.err then
        return lims
    end
    local budget, wait, pool = claim_caps(lims, true, nil, tonumber(args[5]) or 0, now)
    if not budget then
        return wait
    end
    if budget <= 0 and #pool > 0 then
        return {args[4], {}, math.max(1, math.ceil(wait / 1000))}
    end
    local claimed = 0
    local scan = redis.call('HSCAN', prefix .. 'lanes', args[4], 'COUNT', 32)
    local out, cursor = {}, scan[1]
    for i = 1, #scan[2], 2 do
        local tn = scan[2][i]
        if budget <= 0 then
            cursor = args[4]
            break
        end
        if tonumber(scan[2][i + 1]) > (tonumber(redis.call('HGET', prefix .. 'lwait', tn)) or 0) then
            local r = redis.pcall('XPENDING', lane_key(prefix, tn), args[1])
            local k, err, rates = budget, nil, {}
            if type(r) == 'table' and not r.err and r[1] > 0 then
                k, err, rates = claim_caps(lims, false, tn, budget, now)
                if not k then
                    return err
                end
            end
            if type(r) == 'table' and not r.err and r[1] > 0 and k > 0 then
                local c = reclaim({lane_key(prefix, tn), keys[2]},
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

--[[ fair_config: switches a queue to fair or back, and sets lane weights.
KEYS[1] stream, KEYS[2] meta
ARGV 'on' | 'off' | 'weight' TENANT W (1..1000; 1 is the default and removes the setting)
reply: {fair (1|0), tenant lanes holding entries, lanes with undelivered entries}
on: the entries waiting undelivered in the stream (XLEN - the group's pending: acked entries are
deleted) become lane '', first in the ring; nothing moves. off: lane '' leaves the ring (the
stream is read as before); the tenant lanes keep being served until they are empty.
Errors: SLUICECONFIG (a list queue, a bad weight or tenant). ]]
local FAIR_MAX_WEIGHT = 1000

local function fair_config(keys, args)
    local prefix = string.sub(keys[2], 1, -5)
    if slot_migrating(prefix) then -- lanes, ring, weights: derived
        return slot_tryagain(prefix)
    end
    local op = args[1]
    local v = redis.call('HMGET', keys[2], 'backend', 'fair', 'group')
    if v[1] == 'list' then
        return redis.error_reply('SLUICECONFIG ' .. keys[2] .. ' is a list queue: fair queues ' ..
            'need the stream backend')
    end
    if op == 'on' then
        if v[2] ~= '1' then
            local undelivered = redis.call('XLEN', keys[1])
            if v[3] and undelivered > 0 then
                local p = redis.pcall('XPENDING', keys[1], v[3])
                if type(p) == 'table' and not p.err then
                    undelivered = undelivered - p[1]
                end
            end
            redis.call('HDEL', prefix .. 'lwait', '')
            redis.call('LREM', prefix .. 'ring', 0, '')
            if undelivered > 0 then
                redis.call('HSET', prefix .. 'lwait', '', undelivered)
                redis.call('LPUSH', prefix .. 'ring', '')
                redis.call('RPUSH', prefix .. 'wake', 1)
                redis.call('LTRIM', prefix .. 'wake', 0, 0)
            end
            redis.call('HSET', keys[2], 'fair', 1)
        end
    elseif op == 'off' then
        redis.call('HDEL', keys[2], 'fair')
        redis.call('HDEL', prefix .. 'lwait', '')
        redis.call('HDEL', prefix .. 'deficit', '')
        redis.call('LREM', prefix .. 'ring', 0, '')
    elseif op == 'weight' then
        local tn, w = args[2], limit_int(args[3], 1, FAIR_MAX_WEIGHT)
        if type(tn) ~= 'string' or not w then
            return redis.error_reply('SLUICECONFIG weight ' ..
                string.format('%q', string.sub(tostring(args[3]), 1, 40)) ..
                ' is not an integer 1..' .. FAIR_MAX_WEIGHT)
        end
        if w == 1 then
            redis.call('HDEL', prefix .. 'weights', tn)
        else
            redis.call('HSET', prefix .. 'weights', tn, w)
        end
    else
        return redis.error_reply('SLUICECONFIG fair_config: on, off or weight')
    end
    return {redis.call('HGET', keys[2], 'fair') == '1' and 1 or 0,
        redis.call('HLEN', prefix .. 'lanes'), redis.call('LLEN', prefix .. 'ring')}
end

--[[ limits_config: the only writer of a queue's limits, so that meta `limits` always counts
them and every spec is valid before anyone admits with it.
KEYS[1] sluice:{Q}:limits, KEYS[2] meta
ARGV 'set' NAME SCOPE SPEC | 'del' NAME
reply: the number of limits now configured. Errors: SLUICECONFIG naming the bad value (a drain or
inflight scope on a list queue too). ]]
local function limits_config(keys, args)
    local op, name = args[1], args[2]
    if type(name) ~= 'string' or #name > 64 or not string.match(name, LIMIT_NAME_PATTERN) then
        return redis.error_reply('SLUICECONFIG limit name ' ..
            string.format('%q', string.sub(tostring(name), 1, 80)) ..
            ' is not 1..64 of A-Z a-z 0-9 _ . -')
    end
    if op == 'set' then
        local scope = args[3]
        if not ADMISSION_SCOPES[scope] and not DRAIN_SCOPES[scope] then
            return redis.error_reply('SLUICECONFIG scope ' ..
                string.format('%q', string.sub(tostring(scope), 1, 40)) ..
                ' is not one of queue, tenant, client, drain, drain-tenant, inflight, ' ..
                'inflight-tenant')
        end
        if COUNT_SCOPES[scope] then
            if not limit_int(args[4], 1, LIMIT_MAX_COUNT) then
                return redis.error_reply('SLUICECONFIG ' .. scope ..
                    ' takes a count 1..1000000000, not ' ..
                    string.format('%q', string.sub(tostring(args[4]), 1, 40)))
            end
        else
            local l = limit_spec(1, args[4])
            if l.err then
                return l
            end
        end
        -- list workers read with LMOVE, past any limit: refused rather than ignored (P12)
        if DRAIN_SCOPES[scope] and redis.call('HGET', keys[2], 'backend') == 'list' then
            return redis.error_reply('SLUICECONFIG ' .. keys[2] .. ' is a list queue: ' .. scope ..
                ' limits need the stream backend')
        end
        redis.call('HSET', keys[1], name, scope .. ' ' .. args[4])
    elseif op == 'del' then
        redis.call('HDEL', keys[1], name)
    else
        return redis.error_reply('SLUICECONFIG limits_config: set or del')
    end
    -- admission reads `limits`, workers `drain`: each learns with one field whether to look
    local raw = redis.call('HGETALL', keys[1])
    local adm, drn = 0, 0
    for i = 2, #raw, 2 do
        local scope = string.match(raw[i], '^(%S+)')
        if DRAIN_SCOPES[scope] then
            drn = drn + 1
        else
            adm = adm + 1
        end
    end
    redis.call('HSET', keys[2], 'limits', adm, 'drain', drn)
    return #raw / 2
end

-- REGISTER (the loader cuts the text here for EVALSHA mode)
-- Flags. The functions that add work to a bucket (sluice_admit, sluice_list_admit,
-- sluice_replay, sluice_list_replay) are registered WITHOUT allow-oom on purpose: when Redis
-- is over maxmemory it refuses them with an OOM error before they run, so admission stops
-- instead of growing the bucket past maxmemory (the producer sees the refusal). Everything that
-- drains or moves work already admitted (ack, dead, retry, reclaim, touch, list_take, list_ack,
-- list_dead, list_recover, prune, and the reads of paced and fair queues: take, fair_take,
-- lane_ack, lane_reclaim) keeps allow-oom, so a full Redis can still be drained and memory
-- freed (take and fair_take write only their few bytes of rate state). sluice_group (may
-- create the stream and group), sluice_limit (adds limiter state) and sluice_fair_config only
-- grow memory and are refused under OOM as well.
-- A function that drains or moves admitted work: allowed under OOM (see above).
-- Every function is registered through entry() (see limit_api): below, `redis` is the loader's
-- API with a register_function that wraps each callback so.
local register_function = redis.register_function
local redis = {register_function = function(spec, fn)
    if fn == nil then -- the table form: {function_name = ..., callback = ..., flags = ...}
        spec.callback = entry(spec.callback)
        return register_function(spec)
    end
    return register_function(spec, entry(fn))
end}
local function drains(name, fn)
    redis.register_function{function_name = name, callback = fn, flags = {'allow-oom'}}
end

redis.register_function('sluice_admit', admit)
drains('sluice_ack', ack)
drains('sluice_dead', dead)
drains('sluice_retry', retry)
drains('sluice_reclaim', drain_reclaim)
drains('sluice_touch', touch)
redis.register_function('sluice_list_admit', list_admit)
drains('sluice_list_take', list_take)
drains('sluice_list_ack', list_ack)
drains('sluice_list_dead', list_dead)
drains('sluice_list_recover', list_recover)
redis.register_function('sluice_replay', replay)
redis.register_function('sluice_list_replay', list_replay)
drains('sluice_prune', prune)
redis.register_function('sluice_group', group)
redis.register_function{function_name = 'sluice_version', callback = version,
    flags = {'no-writes', 'allow-stale'}}
redis.register_function('sluice_limit', limit)
redis.register_function('sluice_admit2', admit2)
redis.register_function('sluice_list_admit2', list_admit2)
redis.register_function('sluice_limits_config', limits_config)
drains('sluice_take', take)
drains('sluice_fair_take', fair_take)
drains('sluice_lane_ack', lane_ack)
drains('sluice_lane_reclaim', lane_reclaim)
redis.register_function('sluice_fair_config', fair_config)
