#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# fault_cluster_failover.sh - Redis Cluster failover under load (docs/faults.md F26).
#
# A 3+3 node cluster carrying two queues at once: a plain queue and a queue of 3 partitions
# (sluice-admin partitions), one partition on each primary (asserted with CLUSTER KEYSLOT and
# CLUSTER NODES before every kill). A producer admits into each at a steady rate (the blocking
# producer spreads the partitioned queue's messages over its partitions) while a worker drains
# each (the partitioned queue's worker runs one worker per partition). Six times a primary is
# killed with -9, rotating over the primaries of partitions 0, 1 and 2 (so each primary twice;
# the plain queue's primary is one of them): its replica takes over, the killed node comes back
# as the new primary's replica and syncs. Twice: without and with --wait-replicas 1.
# Replication is asynchronous, so without WAIT an admission the primary acknowledged may not
# have reached its replica when it dies: counted, not asserted. With WAIT 1 an admission is
# reported admitted only once the replica has it, and the replica is the node promoted: 0 lost,
# asserted for both queues. Admissions whose WAIT saw no replica (just after a failover, before
# the killed node is back) are reported unknown, and counted. Both workers must live through
# every failover and process everything admitted (with WAIT; without it, what was not lost).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
fl_init fault_cluster_failover
cdir=$FL_DIR/cluster
FL_CLUSTERS+=("$cdir") # stopped by the harness on exit, whatever the outcome
curl=$("$SRC/scripts/test-redis" cluster-start "$cdir") || fl_fail "cluster-start: $curl"
mapfile -t ports <"$cdir/ports"
KILLS=6
PARTS=3

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
part() { # QUEUE I -> the name of partition I
    if [ "$2" = 0 ]; then echo "$1"; else echo "$1~$2"; fi
}
part_owners() { # QUEUE -> the port of each partition's primary, sorted, one line
    local i
    for i in $(seq 0 $((PARTS - 1))); do owner "$(part "$1" "$i")"; done | sort -n | tr '\n' ' '
}
primaries() { # the ports of the primaries serving slots, sorted, one line
    redis-cli -p "$(alive)" CLUSTER NODES |
        awk '$3 ~ /master/ && $3 !~ /fail/ && NF >= 9 { split($2, a, "[:@]"); print a[2] }' |
        sort -n | tr '\n' ' '
}
covered() { # QUEUE: its partitions sit on three different primaries, the cluster's three
    local o
    o=$(part_owners "$1")
    [ "$(echo "$o" | wc -w)" = 3 ] && [ "$(echo "$o" | tr ' ' '\n' | sort -u | grep -c .)" = 3 ] &&
        [ "$o" = "$(primaries)" ]
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
depth_all() { # QUEUE...: entries in their streams, together (empty while a slot has no primary)
    local q n=0 d o
    for q in "$@"; do
        o=$(owner "$q") && [ -n "$o" ] || return 0
        d=$(redis-cli -p "$o" XLEN "sluice:{$q}:stream") || return 0
        n=$((n + d))
    done
    echo "$n"
}
check() { # MODE KIND [check.py options]: the checker's line for one queue of a run
    python3 "$SRC/tests/faults/check.py" --admitted "$FL_DIR/$1-$2.adm" \
        --processed "$FL_DIR/$1-$2.rec" "${@:3}" 2>/dev/null
}

# A partitioned queue whose partitions sit on all three primaries (each name hashes anywhere).
find_partitioned() { # MODE -> a queue name
    local i q
    for i in $(seq 1 200); do
        q="fp-$1-$i"
        covered "$q" && { echo "$q"; return; }
    done
    fl_fail "no queue name in 200 whose $PARTS partitions cover the three primaries"
}

# run MODE WAIT: sets RUN_LINE and RUN_LOST (lost over both queues)
run() {
    local mode=$1 wait=$2 q="fo-$1" qp k victim next w wp p pp plain_kills=0 i
    qp=$(find_partitioned "$mode")
    "$BIN/sluice-admin" --redis "$curl" capacity "$qp" 100000 >/dev/null
    "$BIN/sluice-admin" --redis "$curl" partitions "$qp" "$PARTS" >/dev/null
    fl_log "$mode: partitions of $qp on the primaries $(part_owners "$qp")(all: $(primaries))"
    fl_spawn "$mode-worker" "$BIN/sluice-worker" --redis "$curl" --queue "$q" --handler noop \
        --record "$FL_DIR/$mode-plain.rec" --log-level warn
    w=$FL_PID
    fl_spawn "$mode-pworker" "$BIN/sluice-worker" --redis "$curl" --queue "$qp" --handler noop \
        --record "$FL_DIR/$mode-parts.rec" --log-level warn
    wp=$FL_PID
    for k in plain parts; do
        [ "$k" = plain ] && i=$q || i=$qp
        fl_spawn "$mode-$k-producer" "$BIN/sluice-faultload" --redis "$curl" --queue "$i" \
            --count 1000000 --rate 400 --batch 10 --prefix "$mode-$k" --wait-replicas "$wait" \
            --timeout 2000 --deadline 150000 --out "$FL_DIR/$mode-$k.adm" \
            --unknown "$FL_DIR/$mode-$k.unk"
        [ "$k" = plain ] && p=$FL_PID || pp=$FL_PID
    done
    for k in $(seq 1 $KILLS); do
        i=$(part "$qp" $(((k - 1) % PARTS)))
        fl_wait_until 40 "$mode: the primary of $i has its replica in sync" \
            '[ -n "$(owner "$i")" ] && replica_online "$(owner "$i")"'
        # (a node just restarted may briefly report its old role: asked until every node agrees)
        fl_wait_until 20 "$mode: the partitions of $qp on the three primaries" 'covered "$qp"'
        sleep 1 # admissions flowing through the primary about to die
        victim=$(owner "$i")
        [ "$victim" = "$(owner "$q")" ] && plain_kills=$((plain_kills + 1))
        kill -KILL "$(pid_of_port "$victim")"
        fl_wait_until 40 "$mode: a replica promoted after kill $k" \
            'next=$(owner "$i") && [ -n "$next" ] && [ "$next" != "$victim" ]'
        "$SRC/scripts/test-redis" cluster-node-restart "$cdir" "$victim" >/dev/null
    done
    sleep 1
    for k in "$p" "$pp"; do
        fl_kill "$k" TERM
        fl_wait_pid "$k" 10
    done
    # everything admitted is processed by the same workers, which followed every failover
    local parts=() j
    for j in $(seq 0 $((PARTS - 1))); do parts+=("$(part "$qp" "$j")"); done
    fl_wait_until 30 "$mode: the workers processed what was admitted" \
        '{ check "$mode" plain >/dev/null || { [ "$mode" = nowait ] && [ "$(depth_all "$q")" = 0 ]; }; } &&
         { check "$mode" parts --by-payload >/dev/null ||
           { [ "$mode" = nowait ] && [ "$(depth_all "${parts[@]}")" = 0 ]; }; }'
    for k in "$w" "$wp"; do
        fl_is_child "$k" || fl_fail "$mode: a worker died: $(tail -n 3 "$FL_DIR/$mode-worker.err" "$FL_DIR/$mode-pworker.err")"
    done
    for j in "${parts[@]}"; do # the load reached every partition
        [ "$(redis-cli -p "$(owner "$j")" HGET "sluice:{$j}:stats" admitted)" -gt 0 ] ||
            fl_fail "$mode: nothing admitted into $j"
    done
    for k in "$w" "$wp"; do
        fl_kill "$k" TERM
        fl_wait_pid "$k" 15
    done
    local out outp
    out=$(check "$mode" plain) || true
    outp=$(check "$mode" parts --by-payload) || true
    RUN_LOST=$(($(field lost "$out") + $(field lost "$outp")))
    RUN_LINE="$mode: kills=$KILLS (each primary $((KILLS / PARTS)), the plain queue's $plain_kills);"
    RUN_LINE+=" plain queue: checked=$(field checked "$out") lost=$(field lost "$out")"
    RUN_LINE+=" duplicates=$(field duplicates "$out")"
    RUN_LINE+=" unknown=$(field unknown "$(tail -n 1 "$FL_DIR/$mode-plain-producer.out")");"
    RUN_LINE+=" $PARTS partitions: checked=$(field checked "$outp") lost=$(field lost "$outp")"
    RUN_LINE+=" duplicates=$(field duplicates "$outp")"
    RUN_LINE+=" unknown=$(field unknown "$(tail -n 1 "$FL_DIR/$mode-parts-producer.out")")"
    fl_log "$RUN_LINE"
}

run nowait 0
NOWAIT_LINE=$RUN_LINE
run wait 1
fl_eq "with --wait-replicas 1: admitted but lost (both queues)" 0 "$RUN_LOST"
fl_figures "Redis Cluster failover, $KILLS x kill -9 per mode rotating over the primaries of a" \
    "$PARTS-partition queue (one on each), 400 msg/s into it and 400 msg/s into a plain queue:" \
    "without WAIT: ${NOWAIT_LINE#nowait: }; with --wait-replicas 1: ${RUN_LINE#wait: }"
