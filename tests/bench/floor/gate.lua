-- SPDX-License-Identifier: MIT
-- The floor of sluice_limit's gate (scripts/bench-floor): per limit PTTL (a closed gate has a
-- TTL), then per limit SET PX of the gate's interval when all are open.
-- Leaves out what sluice does besides: spec parsing and checks, a key without a TTL or holding
-- something else (both read as open in sluice), and the reply's figures (1 or 0 only).
--
-- EVALSHA sha N key_1 .. key_N weight COUNT PERIOD_MS       reply: 1 allowed, 0 refused
local w, n, p = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
for i = 1, #KEYS do
    if redis.call('PTTL', KEYS[i]) > 0 then
        return 0
    end
end
local interval = math.ceil(w * p / n)
for i = 1, #KEYS do
    redis.call('SET', KEYS[i], '1', 'PX', interval)
end
return 1
