#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Rate limits on a queue, checked inside the admission call: sluice-admin limit set/list/show/
# del; tenant, client and queue scopes; a limited message is reported as limited (name and
# exact retry-after), counted, never takes room and never stops the next message of another
# tenant in the same batch; callers of the first admission function are refused once a queue
# has limits; the gateway answers 429 with Retry-After and the RateLimit headers.
. "$(dirname "$0")/lib.sh"
q="alim-$$"
keys+=($(queue_keys "$q") "sluice:{$q}:limits")
A() { "$bin/sluice-admin" --redis "$url" "$@"; }
E() { "$bin/sluice-enqueue" --redis "$url" --queue "$q" "$@"; }
cleanup_limits() { rcli --scan --pattern "sluice:{$q}:qlim:*" | xargs -r redis-cli -u "$url" DEL >/dev/null; }
trap 'cleanup_limits; lib_cleanup' EXIT

# the first admission function still works for existing clients (the prefix that fits)
# one admission connects, which loads this build's library (empty input would not connect)
run 0 'admitted=1' E --capacity 7 --tenant z <<<seed
rcli HSET "sluice:{$q}:meta" capacity 7 >/dev/null
rcli FCALL sluice_admit 3 "sluice:{$q}:stream" "sluice:{$q}:meta" "sluice:{$q}:stats" 1000 0 \
    v1a v1b >"$tmp/v1ok"
[ "$(sed -n 1p "$tmp/v1ok")" = 2 ] && [ "$(wc -l <"$tmp/v1ok")" = 7 ] ||
    fail "v1 admit: $(cat "$tmp/v1ok")"
rcli DEL "sluice:{$q}:stream" >/dev/null
rcli HDEL "sluice:{$q}:meta" capacity >/dev/null

# configuration: validated before it is stored, listed, counted in meta `limits`
run 0 "limit per-tenant on $q: tenant gcra 3/10s" A limit "$q" set per-tenant tenant 3/10s
run 0 "limit global on $q: queue log 5/10s" A limit "$q" set global queue 5/10s --algorithm log
run 2 "scope 'planet' is not queue, tenant, client, drain, drain-tenant, inflight or inflight-tenant" A limit "$q" set x planet 1/s
run 2 "needs a unit" A limit "$q" set x queue 1/3x
run 2 'not 1..64 of' A limit "$q" set 'bad name' queue 1/s
run 0 'per-tenant +tenant +gcra +3/10s' A limit "$q" list
[ "$(rcli HGET "sluice:{$q}:meta" limits)" = 2 ] || fail "meta limits is not 2"

# tenant a: 3 of 4 admitted, the 4th limited by per-tenant with an exact retry-after
printf 'a1\na2\na3\na4\n' | E --tenant a >"$tmp/a" 2>&1 && fail "limited run exited 0: $(cat "$tmp/a")"
grep -q '^admitted=3 rejected=1 .* limited=1 (by per-tenant, retry after [0-9]* ms)' "$tmp/a" ||
    fail "tenant a: $(cat "$tmp/a")"
ms=$(sed -n 's/.*retry after \([0-9]*\) ms.*/\1/p' "$tmp/a")
[ "$ms" -gt 3000 ] && [ "$ms" -le 3334 ] || fail "per-tenant retry-after $ms (one interval is 3333 ms)"
# tenant b: 2 admitted (the global log is now at 5), then tenant c is refused by global
run 0 'admitted=2 rejected=0' E --tenant b b1 b2
run 1 'limited=1 \(by global' E --tenant c c1
[ "$(rcli XLEN "sluice:{$q}:stream")" = 5 ] || fail "depth is not 5"
[ "$(rcli HGET "sluice:{$q}:stats" limited)" = 2 ] || fail "limited counter"
run 0 'per-tenant +tenant +gcra +3/10s +1$' A limit "$q" list
run 0 'per-tenant +tenant +gcra:3:10000 +1$' A stats "$q" --sample 0
A stats "$q" --sample 0 --json | grep -q '"limits":\[{"name":"global","scope":"queue","spec":"log:5:10000","refused":1},{"name":"per-tenant",' ||
    fail "stats --json limits: $(A stats "$q" --sample 0 --json)"
run 0 '"name":"global","scope":"queue","spec":"log:5:10000","refused":1' A limit "$q" list --json
run 0 'hash|string' A limit "$q" show per-tenant a
run 0 '5 requests in the log' A limit "$q" show global

# in one batch (what the async producer and the gateway send), limits apply per message: a
# message limited for tenant a does not stop the next one, of tenant d
run 0 'limit global on' A limit "$q" del global
rcli FCALL sluice_admit2 3 "sluice:{$q}:stream" "sluice:{$q}:meta" "sluice:{$q}:stats" \
    1000 0 3 a '' x1 d '' x2 a '' x3 d '' x4 >"$tmp/batch"
# {admitted, depth, capacity, dup, acked, outcome...}: a is limited, d admitted twice
[ "$(sed -n 1p "$tmp/batch")" = 2 ] || fail "batch admitted: $(cat "$tmp/batch")"
[ "$(sed -n 6p "$tmp/batch")" = per-tenant ] || fail "batch outcome 1: $(cat "$tmp/batch")"
sed -n 10p "$tmp/batch" | grep -qE '^[0-9]+-[0-9]+$' || fail "batch outcome 2: $(cat "$tmp/batch")"

# capacity still holds with limits: full is full, and a full message does not consume a limit
run 0 'capacity' A capacity "$q" 7
run 1 'admitted=0 rejected=1 depth=7 capacity=7$' E --tenant e e1
[ "$(rcli EXISTS "sluice:{$q}:qlim:per-tenant:gcra:e")" = 0 ] || fail "a full message was counted"
run 0 'capacity' A capacity "$q" 100

# the first admission function knows nothing of limits: refused, not let past them
rcli FCALL sluice_admit 3 "sluice:{$q}:stream" "sluice:{$q}:meta" "sluice:{$q}:stats" 1000 0 y \
    >"$tmp/v1" 2>&1 || true
grep -q 'has rate limits; this client predates them' "$tmp/v1" || fail "v1 admit: $(cat "$tmp/v1")"

# client scope: the caller's key
run 0 'limit per-client' A limit "$q" set per-client client 1/10s --algorithm gate
run 0 'admitted=1' E --client k1 --tenant f f1
run 1 'limited=1 \(by per-client' E --client k1 --tenant g g1
run 0 'admitted=1' E --client k2 --tenant g g2

# the gateway: the client key from a header; 429 with Retry-After and the RateLimit headers
gateway_start --queue "$q" --client-header X-Api-Key
post() { curl -s -D "$tmp/h" -o "$tmp/b" -w '%{http_code}' -H "X-Api-Key: $1" --data-binary x \
    "http://127.0.0.1:$port/v1/queues/$q/messages"; }
[ "$(post gk1)" = 202 ] || fail "gateway first: $(cat "$tmp/b")"
[ "$(post gk1)" = 429 ] || fail "gateway second: $(cat "$tmp/b")"
tr -d '\r' <"$tmp/h" >"$tmp/hh"
grep -qE '^Retry-After: (9|10)$' "$tmp/hh" || fail "Retry-After: $(cat "$tmp/hh")"
grep -q '^RateLimit-Policy: "per-client";q=1;w=10$' "$tmp/hh" || fail "policy: $(cat "$tmp/hh")"
grep -qE '^RateLimit: "per-client";r=0;t=(9|10)$' "$tmp/hh" || fail "RateLimit: $(cat "$tmp/hh")"
grep -q '"error":"rate limited","limit":"per-client"' "$tmp/b" || fail "body: $(cat "$tmp/b")"
[ "$(post gk2)" = 202 ] || fail "another client: $(cat "$tmp/b")"
curl -s "http://127.0.0.1:$port/metrics" >"$tmp/m"
grep -q "outcome=\"limited\"} 1" "$tmp/m" || fail "gateway metrics: no limited outcome"
grep -q "sluice_gateway_limited_total{queue=\"$q\",limit=\"per-client\"} 1" "$tmp/m" ||
    fail "gateway metrics: no per-limit count: $(grep limited "$tmp/m")"
# GET /v1/queues/{q}: the limits, how often each refused, and the queue's limited counter
curl -s "http://127.0.0.1:$port/v1/queues/$q" >"$tmp/info"
grep -q '"limits_total":2,"limits":\[{"name":"per-client","scope":"client","spec":"gate:1:10000","refused":2},{"name":"per-tenant","scope":"tenant","spec":"gcra:3:10000","refused":' "$tmp/info" ||
    fail "queue info: $(cat "$tmp/info")"
grep -q '"limited":[1-9]' "$tmp/info" || fail "queue info limited: $(cat "$tmp/info")"
echo "test_admission_limits: ok"
