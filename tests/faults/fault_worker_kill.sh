#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# fault_worker_kill.sh - workers die; nothing is lost and nothing stays stuck (docs/faults.md F1-F3,
# F5, F6).
#
#   F1/F2  a worker holding entries in its handler is killed (-9): another worker gets every one
#          after the visibility timeout, each processed exactly once (none was recorded before)
#   F3     a worker is killed after processing, before its ack reached Redis (the ack is held
#          with CLIENT PAUSE WRITE): every entry is redelivered, and those are the only
#          duplicates
#   F5     a poison message crashes the worker on every delivery: after --max-deliveries it is
#          in the dead stream with its id, delivery count and reason; everything else processed
#   F6     a job runs longer than the visibility timeout while another worker polls for idle
#          entries: its owner's heartbeat keeps it, so it is processed once, never stolen; and
#          the control: with the owner stopped (SIGSTOP) the other worker does take it
#   loop   20,000 messages admitted at a steady rate while three workers are killed -9 at random
#          (at least 20 kills) and restarted: 0 lost, every duplicate is an entry the killed
#          worker held at its death (XPENDING of its consumer right after the kill)
#   paced  the same on a paced queue (a drain limit of 800/s under 1,000/s offered: the workers
#          read through sluice_take and wait for allowances): 0 lost, the same bound
#   fair   the same on a fair and paced queue (20 tenants' lanes, drain 800/s, drain-tenant
#          60/s, inflight-tenant 4): entries matched by payload (ids are unique per lane)
set -euo pipefail
. "$(dirname "$0")/lib.sh"
fl_init fault_worker_kill

redis_start r
url=$(redis_url r)
VIS=1000

# pending_of QUEUE CONSUMER: the ids a consumer holds, one per line
pending_of() {
    rcli r XPENDING "sluice:{$1}:stream" workers - + 100000 "$2" | awk 'NR % 4 == 1'
}

# held_in_lanes QUEUE CONSUMER: how many entries a consumer holds in the lanes of a fair queue
held_in_lanes() {
    local lane n=0
    for lane in $(rcli r --scan --pattern "sluice:{$1}:lane:*"); do
        n=$((n + $(rcli r XPENDING "$lane" workers - + 100000 "$2" | awk 'NR % 4 == 1' | grep -c . || true)))
    done
    echo "$n"
}

# fair_drained QUEUE: nothing waiting or in flight, in the stream or in the lanes
fair_drained() {
    local lanes
    lanes=$(rcli r HGET "sluice:{$1}:meta" lane_depth)
    drained r "$1" && [ "${lanes:-0}" = 0 ]
}

f1_f2_killed_in_handler() {
    local q=wk-f12 w
    rm -f "$FL_DIR/processed.rec"
    seq -f 'f12-%g' 1 10 | "$BIN/sluice-enqueue" -q $q -r "$url" --ids >"$FL_DIR/f12.adm"
    worker_start f12-slow r $q --handler sleep:60000 --consumer slow --visibility-timeout $VIS
    w=$FL_PID
    fl_wait_until 10 "F1/F2: the slow worker holds all 10 entries" \
        '[ "$(pending_of $q slow | grep -c .)" = 10 ]'
    fl_kill "$w"
    [ ! -s "$FL_DIR/processed.rec" ] || fl_fail "F1/F2: the slow worker recorded entries"
    worker_start f12-next r $q --visibility-timeout $VIS --consumer next
    w=$FL_PID
    fl_wait_until 15 "F1/F2: the entries of the killed worker processed" 'drained r $q'
    fl_kill "$w" TERM
    fl_wait_pid "$w" 15
    fl_eq "F1/F2 worker exit code after SIGTERM" 0 "$FL_RC"
    check_e2e --admitted "$FL_DIR/f12.adm" --processed "$FL_DIR/processed.rec" \
        --redis "$url" --queue $q --max-duplicates 0
    fl_eq "F1/F2 checked" 10 "$(field checked "$CHECK_LINE")"
    fl_log "F1/F2 ok: 10 entries of a killed worker reclaimed and processed once"
}

f3_killed_before_ack() {
    local q=wk-f3 w
    rm -f "$FL_DIR/processed.rec"
    worker_start f3-a r $q --handler sleep:1500 --consumer a --visibility-timeout $VIS
    w=$FL_PID
    fl_wait_until 10 "F3: worker a ready" 'grep -q group_created "$FL_DIR/f3-a.err"'
    seq -f 'f3-%g' 1 10 | "$BIN/sluice-enqueue" -q $q -r "$url" --ids >"$FL_DIR/f3.adm"
    fl_wait_until 10 "F3: worker a holds all 10 entries" \
        '[ "$(pending_of $q a | grep -c .)" = 10 ]'
    # writes wait from now on: the handlers finish and record, their ack cannot run
    rcli r CLIENT PAUSE 8000 WRITE >/dev/null
    fl_wait_until 10 "F3: worker a recorded all 10 (acks held by the pause)" \
        '[ "$(lines "$FL_DIR/processed.rec")" = 10 ]'
    fl_kill "$w"
    rcli r CLIENT UNPAUSE >/dev/null
    fl_eq "F3 entries still pending after the kill" 10 "$(pending_of $q a | grep -c .)"
    pending_of $q a >"$FL_DIR/f3.explained"
    worker_start f3-b r $q --consumer b --visibility-timeout $VIS
    w=$FL_PID
    fl_wait_until 15 "F3: the unacknowledged entries redelivered" 'drained r $q'
    fl_kill "$w" TERM
    fl_wait_pid "$w" 15
    check_e2e --admitted "$FL_DIR/f3.adm" --processed "$FL_DIR/processed.rec" \
        --redis "$url" --queue $q --explained "$FL_DIR/f3.explained"
    fl_eq "F3 duplicates (all 10 processed, then redelivered)" 10 \
        "$(field duplicates "$CHECK_LINE")"
    fl_log "F3 ok: 10 processed-not-acked entries redelivered: 10 explained duplicates, 0 lost"
}

# f5_run QUEUE CONCURRENCY: admits 20 good, 1 poison, 20 good; restarts the worker each time
# the poison kills it, until the queue is drained. Sets CRASHES; the check line in CHECK_LINE.
f5_run() {
    local q=$1 conc=$2 maxdel=3 gen=0 w deadline
    CRASHES=0
    rm -f "$FL_DIR/processed.rec" "$FL_DIR/$q.explained"
    {
        seq -f "$q-ok-%g" 1 20
        echo "$q-POISON"
        seq -f "$q-ok-%g" 21 40
    } | "$BIN/sluice-enqueue" -q "$q" -r "$url" --ids --batch 1 >"$FL_DIR/$q.adm"
    POISON_ID=$(awk -v p="$q-POISON" '$2 == p {print $1}' "$FL_DIR/$q.adm")
    deadline=$(($(fl_now_ms) + 40000))
    while ! drained r "$q"; do
        [ "$(fl_now_ms)" -lt "$deadline" ] || fl_fail "F5 ($q): queue not drained in 40 s"
        gen=$((gen + 1))
        worker_start "$q-worker" r "$q" --handler crash-on:POISON --concurrency "$conc" \
            --consumer "$q-$gen" --visibility-timeout 500 --max-deliveries $maxdel
        w=$FL_PID
        while fl_is_child "$w" && ! drained r "$q" && [ "$(fl_now_ms)" -lt "$deadline" ]; do
            sleep 0.1
        done
        if ! fl_is_child "$w"; then
            fl_wait_pid "$w" 5
            [ "$FL_RC" -ne 0 ] || fl_fail "F5 ($q): the worker exited 0 without being asked"
            CRASHES=$((CRASHES + 1))
            pending_of "$q" "$q-$gen" >>"$FL_DIR/$q.explained"
        fi
        [ "$CRASHES" -le $((maxdel + 1)) ] ||
            fl_fail "F5 ($q): $CRASHES crashes; the poison was not dead-lettered after $maxdel deliveries"
    done
    fl_kill "$w" TERM
    fl_wait_pid "$w" 15
    fl_eq "F5 ($q) crashes (one per delivery of the poison)" $maxdel "$CRASHES"
    local dead
    dead=$(rcli r XRANGE "sluice:{$q}:dead" - + | tr '\n' ' ')
    case "$dead" in *"id $POISON_ID m "*) ;; *) fl_fail "F5 ($q): $POISON_ID not in the dead stream: $dead" ;; esac
    case "$dead" in *"deliveries $((maxdel + 1)) "*) ;; *) fl_fail "F5 ($q): dead entry without deliveries $((maxdel + 1)): $dead" ;; esac
    case "$dead" in *"max deliveries is $maxdel"*) ;; *) fl_fail "F5 ($q): dead entry without its reason: $dead" ;; esac
    check_e2e --admitted "$FL_DIR/$q.adm" --processed "$FL_DIR/processed.rec" \
        --redis "$url" --queue "$q" --explained "$FL_DIR/$q.explained"
    fl_eq "F5 ($q) checked" 41 "$(field checked "$CHECK_LINE")"
}

f5_poison() {
    # one at a time: the poison alone is dead-lettered
    f5_run wk-f5 1
    fl_eq "F5 dead letters with concurrency 1" 1 "$(field dead "$CHECK_LINE")"
    fl_eq "F5 duplicates with concurrency 1" 0 "$(field duplicates "$CHECK_LINE")"
    F5_LINE="concurrency 1: crashes=$CRASHES dead=1 (the poison only)"
    # concurrency 4: entries in flight next to the poison share its crashes (each crash counts
    # a delivery for them too). Nothing may be lost; how many innocent entries end up dead is
    # reported, not hidden.
    f5_run wk-f5c4 4
    local neighbours=$(($(field dead "$CHECK_LINE") - 1))
    F5_LINE+="; concurrency 4: crashes=$CRASHES dead=$((neighbours + 1)) (poison + $neighbours"
    F5_LINE+=" in-flight neighbours), duplicates=$(field duplicates "$CHECK_LINE"), lost=0"
    fl_log "F5 ok: $F5_LINE"
}

f6_long_job() {
    local q=wk-f6 a b
    rm -f "$FL_DIR/processed.rec"
    worker_start f6-owner r $q --handler sleep:3500 --consumer owner --visibility-timeout $VIS
    a=$FL_PID
    fl_wait_until 10 "F6: owner ready" 'grep -q group_created "$FL_DIR/f6-owner.err"'
    seq -f 'f6-%g' 1 4 | "$BIN/sluice-enqueue" -q $q -r "$url" --ids >"$FL_DIR/f6.adm"
    fl_wait_until 10 "F6: the owner holds all 4 entries" \
        '[ "$(pending_of $q owner | grep -c .)" = 4 ]'
    # a second worker that would claim anything idle for more than VIS ms
    worker_start f6-thief r $q --consumer thief --visibility-timeout $VIS
    b=$FL_PID
    fl_wait_until 15 "F6: the long jobs finished" 'drained r $q'
    fl_kill "$b" TERM
    fl_wait_pid "$b" 15
    fl_kill "$a" TERM
    fl_wait_pid "$a" 15
    fl_grep "F6 the other worker claimed nothing" "reclaimed=0" "$FL_DIR/f6-thief.out"
    if grep -q entry_lost "$FL_DIR/f6-owner.err"; then
        fl_fail "F6: the owner lost a job: $(grep entry_lost "$FL_DIR/f6-owner.err" | head -n 2)"
    fi
    check_e2e --admitted "$FL_DIR/f6.adm" --processed "$FL_DIR/processed.rec" \
        --redis "$url" --queue $q --max-duplicates 0
    fl_log "F6 ok: 3.5 s jobs with a 1 s visibility timeout kept by their owner"
}

# The control for F6: the same long jobs, but the owner is stopped (SIGSTOP) for longer than the
# visibility timeout, so its heartbeat stops: the other worker must take the jobs (F6 above is
# not passing merely because nobody looks), and both process them (duplicate case 2 of the
# guarantees). The owner notices when it resumes (event=entry_lost).
f6_control_owner_stopped() {
    local q=wk-f6c a b
    rm -f "$FL_DIR/processed.rec"
    worker_start f6c-owner r $q --handler sleep:2500 --consumer owner --visibility-timeout $VIS
    a=$FL_PID
    fl_wait_until 10 "F6 control: owner ready" 'grep -q group_created "$FL_DIR/f6c-owner.err"'
    seq -f 'f6c-%g' 1 2 | "$BIN/sluice-enqueue" -q $q -r "$url" --ids >"$FL_DIR/f6c.adm"
    fl_wait_until 10 "F6 control: the owner holds both entries" \
        '[ "$(pending_of $q owner | grep -c .)" = 2 ]'
    pending_of $q owner >"$FL_DIR/f6c.explained"
    fl_kill "$a" STOP
    worker_start f6c-thief r $q --consumer thief --visibility-timeout $VIS
    b=$FL_PID
    fl_wait_until 10 "F6 control: the other worker takes the jobs of the stopped owner" \
        '[ "$(lines "$FL_DIR/processed.rec")" -ge 2 ]'
    fl_kill "$a" CONT
    fl_wait_until 10 "F6 control: the resumed owner finishes too" \
        '[ "$(lines "$FL_DIR/processed.rec")" -ge 4 ]'
    fl_wait_until 10 "F6 control: queue drained" 'drained r $q'
    fl_kill "$b" TERM
    fl_wait_pid "$b" 15
    fl_kill "$a" TERM
    fl_wait_pid "$a" 15
    fl_grep "F6 control: the other worker claimed both" "reclaimed=2" "$FL_DIR/f6c-thief.out"
    fl_grep "F6 control: the resumed owner says it lost them" "event=entry_lost" \
        "$FL_DIR/f6c-owner.err"
    check_e2e --admitted "$FL_DIR/f6c.adm" --processed "$FL_DIR/processed.rec" \
        --redis "$url" --queue $q --explained "$FL_DIR/f6c.explained"
    fl_eq "F6 control: duplicates when the owner is stopped" 2 "$(field duplicates "$CHECK_LINE")"
    fl_log "F6 control ok: owner stopped > visibility timeout: jobs taken over (2 duplicates)"
}

# kill_loop [QUEUE COUNT RATE [DRAIN_RATE [fair]]]: sets LOOP_LINE
kill_loop() {
    local q=${1:-wk-loop} count=${2:-20000} rate=${3:-1500} pace=${4:-} fair=${5:-}
    local slots=3 conc=16 kills=0 held=0 s gen=0 prod deadline
    local -a wpid wname load_opts=() check_opts=(--explained "$FL_DIR/$q.explained")
    rm -f "$FL_DIR/processed.rec" "$FL_DIR/$q.explained"
    if [ -n "$pace" ]; then
        "$BIN/sluice-admin" --redis "$url" limit $q set pace drain "$pace" >/dev/null
    fi
    if [ -n "$fair" ]; then
        "$BIN/sluice-admin" --redis "$url" fair $q on >/dev/null
        "$BIN/sluice-admin" --redis "$url" limit $q set per-tenant drain-tenant 60/1s >/dev/null
        "$BIN/sluice-admin" --redis "$url" limit $q set lease inflight-tenant 4 >/dev/null
        load_opts=(--tenants 20)
        check_opts=(--by-payload) # ids are unique per lane: the duplicates bound below holds
    fi
    start_slot() {
        gen=$((gen + 1))
        wname[$1]="loop-$1-$gen"
        worker_start "loop-w$1" r $q --handler sleep:15 --concurrency $conc \
            --consumer "${wname[$1]}" --visibility-timeout $VIS --log-level warn
        wpid[$1]=$FL_PID
    }
    for s in $(seq 1 $slots); do start_slot "$s"; done
    fl_spawn "$q-producer" "$BIN/sluice-faultload" --redis "$url" --queue $q --count $count \
        --prefix "$q" --batch 50 --rate "$rate" --capacity 5000 --deadline 90000 \
        --out "$FL_DIR/$q.adm" --unknown "$FL_DIR/$q.unknown" "${load_opts[@]}"
    prod=$FL_PID
    deadline=$(($(fl_now_ms) + 100000))
    while fl_is_child "$prod" || [ "$kills" -lt 24 ]; do
        [ "$(fl_now_ms)" -lt "$deadline" ] || fl_fail "kill loop: not done in 100 s"
        sleep "0.$((25 + RANDOM % 30))"
        s=$((1 + RANDOM % slots))
        fl_is_child "${wpid[$s]}" || fl_fail "kill loop: worker ${wname[$s]} died by itself: $(tail -n 3 "$FL_DIR/loop-w$s.err")"
        fl_kill "${wpid[$s]}"
        kills=$((kills + 1))
        # what it held at its death bounds (and names) the duplicates this kill may cause
        pending_of $q "${wname[$s]}" >"$FL_DIR/kill.ids"
        held=$((held + $(grep -c . "$FL_DIR/kill.ids" || true)))
        cat "$FL_DIR/kill.ids" >>"$FL_DIR/$q.explained"
        if [ -n "$fair" ]; then
            held=$((held + $(held_in_lanes $q "${wname[$s]}")))
        fi
        start_slot "$s"
    done
    fl_wait_pid "$prod" 10
    fl_eq "kill loop: producer exit code ($(cat "$FL_DIR/$q-producer.out"))" 0 "$FL_RC"
    fl_wait_until 30 "kill loop: queue drained after the last kill" 'fair_drained $q'
    for s in $(seq 1 $slots); do
        fl_kill "${wpid[$s]}" TERM
        fl_wait_pid "${wpid[$s]}" 15
        fl_eq "kill loop: exit code of ${wname[$s]} after SIGTERM" 0 "$FL_RC"
    done
    check_e2e --admitted "$FL_DIR/$q.adm" --processed "$FL_DIR/processed.rec" \
        --redis "$url" --queue $q "${check_opts[@]}" --max-duplicates "$held"
    fl_ge "kill loop: kills" 20 "$kills"
    fl_eq "kill loop: admitted and checked" $count "$(field checked "$CHECK_LINE")"
    fl_eq "kill loop: lost" 0 "$(field lost "$CHECK_LINE")"
    fl_le "kill loop: duplicates (bound: entries held at the kills)" "$held" \
        "$(field duplicates "$CHECK_LINE")"
    fl_le "kill loop: entries held at the kills (concurrency x kills)" $((conc * kills)) "$held"
    LOOP_LINE="kills=$kills checked=$(field checked "$CHECK_LINE") lost=0"
    local dups
    dups=$(field duplicates "$CHECK_LINE")
    LOOP_LINE+=" duplicates=$dups held_at_kills=$held (F1/F2, killed before or in the handler:"
    LOOP_LINE+=" $((held - dups)); F3, processed but not acked: $dups)"
    LOOP_LINE+=" bound=concurrency*kills=$((conc * kills))"
    LOOP_LINE+=" producer=[$(cat "$FL_DIR/$q-producer.out")]"
    fl_log "kill loop ok: $LOOP_LINE"
}

f1_f2_killed_in_handler
f3_killed_before_ack
f5_poison
f6_long_job
f6_control_owner_stopped
kill_loop
PLAIN_LINE=$LOOP_LINE
kill_loop wk-paced 5000 1000 800/1s
PACED_LINE=$LOOP_LINE
kill_loop wk-fair 5000 1000 800/1s fair
fl_figures "worker kill -9 loop: $PLAIN_LINE; every duplicate was held by a killed worker" \
    "(processed, killed before its ack); F3: 10/10 redelivered; F5 poison: $F5_LINE;" \
    "paced queue (drain 800/1s, 1,000/s offered): ${PACED_LINE%% producer=*};" \
    "fair + paced queue (20 tenants, drain 800/1s, drain-tenant 60/1s, inflight-tenant 4):" \
    "${LOOP_LINE%% producer=*}"
