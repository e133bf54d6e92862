#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Drain limits while they change and while entries come back: a redelivery (a retry, a reclaim)
# takes a drain unit like a first read; a paced or fair worker told to wait long learns of a
# raised, lowered or deleted limit, and of a new tenant's lane, within about a second; a worker
# held by `inflight` does not poll for a unit another worker holds; drain and inflight limits are
# refused on a list queue, whose workers could not honour them.
. "$(dirname "$0")/lib.sh"
q="live-$$"
A() { "$bin/sluice-admin" --redis "$url" "$@"; }
worker=("$bin/sluice-worker" --redis "$url" --log-level error) # started directly: $! is its PID
live_cleanup() {
    local k
    for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
    pids=()
    rcli --scan --pattern "sluice:{$q-*" | while read -r k; do rcli DEL "$k" >/dev/null; done
    [ -z "${rpid:-}" ] || kill -KILL "$rpid" 2>/dev/null || true
    lib_cleanup
}
trap live_cleanup EXIT
stop_workers() {
    for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
    pids=()
}
acked() { rcli HGET "sluice:{$1}:stats" acked; }
# wait_acked Q N SECONDS: until Q has acked N (a timeout is not a failure by itself)
wait_acked() {
    for _ in $(seq 1 $(($3 * 10))); do
        [ "$(acked "$1")" -ge "$2" ] 2>/dev/null && return 0
        sleep 0.1
    done
}

# ---- retries come back through reclaim and take drain units too (docs/faults.md F35) ----
# drain 5/1s (log: at most 5 in any second), every entry asks for a retry 50 ms later; reclaim
# passes every 250 ms. Without the drain on redeliveries the handler ran ~100 times a second. The
# same on a fair queue, whose tenant's entries come back through the lanes' reclaim.
r="$q-retry"
rf="$q-retryfair"
run 0 'fair' A fair "$rf" on
for x in "$r" "$rf"; do
    printf '#!/bin/sh\necho x >>"%s"\nexit 75\n' "$tmp/calls-$x" >"$tmp/again-$x.sh"
    chmod +x "$tmp/again-$x.sh"
    seq 1 20 | "$bin/sluice-enqueue" --redis "$url" --queue "$x" --tenant T >/dev/null
    run 0 'limit p on' A limit "$x" set p drain 5/1s --algorithm log
    "${worker[@]}" --queue "$x" --handler "exec:$tmp/again-$x.sh" --concurrency 16 \
        --retry-backoff 50 --visibility-timeout 1000 --max-deliveries 100 >/dev/null &
    pids+=("$!")
done
sleep 4
stop_workers
for x in "$r" "$rf"; do
    calls=$(wc -l <"$tmp/calls-$x")
    reclaimed=$(rcli HGET "sluice:{$x}:stats" reclaimed)
    [ "${reclaimed:-0}" -gt 0 ] || fail "$x: no retry came back through reclaim"
    # 4 s of 5/1s: at most 5 windows of 5 (the stop comes a little after 4 s), one more of slack
    [ "$calls" -le 30 ] ||
        fail "$x: $calls handler calls in 4 s under drain 5/1s ($reclaimed reclaimed)"
    echo "retries: $calls handler calls in 4 s under drain 5/1s on $x, $reclaimed redeliveries"
done

# ---- a long wait ends with the change: raised, lowered by mistake and restored (B31) ----
c="$q-change"
seq 1 300 | "$bin/sluice-enqueue" --redis "$url" --queue "$c" --capacity 1000 >/dev/null
run 0 'limit p on' A limit "$c" set p drain 2/1h
for i in 1 2; do
    "${worker[@]}" --queue "$c" --concurrency 16 --consumer "w$i" >/dev/null &
    pids+=("$!")
done
wait_acked "$c" 2 5
sleep 1.5 # both workers now wait ~30 min for the next unit
[ "$(acked "$c")" = 2 ] || fail "drain 2/1h: acked $(acked "$c"), expected the burst of 2"
run 0 'limit p on' A limit "$c" set p drain 100/1s
wait_acked "$c" 100 4
raised=$(acked "$c")
[ "$raised" -ge 100 ] || fail "raised to 100/1s: acked $raised after 4 s"
run 0 'limit p on' A limit "$c" set p drain 1/1h # a mistake: the rescaled debt is days
sleep 1.5
low=$(acked "$c")
run 0 'limit p on' A limit "$c" set p drain 100/1s # put back
wait_acked "$c" $((low + 100)) 4
[ "$(acked "$c")" -ge $((low + 100)) ] ||
    fail "restored to 100/1s: +$(($(acked "$c") - low)) in 4 s (workers kept the long wait)"
run 0 'limit p on' A limit "$c" set p drain 1/1h
sleep 1.5
run 0 'limit p .* deleted' A limit "$c" del p
wait_acked "$c" 300 4
[ "$(acked "$c")" = 300 ] || fail "drain limit deleted: acked $(acked "$c") of 300 after 4 s"
stop_workers
echo "changes: 2 under 2/1h, $raised after raising, all 300 after restoring and deleting"

# ---- a tenant over its own rate does not hold up a new tenant (F36) ----
f="$q-fair"
run 0 'fair' A fair "$f" on
run 0 'limit per-t on' A limit "$f" set per-t drain-tenant 2/1h
seq 1 10 | sed 's/^/A-/' | "$bin/sluice-enqueue" --redis "$url" --queue "$f" --tenant A >/dev/null
for i in 1 2; do
    "${worker[@]}" --queue "$f" --concurrency 8 --consumer "f$i" --record "$tmp/rec$i" \
        >/dev/null &
    pids+=("$!")
done
wait_acked "$f" 2 5
sleep 1.5 # A is held for ~30 min, the workers with it
seq 1 2 | sed 's/^/B-/' | "$bin/sluice-enqueue" --redis "$url" --queue "$f" --tenant B >/dev/null
wait_acked "$f" 4 4
b=$(cat "$tmp"/rec* | grep -c ' B-' || true)
[ "$b" = 2 ] || fail "tenant B (within its rate): $b of 2 served 4 s after it came"
stop_workers
echo "fair: tenant B served while A waits for its rate"

# ---- a worker held by inflight waits for a release, not a 20-ms poll ----
# On a server of its own, to count its calls: inflight 1, a 2-s job on one of four workers.
redis-server --port 0 --unixsocket "$tmp/r.sock" --save '' --appendonly no \
    --dir "$tmp" >/dev/null 2>&1 &
rpid=$!
own="unix://$tmp/r.sock"
for _ in $(seq 1 50); do redis-cli -s "$tmp/r.sock" PING >/dev/null 2>&1 && break; sleep 0.1; done
i="$q-lease"
seq 1 3 | "$bin/sluice-enqueue" --redis "$own" --queue "$i" >/dev/null
"$bin/sluice-admin" --redis "$own" limit "$i" set one inflight 1 >/dev/null
for k in 1 2 3 4; do
    "$bin/sluice-worker" --redis "$own" --log-level error --queue "$i" --handler sleep:2000 \
        --consumer "l$k" >/dev/null &
    pids+=("$!")
done
sleep 1 # every worker started; one holds the unit, three are held
calls() { redis-cli -s "$tmp/r.sock" INFO commandstats | tr -d '\r' |
    sed -n 's/^cmdstat_fcall:calls=\([0-9]*\),.*/\1/p'; }
before=$(calls)
sleep 2
polls=$(($(calls) - before))
for _ in $(seq 1 80); do
    [ "$(redis-cli -s "$tmp/r.sock" HGET "sluice:{$i}:stats" acked)" = 3 ] && break
    sleep 0.1
done
done3=$(redis-cli -s "$tmp/r.sock" HGET "sluice:{$i}:stats" acked)
stop_workers
# three held workers at about one call a second, plus the settles: 20-ms polling made ~300
[ "$polls" -le 40 ] || fail "$polls function calls in 2 s from workers held by inflight 1"
[ "$done3" = 3 ] || fail "inflight 1: acked $done3 of 3 in 8 s"
echo "inflight: $polls calls in 2 s while held; all 3 done one at a time"

# ---- drain and inflight limits are refused on a list queue (B32) ----
l="$q-list"
seq 1 3 | "$bin/sluice-enqueue" --redis "$url" --queue "$l" --backend list >/dev/null
run 2 'list queue: drain limits need the stream backend' A limit "$l" set p drain 1/1h
run 2 'list queue: inflight limits need the stream backend' A limit "$l" set i inflight 1
run 2 'list queue' A limit "$l" set t drain-tenant 1/1h
run 0 'limit q on' A limit "$l" set q queue 100/1s # admission limits work on lists
run 0 'q +queue' A limit "$l" list
grep -q ' drain' "$tmp/out" && fail "a refused drain limit was written: $(cat "$tmp/out")"
# one set before the queue's first admission cannot be refused: its list workers say so
l2="$q-list2"
run 0 'limit p on' A limit "$l2" set p drain 1/1h
seq 1 3 | "$bin/sluice-enqueue" --redis "$url" --queue "$l2" --backend list >/dev/null
timeout 20 "$bin/sluice-worker" --redis "$url" --log-level warn --queue "$l2" --backend list \
    --max-messages 3 >/dev/null 2>"$tmp/lw.log" || fail "list worker: $(cat "$tmp/lw.log")"
grep -q 'event=drain_limits_ignored' "$tmp/lw.log" ||
    fail "the list worker did not say that it ignores the drain limit: $(cat "$tmp/lw.log")"
echo "list: drain and inflight refused; an earlier one is reported by the list worker"
echo "test_pacing_live: ok"
