#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A Redis Cluster that keeps serving with one primary gone for good (its replica gone too,
# cluster-require-full-coverage no): the blocking clients (sluice-enqueue, sluice-admin) still
# serve the queues whose slots live on the other primaries, and `sluice-admin partitions Q` shows
# the partitions it can read with the dead one marked UNAVAILABLE (exit 3). The dead primary is
# the first one in the slot map the URL's first seed gives (CLUSTER SHARDS order), the node a
# client without a connection would start on.
. "$(dirname "$0")/lib.sh"
src=${SLUICE_SOURCE_DIR:?run through ctest}
cdir=$tmp/cluster
trap '"$src/scripts/test-redis" cluster-stop "$cdir" >/dev/null 2>&1 || true; lib_cleanup' EXIT
"$src/scripts/test-redis" cluster-start "$cdir" >"$tmp/start" 2>&1 || fail "cluster-start: $(cat "$tmp/start")"
mapfile -t ports <"$cdir/ports"
rc() { redis-cli -p "$@"; }
for p in "${ports[@]}"; do rc "$p" CONFIG SET cluster-require-full-coverage no >/dev/null; done
first_primary() { # the primary of the first shard with slots in node $1's CLUSTER SHARDS
    rc "$1" --json CLUSTER SHARDS | python3 -c '
import json, sys
for sh in json.load(sys.stdin):
    if sh["slots"]:
        print([n["port"] for n in sh["nodes"] if n["role"] == "master"][0]); break'
}
replica_of() { # the port of the replica of primary $1
    local id p
    id=$(rc "$1" CLUSTER MYID)
    for p in "${ports[@]}"; do
        [[ "$(rc "$p" CLUSTER NODES)" == *"myself,slave $id"* ]] && echo "$p"
    done
    return 0
}
seed="" victim=""
for p in "${ports[@]}"; do # a seed that is neither the victim nor its replica (both die)
    v=$(first_primary "$p")
    [ -n "$v" ] && [ "$v" != "$p" ] && [ "$(replica_of "$v")" != "$p" ] && { seed=$p victim=$v; break; }
done
[ -n "$seed" ] || fail "no seed found"
url="redis+cluster://127.0.0.1:$seed"
owner() {
    local s
    s=$(rc "$seed" CLUSTER KEYSLOT "sluice:{$1}:stream")
    rc "$seed" CLUSTER NODES | awk -v s="$s" '$3 ~ /master/ {
        for (i = 9; i <= NF; i++) { split($i, r, "-"); if (r[2] == "") r[2] = r[1]
            if (s >= r[1] && s <= r[2]) { split($2, a, "[:@]"); print a[2] } } }'
}
plain="" q=""
for i in $(seq 1 400); do
    n="dp$$-$i"
    [ -z "$plain" ] && [ "$(owner "$n")" != "$victim" ] && plain=$n
    if [ -z "$q" ] && [ "$n" != "$plain" ] && [ "$(owner "$n~1")" = "$victim" ] && [ "$(owner "$n")" != "$victim" ] &&
        [ "$(owner "$n~2")" != "$victim" ]; then
        q=$n
    fi
    [ -n "$plain" ] && [ -n "$q" ] && break
done
[ -n "$plain" ] && [ -n "$q" ] || fail "no queue names found"
A() { "$bin/sluice-admin" --redis "$url" "$@"; }
run 0 "capacity of $q: 90" A capacity "$q" 90
run 0 'partitions of .*: 3 ' A partitions "$q" 3
seq 1 60 | "$bin/sluice-enqueue" --redis "$url" --queue "$q" >"$tmp/e" 2>&1 || fail "$(cat "$tmp/e")"

rep=$(replica_of "$victim")
for d in "$cdir"/node*; do # its replica first (no failover), then the primary
    [ "$(cat "$d/port")" = "$rep" ] && kill -9 "$(cat "$d/pid")"
done
sleep 0.5
for d in "$cdir"/node*; do [ "$(cat "$d/port")" = "$victim" ] && kill -9 "$(cat "$d/pid")"; done
for i in $(seq 1 100); do # the others mark it failed (cluster-node-timeout 2000)
    rc "$seed" CLUSTER NODES | grep -q ":$victim@.*master,fail " && break
    sleep 0.1
done
rc "$seed" CLUSTER INFO | grep -q 'cluster_state:ok' || fail "cluster not ok: $(rc "$seed" CLUSTER INFO)"

# a plain queue on a live primary: admitted, as before the loss
run 0 '^admitted=1 rejected=0' "$bin/sluice-enqueue" --redis "$url" --queue "$plain" --timeout 3000 x
run 0 "queue $plain" A stats "$plain" --sample 0
# the partitioned queue: 0 and 2 shown, 1 marked
run 3 "^  $q~1 +UNAVAILABLE" A partitions "$q"
grep -qE "^  all together +depth [0-9]+ / 60 \(UNAVAILABLE partitions left out\)\$" "$tmp/out" ||
    fail "partitions, sums: $(cat "$tmp/out")"
echo "test_cluster_dead_primary: with the first primary of the map dead, a queue on another" \
    "primary admits and partitions Q marks the dead partition"
