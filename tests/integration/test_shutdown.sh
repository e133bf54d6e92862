#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A graceful stop whose exec handlers outlive --grace (docs/faults.md F28): the worker exits 0
# without touching its closed connections (the sanitizer pass runs this too), the unfinished
# entries stay pending for others to reclaim, and they are counted as abandoned, not failed
# or dead-lettered - also on a partitioned queue, whose partitions' workers run on threads. A
# consumer that holds entries stays in the group; a clean stop deletes it (every partition's).
. "$(dirname "$0")/lib.sh"
q="shutdown-$$"
read -ra qk <<<"$(queue_keys "$q")"
keys+=("${qk[@]}")

"$bin/sluice-enqueue" --redis "$url" --queue "$q" a b c >/dev/null
"$bin/sluice-worker" --redis "$url" --queue "$q" --grace 500 --concurrency 4 \
    --handler 'exec:sleep 5' --log-level info 2>"$tmp/worker.log" &
pid=$!
pids+=("$pid")
for _ in $(seq 1 100); do # all three taken
    [ "$(rcli XPENDING "sluice:{$q}:stream" workers | head -n 1)" = 3 ] && break
    sleep 0.05
done
[ "$(rcli XPENDING "sluice:{$q}:stream" workers | head -n 1)" = 3 ] || fail "worker took nothing"
# term PID LOG: SIGTERM, then the worker must exit 0 within 4 s (--grace 500); sets $ms
term() {
    local start rc=0
    start=$(date +%s%N)
    kill -TERM "$1"
    wait "$1" || rc=$?
    ms=$((($(date +%s%N) - start) / 1000000))
    [ "$rc" -eq 0 ] || fail "worker exited $rc after SIGTERM: $(tail -n 3 "$2")"
    [ "$ms" -lt 4000 ] || fail "worker took ${ms} ms to stop with --grace 500"
}
term "$pid" "$tmp/worker.log"
pending=$(rcli XPENDING "sluice:{$q}:stream" workers | head -n 1)
[ "$pending" = 3 ] || fail "expected the 3 unfinished entries pending, found $pending"
[ "$(rcli XINFO CONSUMERS "sluice:{$q}:stream" workers | grep -c '^name$')" = 1 ] ||
    fail "the consumer holding 3 entries was deleted at its stop"
[ "$(rcli XLEN "sluice:{$q}:dead")" = 0 ] || fail "abandoned entries were dead-lettered"
grep -q 'event=stopped .*failed=0 .*abandoned=3' "$tmp/worker.log" ||
    fail "abandoned jobs not reported as such: $(grep event=stopped "$tmp/worker.log")"
if grep -q 'event=dead_letter' "$tmp/worker.log"; then
    fail "a dead letter was attempted during shutdown: $(cat "$tmp/worker.log")"
fi

# the same on a partitioned queue, whose partitions' workers run on threads of their own: the
# grace period holds there too (their sleeps and commands are ended after it)
pq="$q-p"
A() { "$bin/sluice-admin" --redis "$url" "$@"; }
for p in "$pq" "$pq~1"; do # two in each: the first before it is partitioned (no routing then)
    read -ra qk <<<"$(queue_keys "$p")"
    keys+=("${qk[@]}")
    "$bin/sluice-enqueue" --redis "$url" --queue "$p" x y >/dev/null
    [ "$p" != "$pq" ] || A partitions "$pq" 2 >/dev/null
done
"$bin/sluice-worker" --redis "$url" --queue "$pq" --grace 500 --concurrency 2 \
    --handler 'exec:sleep 5' --log-level info 2>"$tmp/pworker.log" >/dev/null &
pid=$!
pids+=("$pid")
taken() { echo $(($(rcli XPENDING "sluice:{$pq}:stream" workers | head -n 1) +
    $(rcli XPENDING "sluice:{$pq~1}:stream" workers | head -n 1))); }
for _ in $(seq 1 100); do
    [ "$(taken)" = 4 ] && break
    sleep 0.05
done
[ "$(taken)" = 4 ] || fail "the partitioned worker took $(taken) of 4"
first_ms=$ms
term "$pid" "$tmp/pworker.log"
[ "$(taken)" = 4 ] || fail "expected the 4 unfinished entries pending, found $(taken)"
[ "$(grep -c 'event=stopped .*abandoned=2' "$tmp/pworker.log")" = 2 ] ||
    fail "each partition's worker should abandon 2: $(grep event=stopped "$tmp/pworker.log")"

# a clean stop, nothing held: the worker deletes its consumer from the group - on a plain queue
# and in every partition of a partitioned one (one worker per partition, on its threads) - so
# stopped workers do not pile up in `stats`
consumers() { rcli XINFO CONSUMERS "sluice:{$1}:stream" workers | grep -cx "$2" || true; }
cq="$q-c"
for p in "$cq" "$cq~1" "$cq~2"; do
    read -ra qk <<<"$(queue_keys "$p")"
    keys+=("${qk[@]}")
done
"$bin/sluice-enqueue" --redis "$url" --queue "$cq" a b >/dev/null
for mode in plain partitioned; do
    [ "$mode" = plain ] || A partitions "$cq" 3 >/dev/null
    "$bin/sluice-worker" --redis "$url" --queue "$cq" --consumer "leaver-$mode" --handler noop \
        --log-level info 2>"$tmp/cworker.log" >/dev/null &
    pid=$!
    pids+=("$pid")
    parts=("$cq")
    [ "$mode" = plain ] || parts=("$cq" "$cq~1" "$cq~2")
    for _ in $(seq 1 100); do # every partition's worker joined its group
        n=0
        for p in "${parts[@]}"; do n=$((n + $(consumers "$p" "leaver-$mode"))); done
        [ "$n" = "${#parts[@]}" ] && break
        sleep 0.05
    done
    [ "$n" = "${#parts[@]}" ] || fail "$mode: $n of ${#parts[@]} consumers joined"
    "$bin/sluice-enqueue" --redis "$url" --queue "$cq" c d e f >/dev/null
    for _ in $(seq 1 100); do # all processed
        n=0
        for p in "${parts[@]}"; do n=$((n + $(rcli XLEN "sluice:{$p}:stream"))); done
        [ "$n" = 0 ] && break
        sleep 0.05
    done
    term "$pid" "$tmp/cworker.log"
    for p in "${parts[@]}"; do
        [ "$(consumers "$p" "leaver-$mode")" = 0 ] ||
            fail "$mode: consumer leaver-$mode is still in $p's group after a clean stop"
    done
    [ "$(grep -c 'event=consumer_deleted' "$tmp/cworker.log")" = "${#parts[@]}" ] ||
        fail "$mode: $(grep -c 'event=consumer_deleted' "$tmp/cworker.log") consumer_deleted lines"
done
echo "ok: 3 jobs abandoned at shutdown, still pending, worker exited 0 in ${first_ms} ms; a" \
    "partitioned queue's 4 abandoned; clean stops deleted their consumers (1 and 3 partitions)"
