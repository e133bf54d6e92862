#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# fault_redis_kill.sh - Redis dies and comes back (docs/faults.md F8, F14, F15).
#
#   F8  appendfsync always: redis-server is killed -9 repeatedly while two producers admit and
#       two workers drain; it is restarted on the same port and data. Afterwards: 0 admitted
#       messages lost, the consumer group intact (no group_missing), producers and workers
#       reconnected by themselves. The idempotent producer retries its unknown outcomes under
#       the same key: each of its payloads is admitted exactly once. Duplicates may only be
#       entries pending at a kill.
#   F8 on a fair, paced queue: the same kills while 10 tenants' lanes are admitted to and
#       drained under drain / drain-tenant limits: 0 lost (matched by payload: ids are unique
#       per lane), the lane bookkeeping back to 0 once drained
#   F14 the function library survives a restart, and FUNCTION FLUSH under load is healed by a
#       reload: a long-lived producer and a worker keep going without an error
#   F15 restart without persistence: keys, group and library are gone. The worker says so
#       loudly (event=group_missing), recreates the group at 0 and processes everything
#       admitted after the restart; what was admitted before it is gone (reported: that is the
#       documented price of running without persistence)
set -euo pipefail
. "$(dirname "$0")/lib.sh"
fl_init fault_redis_kill

# pel_ids REDIS QUEUE: every pending id of the group (empty when there is none)
pel_ids() {
    rcli "$1" XPENDING "sluice:{$2}:stream" workers - + 1000000 2>/dev/null | awk 'NR % 4 == 1' || true
}

f8_kill_redis_always() {
    local q=rk-f8 kills=0 held=0 deadline p1 p2 w1 w2 n
    redis_start f8 --fsync always
    url=$(redis_url f8)
    rm -f "$FL_DIR/processed.rec" "$FL_DIR/f8.explained"
    worker_start f8-w1 f8 $q --handler sleep:1 --concurrency 16 --visibility-timeout 1000
    w1=$FL_PID
    worker_start f8-w2 f8 $q --handler sleep:1 --concurrency 16 --visibility-timeout 1000
    w2=$FL_PID
    fl_spawn f8-batch "$BIN/sluice-faultload" --redis "$url" --queue $q --count 6000 \
        --prefix f8b --batch 20 --rate 600 --timeout 1000 --deadline 60000 \
        --out "$FL_DIR/f8.adm" --unknown "$FL_DIR/f8.unknown"
    p1=$FL_PID
    fl_spawn f8-idem "$BIN/sluice-faultload" --redis "$url" --queue $q --count 1000 \
        --prefix f8i --idempotent --rate 100 --timeout 1000 --deadline 60000 \
        --out "$FL_DIR/f8.adm"
    p2=$FL_PID
    deadline=$(($(fl_now_ms) + 90000))
    while fl_is_child "$p1" || fl_is_child "$p2" || [ "$kills" -lt 5 ]; do
        [ "$(fl_now_ms)" -lt "$deadline" ] || fl_fail "F8: not done in 90 s"
        sleep "1.$((RANDOM % 6))"
        # what is pending when it dies (and again once it is back) may be delivered twice
        pel_ids f8 $q >>"$FL_DIR/f8.explained"
        redis_kill f8
        kills=$((kills + 1))
        sleep 0.3
        redis_restart f8
        n=$(pel_ids f8 $q | tee -a "$FL_DIR/f8.explained" | grep -c . || true)
        held=$((held + n))
    done
    fl_wait_pid "$p1" 10
    fl_eq "F8 batch producer exit ($(cat "$FL_DIR/f8-batch.out"))" 0 "$FL_RC"
    fl_wait_pid "$p2" 10
    fl_eq "F8 idempotent producer exit ($(cat "$FL_DIR/f8-idem.out"))" 0 "$FL_RC"
    fl_wait_until 30 "F8: queue drained after the last restart" 'drained f8 $q'
    for w in $w1 $w2; do
        fl_is_child "$w" || fl_fail "F8: a worker died: $(tail -n 3 "$FL_DIR/f8-w1.err" "$FL_DIR/f8-w2.err")"
        fl_kill "$w" TERM
        fl_wait_pid "$w" 15
        fl_eq "F8 worker exit code after SIGTERM" 0 "$FL_RC"
    done
    if grep -q group_missing "$FL_DIR"/f8-w*.err; then
        fl_fail "F8: the consumer group was lost across a restart with appendfsync always"
    fi
    fl_eq "F8 consumer group after the restarts" workers \
        "$(rcli f8 XINFO GROUPS "sluice:{$q}:stream" | sed -n 2p)"
    check_e2e --admitted "$FL_DIR/f8.adm" --processed "$FL_DIR/processed.rec" \
        --redis "$url" --queue $q --explained "$FL_DIR/f8.explained"
    fl_eq "F8 admitted by both producers (all of the idempotent one's)" 7000 \
        "$(($(field checked "$CHECK_LINE") + $(field unknown "$(cat "$FL_DIR/f8-batch.out")")))"
    fl_eq "F8 payloads admitted under two ids (idempotency key broken)" 0 \
        "$(field payloads_under_two_ids "$CHECK_LINE")"
    F8_LINE="redis kill -9 x$kills (appendfsync always): checked=$(field checked "$CHECK_LINE")"
    F8_LINE+=" lost=0 duplicates=$(field duplicates "$CHECK_LINE") (all pending at a kill;"
    F8_LINE+=" pending after restarts: $held)"
    local retries
    retries=$(field EUNKNOWN "$(cat "$FL_DIR/f8-idem.out")")
    F8_LINE+=" unknown_outcomes=$(field unknown "$(cat "$FL_DIR/f8-batch.out")")"
    F8_LINE+=" idempotent_retries_after_unknown=${retries:-0}"
    fl_log "F8 ok: $F8_LINE"
    "$SRC/scripts/test-redis" stop "$FL_DIR/f8"
}

f8_fair_paced() {
    local q=rk-fair kills=0 deadline p1 w1 w2 lanes
    redis_start f8f --fsync always
    url=$(redis_url f8f)
    rm -f "$FL_DIR/processed.rec"
    "$BIN/sluice-admin" --redis "$url" fair $q on >/dev/null
    "$BIN/sluice-admin" --redis "$url" limit $q set pace drain 500/1s >/dev/null
    "$BIN/sluice-admin" --redis "$url" limit $q set per-tenant drain-tenant 60/1s >/dev/null
    worker_start f8f-w1 f8f $q --handler sleep:1 --concurrency 16 --visibility-timeout 1000
    w1=$FL_PID
    worker_start f8f-w2 f8f $q --handler sleep:1 --concurrency 16 --visibility-timeout 1000
    w2=$FL_PID
    fl_spawn f8f-batch "$BIN/sluice-faultload" --redis "$url" --queue $q --count 2000 \
        --prefix f8f --batch 20 --rate 400 --timeout 1000 --deadline 60000 --tenants 10 \
        --out "$FL_DIR/f8f.adm" --unknown "$FL_DIR/f8f.unknown"
    p1=$FL_PID
    deadline=$(($(fl_now_ms) + 60000))
    while fl_is_child "$p1" || [ "$kills" -lt 3 ]; do
        [ "$(fl_now_ms)" -lt "$deadline" ] || fl_fail "F8 fair: not done in 60 s"
        sleep "1.$((RANDOM % 6))"
        redis_kill f8f
        kills=$((kills + 1))
        sleep 0.3
        redis_restart f8f
    done
    fl_wait_pid "$p1" 10
    fl_eq "F8 fair producer exit ($(cat "$FL_DIR/f8f-batch.out"))" 0 "$FL_RC"
    fl_wait_until 30 "F8 fair: queue drained after the last restart" \
        'drained f8f $q && [ "$(rcli f8f HGET "sluice:{$q}:meta" lane_depth)" = 0 ]'
    for w in $w1 $w2; do
        fl_is_child "$w" || fl_fail "F8 fair: a worker died: $(tail -n 3 "$FL_DIR/f8f-w1.err" "$FL_DIR/f8f-w2.err")"
        fl_kill "$w" TERM
        fl_wait_pid "$w" 15
        fl_eq "F8 fair worker exit code after SIGTERM" 0 "$FL_RC"
    done
    check_e2e --admitted "$FL_DIR/f8f.adm" --processed "$FL_DIR/processed.rec" --by-payload
    lanes=$(rcli f8f EXISTS "sluice:{$q}:lanes" "sluice:{$q}:ring")
    fl_eq "F8 fair: lane counts and ring left after the drain" 0 "$lanes"
    F8F_LINE="fair + paced queue (10 tenants, drain 500/1s, drain-tenant 60/1s), redis kill -9"
    F8F_LINE+=" x$kills: checked=$(field checked "$CHECK_LINE") lost=0"
    F8F_LINE+=" duplicates=$(field duplicates "$CHECK_LINE")"
    F8F_LINE+=" unknown_outcomes=$(field unknown "$(cat "$FL_DIR/f8f-batch.out")")"
    fl_log "F8 fair ok: $F8F_LINE"
    "$SRC/scripts/test-redis" stop "$FL_DIR/f8f"
}

f14_library() {
    local q=rk-f14 w p rc=0
    redis_start f14
    url=$(redis_url f14)
    rm -f "$FL_DIR/processed.rec"
    "$BIN/sluice-enqueue" -q $q -r "$url" --ids first >"$FL_DIR/f14.adm"
    rcli f14 FUNCTION LIST LIBRARYNAME sluice | grep -qx sluice ||
        fl_fail "F14: no sluice library after the first admission"
    redis_restart f14
    rcli f14 FUNCTION LIST LIBRARYNAME sluice | grep -qx sluice ||
        fl_fail "F14: the library did not survive a restart with persistence"
    worker_start f14-worker f14 $q --visibility-timeout 1000
    w=$FL_PID
    fl_spawn f14-load "$BIN/sluice-faultload" --redis "$url" --queue $q --count 300 \
        --prefix f14 --batch 5 --rate 100 --out "$FL_DIR/f14.adm" --deadline 30000
    p=$FL_PID
    for _ in 1 2 3; do
        sleep 0.7
        rcli f14 FUNCTION FLUSH SYNC >/dev/null
    done
    fl_wait_pid "$p" 30
    fl_eq "F14 producer exit ($(cat "$FL_DIR/f14-load.out"))" 0 "$FL_RC"
    # with no producer running, the worker's own calls (reclaim every 250 ms) meet the
    # missing library first and must reload it
    fl_wait_until 15 "F14: queue drained" 'drained f14 $q'
    rcli f14 FUNCTION FLUSH SYNC >/dev/null
    fl_wait_until 10 "F14: the worker reloads the library" \
        'grep -q "event=library_missing" "$FL_DIR/f14-worker.err"'
    fl_wait_until 10 "F14: library back" \
        'rcli f14 FUNCTION LIST LIBRARYNAME sluice | grep -qx sluice'
    "$BIN/sluice-enqueue" -q $q -r "$url" --ids after-flush >>"$FL_DIR/f14.adm" || rc=$?
    fl_eq "F14 a new producer after FUNCTION FLUSH" 0 "$rc"
    fl_wait_until 15 "F14: queue drained" 'drained f14 $q'
    fl_is_child "$w" || fl_fail "F14: the worker died: $(tail -n 3 "$FL_DIR/f14-worker.err")"
    fl_kill "$w" TERM
    fl_wait_pid "$w" 15
    fl_eq "F14 worker exit code after SIGTERM" 0 "$FL_RC"
    local errors
    errors=$(grep -Eo 'E[A-Z]+=[0-9]+' "$FL_DIR/f14-load.out" | tr '\n' ' ' || true)
    fl_eq "F14 producer errors across 3 FUNCTION FLUSHes" "" "$errors"
    check_e2e --admitted "$FL_DIR/f14.adm" --processed "$FL_DIR/processed.rec" \
        --redis "$url" --queue $q --max-duplicates 0
    fl_eq "F14 checked" 302 "$(field checked "$CHECK_LINE")"
    fl_log "F14 ok: library persisted; 4 FUNCTION FLUSHes healed by reloads" \
        "($(grep -c library_missing "$FL_DIR/f14-worker.err" || true) by the worker)"
    "$SRC/scripts/test-redis" stop "$FL_DIR/f14"
}

f15_no_persistence() {
    local q=rk-f15 w before after
    redis_start f15 --no-aof
    url=$(redis_url f15)
    rm -f "$FL_DIR/processed.rec"
    worker_start f15-worker f15 $q --handler sleep:20 --concurrency 1 --visibility-timeout 1000
    w=$FL_PID
    seq -f 'f15-before-%g' 1 200 | "$BIN/sluice-enqueue" -q $q -r "$url" --ids \
        >"$FL_DIR/f15-before.adm"
    fl_wait_until 10 "F15: some processed before the restart" \
        '[ "$(lines "$FL_DIR/processed.rec")" -ge 10 ]'
    redis_kill f15
    redis_restart f15
    fl_eq "F15 stream after a restart without persistence" 0 "$(depth f15 $q)"
    seq -f 'f15-after-%g' 1 100 | "$BIN/sluice-enqueue" -q $q -r "$url" --ids \
        >"$FL_DIR/f15-after.adm" || fl_fail "F15: admission after the restart failed"
    fl_wait_until 20 "F15: everything admitted after the restart processed" 'drained f15 $q'
    fl_grep "F15 the worker logs the lost group loudly" \
        "level=error .*event=group_missing" "$FL_DIR/f15-worker.err"
    fl_is_child "$w" || fl_fail "F15: the worker died: $(tail -n 3 "$FL_DIR/f15-worker.err")"
    fl_kill "$w" TERM
    fl_wait_pid "$w" 15
    check_e2e --admitted "$FL_DIR/f15-after.adm" --processed "$FL_DIR/processed.rec"
    fl_eq "F15 checked (admitted after the restart)" 100 "$(field checked "$CHECK_LINE")"
    after=$CHECK_LINE
    # before the restart: whatever was not processed yet is gone with the data
    before=$(python3 "$SRC/tests/faults/check.py" --admitted "$FL_DIR/f15-before.adm" \
        --processed "$FL_DIR/processed.rec" 2>/dev/null || true)
    [ "$(field lost "$before")" -gt 0 ] ||
        fl_fail "F15: expected the unprocessed backlog to be gone without persistence: $before"
    F15_LINE="no persistence: after restart checked=$(field checked "$after") lost=0;"
    F15_LINE+=" backlog lost with the data (documented): $(field lost "$before") of 200"
    fl_log "F15 ok: $F15_LINE"
}

f8_kill_redis_always
f8_fair_paced
f14_library
f15_no_persistence
fl_figures "$F8_LINE; $F8F_LINE; F14 library reload ok; F15 $F15_LINE"
