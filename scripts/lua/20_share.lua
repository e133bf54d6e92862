---------------------------------------------------------------------------------------------------
-- share: a tenant's share of the bucket (meta per_tenant), counted per tenant.
-- keys:  sluice:{Q}:tdepth (tenant -> entries held); entries counted there carry field k
-- state: none
---------------------------------------------------------------------------------------------------

--[[ A tenant's share of the bucket (meta `per_tenant` = M, stream backend): no tenant holds more
than M entries, waiting + in flight. sluice:{Q}:tdepth counts per tenant the entries admitted
while a share was set; those entries carry their tenant in the field `k`, and an entry's count
goes when the entry goes (ack, dead), in the same function call: exact through crashes, and a
share switched on or off later never makes a count drift. ]]
-- Lowers the count of the tenant of entry `e` ({id, fields}) when it carries one. A count at 0
-- is removed when the caller may (HDEL is not in the worker's ACL of earlier versions).
local function tdepth_release_entry(tk, e)
    local t = field(e[2], 'k')
    if t and COUNT.add(tk, t, -1) <= 0 and
        (not redis.acl_check_cmd or redis.acl_check_cmd('HDEL', tk, t)) then
        redis.call('HDEL', tk, t)
    end
end

-- The same for the entries `ids` of `stream` (the queue's stream or a lane), before they are
-- deleted. Only queues that ever counted tenants (meta `tenant_counts`, set by the first counted
-- admission; the caller read it: `counted`) read the entries.
local function tdepth_release(K, stream, ids, counted)
    if not counted then
        return
    end
    local tk = K.tdepth
    for _, id in ipairs(ids) do
        local e = redis.call('XRANGE', stream, id, id)
        if e[1] then
            tdepth_release_entry(tk, e[1])
        end
    end
end
