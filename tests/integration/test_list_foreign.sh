#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# docs/faults.md B17: elements pushed into a list queue by something other than sluice (no
# "seq:" prefix, or not an envelope) are dead-lettered whole with a reason, nothing vanishes,
# and the depth counter never goes below 0, so capacity stays exact afterwards.
. "$(dirname "$0")/lib.sh"
q="listforeign-$$"
read -ra qk <<<"$(queue_keys "$q")"
keys+=("${qk[@]}")
keys+=("sluice:{$q}:proc:w1")

rcli HSET "sluice:{$q}:meta" capacity 3 >/dev/null
rcli LPUSH "sluice:{$q}:list" "no separator here" "7:notmsgpack" >/dev/null
"$bin/sluice-worker" --redis "$url" --queue "$q" --backend list --consumer w1 \
    --handler sleep:0 --log-level error &
pid=$!
for _ in $(seq 1 100); do
    [ "$(rcli XLEN "sluice:{$q}:dead")" = 2 ] && break
    sleep 0.05
done
kill -TERM "$pid"
wait "$pid" || fail "worker exited $? after SIGTERM"
[ "$(rcli XLEN "sluice:{$q}:dead")" = 2 ] || fail "expected 2 dead letters"
rcli XRANGE "sluice:{$q}:dead" - + | grep -qx "no separator here" ||
    fail "the element without a separator vanished: $(rcli XRANGE "sluice:{$q}:dead" - +)"
rcli XRANGE "sluice:{$q}:dead" - + | grep -qx "notmsgpack" || fail "7:notmsgpack not dead-lettered"
[ "$(rcli LLEN "sluice:{$q}:proc:w1")" = 0 ] || fail "foreign elements left in processing"
depth=$(rcli HGET "sluice:{$q}:meta" list_depth)
[ "${depth:-0}" -ge 0 ] || fail "list_depth went negative: $depth"
# capacity is exact afterwards: 3 admitted, the 4th rejected
rc=0
out=$("$bin/sluice-enqueue" --redis "$url" --queue "$q" --backend list a b c d) || rc=$?
[ "$rc" -eq 1 ] && echo "$out" | grep -q "admitted=3 rejected=1" ||
    fail "capacity 3 after foreign elements: exit $rc, $out"
echo "ok: 2 foreign elements dead-lettered whole, depth ${depth:-0}, capacity exact"
