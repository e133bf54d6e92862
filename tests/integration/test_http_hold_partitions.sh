#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A Retry-After hold on a partitioned queue holds every partition: two sluice-worker processes
# drain a queue of 3 partitions (each process a worker per partition, 6 in all) into a back end
# that answers its first request with 429, Retry-After: 2; for about two seconds no request
# reaches it from any partition, then every partition delivers again and every message is done.
# Every partition's worker reads and sets the hold of the queue as a whole,
# sluice:{Q}:hold:HOST:PORT (docs/delivery.md#retry-after-holds-the-pool).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/http_lib.sh"
q="holdp-$$"
backend_start be
use_queue "$q" "sluice:{$q}:hold:127.0.0.1:$bport"
use_queue "$q~1" "sluice:{$q~1}:hold:127.0.0.1:$bport"
use_queue "$q~2" "sluice:{$q~2}:hold:127.0.0.1:$bport"
"$bin/sluice-admin" --redis "$url" partitions "$q" 3 >/dev/null
# no tenant: spread over the partitions; 100 ms a request, one at a time per worker, so each
# partition has work for about 1.5 s without a hold
seq 1 90 | xargs "$bin/sluice-enqueue" --redis "$url" --queue "$q" >/dev/null
for p in "" "~1" "~2"; do
    [ "$(rcli XLEN "sluice:{$q$p}:stream")" -ge 15 ] || fail "partition $q$p got too few messages"
done
workers_start 2 "$q" "http://127.0.0.1:$bport/ra/2/1/100"
left() { for p in "" "~1" "~2"; do rcli XLEN "sluice:{$q$p}:stream"; done | paste -sd+ | bc; }
for _ in $(seq 1 300); do
    [ "$(grep -c '"path"' "$tmp/be.log")" -ge 91 ] && [ "$(left)" = 0 ] && break
    sleep 0.1
done
kill -TERM "${wpid[1]}" "${wpid[2]}"
wait "${wpid[1]}" "${wpid[2]}" || fail "a worker failed: $(cat "$tmp"/w?.log)"
python3 - "$tmp/be.log" "$q" <<'PY' || fail "the hold: see above"
import json, sys
rs = [json.loads(l) for l in open(sys.argv[1])]
q = sys.argv[2]
assert len(rs) == 91, ("requests", len(rs))
t0 = rs[0]["t"]  # the request answered 429, Retry-After: 2
later = [(r["t"] - t0, r["headers"]["sluice-queue"]) for r in rs[1:]]
# generous bounds (as test_http_hold.sh): a request already under way may land just after the
# 429, and the hold ends with the key's expiry plus a reclaim or read
inside = [(round(d, 2), p) for d, p in later if 0.4 <= d <= 1.6]
assert not inside, ("requests during the hold (+s, partition)", inside)
after = [(d, p) for d, p in later if d > 1.6]
assert after and min(after)[0] >= 1.8, ("first requests after the hold", sorted(after)[:3])
parts = {p for _, p in after}
assert parts == {q, q + "~1", q + "~2"}, ("partitions delivering after the hold", parts)
print("ok: no request from any of 3 partitions from +%.2f s to +%.2f s after the 429 "
      "(Retry-After: 2); 91 requests" % (max([d for d, _ in later if d < 1.6] or [0]),
                                          min(after)[0]))
PY
[ "$(left)" = 0 ] || fail "entries left: $(left)"
grep -h 'http_holds=1' "$tmp"/w?.out >/dev/null || fail "no worker counted the hold"
echo "ok: $(cat "$tmp"/w?.out | tr '\n' ' ')"
