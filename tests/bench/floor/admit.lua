-- SPDX-License-Identifier: MIT
-- The floor of sluice_admit2 on a plain queue (scripts/bench-floor): XLEN for the depth, then an
-- XADD per message while the depth is under the capacity.
-- Leaves out what sluice does besides: the queue's settings in its meta hash (capacity,
-- backend, limits, share, fair lanes), the admitted and rejected counters, idempotency keys,
-- the slot-migration check and the per-message outcomes of the reply (ids only).
--
-- EVALSHA sha 1 stream capacity envelope_1 .. envelope_n     reply: the ids admitted
local cap = tonumber(ARGV[1])
local depth = redis.call('XLEN', KEYS[1])
local ids = {}
for i = 2, #ARGV do
    if depth >= cap then
        break
    end
    ids[#ids + 1] = redis.call('XADD', KEYS[1], '*', 'm', ARGV[i])
    depth = depth + 1
end
return ids
