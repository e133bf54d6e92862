-- SPDX-License-Identifier: MIT
-- The floor of sluice_limit's fixed window (scripts/bench-floor): the fewest commands that do its
-- job - N clock-aligned fixed windows of COUNT per PERIOD_MS, one request counted in all or none -
-- as one counter per window key: TIME, a GET per limit, then INCRBY and PEXPIRE on first use.
-- Leaves out what sluice does besides: spec parsing and checks, the weight's checks, a key
-- holding something else (WRONGTYPE fails the call here), the reply's remaining, retry-after
-- and reset figures (1 or 0 only), and the window boundary (the key's TTL stands for it).
--
-- EVALSHA sha N key_1 .. key_N weight COUNT PERIOD_MS       reply: 1 allowed, 0 refused
local t = redis.call('TIME')
local now_ms = t[1] * 1000 + math.floor(t[2] / 1000)
local w, n, p = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
for i = 1, #KEYS do
    if (tonumber(redis.call('GET', KEYS[i])) or 0) + w > n then
        return 0
    end
end
for i = 1, #KEYS do
    if redis.call('INCRBY', KEYS[i], w) == w then
        redis.call('PEXPIRE', KEYS[i], p - now_ms % p)
    end
end
return 1
