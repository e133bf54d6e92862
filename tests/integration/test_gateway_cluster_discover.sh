#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# sluice-gateway --discover on a Redis Cluster (3 primaries, 3 replicas, started here and stopped
# by their PIDs): queues made by sluice-enqueue on each primary, none of them served, are all
# listed in the "discovered" part of GET /v1/queues with their depths (SCAN runs on every
# primary, and each queue's figures are read on a connection to its slot's owner).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/cluster_lib.sh"
cluster_start
queue_per_primary "gd$$"
queues=("${queue_of[@]}")
n=0
for q in "${queues[@]}"; do
    n=$((n + 1))
    "$bin/sluice-admin" --redis "$curl" capacity "$q" 100 >/dev/null || fail "capacity $q"
    seq 1 "$n" | "$bin/sluice-enqueue" --redis "$curl" --queue "$q" >/dev/null || fail "enqueue $q"
done
# a served queue, on one of the primaries, is not repeated among the discovered ones
served="gds$$"
"$bin/sluice-enqueue" --redis "$curl" --queue "$served" x >/dev/null
gateway_start --redis "$curl" --queue "$served" --dashboard --discover

# every queue with its depth (1, 2 and 3 entries) and capacity: 30 s at most (a round of SCAN
# every 10 s, and at the next second after one that found a primary's connection not up yet)
want() { # the JSON of queue number $1 (1-based): depth $1, capacity 100
    printf '{"queue":"%s","backend":"stream","depth":%d,"capacity":100,' "${queues[$1 - 1]}" "$1"
}
for i in $(seq 1 150); do
    curl -s --max-time 5 -o "$tmp/b" "http://127.0.0.1:$port/v1/queues" || true
    all=1
    for k in 1 2 3; do grep -qF -- "$(want "$k")" "$tmp/b" || all=0; done
    [ "$all" = 1 ] && break
    sleep 0.2
done
for k in 1 2 3; do
    grep -qF -- "$(want "$k")" "$tmp/b" ||
        fail "queue ${queues[$k - 1]} (on $(owner "${queues[$k - 1]}")) not discovered with depth $k: $(head -c 1500 "$tmp/b")"
done
grep -oF '"discovered":[' "$tmp/b" >/dev/null || fail "no discovered list: $(head -c 600 "$tmp/b")"
! sed 's/.*"discovered":\[//' "$tmp/b" | grep -qF "\"queue\":\"$served\"" ||
    fail "a served queue is listed as discovered"

# a slot moves: the gateway scans a primary on the connection of a slot it serves (the slot of
# "{-0}" first), which stays on the node it found the slot on until a keyed call hears MOVED.
# Moving that (empty) slot to another primary must not leave that primary unscanned: a queue
# made there now is discovered at a later round (bounded: 30 s), the one there before is kept.
s0=$(rc "$(alive)" CLUSTER KEYSLOT "{-0}")
from=$(slot_owner "$s0")
to=""
for p in $(primaries); do [ "$p" != "$from" ] && to=$p && break; done
to_id=$(rc "$to" CLUSTER MYID)
for p in $(primaries); do rc "$p" CLUSTER SETSLOT "$s0" NODE "$to_id" >/dev/null; done
later=""
for i in $(seq 1 300); do
    later="gdl$$-$i"
    [ "$(owner "$later")" = "$to" ] && break
done
"$bin/sluice-enqueue" --redis "$curl" --queue "$later" x >/dev/null || fail "enqueue $later"
for i in $(seq 1 150); do
    curl -s --max-time 5 -o "$tmp/b" "http://127.0.0.1:$port/v1/queues" || true
    grep -qF "\"queue\":\"$later\"" "$tmp/b" && break
    sleep 0.2
done
grep -qF "\"queue\":\"$later\"" "$tmp/b" ||
    fail "after slot $s0 moved from $from to $to, a queue on $to was not discovered: $(head -c 1500 "$tmp/b")"
grep -qF "\"queue\":\"${queue_of[$to]}\"" "$tmp/b" ||
    fail "queue ${queue_of[$to]} on $to dropped after slot $s0 moved: $(head -c 1500 "$tmp/b")"
! grep -q 'level=warn' "$tmp/gw.log" || fail "gateway warnings: $(grep level=warn "$tmp/gw.log")"
kill -TERM "${pids[-1]}"
wait "${pids[-1]}" || fail "gateway exit $?: $(tail -n 5 "$tmp/gw.log")"
echo "OK"
