-- SPDX-License-Identifier: MIT
-- The floor of sluice_fair_take (scripts/bench-floor): one round over the head of the ring of
-- lanes, an XREADGROUP per lane (its group created the first time), the lanes read put at the
-- back of the ring (or out of it, when they gave less than asked), the entries returned as
-- sluice_fair_take returns them ({lane, entries, ...}).
-- Leaves out what sluice does besides: the pause flag, the slot-migration check, the queue's
-- limits (drain, inflight, per tenant), weights and deficit credit (a lane's turn here is a
-- fixed share of the read), the undelivered and served counts per lane, the held-lane wait and
-- the wake token.
--
-- EVALSHA sha 1 ring lane_prefix group consumer n    reply: {{lane_1, entries_1, ...}, 0}
local ring, prefix, group, consumer = KEYS[1], ARGV[1], ARGV[2], ARGV[3]
local n = tonumber(ARGV[4])
local lanes = redis.call('LRANGE', ring, 0, 63)
local k = math.max(1, math.ceil(n / math.max(#lanes, 1)))
local out, back, visited = {}, {}, 0
for _, t in ipairs(lanes) do
    if n <= 0 then
        break
    end
    visited = visited + 1
    local lane = prefix .. t
    local r = redis.pcall('XREADGROUP', 'GROUP', group, consumer, 'COUNT', k, 'STREAMS', lane, '>')
    if type(r) == 'table' and r.err then
        redis.call('XGROUP', 'CREATE', lane, group, '0', 'MKSTREAM')
        r = redis.call('XREADGROUP', 'GROUP', group, consumer, 'COUNT', k, 'STREAMS', lane, '>')
    end
    local got = r and r[1] and #r[1][2] or 0
    if got > 0 then
        out[#out + 1], out[#out + 2] = t, r[1][2]
        n = n - got
    end
    if got == k then
        back[#back + 1] = t
    end
end
if visited > 0 then
    redis.call('LPOP', ring, visited)
end
if #back > 0 then
    redis.call('RPUSH', ring, unpack(back))
end
return {out, 0}
