#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# fault_cluster_failover.sh - Redis Cluster failover under load (docs/faults.md F26).
#
# A 3+3 node cluster; a producer admits into a queue at a steady rate while a worker drains it,
# and the primary of the queue's slot is killed with -9 five times (each time its replica takes
# over, the killed node comes back as the new primary's replica and syncs). Twice: without and
# with --wait-replicas 1. Replication is asynchronous, so without WAIT an admission the primary
# acknowledged may not have reached its replica when it dies: counted, not asserted. With WAIT 1
# an admission is reported admitted only once the replica has it, and the replica is the node
# promoted: 0 lost, asserted. Admissions whose WAIT saw no replica (just after a failover, before
# the killed node is back) are reported unknown, and counted.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
fl_init fault_cluster_failover
cdir=$FL_DIR/cluster
trap 'rc=$?; "$SRC/scripts/test-redis" cluster-stop "$cdir" >/dev/null 2>&1; (exit $rc); fl_cleanup' EXIT
curl=$("$SRC/scripts/test-redis" cluster-start "$cdir") || fl_fail "cluster-start: $curl"
mapfile -t ports <"$cdir/ports"
KILLS=5

alive() { # a node that answers
    local p
    for p in "${ports[@]}"; do
        redis-cli -p "$p" PING 2>/dev/null | grep -q PONG && { echo "$p"; return; }
    done
}
owner() { # QUEUE -> port of the primary serving its slot (empty while none does)
    local a s
    a=$(alive)
    s=$(redis-cli -p "$a" CLUSTER KEYSLOT "sluice:{$1}:stream")
    redis-cli -p "$a" CLUSTER NODES | awk -v s="$s" '$3 ~ /master/ && $3 !~ /fail/ {
        for (i = 9; i <= NF; i++) { split($i, r, "-"); if (r[2] == "") r[2] = r[1]
            if (s >= r[1] && s <= r[2]) { split($2, a, "[:@]"); print a[2] } } }'
}
pid_of_port() {
    local d
    for d in "$cdir"/node*; do
        [ "$(cat "$d/port")" = "$1" ] && cat "$d/pid"
    done
}
replica_online() { # PORT: the primary on PORT has a replica in sync
    redis-cli -p "$1" INFO replication 2>/dev/null | grep -q 'state=online'
}

# run MODE WAIT: sets RUN_LINE and RUN_LOST
run() {
    local mode=$1 wait=$2 q="fo-$1" k victim next p w
    fl_spawn "$mode-worker" "$BIN/sluice-worker" --redis "$curl" --queue "$q" --handler noop \
        --record "$FL_DIR/$mode.rec" --log-level warn
    w=$FL_PID
    fl_spawn "$mode-producer" "$BIN/sluice-faultload" --redis "$curl" --queue "$q" \
        --count 1000000 --rate 400 --batch 10 --prefix "$mode" --wait-replicas "$wait" \
        --timeout 2000 --deadline 120000 --out "$FL_DIR/$mode.adm" --unknown "$FL_DIR/$mode.unk"
    p=$FL_PID
    for k in $(seq 1 $KILLS); do
        fl_wait_until 40 "$mode: the queue's primary has its replica in sync" \
            '[ -n "$(owner $q)" ] && replica_online "$(owner $q)"'
        sleep 1 # admissions flowing through the primary about to die
        victim=$(owner "$q")
        kill -KILL "$(pid_of_port "$victim")"
        fl_wait_until 40 "$mode: a replica promoted after kill $k" \
            'next=$(owner $q) && [ -n "$next" ] && [ "$next" != "$victim" ]'
        "$SRC/scripts/test-redis" cluster-node-restart "$cdir" "$victim" >/dev/null
    done
    sleep 1
    fl_kill "$p" TERM
    fl_wait_pid "$p" 10
    # everything admitted is processed by the same worker, which followed every failover
    fl_wait_until 30 "$mode: the worker processed what was admitted" \
        'python3 "$SRC/tests/faults/check.py" --admitted "$FL_DIR/$mode.adm" --processed "$FL_DIR/$mode.rec" >/dev/null 2>&1 ||
         { [ "$mode" = nowait ] && [ "$(depth_on "$q")" = 0 ]; }'
    fl_is_child "$w" || fl_fail "$mode: the worker died: $(tail -n 3 "$FL_DIR/$mode-worker.err")"
    fl_kill "$w" TERM
    fl_wait_pid "$w" 15
    local out rc=0
    out=$(python3 "$SRC/tests/faults/check.py" --admitted "$FL_DIR/$mode.adm" \
        --processed "$FL_DIR/$mode.rec" 2>/dev/null) || rc=$?
    RUN_LOST=$(field lost "$out")
    RUN_LINE="$mode: kills=$KILLS checked=$(field checked "$out") lost=$RUN_LOST"
    RUN_LINE+=" duplicates=$(field duplicates "$out")"
    RUN_LINE+=" unknown=$(field unknown "$(tail -n 1 "$FL_DIR/$mode-producer.out")")"
    fl_log "$RUN_LINE"
}
depth_on() { redis-cli -p "$(owner "$1")" XLEN "sluice:{$1}:stream"; }

run nowait 0
NOWAIT_LINE=$RUN_LINE
run wait 1
fl_eq "with --wait-replicas 1: admitted but lost" 0 "$RUN_LOST"
fl_figures "Redis Cluster failover, $KILLS x kill -9 of the queue's primary under 400 msg/s:" \
    "without WAIT: ${NOWAIT_LINE#nowait: }; with --wait-replicas 1: ${RUN_LINE#wait: }"
