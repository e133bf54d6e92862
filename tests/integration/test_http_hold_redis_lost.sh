#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A Retry-After hold reaches the other worker processes though the worker that got the answer had
# lost its Redis connection at that moment: it sets the hold key once it is connected again, and
# the others hold from then on. Worker A reaches Redis through sluice-faultproxy, which resets
# every connection from just before the 429 (Retry-After: 5) until 0.5 s after it; worker B
# delivers meanwhile. Asserted: the hold key appears, and no request reaches the back end from
# 0.4 s after it appeared until shortly before it expires (docs/delivery.md#retry-after-holds-the-pool).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/http_lib.sh"
q="holdl-$$"
backend_start be
hold="sluice:{$q}:hold:127.0.0.1:$bport"
use_queue "$q" "$hold"
seq 1 60 | xargs "$bin/sluice-enqueue" --redis "$url" --queue "$q" >/dev/null
proxy_start # Redis through sluice-faultproxy: $mode, $tmp/proxy.port
# the first request is answered after 1.5 s with 429, Retry-After: 5; the others at once (A's
# first request is the first: B starts after it)
handler="http://127.0.0.1:$bport/ra/5/1/100/1500"
worker() { # worker I URL: as workers_start's
    "$bin/sluice-worker" --redis "$2" --queue "$q" --handler "$handler" --concurrency 1 \
        --visibility-timeout 2000 --retry-backoff 100 --block 200 >"$tmp/w$1.out" 2>"$tmp/w$1.log" &
    pids+=("$!")
    wpid[$1]=$!
}
worker 1 "redis://127.0.0.1:$(cat "$tmp/proxy.port")" # A
wait_lines "$tmp/be.log" 1 10
echo reset >"$mode" # A's connections drop and cannot come back
sleep 0.3
worker 2 "$url" # B, straight to Redis
wait_log "$tmp/w1.log" 'event=http_hold' 5
grep -q 'event=http_hold' "$tmp/w1.log" || fail "worker A got no hold: $(cat "$tmp/w1.log")"
sleep 0.5
echo pass >"$mode"
set_at= ttl=
for _ in $(seq 1 100); do # the key is set once A is connected again
    ttl=$(rcli PTTL "$hold")
    [ "$ttl" -gt 0 ] && set_at=$(date +%s.%N) && break
    sleep 0.05
done
[ -n "$set_at" ] || fail "the hold key was never set: the hold did not reach Redis"
sleep "$(echo "$ttl / 1000 + 0.5" | bc -l)"
kill -TERM "${wpid[1]}" "${wpid[2]}"
wait "${wpid[1]}" "${wpid[2]}" || fail "a worker failed: $(cat "$tmp"/w?.log)"
python3 - "$tmp/be.log" "$set_at" "$ttl" <<'PY' || fail "the hold: see above"
import json, sys
rs = [json.loads(l) for l in open(sys.argv[1])]
set_at, ttl = float(sys.argv[2]), int(sys.argv[3]) / 1000.0
# generous bounds: a request under way when the key appeared may land just after it
inside = [round(r["t"] - set_at, 2) for r in rs if 0.4 <= r["t"] - set_at <= ttl - 0.3]
assert ttl >= 1.0, ("the key's expiry when it appeared (s)", ttl)
assert not inside, ("requests after the hold key appeared (+s)", inside)
print("ok: the hold key appeared with %.1f s left, no request from +0.4 s to +%.1f s; "
      "%d requests" % (ttl, ttl - 0.3, len(rs)))
PY
grep -q 'http_holds=1' "$tmp/w1.out" || fail "worker A did not count the hold: $(cat "$tmp/w1.out")"
echo "ok: $(cat "$tmp"/w?.out | tr '\n' ' ')"
