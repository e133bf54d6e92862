#!lua name=sluice
--[[
sluice server-side library, data model version 1.

The single source of every atomic operation sluice performs. It is embedded into the binaries
at build time and loaded with FUNCTION LOAD (Redis 7); on servers without functions each
function is run as a script with EVALSHA (the loader appends `return fn(KEYS, ARGV)` to the
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
    local v = redis.call('HMGET', meta, 'capacity', 'backend', 'list_depth')
    local raw = v[1] or default
    local cap = parse_capacity(raw)
    if cap == nil then
        return redis.error_reply('SLUICECONFIG invalid capacity ' .. string.format('%q',
            string.sub(tostring(raw), 1, 40)) .. ' in ' .. meta ..
            ' (an integer 0..9007199254740992)')
    end
    if not v[2] then -- HSETNX: what a producer's ACL allows on meta (see README, least privilege)
        redis.call('HSETNX', meta, 'backend', backend)
    elseif v[2] ~= backend then
        return redis.error_reply('SLUICECONFIG ' .. meta .. ' is a ' .. v[2] ..
            ' queue; this client uses the ' .. backend .. ' backend')
    end
    return cap, tonumber(v[3]) or 0
end

-- The `m` field of a stream entry's field list (flat name, value, ...), or nil.
local function field_m(fields)
    for i = 1, #fields, 2 do
        if fields[i] == 'm' then
            return fields[i + 1]
        end
    end
    return nil
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
-- behind Retry-After) when there were any.
local function count_rejected(stats, rejected, reply)
    if rejected > 0 then
        redis.call('HINCRBY', stats, 'rejected', rejected)
        reply[5] = tonumber(redis.call('HGET', stats, 'acked')) or 0
    end
end

--[[ admit (stream backend)
KEYS[1] stream, KEYS[2] meta, KEYS[3] stats, KEYS[4] idempotency key (optional)
ARGV[1] default capacity (used when meta has no `capacity`)
ARGV[2] idempotency TTL in ms (only with KEYS[4]; exactly one envelope then)
ARGV[3..] envelopes, appended in order while depth < capacity; the rest are rejected
reply: {admitted, depth_after, capacity, duplicate(0|1), acked, id_1, ..., id_admitted}
`acked` is the stats counter when something was rejected (for the drain-rate estimate behind
Retry-After), else -1. A duplicate (the idempotency key was seen within its TTL) replies
{1, depth, capacity, 1, -1, id} without appending. ]]
local function admit(keys, args)
    local cap = queue_settings(keys[2], args[1], 'stream')
    if type(cap) == 'table' then
        return cap
    end
    local depth = redis.call('XLEN', keys[1])
    if keys[4] then
        local seen = redis.call('GET', keys[4])
        if seen then
            return {1, depth, cap, 1, -1, seen}
        end
    end
    local n = #args - 2
    local take = room(cap, depth, n)
    local reply = {take, depth + take, cap, 0, -1}
    for i = 1, take do
        reply[5 + i] = redis.call('XADD', keys[1], '*', 'm', args[2 + i])
    end
    if take > 0 then
        redis.call('HINCRBY', keys[3], 'admitted', take)
        if keys[4] then
            redis.call('SET', keys[4], reply[6], 'PX', args[2])
        end
    end
    count_rejected(keys[3], n - take, reply)
    return reply
end

--[[ ack (stream backend): acknowledge and delete in one step, so depth never leaks.
KEYS[1] stream, KEYS[2] stats
ARGV[1] group, ARGV[2..] entry ids
reply: number of ids that were pending (acked now); ids acked earlier (after a reclaim by
another worker) count 0 and are not deleted twice. ]]
local function ack(keys, args)
    local ids = {}
    for i = 2, #args do
        ids[#ids + 1] = args[i]
    end
    local n = redis.call('XACK', keys[1], args[1], unpack(ids))
    redis.call('XDEL', keys[1], unpack(ids))
    if n > 0 then
        redis.call('HINCRBY', keys[2], 'acked', n)
    end
    return n
end

--[[ dead (stream backend): move one entry to the dead stream with its reason, then ack + delete.
KEYS[1] stream, KEYS[2] dead, KEYS[3] stats
ARGV[1] group, ARGV[2] id, ARGV[3] consumer, ARGV[4] delivery count, ARGV[5] reason
reply: 1 if the entry still had a body, 0 if it had been deleted (it is acked either way). ]]
local function dead(keys, args)
    local e = redis.call('XRANGE', keys[1], args[2], args[2])
    local body = ''
    if e[1] then
        body = field_m(e[1][2]) or ''
    end
    redis.call('XADD', keys[2], '*', 'id', args[2], 'm', body, 'deliveries', args[4],
        'consumer', args[3], 'reason', args[5])
    redis.call('XACK', keys[1], args[1], args[2])
    redis.call('XDEL', keys[1], args[2])
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
reply: 1 if the entry was still pending, else 0 ]]
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
reply: {next_cursor, {{id, body_or_false, deliveries}, ...}, {deleted ids}} ]]
local function reclaim(keys, args)
    local r = redis.call('XAUTOCLAIM', keys[1], args[1], args[2], args[3], args[4], 'COUNT',
        args[5])
    local out = {}
    for i, e in ipairs(r[2]) do
        local body = false
        if e[2] then
            body = field_m(e[2]) or false
        end
        local p = redis.call('XPENDING', keys[1], args[1], e[1], e[1], 1)
        local count = 1
        if p[1] then
            count = p[1][4]
        end
        out[i] = {e[1], body, count}
    end
    if #out > 0 then
        redis.call('HINCRBY', keys[2], 'reclaimed', #out)
    end
    return {r[1], out, r[3] or {}}
end

--[[ touch (stream backend): the owner's heartbeat for long jobs. Re-claims (JUSTID, which
resets idle time without counting a delivery) each id still owned by `consumer`.
KEYS[1] stream
ARGV[1] group, ARGV[2] consumer, ARGV[3..] ids
reply: the ids no longer owned by `consumer` (another worker took them) ]]
local function touch(keys, args)
    local lost = {}
    for i = 3, #args do
        local p = redis.call('XPENDING', keys[1], args[1], args[i], args[i], 1, args[2])
        if p[1] then
            redis.call('XCLAIM', keys[1], args[1], args[2], 0, args[i], 'JUSTID')
        else
            lost[#lost + 1] = args[i]
        end
    end
    return lost
end

--[[ list_admit (list backend). Depth = waiting + in flight is kept in meta field
`list_depth`: it changes only here and in list_ack/list_dead, so a crash cannot leak it.
Elements are "<seq>:<envelope>"; seq is the message id.
KEYS[1] list, KEYS[2] meta, KEYS[3] stats
ARGV as admit. reply as admit. ]]
local function list_admit(keys, args)
    local cap, depth = queue_settings(keys[2], args[1], 'list')
    if type(cap) == 'table' then
        return cap
    end
    local n = #args - 2
    local take = room(cap, depth, n)
    local reply = {take, depth + take, cap, 0, -1}
    if take > 0 then
        local last = redis.call('HINCRBY', keys[2], 'list_seq', take)
        local elems = {}
        for i = 1, take do
            local id = tostring(last - take + i)
            reply[5 + i] = id
            elems[i] = id .. ':' .. args[2 + i]
        end
        redis.call('LPUSH', keys[1], unpack(elems))
        redis.call('HINCRBY', keys[2], 'list_depth', take)
        redis.call('HINCRBY', keys[3], 'admitted', take)
    end
    count_rejected(keys[3], n - take, reply)
    return reply
end

--[[ list_take (list backend): move up to ARGV[1] elements into the consumer's processing list.
KEYS[1] list, KEYS[2] processing list, KEYS[3] procs set
reply: the elements, oldest first ]]
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
reply: number removed ]]
local function list_ack(keys, args)
    local n = 0
    for i = 1, #args do
        n = n + redis.call('LREM', keys[1], -1, args[i])
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
reply: 1 if removed, else 0 ]]
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
reply: number of elements moved ]]
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
    return field_m(e[1][2]) or ''
end

-- The loop of replay and list_replay. `depth` is the bucket's depth now; append(body) queues
-- one body. Outcome codes follow the counters' order: 0 replayed, 1 not fit, 2 skipped,
-- 3 missing.
local function replay_letters(keys, args, cap, depth, append)
    local counts = {0, 0, 0, 0}
    local outcomes = {}
    for i = 2, #args do
        local body = dead_body(keys[4], args[i])
        local o = 1
        if body == nil then
            o = 3
        elseif body == '' then
            o = 2
        elseif depth < cap then
            append(body)
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
happened to ARGV[1 + i]: 0 replayed, 1 not fit (stays dead), 2 skipped, 3 missing. ]]
local function replay(keys, args)
    local cap = queue_settings(keys[2], args[1], 'stream')
    if type(cap) == 'table' then
        return cap
    end
    return replay_letters(keys, args, cap, redis.call('XLEN', keys[1]), function(body)
        redis.call('XADD', keys[1], '*', 'm', body)
    end)
end

--[[ list_replay (list backend): replay onto the list, as list_admit appends.
KEYS[1] list, KEYS[2] meta, KEYS[3] stats, KEYS[4] dead
ARGV as replay. reply as replay. ]]
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
reply: 1 deleted (or it did not exist), 0 kept (it has pending entries) ]]
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
errors: SLUICECONFIG (another group, or a list queue) ]]
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
            other .. '"; one group per queue (see sluice_group in the README)')
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

--[[ version: KEYS none; reply: the library version string ]]
local function version(keys, args)
    return VERSION
end

-- REGISTER (the loader cuts the text here for EVALSHA mode)
redis.register_function('sluice_admit', admit)
redis.register_function{function_name = 'sluice_ack', callback = ack, flags = {'allow-oom'}}
redis.register_function{function_name = 'sluice_dead', callback = dead, flags = {'allow-oom'}}
redis.register_function{function_name = 'sluice_retry', callback = retry, flags = {'allow-oom'}}
redis.register_function{function_name = 'sluice_reclaim', callback = reclaim,
    flags = {'allow-oom'}}
redis.register_function{function_name = 'sluice_touch', callback = touch, flags = {'allow-oom'}}
redis.register_function('sluice_list_admit', list_admit)
redis.register_function{function_name = 'sluice_list_take', callback = list_take,
    flags = {'allow-oom'}}
redis.register_function{function_name = 'sluice_list_ack', callback = list_ack,
    flags = {'allow-oom'}}
redis.register_function{function_name = 'sluice_list_dead', callback = list_dead,
    flags = {'allow-oom'}}
redis.register_function{function_name = 'sluice_list_recover', callback = list_recover,
    flags = {'allow-oom'}}
redis.register_function('sluice_replay', replay)
redis.register_function('sluice_list_replay', list_replay)
redis.register_function{function_name = 'sluice_prune', callback = prune, flags = {'allow-oom'}}
redis.register_function('sluice_group', group)
redis.register_function{function_name = 'sluice_version', callback = version,
    flags = {'no-writes', 'allow-stale'}}
