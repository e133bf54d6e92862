#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# fault_burst.sh - bursts far above capacity (docs/faults.md F20).
#
# Capacity 500. Three bursts, each of four producers offering 8,000 payloads at once (64x the
# capacity), while two workers drain. Asserts: the surplus is rejected (exit 1, counted), never
# dropped after admission (0 lost); the depth sampled during the bursts never exceeds the
# capacity; the workers' resident memory after the third burst is within a few MB of what it was
# after the first (bounded by concurrency, not by load), and so is Redis's once drained.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
fl_init fault_burst

q=burst
cap=500
redis_start r
url=$(redis_url r)
rcli r HSET "sluice:{$q}:meta" capacity $cap >/dev/null

rss_kb() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }
redis_used() { rcli r INFO memory | awk -F: '/^used_memory:/ {print $2}' | tr -d '\r'; }

worker_start w1 r $q --handler sleep:10 --concurrency 16 --visibility-timeout 2000
w1=$FL_PID
worker_start w2 r $q --handler sleep:10 --concurrency 16 --visibility-timeout 2000
w2=$FL_PID
fl_wait_until 10 "workers ready" 'grep -q redis_up "$FL_DIR/w1.err" && grep -q redis_up "$FL_DIR/w2.err"'

offered=0
burst() { # N
    local n=$1 p pids=() rc
    for p in 1 2 3 4; do
        seq -f "b$n-p$p-%g" 1 8000 >"$FL_DIR/in.$n.$p"
        fl_spawn_in "burst$n-p$p" "$FL_DIR/in.$n.$p" "$BIN/sluice-enqueue" -q $q -r "$url" \
            --ids --batch 200 --capacity $cap
        pids+=("$FL_PID")
        offered=$((offered + 8000))
    done
    for p in "${pids[@]}"; do
        rc=0
        wait "$p" || rc=$?
        [ "$rc" -eq 0 ] || [ "$rc" -eq 1 ] ||
            fl_fail "burst $n: a producer exited $rc: $(cat "$FL_DIR"/burst$n-p*.err)"
    done
    fl_wait_until 30 "burst $n drained" 'drained r $q'
}

# the depth, sampled every 5 ms by a separate client for the whole run
fl_spawn sampler redis-cli -s "$FL_DIR/r/redis.sock" -r 100000 -i 0.005 XLEN "sluice:{$q}:stream"
sampler=$FL_PID
burst 1
rss1=$(($(rss_kb "$w1") + $(rss_kb "$w2")))
used1=$(redis_used)
burst 2
burst 3
rss3=$(($(rss_kb "$w1") + $(rss_kb "$w2")))
used3=$(redis_used)
fl_kill "$sampler"
max_depth=$(sort -n "$FL_DIR/sampler.out" | tail -n 1)
for w in $w1 $w2; do
    fl_kill "$w" TERM
    fl_wait_pid "$w" 15
    fl_eq "worker exit code after SIGTERM" 0 "$FL_RC"
done

fl_le "F20 depth sampled during the bursts (capacity $cap)" $cap "$max_depth"
# the sampler saw the bucket (nearly) full: the bound above was really exercised
fl_ge "F20 highest depth sampled" $((cap * 8 / 10)) "$max_depth"
adm=()
for f in "$FL_DIR"/burst*.out; do adm+=(--admitted "$f"); done
check_e2e "${adm[@]}" --processed "$FL_DIR/processed.rec" --redis "$url" \
    --queue $q --max-duplicates 0
admitted=$(field checked "$CHECK_LINE")
rejected=$(rcli r HGET "sluice:{$q}:stats" rejected)
fl_eq "F20 admitted + rejected = offered" "$offered" "$((admitted + rejected))"
fl_ge "F20 rejected (bursts are 64x the capacity)" $((offered / 2)) "$rejected"
fl_le "F20 workers' RSS growth from burst 1 to burst 3 (kB)" 4096 $((rss3 - rss1))
fl_le "F20 redis used_memory growth from burst 1 to burst 3, drained (bytes)" $((2 * 1024 * 1024)) \
    $((used3 - used1))
fl_figures "F20 bursts: offered=$offered admitted=$admitted rejected=$rejected lost=0" \
    "max_depth=$max_depth (capacity $cap) workers_rss_kb=$rss1->$rss3" \
    "redis_used_memory=$used1->$used3"
