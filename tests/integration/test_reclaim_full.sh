#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# docs/faults.md F22: a worker crashes while producers keep the bucket full (the normal state
# under overload). Its entries must come back within about twice the visibility timeout, not
# when the producers stop: a reclaim pass takes the next free slot before any new read.
. "$(dirname "$0")/lib.sh"
q="reclaimfull-$$"
stream="sluice:{$q}:stream"
read -ra qk <<<"$(queue_keys "$q")"
keys+=("${qk[@]}")
vt=2000

rcli HSET "sluice:{$q}:meta" capacity 60 >/dev/null
seq 1 60 | "$bin/sluice-enqueue" --redis "$url" --queue "$q" >/dev/null
# worker A takes 16 entries and hangs on them, then dies
"$bin/sluice-worker" --redis "$url" --queue "$q" --consumer crashed --concurrency 16 \
    --handler sleep:100000 --log-level error &
a=$!
pids+=("$a")
for _ in $(seq 1 100); do
    [ "$(rcli XPENDING "$stream" workers | head -n 1)" = 16 ] && break
    sleep 0.05
done
rcli XPENDING "$stream" workers - + 100 crashed | awk 'NR % 4 == 1' >"$tmp/ids"
[ "$(wc -l <"$tmp/ids")" -eq 16 ] || fail "worker A did not take 16 entries"
kill -KILL "$a"
killed=$(date +%s%N)

# worker B drains; a producer keeps refilling every freed place at once
"$bin/sluice-worker" --redis "$url" --queue "$q" --consumer survivor --concurrency 8 \
    --visibility-timeout "$vt" --handler sleep:20 --log-level error &
pids+=($!)
seq 1 100000 >"$tmp/payloads"
"$bin/sluice-enqueue" --redis "$url" --queue "$q" --batch 10 --rate 3000 <"$tmp/payloads" \
    >/dev/null 2>&1 &
pids+=($!)

# every entry of A must be processed (acked and deleted) within 2 x vt + 1.5 s margin
deadline_ms=$((2 * vt + 1500))
left=16
while :; do
    left=0
    while read -r id; do
        [ -n "$(rcli XRANGE "$stream" "$id" "$id")" ] && left=$((left + 1))
    done <"$tmp/ids"
    ms=$((($(date +%s%N) - killed) / 1000000))
    [ "$left" -eq 0 ] && break
    [ "$ms" -lt "$deadline_ms" ] || break
    sleep 0.1
done
depth=$(rcli XLEN "$stream")
[ "$left" -eq 0 ] ||
    fail "$left of the crashed worker's 16 entries still waiting ${ms} ms after the crash (depth $depth of 60)"
[ "$depth" -ge 50 ] || fail "the bucket was not kept full (depth $depth of 60): the test proves nothing"
echo "ok: 16 entries of a crashed worker processed ${ms} ms after the crash, bucket full (depth $depth/60)"
