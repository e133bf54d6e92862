#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Partitions added during a Retry-After hold hold too, on a Redis Cluster: two sluice-worker
# processes drain a plain queue into a back end that answers its first request with 429,
# Retry-After: 5; while the hold lasts the queue gets 3 partitions (on 3 primaries) and more
# messages, and each process starts a worker for each new partition. Those workers read keys of
# their own (sluice:{Q~i}:hold:HOST:PORT) that nobody had set: the process that got the answer
# tells its new workers of the hold, they set their keys, and no request reaches the back end
# from 0.5 s after both processes started them until the hold ends; then every message is done
# (docs/delivery.md#retry-after-holds-the-pool).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/cluster_lib.sh"
. "$(dirname "$0")/http_lib.sh"
cluster_start
url=$curl # workers_start's
q=$(partitions_apart "hg$$")
backend_start be
seq 1 20 | xargs "$bin/sluice-enqueue" --redis "$curl" --queue "$q" >/dev/null
workers_start 2 "$q" "http://127.0.0.1:$bport/ra/5/1/100"
wait_log "$tmp/be.log" '"path"' 10
"$bin/sluice-admin" --redis "$curl" partitions "$q" 3 >/dev/null
seq 21 80 | xargs "$bin/sluice-enqueue" --redis "$curl" --queue "$q" >/dev/null
started=
for _ in $(seq 1 100); do # each pool looks for new partitions once a second
    if grep -q "partition_started .*partition=$q~2" "$tmp/w1.log" &&
        grep -q "partition_started .*partition=$q~2" "$tmp/w2.log"; then
        started=$(date +%s.%N)
        break
    fi
    sleep 0.05
done
[ -n "$started" ] || fail "the new partitions' workers did not start: $(cat "$tmp"/w?.log)"
xlen() { rc "$(owner "$1")" XLEN "sluice:{$1}:stream"; }
workers_drain "$q" 81
python3 - "$tmp/be.log" "$q" "$started" <<'PY' || fail "the hold: see above"
import json, sys
rs = [json.loads(l) for l in open(sys.argv[1])]
q, started = sys.argv[2], float(sys.argv[3])
assert len(rs) == 81, ("requests", len(rs))
t0 = rs[0]["t"]  # the request answered 429, Retry-After: 5
since, until = started - t0 + 0.5, 4.7
assert until - since >= 1.0, ("the new partitions started too late to check (+s)", since)
inside = [(round(r["t"] - t0, 2), r["headers"]["sluice-queue"]) for r in rs[1:]
          if since <= r["t"] - t0 <= until]
assert not inside, ("requests during the hold (+s, partition)", inside)
parts = {r["headers"]["sluice-queue"] for r in rs if r["t"] - t0 > until}
assert parts == {q, q + "~1", q + "~2"}, ("partitions delivering after the hold", parts)
print("ok: no request from +%.2f s to +%.1f s after the 429 (Retry-After: 5) though the "
      "partitions were added during it; 81 requests" % (since, until))
PY
[ "$(parts_left "$q")" = 0 ] || fail "entries left: $(parts_left "$q")"
echo "ok: $(cat "$tmp"/w?.out | tr '\n' ' ')"
