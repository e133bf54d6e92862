#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Paced draining: a `drain` limit is the pace of all workers together (they reserve rate before
# they read and wait for the next allowance: nothing is read early, failed or dead-lettered
# because of the rate); an `inflight` limit bounds the entries in flight across all workers, and
# the leases of a worker killed with -9 come back through reclaim after the visibility timeout.
. "$(dirname "$0")/lib.sh"
q="pace-$$"
q2="lease-$$"
keys+=($(queue_keys "$q") $(queue_keys "$q2") "sluice:{$q}:limits" "sluice:{$q2}:limits"
    "sluice:{$q}:qlim:pace:gcra:")
A() { "$bin/sluice-admin" --redis "$url" "$@"; }
worker=("$bin/sluice-worker" --redis "$url" --log-level error) # started directly: $! is its PID

# ---- drain 20/1s (GCRA: a burst of 20, then one every 50 ms), two workers, 200 waiting ----
seq 1 200 | "$bin/sluice-enqueue" --redis "$url" --queue "$q" --capacity 1000 >/dev/null
run 0 'limit pace on' A limit "$q" set pace drain 20/1s
"${worker[@]}" --queue "$q" --record "$tmp/r1" --concurrency 16 >/dev/null &
pids+=("$!")
"${worker[@]}" --queue "$q" --record "$tmp/r2" --concurrency 16 >/dev/null &
pids+=("$!")
sleep 6.5
cat "$tmp/r1" "$tmp/r2" | awk '{ print $3 }' | sort -n >"$tmp/t"
first=$(head -n 1 "$tmp/t")
[ -n "$first" ] || fail "nothing processed"
# over 5 s from the first entry: 20 + 99 allowed (one every 50 ms after the burst)
n5=$(awk -v f="$first" '$1 < f + 5000' "$tmp/t" | wc -l)
[ "$n5" -ge 108 ] && [ "$n5" -le 121 ] || fail "processed in 5 s: $n5 (expected 108..121)"
# in every 1-s window at most rate + burst
worst=$(awk '{ t[NR] = $1 } END { j = 1; m = 0; for (i = 1; i <= NR; i++) {
    while (t[i] - t[j] >= 1000) j++; if (i - j + 1 > m) m = i - j + 1 } print m }' "$tmp/t")
[ "$worst" -le 40 ] || fail "a 1-s window held $worst entries (rate + burst is 40)"
# nothing twice, nothing dead, every delivery counted once
dups=$(cat "$tmp/r1" "$tmp/r2" | awk '{ print $1 }' | sort | uniq -d | wc -l)
[ "$dups" = 0 ] || fail "$dups entries processed twice"
[ "$(rcli XLEN "sluice:{$q}:dead")" = 0 ] || fail "dead letters under pacing"
rcli XPENDING "sluice:{$q}:stream" workers - + 1000 | awk 'NR % 4 == 0 && $1 > 1' >"$tmp/redeliv"
[ ! -s "$tmp/redeliv" ] || fail "entries delivered more than once: $(cat "$tmp/redeliv")"
# a rate changed at run time holds within about a second: 200/1s drains the rest quickly
run 0 'limit pace on' A limit "$q" set pace drain 200/1s
for _ in $(seq 1 40); do
    [ "$(rcli XLEN "sluice:{$q}:stream")" = 0 ] && break
    sleep 0.25
done
[ "$(rcli XLEN "sluice:{$q}:stream")" = 0 ] || fail "the faster rate did not drain the rest"
for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
pids=()
echo "pacing: $n5 in the first 5 s (expected 119), at most $worst in any 1-s window"

# ---- inflight 2 across three workers, 200 ms per entry; a worker killed with -9 ----
seq 1 30 | "$bin/sluice-enqueue" --redis "$url" --queue "$q2" --capacity 1000 >/dev/null
run 0 'limit lease on' A limit "$q2" set lease inflight 2
run 0 'lease +inflight' A limit "$q2" list
for i in 1 2 3; do
    "${worker[@]}" --queue "$q2" --handler sleep:200 --visibility-timeout 1500 --consumer "c$i" \
        >/dev/null &
    pids+=("$!")
done
max=0
killed=0
for i in $(seq 1 240); do # at most 12 s
    p=$(rcli XPENDING "sluice:{$q2}:stream" workers | head -n 1)
    p=${p:-0}
    [ "$p" -gt "$max" ] && max=$p
    if [ "$killed" = 0 ] && [ "$i" -gt 10 ]; then
        held=$(rcli XPENDING "sluice:{$q2}:stream" workers - + 10 c1 | wc -l)
        if [ "$held" -gt 0 ]; then
            kill -KILL "${pids[0]}"
            killed=1
        fi
    fi
    [ "$(rcli XLEN "sluice:{$q2}:stream")" = 0 ] && break
    sleep 0.05
done
[ "$killed" = 1 ] || fail "worker c1 never held a lease to be killed with"
[ "$max" -le 2 ] || fail "$max entries in flight at once (inflight 2)"
[ "$(rcli XLEN "sluice:{$q2}:stream")" = 0 ] ||
    fail "the killed worker's leases did not come back: $(rcli XLEN "sluice:{$q2}:stream") left"
[ "$(rcli HGET "sluice:{$q2}:stats" acked)" = 30 ] || fail "acked $(rcli HGET "sluice:{$q2}:stats" acked) of 30"
echo "inflight: at most $max in flight; all 30 done after a kill -9"
echo "test_pacing: ok"
