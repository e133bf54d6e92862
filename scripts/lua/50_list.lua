---------------------------------------------------------------------------------------------------
-- list: the list backend's reads and settling - list_take, list_ack, list_dead, list_recover.
-- keys:  sluice:{Q}:list, :proc:CONSUMER, :procs, :dead, :meta (list_depth), :stats
-- state: none
---------------------------------------------------------------------------------------------------

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
    local depth = COUNT.get(meta, 'list_depth') or 0
    if n > depth then
        n = depth
    end
    if n > 0 then
        COUNT.add(meta, 'list_depth', -n)
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
        COUNT.add(keys[3], 'acked', n)
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
    COUNT.add(keys[4], 'dead', 1)
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
