#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# fault_memory.sh - Redis memory full under maxmemory-policy noeviction (docs/faults.md F18).
#
# The bucket is filled until Redis refuses writes. Then:
#   - admission fails with a clear out-of-memory error (exit 3, "out of memory"), and what was
#     admitted before stays (nothing evicted);
#   - a worker that was running drains the queue: reads, acks and deletes are allowed at
#     maxmemory (sluice_ack is allow-oom);
#   - so does a worker started only now (workers restarted during the incident): the group it
#     needs already exists, though XGROUP CREATE itself is refused at maxmemory;
#   - once drained, admission works again.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
fl_init fault_memory

q=mem-f18
redis_start r -- --maxmemory-policy noeviction
url=$(redis_url r)
used=$(rcli r INFO memory | awk -F: '/^used_memory:/ {print $2}' | tr -d '\r')
rcli r CONFIG SET maxmemory $((used + 3 * 1024 * 1024)) >/dev/null
pad=$(head -c 1000 /dev/zero | tr '\0' 'p')

# fill PREFIX: 1 KB payloads, 100 per call, then single ones, until the server refuses
# (bounded: 20 x 1000 + 300). Sets ADMITTED (all admissions so far).
fill() {
    local rc=0 round i
    for round in $(seq 1 20); do
        rc=0
        seq -f "$1-$round-%g" 1 1000 | sed "s/\$/-$pad/" |
            "$BIN/sluice-enqueue" -q $q -r "$url" --ids --capacity 1000000 \
                >>"$FL_DIR/fill.adm" 2>"$FL_DIR/fill.err" || rc=$?
        [ "$rc" -eq 0 ] || break
    done
    fl_eq "F18 exit code once memory is full" 3 "$rc"
    fl_grep "F18 message" "out of memory" "$FL_DIR/fill.err"
    fl_grep "F18 the server's reason is kept" "OOM command not allowed" "$FL_DIR/fill.err"
    # single admissions (a fresh client each) go on being refused once memory is really full;
    # the freed client buffers may let a few more in first
    for i in $(seq 1 300); do
        rc=0
        "$BIN/sluice-enqueue" -q $q -r "$url" --ids --capacity 1000000 "$1-one-$i-$pad" \
            >>"$FL_DIR/fill.adm" 2>"$FL_DIR/one.err" || rc=$?
        [ "$rc" -eq 0 ] || break
    done
    fl_eq "F18 single admission at maxmemory" 3 "$rc"
    fl_grep "F18 single admission message" "out of memory" "$FL_DIR/one.err"
    ADMITTED=$(grep -vc = "$FL_DIR/fill.adm" || true)
    fl_ge "F18 admitted before memory was full" 1000 "$(depth r $q)"
    fl_log "memory full at depth $(depth r $q): $(tail -n 1 "$FL_DIR/fill.err")"
}

# (a) a worker that was running (stopped while the bucket fills) drains at maxmemory
worker_start running r $q --concurrency 64 --visibility-timeout 2000
w=$FL_PID
fl_wait_until 10 "F18: worker ready" 'grep -q group_created "$FL_DIR/running.err"'
fl_kill "$w" STOP
fill a
fl_eq "F18 stream length = admitted (nothing evicted)" "$ADMITTED" "$(depth r $q)"
fl_kill "$w" CONT
fl_wait_until 30 "F18: a running worker drains at maxmemory" 'drained r $q'
fl_is_child "$w" || fl_fail "F18: the worker died: $(tail -n 3 "$FL_DIR/running.err")"
fl_kill "$w" TERM
fl_wait_pid "$w" 15
fl_eq "F18 worker exit code after SIGTERM" 0 "$FL_RC"
first=$ADMITTED

# (b) a worker (re)started while Redis is at maxmemory: the group exists; it must drain too
fill b
worker_start restarted r $q --concurrency 64 --visibility-timeout 2000
w=$FL_PID
fl_wait_until 20 "F18: a worker started at maxmemory drains the queue" 'drained r $q'
fl_is_child "$w" || fl_fail "F18: the worker died: $(tail -n 3 "$FL_DIR/restarted.err")"
rc=0
"$BIN/sluice-enqueue" -q $q -r "$url" --ids after-drain >>"$FL_DIR/fill.adm" \
    2>"$FL_DIR/after.err" || rc=$?
fl_eq "F18 admission after draining" 0 "$rc"
fl_wait_until 10 "F18: the last one processed" 'drained r $q'
fl_kill "$w" TERM
fl_wait_pid "$w" 15
fl_eq "F18 worker exit code after SIGTERM" 0 "$FL_RC"
check_e2e --admitted "$FL_DIR/fill.adm" --processed "$FL_DIR/processed.rec" --redis "$url" \
    --queue $q --max-duplicates 0
fl_figures "F18 maxmemory (noeviction): admission refused with EOOM (twice, after $first and" \
    "$((ADMITTED - first)) admitted); a running and a restarted worker drained at maxmemory;" \
    "checked=$(field checked "$CHECK_LINE") lost=0"
