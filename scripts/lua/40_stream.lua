---------------------------------------------------------------------------------------------------
-- stream: the stream backend's settling of entries - ack, dead, retry, reclaim, touch, prune,
-- group.
-- keys:  sluice:{Q}:stream (or a lane), :dead, :stats, :meta (group, tenant_counts); derived:
--        :tdepth, :lanes (acks and dead letters of share and fair queues)
-- state: none
---------------------------------------------------------------------------------------------------

--[[ ack (stream backend): acknowledge and delete in one step, so depth never leaks.
KEYS[1] stream (or a lane of a fair queue), KEYS[2] stats, KEYS[3] meta (optional: derived when
absent, which costs the slot check below on every call)
ARGV[1] group, ARGV[2..] entry ids
reply: number of ids that were pending (acked now); ids acked earlier (after a reclaim by
another worker) count 0 and are not deleted twice. A missing stream or group acks nothing (0).
A lane, or a queue that counts tenants, derives keys (tdepth, lanes): while its slot migrates
they must be on this node, else TRYAGAIN (see slot_migrating); `checked`: the caller (lane_ack)
checked already. `batch` (lane_ack, one call over several lanes): {K, counted (meta
tenant_counts, read once), n, removed}: the queue's counts (stats acked, meta lane_depth) are
added up there for the caller to write once, instead of here.
errors: ERR (an id that is not a stream id, or no id at all), WRONGTYPE (KEYS[1] is not a
stream, KEYS[2] not a hash), TRYAGAIN (nothing written) ]]
local function ack(keys, args, checked, batch)
    local K = batch and batch.K or queue_keys_of(keys[2], 'stats')
    local lane = K:lane_tenant(keys[1]) or ''
    if not keys[3] and not checked then
        if slot_migrating(K) then
            return slot_tryagain(K)
        end
        checked = true
    end
    local counted
    if batch then
        counted = batch.counted
    else
        counted = redis.call('HGET', keys[3] or K.meta, 'tenant_counts')
    end
    if (counted or lane ~= '') and not checked and slot_migrating(K) then
        local list = {} -- derived: they must all be here
        if counted then
            list[1] = K.tdepth
        end
        if lane ~= '' then
            list[#list + 1] = K.lanes
        end
        local err = slot_keys_here(K, list)
        if err then
            return err
        end
    end
    local ids = {}
    for i = 2, #args do
        ids[#ids + 1] = args[i]
    end
    local n = redis.call('XACK', keys[1], args[1], unpack(ids))
    tdepth_release(K, keys[1], ids, counted)
    local d = redis.call('XDEL', keys[1], unpack(ids))
    if batch then
        batch.n, batch.removed = batch.n + n, batch.removed + lane_removed(K, lane, d, true)
        return n
    end
    lane_removed(K, lane, d)
    if n > 0 then
        COUNT.add(keys[2], 'acked', n)
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
    local K = queue_keys_of(keys[3], 'stats')
    local lane = K:lane_tenant(keys[1])
    if (tenant or (lane and lane ~= '')) and slot_migrating(K) then
        return slot_tryagain(K) -- tdepth, lanes: derived (see slot_migrating)
    end
    local letter = {'XADD', keys[2], '*', 'id', args[2], 'm', body, 'deliveries', args[4],
        'consumer', args[3], 'reason', args[5]}
    if tenant then -- kept with the letter, so a replay counts it in its tenant's share again
        letter[#letter + 1], letter[#letter + 2] = 'k', tenant
        tdepth_release_entry(K.tdepth, e[1])
    end
    if lane and lane ~= '' then -- and a replay puts it back into its lane
        letter[#letter + 1], letter[#letter + 2] = 'lane', lane
    end
    redis.call(unpack(letter))
    redis.call('XACK', keys[1], args[1], args[2])
    lane_removed(K, K:lane_tenant(keys[1]) or '', redis.call('XDEL', keys[1], args[2]))
    COUNT.add(keys[3], 'dead', 1)
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
        COUNT.add(keys[2], 'retried', 1)
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
        COUNT.add(keys[2], 'reclaimed', #out)
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
