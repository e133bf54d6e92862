-- SPDX-License-Identifier: MIT
-- The comparison of `scripts/bench`'s limits section: a sliding-window log over two sorted sets
-- (a global limit and a per-category limit) the way a notification sender typically publishes
-- it. Run as one script it is exact; the same steps sent as separate commands (or MULTI without
-- WATCH) are not: two senders can both read a count under the limit and both add.
--
-- EVALSHA sha 2 GLOBAL CATEGORY global_limit category_limit window_ms unique_id
-- reply: 1 allowed (a member added to both sets), 0 refused (nothing added)
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local window = tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now - window)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[1]) or
    redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[2]) then
    return 0
end
local member = now .. ':' .. ARGV[4]
redis.call('ZADD', KEYS[1], now, member)
redis.call('ZADD', KEYS[2], now, member)
redis.call('PEXPIRE', KEYS[1], window)
redis.call('PEXPIRE', KEYS[2], window)
return 1
