#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A tenant's share of the bucket (sluice-admin capacity Q N --per-tenant M): a burst from one
# tenant cannot fill the bucket and lock the others out; the per-tenant counts change in the
# same function calls as the depth (admission, acknowledgement, dead letters, replay), so they
# come back to zero when the work is done, and a share switched on with entries waiting, or
# off again, never makes them drift.
. "$(dirname "$0")/lib.sh"
q="share-$$"
keys+=($(queue_keys "$q") "sluice:{$q}:tdepth")
A() { "$bin/sluice-admin" --redis "$url" "$@"; }
E() { "$bin/sluice-enqueue" --redis "$url" --queue "$q" "$@"; }
W() { "$bin/sluice-worker" --redis "$url" --queue "$q" --log-level error "$@"; }
held() { local v; v=$(rcli HGET "sluice:{$q}:tdepth" "$1"); echo "${v:-0}"; }

# entries admitted before any share: not counted, and their acks must not count down
run 0 'admitted=2' E --tenant a old1 old2
run 0 'per-tenant share: no tenant holds more than 3' A capacity "$q" 10 --per-tenant 3
run 2 '--per-tenant 11 is more than the capacity 10' A capacity "$q" 10 --per-tenant 11
run 2 "option '--per-tenant' does not apply to 'stats'" A stats "$q" --per-tenant 1

# a burst of 6 from tenant a: 3 admitted (plus the 2 from before the share), 3 full; b and the
# tenantless still get in
seq 1 6 | sed 's/^/a/' | E --tenant a >"$tmp/a" 2>&1 && fail "burst exited 0: $(cat "$tmp/a")"
grep -q '^admitted=3 rejected=3 ' "$tmp/a" || fail "tenant a: $(cat "$tmp/a")"
run 0 'admitted=3 rejected=0' E --tenant b b1 b2 b3
run 0 'admitted=1 rejected=0' E none1
[ "$(held a)" = 3 ] && [ "$(held b)" = 3 ] && [ "$(held '')" = 1 ] ||
    fail "held: a=$(held a) b=$(held b) none=$(held '')"
# the whole still stays within the capacity: 2 + 3 + 3 + 1 = 9 of 10
run 1 'admitted=1 rejected=1' E --tenant c c1 c2

# the workers drain everything: every count comes back to zero and the hash goes away
W --handler noop --max-messages 10 >/dev/null 2>&1
[ "$(rcli XLEN "sluice:{$q}:stream")" = 0 ] || fail "not drained"
[ "$(rcli EXISTS "sluice:{$q}:tdepth")" = 0 ] || fail "counts left: $(rcli HGETALL "sluice:{$q}:tdepth")"

# a dead letter gives its tenant's room back, and a replay takes it again
run 0 'admitted=1' E --tenant a poison
W --handler exec:false --max-deliveries 1 --max-messages 1 >/dev/null 2>&1 || true
[ "$(rcli XLEN "sluice:{$q}:dead")" = 1 ] || fail "no dead letter"
[ "$(held a)" = 0 ] || fail "dead letter still held: $(held a)"
run 0 'admitted=3' E --tenant a a7 a8 a9
run 1 'did not fit|not fit|kept' A dead replay "$q"
[ "$(held a)" = 3 ] || fail "a replay past the share: $(held a)"
W --handler noop --max-messages 3 >/dev/null 2>&1
run 0 'replayed' A dead replay "$q"
[ "$(held a)" = 1 ] || fail "replayed letter not counted: $(held a)"

# switched off with entries waiting: nothing is refused for the share, and the acks of the
# entries admitted under it still count them down
run 0 'per-tenant share: off' A capacity "$q" 10 --per-tenant 0
run 0 'admitted=4' E --tenant a x1 x2 x3 x4
W --handler noop --max-messages 5 >/dev/null 2>&1
[ "$(rcli XLEN "sluice:{$q}:stream")" = 0 ] || fail "not drained after off"
[ "$(rcli EXISTS "sluice:{$q}:tdepth")" = 0 ] || fail "drift: $(rcli HGETALL "sluice:{$q}:tdepth")"
echo "test_tenant_share: ok"
