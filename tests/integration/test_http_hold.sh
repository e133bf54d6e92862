#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A 429 with Retry-After: 2 holds the whole pool: two worker processes drain one queue into a
# back end that answers its first request so; for about two seconds no request reaches it (from
# either worker), then both deliver again and every message is done. The hold lives in
# sluice:{Q}:hold:HOST:PORT with the Retry-After as its expiry (docs/data-model.md).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/http_lib.sh"
q="hold-$$"
backend_start be
use_queue "$q" "sluice:{$q}:hold:127.0.0.1:$bport"
seq 1 40 | xargs "$bin/sluice-enqueue" --redis "$url" --queue "$q" >/dev/null
# 100 ms a request, one at a time per worker: 40 messages take 2 s without a hold
workers_start 2 "$q" "http://127.0.0.1:$bport/ra/2/1/100"
for i in $(seq 1 200); do
    [ "$(grep -c '"path"' "$tmp/be.log")" -ge 41 ] && [ "$(rcli XLEN "sluice:{$q}:stream")" = 0 ] && break
    sleep 0.1
done
kill -TERM "${wpid[1]}" "${wpid[2]}"
wait "${wpid[1]}" "${wpid[2]}" || fail "a worker failed: $(cat "$tmp"/w?.log)"
python3 - "$tmp/be.log" <<'PY' || fail "the hold: see above"
import json, sys
rs = [json.loads(l) for l in open(sys.argv[1])]
assert len(rs) == 41, ("requests", len(rs))
t0 = rs[0]["t"]  # the request answered 429, Retry-After: 2
later = [r["t"] - t0 for r in rs[1:]]
# generous bounds: a request already under way may land just after the 429, and the hold ends
# with the key's expiry plus a reclaim or read
inside = [d for d in later if 0.4 <= d <= 1.6]
assert not inside, ("requests during the hold at +%s s" % inside)
after = [d for d in later if d > 1.6]
assert after and min(after) >= 1.8, ("first request after the hold", after[:3])
print("ok: no request from +%.2f s to +%.2f s after the 429 (Retry-After: 2); 41 requests"
      % (max([d for d in later if d < 1.6] or [0]), min(after)))
PY
for i in 1 2; do
    grep -q 'processed=[1-9]' "$tmp/w$i.out" || fail "worker $i delivered nothing: $(cat "$tmp/w$i.out")"
done
grep -h 'http_holds=1' "$tmp"/w?.out >/dev/null || fail "no worker counted the hold"
echo "ok: both workers held, then delivered: $(cat "$tmp"/w?.out | tr '\n' ' ')"

# a worker stopped during a hold does not wait for it: what it holds is retried after the hold
# (F32), and it reads nothing while the hold lasts
q2="$q-stop"
use_queue "$q2" "sluice:{$q2}:hold:127.0.0.1:$bport"
"$bin/sluice-enqueue" --redis "$url" --queue "$q2" s1 s2 s3 >/dev/null
"$bin/sluice-worker" --redis "$url" --queue "$q2" --handler "http://127.0.0.1:$bport/ra/30/1" \
    --concurrency 1 >"$tmp/ws.out" 2>"$tmp/ws.log" &
pids+=("$!")
ws=$!
wait_log "$tmp/ws.log" 'event=http_hold' 5
sleep 0.3
start=$(date +%s%N)
kill -TERM "$ws"
wait "$ws" || fail "stop during a hold: $(cat "$tmp/ws.log")"
took=$((($(date +%s%N) - start) / 1000000))
[ "$took" -lt 5000 ] || fail "the stop waited ${took} ms for a 30 s hold"
grep -q 'retried=1 ' "$tmp/ws.out" || fail "stop during a hold: $(cat "$tmp/ws.out")"
[ "$(grep -c '/ra/30/1' "$tmp/be.log")" = 1 ] || fail "requests during the hold: $(grep -c '/ra/30/1' "$tmp/be.log")"
[ "$(rcli XLEN "sluice:{$q2}:stream")" = 3 ] || fail "entries gone"
echo "ok: stopped during a 30 s hold in ${took} ms: one request, the entry retried, nothing more read"

# a job waiting for a hold past --handler-timeout is given up (its entry retried; nothing sent)
q3="$q-timeout"
use_queue "$q3" "sluice:{$q3}:hold:127.0.0.1:$bport"
"$bin/sluice-enqueue" --redis "$url" --queue "$q3" t1 >/dev/null
"$bin/sluice-worker" --redis "$url" --queue "$q3" --handler "http://127.0.0.1:$bport/ra/30/1/0" \
    --concurrency 1 --visibility-timeout 1000 --handler-timeout 500 >"$tmp/wt.out" \
    2>"$tmp/wt.log" &
pids+=("$!")
wt=$!
wait_log "$tmp/wt.log" 'event=handler_timeout'
kill -TERM "$wt"
wait "$wt" || fail "timeout during a hold: $(cat "$tmp/wt.log")"
grep -q 'event=handler_timeout' "$tmp/wt.log" || fail "no handler timeout: $(cat "$tmp/wt.log")"
[ "$(grep -c '/ra/30/1/0' "$tmp/be.log")" = 1 ] || fail "a request during the hold"
echo "ok: a delivery held past --handler-timeout was given up, nothing sent: $(cat "$tmp/wt.out")"
