---------------------------------------------------------------------------------------------------
-- clear: delete a queue's waiting entries (not those in flight), for both backends, keeping its
-- settings and counters and fixing every count derived from the entries.
-- keys:  sluice:{Q}:stream or :list, :meta (list_depth, lane_depth, lane_wait, tenant_counts);
--        derived: :tdepth, :lane:T, :lanes, :lwait, :ring, :deficit, :served
-- state: none
---------------------------------------------------------------------------------------------------

--[[ clear (stream backend; `sluice-admin clear`): deletes up to ARGV[2] waiting entries - the
entries not yet delivered to the group, those after its last delivered id (every entry when the
group does not exist yet) - of the queue's stream, then of the tenant lanes of a fair queue (the
lanes of the ring: a lane with undelivered entries is in it), at most CLEAR_MAX_LANES lanes a
call. Entries in flight stay, and their acks, dead letters and retries work as before. In the
same call every count goes with the entries: a tenant's share (tdepth, entries carrying `k`),
a lane's count (lanes, meta lane_depth; an empty lane goes, as an ack leaves it), its
undelivered count (lwait, meta lane_wait); a lane left with nothing undelivered leaves the ring
and its credit. Capacity, limits, weights, the counters and the dead letters are kept.
KEYS[1] stream, KEYS[2] meta
ARGV[1] group, ARGV[2] the most entries to delete (1..CLEAR_MAX_ENTRIES)
reply: {deleted, more (1: the call stopped at its bound, call again), lanes finished}
errors: TRYAGAIN (the slot migrates), ERR (a bad ARGV[2]), WRONGTYPE ]]
local CLEAR_MAX_ENTRIES = 1000
local CLEAR_MAX_LANES = 128

-- Deletes up to n undelivered entries of stream `key`, releasing their tenant counts when the
-- queue counts tenants. Returns how many, and whether none is left.
local function clear_stream(K, key, group, n, counted)
    local last = last_delivered(key, group)
    local es = redis.call('XRANGE', key, last and ('(' .. last) or '-', '+', 'COUNT', n)
    local ids = {}
    for i, e in ipairs(es) do
        ids[i] = e[1]
        if counted then
            tdepth_release_entry(K.tdepth, e)
        end
    end
    if #ids > 0 then
        redis.call('XDEL', key, unpack(ids))
    end
    return #ids, #es < n
end

-- Lane t of the ring: up to n of its undelivered entries deleted (lane '', the stream, was
-- cleared first) and counted; a lane left with none leaves the ring. Returns deleted, done.
local function clear_lane(K, t, group, n, counted)
    local d, done = 0, true
    if t ~= '' then
        d, done = clear_stream(K, K:lane(t), group, n, counted)
    end
    if d > 0 then
        COUNT.add(K.lwait, t, -d)
        COUNT.add(K.meta, 'lane_wait', -d)
        lane_removed(K, t, d)
    end
    if done then
        local left = COUNT.get(K.lwait, t) or 0
        redis.call('HDEL', K.lwait, t)
        if t ~= '' and left ~= 0 then -- its count was off: lane_wait sums the lanes' counts
            COUNT.add(K.meta, 'lane_wait', -left)
        end
        redis.call('LREM', K.ring, 0, t)
        redis.pcall('HDEL', K.deficit, t) -- (a key of another type: no credit to clear)
    end
    return d, done
end

local function clear(keys, args)
    local n = tonumber(args[2])
    if not n or n < 1 or n > CLEAR_MAX_ENTRIES or n ~= math.floor(n) then
        return redis.error_reply('ERR sluice_clear: the count must be 1..' .. CLEAR_MAX_ENTRIES)
    end
    local K = queue_keys_of(keys[2], 'meta')
    if slot_migrating(K) then -- share counts, lanes: derived
        return slot_tryagain(K)
    end
    local counted = redis.call('HGET', keys[2], 'tenant_counts') ~= false
    local deleted, done = clear_stream(K, keys[1], args[1], n, counted)
    if not done then
        return {deleted, 1, 0}
    end
    local ring = redis.call('LRANGE', K.ring, 0, CLEAR_MAX_LANES - 1)
    local finished = 0
    for _, t in ipairs(ring) do
        if deleted >= n then
            return {deleted, 1, finished}
        end
        local d, lane_done = clear_lane(K, t, args[1], n - deleted, counted)
        deleted = deleted + d
        if not lane_done then
            return {deleted, 1, finished}
        end
        finished = finished + 1
    end
    return {deleted, #ring == CLEAR_MAX_LANES and 1 or 0, finished}
end

--[[ list_clear (list backend): deletes up to ARGV[1] waiting elements (the oldest first, those
the workers would take next); the processing lists (in flight) stay. meta list_depth drops by
as many.
KEYS[1] list, KEYS[2] meta
ARGV[1] the most elements to delete (1..CLEAR_MAX_ENTRIES)
reply: {deleted, more (1: call again), 0}
errors: ERR (a bad ARGV[1]), WRONGTYPE ]]
local function list_clear(keys, args)
    local n = tonumber(args[1])
    if not n or n < 1 or n > CLEAR_MAX_ENTRIES or n ~= math.floor(n) then
        return redis.error_reply('ERR sluice_list_clear: the count must be 1..' ..
            CLEAR_MAX_ENTRIES)
    end
    local len = redis.call('LLEN', keys[1])
    local d = math.min(len, n)
    if d == len then
        redis.call('DEL', keys[1])
    else -- admission pushes on the left, workers take from the right: the oldest go first
        redis.call('LTRIM', keys[1], 0, len - d - 1)
    end
    list_depth_sub(keys[2], d)
    return {d, d < len and 1 or 0, 0}
end
