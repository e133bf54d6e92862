-- SPDX-License-Identifier: MIT
-- The floor of sluice_limit's log (scripts/bench-floor): TIME, per limit ZREMRANGEBYSCORE of
-- the expired units and ZCARD, then per limit ZADD of one member and PEXPIRE when all pass.
-- Leaves out what sluice does besides: spec parsing and checks, weights above 1 (one member
-- per unit), two calls in one microsecond (sluice numbers the members; here the member is the
-- time and one would overwrite the other), a key holding something else, and the reply's
-- figures (1 or 0 only).
--
-- EVALSHA sha N key_1 .. key_N weight COUNT PERIOD_MS       reply: 1 allowed, 0 refused
local t = redis.call('TIME')
local now = t[1] .. string.format('%06d', t[2])
local n, p = tonumber(ARGV[2]), tonumber(ARGV[3])
for i = 1, #KEYS do
    redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', now - p * 1000)
    if redis.call('ZCARD', KEYS[i]) + 1 > n then
        return 0
    end
end
for i = 1, #KEYS do
    redis.call('ZADD', KEYS[i], now, now)
    redis.call('PEXPIRE', KEYS[i], p + 1)
end
return 1
