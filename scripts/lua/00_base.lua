---------------------------------------------------------------------------------------------------
-- base: what every function needs - the library version, the runtime API every entry point
-- sets on its first call (entry), stream entry fields, and the slot-migration check of functions
-- that derive keys.
-- keys:  every key name of a queue (queue_keys); the slot check's probes sluice:{Q}:migrating?
--        and sluice:{Q}:migrating?2, which never exist
-- state: the initialisers of every module's state (on_fresh_state), run by entry() on a fresh
--        Lua state whichever function runs first; the runtime API (r_call, r_pcall, ...); the
--        key tables made last (a memo by prefix)
---------------------------------------------------------------------------------------------------

--[[
sluice server-side library, data model version 1.

The single source of every atomic operation sluice performs. It is embedded into the binaries
at build time and loaded with FUNCTION LOAD (Redis 7); on servers without functions each
function is run as a script with EVALSHA: the modules it needs (its "-- @needs" line in the
register module) and `return entry(fn)(KEYS, ARGV)`. Each call of such a script makes all its
closures and tables again, so base is cut in parts (the "-- @module base_*" lines below) that a
script carries only when its function reaches them.

Every key a function touches is passed in KEYS; all keys of one queue share the hash tag {Q}.
Counters live in sluice:{Q}:stats (admitted, rejected, acked, retried, dead, reclaimed).
Never bound the stream with MAXLEN: it would drop admitted work silently.
]]

local VERSION = '1:@LIBRARY_HASH@' -- data model 1, then the hash of the library's text

--[[ Module state. Every module-level variable that changes after the library loads (the
runtime API below, the limiter's caches and scratch tables) is declared without a value and set
by its module's initialiser, registered with on_fresh_state. entry() runs every initialiser, in
module order, before the first call on a fresh Lua state (new server, restart, failover,
FUNCTION LOAD), whichever function that is: each function is called through entry() (registered
so, and the EVALSHA form of each function calls it so, where every call is a fresh state). So no
state depends on which entry point ran first, and each module's state is set in one place. ]]
local STATE_INITS = {}
local function on_fresh_state(init)
    STATE_INITS[#STATE_INITS + 1] = init
end

--[[ The runtime API in upvalues. A function's globals (redis, tonumber, math, ...) are looked up
through the globals table's metatable on every use, which costs a short hot path more than some
of its calls; an upvalue is one step. redis.call, tonumber and math are not there while the
library loads: the first initialiser sets them. The string functions come from the strings'
metatable, there at load. ]]
local r_call, r_pcall, to_number, l_type, m_floor, m_ceil, m_fmod, COUNT
local s_format, s_match = ('').format, ('').match
on_fresh_state(function()
    r_call, r_pcall, to_number, l_type = redis.call, redis.pcall, tonumber, type
    m_floor, m_ceil, m_fmod = math.floor, math.ceil, math.fmod
end)

--[[ The counts sluice keeps in Redis: hash fields or strings holding a whole number (a depth, a
share, a tenant's or a lane's entries, a lane's credit or weight, a sequence, the count of limits,
the stats counters). Anything else found there (written by hand or by another program: a sign, a
fraction, an exponent, past 2^53, inf, nan, garbage, a key of another type) reads as none and is
replaced when the count is next written, so no stored value makes a call read without bound,
loop, pass a capacity or a share by it, or fail (after it wrote). ]]
COUNT = {}

-- A count read back (a string, nil, or another type's error table): its number when it is a
-- whole number 0..2^53, else nil.
function COUNT.of(v)
    local n = to_number(v)
    if n and n >= 0 and n <= 9007199254740992 and n == m_floor(n) then
        return n
    end
    return nil
end

-- The count at field of hash key (COUNT.of; a key of another type reads as none).
function COUNT.get(key, field)
    return COUNT.of(r_pcall('HGET', key, field))
end

-- HINCRBY key field n (n a number or its text) and its result; a count that is no integer (or
-- would overflow) read as none: it becomes n, or 0 for n < 0 (a key of another type than a
-- hash is replaced by the hash).
function COUNT.add(key, field, n)
    local r = r_pcall('HINCRBY', key, field, n)
    if l_type(r) == 'number' then
        return r
    end
    if r_call('TYPE', key).ok ~= 'hash' then
        r_call('DEL', key)
    end
    n = to_number(n)
    if n < 0 then
        n = 0
    end
    r_call('HSET', key, field, n)
    return n
end

-- fn as called by Redis: on a fresh Lua state, every module's state is set first.
local function entry(fn)
    return function(keys, args)
        if not r_call then
            for i = 1, #STATE_INITS do
                STATE_INITS[i]()
            end
        end
        return fn(keys, args)
    end
end

--[[ version: KEYS none; reply: the library version string; errors: none ]]
local function version(keys, args)
    return VERSION
end

--[[ Memos of pure functions (the key tables below, the limiter's parsed specs): {map = key ->
value, n = values kept, max}, read as memo.map[key]. memo_put keeps a value and gives it back; a
memo holding max starts over, so it never grows past max. ]]
local function memo_put(memo, key, value)
    if memo.n >= memo.max then
        memo.map, memo.n = {}, 0
    end
    memo.map[key], memo.n = value, memo.n + 1
    return value
end

-- @module base_fields
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

-- The id after which the entries of stream `key` are undelivered to `group`, or nil when the
-- group (or the stream) does not exist: then every entry waits. (sluice_clear, the paced read.)
local function last_delivered(key, group)
    local r = redis.pcall('XINFO', 'GROUPS', key)
    if type(r) ~= 'table' or r.err then
        return nil
    end
    for _, g in ipairs(r) do
        if field(g, 'name') == group then
            return field(g, 'last-delivered-id')
        end
    end
    return nil
end

-- @module base_keys
--[[ The keys of a queue: every key name the library builds is built here, from the queue's
prefix "sluice:{Q}:" (the C side's twin is common/src/queue.c; docs/data-model.md lists them).
queue_keys(prefix) gives the queue's key table K; queue_keys_of(key, name) the same from a key of
the queue known to be its `name` key (KEYS[2], meta or stats, for most functions). A name is
built the first time it is used, and a name that is not a key of the queue fails loudly.
  K.stream K.meta K.stats K.dead    the bucket, its settings, counters, dead letters
  K.tdepth                          a tenant's share: entries per tenant
  K.limits, K:qlim(NAME, ALG)       the queue's limits; limit NAME's state keys less the VALUE
                                    that ends them (sluice:{Q}:qlim:NAME:ALG:VALUE)
  K:lane(T)                         tenant T's lane (T '' is the stream); K:lane_tenant(key)
                                    the tenant of a lane key ('' the stream, nil another key)
  K.lanes K.lwait K.served K.ring K.deficit K.weights K.wake   a fair queue's lanes and ring
  K:wake_up, K:ring_repair          a fair queue's wake-up token and ring kept right (lanes)
  K:claim_refund(T0, TAG, TTL)      a grant's refund made once
  K.list K.procs K:proc(CONSUMER), K:idem(KEY)   the list backend; idempotency keys (the client
                                    names these in KEYS: listed so the table is complete)
  K.migrating K.migrating2          the slot check's probes, keys that never exist
A partition i of queue Q is a queue of its own, prefix "sluice:{Q~i}:" (named by the client). ]]
local KEY_SUFFIX = {stream = 'stream', meta = 'meta', stats = 'stats', dead = 'dead',
    tdepth = 'tdepth', limits = 'limits', lanes = 'lanes', lwait = 'lwait', served = 'served',
    ring = 'ring', deficit = 'deficit', weights = 'weights', wake = 'wake', list = 'list',
    procs = 'procs', migrating = 'migrating?', migrating2 = 'migrating?2'}
local KEY_FNS = {}
function KEY_FNS.lane(K, t)
    if t == '' then
        return K.stream
    end
    return K.prefix .. 'lane:' .. t
end
function KEY_FNS.lane_tenant(K, key)
    if key == K.stream then
        return ''
    end
    local lp = K.prefix .. 'lane:'
    if string.sub(key, 1, #lp) == lp then
        return string.sub(key, #lp + 1)
    end
    return nil
end
function KEY_FNS.qlim(K, name, alg)
    return K.prefix .. 'qlim:' .. name .. ':' .. alg .. ':'
end
function KEY_FNS.proc(K, consumer)
    return K.prefix .. 'proc:' .. consumer
end
function KEY_FNS.idem(K, key)
    return K.prefix .. 'idem:' .. key
end
-- A read's refund is made once (sluice_take refund, sluice_fair_refund): the first call for the
-- grant of time t0 (us, as text) and `tag` claims sluice:{Q}:refunded:T0TAG for ttl_ms (past it nothing
-- of the grant could be given back: see the callers); true the first time, false after.
function KEY_FNS.claim_refund(K, t0, tag, ttl_ms)
    return redis.call('SET', K.prefix .. 'refunded:' .. t0 .. tag, '1', 'NX', 'PX',
        string.format('%d', ttl_ms)) ~= false
end
local KEYS_MT = {__index = function(K, name)
    local f = KEY_FNS[name]
    if f then
        return f
    end
    local suffix = KEY_SUFFIX[name]
    if not suffix then
        error('sluice: ' .. tostring(name) .. ' is not a key of a queue')
    end
    local key = K.prefix .. suffix
    K[name] = key
    return key
end}

local function queue_keys(prefix)
    return setmetatable({prefix = prefix}, KEYS_MT)
end

--[[ The key tables made last, by prefix: a key table is a function of its prefix alone (names,
never anything read from Redis), so a call takes the one an earlier call made rather than make
it and its names again (an admission with limits made two and three names: 0.9 us of its 18).
At most 64 prefixes. Its state is local to this block: the library's main chunk is near Lua's
limit of 200 locals. ]]
local queue_keys_of
do
    local keys_memo
    function queue_keys_of(key, name)
        local prefix = string.sub(key, 1, -1 - #KEY_SUFFIX[name])
        return keys_memo.map[prefix] or memo_put(keys_memo, prefix, queue_keys(prefix))
    end
    on_fresh_state(function()
        keys_memo = {map = {}, n = 0, max = 64}
    end)
end

-- @module base_slots
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
--[[ A server that is no cluster node has no slots to migrate: it is asked once per Lua state
(the first call that would probe), with an EXISTS of two keys in different slots, which a
cluster node refuses inside a script whatever it serves (Redis 6 and 7: the keys of one command
in two slots) and a server without cluster mode answers 0; from then on its probes are left out
(cluster mode is set when a server starts, and a restart is a fresh Lua state). Anything else
(a cluster node's refusal, an ACL's) keeps the probe on every call, as before. ]]
local slot_migrating
do
    local standalone -- nil: not asked yet; true: no cluster; false: a cluster node or unknown
    function slot_migrating(K)
        if standalone then
            return false
        elseif standalone == nil then
            standalone = redis.pcall('EXISTS', 'sluice:{a}:migrating?',
                'sluice:{b}:migrating?') == 0
            if standalone then
                return false
            end
        end
        local a, b = K.migrating, K.migrating2
        local r = redis.pcall('EXISTS', a, b)
        if type(r) == 'table' and r.err ~= nil and not cluster_refused(r) then
            r = redis.pcall('HGET', a, 'x') -- this user may not run EXISTS
        end
        return cluster_refused(r)
    end
    on_fresh_state(function()
        standalone = nil
    end)
end

local function slot_tryagain(K)
    return redis.error_reply('TRYAGAIN ' .. K.prefix .. '* is being migrated to another node ' ..
        '(this call derives keys Redis cannot route until the migration ends)')
end

-- While the slot migrates: nil when every key of `list` is on this node, else TRYAGAIN.
local function slot_keys_here(K, list)
    for _, k in ipairs(list) do
        if redis.pcall('EXISTS', k) ~= 1 then
            return slot_tryagain(K)
        end
    end
    return nil
end
