-- SPDX-License-Identifier: MIT
-- The floor of sluice_limit's gcra (scripts/bench-floor): TIME, a GET per limit of its
-- theoretical arrival time (TAT, microseconds), then a SET PX per limit when all pass.
-- Leaves out what sluice does besides: spec parsing and checks, the fractional TAT (an emission
-- interval that is not a whole microsecond), the COUNT and PERIOD kept with the TAT (rescaling
-- a changed limit's debt), a key holding something else, and the reply's figures (1 or 0 only).
--
-- EVALSHA sha N key_1 .. key_N weight COUNT PERIOD_MS       reply: 1 allowed, 0 refused
local t = redis.call('TIME')
local now = t[1] * 1000000 + t[2]
local w, n, p = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]) * 1000
local step = math.floor(p / n)
local tat = {}
for i = 1, #KEYS do
    local v = tonumber(redis.call('GET', KEYS[i])) or now
    if v < now then
        v = now
    end
    v = v + w * step
    if v - now > p then
        return 0
    end
    tat[i] = v
end
for i = 1, #KEYS do
    redis.call('SET', KEYS[i], tat[i], 'PX', math.ceil((tat[i] - now) / 1000) + 1)
end
return 1
