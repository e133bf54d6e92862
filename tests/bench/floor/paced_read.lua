-- SPDX-License-Identifier: MIT
-- The floor of sluice_take with one drain rate that does not bind (scripts/bench-floor): TIME,
-- the rate's state (a GCRA theoretical arrival time) read, XREADGROUP for what it allows, the
-- state written back for what was read, the entries returned as sluice_take returns them.
-- Leaves out what sluice does besides: the pause flag, the slot-migration check, the queue's
-- limits hash (which limits there are, their scopes and specs), the inflight count, the
-- group's last delivered id when nothing is left, and the wait when the rate binds (here it
-- reads nothing then).
--
-- EVALSHA sha 2 stream rate_key group consumer n count period_ms
--     reply: {entries, 0, ''}
local group, consumer, n = ARGV[1], ARGV[2], tonumber(ARGV[3])
local count, period = tonumber(ARGV[4]), tonumber(ARGV[5])
local t = redis.call('TIME')
local now = t[1] * 1000000 + t[2]
local step = period * 1000 / count -- us per unit
local tat = tonumber(redis.call('GET', KEYS[2]) or 0)
if tat < now then
    tat = now
end
local allow = math.min(n, math.floor((now + period * 1000 - tat) / step))
if allow <= 0 then
    return {{}, 0, ''}
end
local r = redis.call('XREADGROUP', 'GROUP', group, consumer, 'COUNT', allow, 'STREAMS', KEYS[1],
    '>')
local got = r and r[1] and #r[1][2] or 0
if got > 0 then
    redis.call('SET', KEYS[2], string.format('%d', tat + got * step), 'PX', period)
end
return {r, 0, ''}
