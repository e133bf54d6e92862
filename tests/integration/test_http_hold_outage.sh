#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The hold key's SET of a worker that got Retry-After while its Redis connection was down waits
# for the connection (sluice_aconn_command_held) instead of being tried again and again: one
# worker, reaching its own redis-server through sluice-faultproxy, which resets every connection
# from just before the 429 (Retry-After: 5) until 1 s after it. Asserted: the worker made at most
# 3 SET calls for the hold (its debug lines event=http_hold_set; tried every 50 ms it made 20 to
# 80, as the reconnect's backoff went), the server ran 1 or 2 SETs (the held one, and the rest
# of the hold set again once it landed late), the key appeared, and it was gone 0.7 s after the
# hold's end: the late SET did not stretch the hold by the outage
# (docs/delivery.md#retry-after-holds-the-pool).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/http_lib.sh"
src=${SLUICE_SOURCE_DIR:?run through ctest}
srv="$tmp/redis"
"$src/scripts/test-redis" start "$srv" --no-aof >/dev/null # its own: SETs counted by the server
pids+=("$(cat "$srv/pid")")
url="redis://127.0.0.1:$(cat "$srv/port")"
q="holdo-$$"
backend_start be
hold="sluice:{$q}:hold:127.0.0.1:$bport"
seq 1 20 | xargs "$bin/sluice-enqueue" --redis "$url" --queue "$q" >/dev/null
proxy_start # Redis through sluice-faultproxy: $mode, $tmp/proxy.port
rcli CONFIG RESETSTAT >/dev/null
# the first request is answered after 0.5 s with 429, Retry-After: 5; the others at once
"$bin/sluice-worker" --redis "redis://127.0.0.1:$(cat "$tmp/proxy.port")" --queue "$q" \
    --handler "http://127.0.0.1:$bport/ra/5/1/100/500" --concurrency 1 --visibility-timeout 2000 \
    --retry-backoff 100 --block 200 --log-level debug >"$tmp/w.out" 2>"$tmp/w.log" &
pids+=("$!")
wpid=$!
wait_lines "$tmp/be.log" 1 10
echo reset >"$mode" # the worker's connections drop and cannot come back
wait_log "$tmp/w.log" 'event=http_hold ' 5
held_at=$(date +%s.%N)
grep -q 'event=http_hold ' "$tmp/w.log" || fail "the worker got no hold: $(tail -5 "$tmp/w.log")"
sleep 1 # the reconnect's backoff: its next try at most ~1.6 s after the outage's end
echo pass >"$mode"
seen=
for _ in $(seq 1 100); do # the key is set once the worker is connected again
    [ "$(rcli PTTL "$hold")" -gt 0 ] && seen=1 && break
    sleep 0.05
done
[ -n "$seen" ] || fail "the hold key was never set: $(grep http_hold "$tmp/w.log")"
# the hold ends 5 s after the 429 (held_at is a little later): the key is gone by then + 0.7 s
sleep "$(echo "$held_at + 5.7 - $(date +%s.%N)" | bc -l)"
ttl=$(rcli PTTL "$hold")
[ "$ttl" = -2 ] || fail "the hold key outlived the hold: PTTL $ttl ms at its end + 0.7 s"
kill -TERM "$wpid"
wait "$wpid" || fail "the worker failed: $(tail -5 "$tmp/w.log")"
tries=$(grep -c 'event=http_hold_set ' "$tmp/w.log" || true)
[ "$tries" -le 3 ] || fail "$tries SET calls for one hold (tried again while Redis was away)"
sets=$(rcli INFO commandstats | sed -n 's/^cmdstat_set:calls=\([0-9]*\),.*/\1/p')
[ "${sets:-0}" -ge 1 ] && [ "${sets:-0}" -le 2 ] || fail "the server ran ${sets:-0} SETs, not 1 or 2"
grep -q 'http_holds=1' "$tmp/w.out" || fail "the worker did not count the hold: $(cat "$tmp/w.out")"
echo "ok: $tries SET call(s) for the hold, $sets SET(s) run; the key gone at the hold's end"
