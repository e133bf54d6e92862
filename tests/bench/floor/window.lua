-- SPDX-License-Identifier: MIT
-- The floor of sluice_limit's window (scripts/bench-floor): a minimal sub-bucket hash, one field
-- per block of PRECISION_MS: TIME, per limit HGETALL (the live blocks summed, the expired ones
-- noted), then per limit HINCRBY of the current block, HDEL of the expired ones and PEXPIRE
-- when all pass. Leaves out what sluice does besides: spec parsing and checks, several windows
-- sharing one hash, the clock going back, a key holding something else, and the reply's
-- figures (1 or 0 only).
--
-- EVALSHA sha N key_1 .. key_N weight COUNT PERIOD_MS PRECISION_MS   reply: 1 allowed, 0 refused
local t = redis.call('TIME')
local now_ms = t[1] * 1000 + math.floor(t[2] / 1000)
local w, n, p, prec = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local b = math.floor(now_ms / prec)
local oldest = b - math.ceil(p / prec) + 1
local expired = {}
for i = 1, #KEYS do
    local h, total, old = redis.call('HGETALL', KEYS[i]), 0, {}
    for j = 1, #h, 2 do
        if tonumber(h[j]) < oldest then
            old[#old + 1] = h[j]
        else
            total = total + tonumber(h[j + 1])
        end
    end
    if total + w > n then
        return 0
    end
    expired[i] = old
end
for i = 1, #KEYS do
    redis.call('HINCRBY', KEYS[i], b, w)
    if #expired[i] > 0 then
        redis.call('HDEL', KEYS[i], unpack(expired[i]))
    end
    redis.call('PEXPIRE', KEYS[i], p + prec)
end
return 1
