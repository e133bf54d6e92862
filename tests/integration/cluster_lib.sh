# SPDX-License-Identifier: MIT
# Shared by the integration tests that start a Redis Cluster of their own (sourced after lib.sh,
# not run; the cluster tests take turns, see tests/CMakeLists.txt):
#   cluster_start          3 primaries and 3 replicas on free loopback ports (scripts/test-redis
#                          cluster-start; never the fixture's port), stopped by their PIDs on
#                          exit (nodes a test stopped with SIGSTOP are continued first); sets
#                          curl (the redis+cluster:// URL), cdir and ports (one per node)
#   rc PORT ARGS...        redis-cli to one node
#   alive                  the port of a node that answers (the first may be one a test killed)
#   primaries              the ports of the primaries not marked failed, one a line
#   slot_of QUEUE          the hash slot of QUEUE's keys
#   slot_owner SLOT        the port of the primary serving SLOT (empty while none does)
#   owner QUEUE            the port of the primary serving QUEUE's slot
#   queue_per_primary P    fills queue_of (primary port -> a queue name P-N whose slot it
#                          serves) for each of the 3 primaries
#   partitions_apart P     prints a queue name P-N whose partitions P-N, P-N~1 and P-N~2 are
#                          on the 3 different primaries
#   pid_of PORT            the pid of the node on PORT
#   replica_of PORT        the port of a replica (not failed) of the primary on PORT
#   stat PORT SECTION NAME a count from INFO SECTION (its calls= or count=; 0 when absent)
#   load_library           the sluice functions on every primary, for tests that call them with
#                          redis-cli on a node no sluice client has connected to yet (a client
#                          that finds another build's library there loads its own, REPLACE)
src=${SLUICE_SOURCE_DIR:?run through ctest}
cdir=$tmp/cluster
ports=()

cluster_cleanup() {
    local d
    for d in "$cdir"/node*; do
        kill -CONT "$(cat "$d/pid" 2>/dev/null)" 2>/dev/null || true
    done
    "$src/scripts/test-redis" cluster-stop "$cdir" >/dev/null 2>&1 || true
    lib_cleanup
}

cluster_start() {
    trap cluster_cleanup EXIT
    # the first port tried is the fixture server's, which answers PING: the harness must pass
    # over it rather than take that server for one of its nodes
    curl=$(TEST_REDIS_FIRST_PORT=${url##*:} "$src/scripts/test-redis" cluster-start "$cdir") ||
        fail "cluster-start: $curl"
    mapfile -t ports <"$cdir/ports"
}

rc() { redis-cli -p "$@"; }

alive() {
    local p
    for p in "${ports[@]}"; do
        rc "$p" PING 2>/dev/null | grep -q PONG && {
            echo "$p"
            return
        }
    done
}

primaries() {
    rc "$(alive)" CLUSTER NODES | awk '$3 ~ /master/ && $3 !~ /fail/ { split($2, a, "[:@]"); print a[2] }'
}

slot_of() { rc "$(alive)" CLUSTER KEYSLOT "sluice:{$1}:stream"; }

slot_owner() {
    rc "$(alive)" CLUSTER NODES | awk -v s="$1" '$3 ~ /master/ && $3 !~ /fail/ {
        for (i = 9; i <= NF; i++) { split($i, r, "-"); if (r[2] == "") r[2] = r[1]
            if (s >= r[1] && s <= r[2]) { split($2, a, "[:@]"); print a[2] } } }'
}

owner() { slot_owner "$(slot_of "$1")"; }

queue_per_primary() {
    declare -gA queue_of=()
    local i q p
    for i in $(seq 1 300); do
        q="$1-$i"
        p=$(owner "$q")
        [ -n "$p" ] && [ -z "${queue_of[$p]:-}" ] && queue_of[$p]=$q
        [ "${#queue_of[@]}" -eq 3 ] && break
    done
    [ "${#queue_of[@]}" -eq 3 ] || fail "no queue name found for each primary"
}

partitions_apart() {
    local i o0 o1 o2
    for i in $(seq 1 300); do
        o0=$(owner "$1-$i") o1=$(owner "$1-$i~1") o2=$(owner "$1-$i~2")
        if [ "$o0" != "$o1" ] && [ "$o1" != "$o2" ] && [ "$o0" != "$o2" ]; then
            echo "$1-$i"
            return 0
        fi
    done
    fail "no queue name with its 3 partitions on 3 primaries"
}

pid_of() {
    local d
    for d in "$cdir"/node*; do
        if [ "$(cat "$d/port")" = "$1" ]; then cat "$d/pid"; fi
    done
}

replica_of() {
    local id
    id=$(rc "$1" CLUSTER MYID)
    rc "$(alive)" CLUSTER NODES | awk -v id="$id" '$3 ~ /slave/ && $3 !~ /fail/ && $4 == id {
        split($2, a, "[:@]"); print a[2]; exit }'
}

stat() {
    rc "$1" INFO "$2" | tr -d '\r' | sed -n "s/^$3:\(calls\|count\)=\([0-9]*\).*/\2/p" | head -n 1 |
        grep . || echo 0
}

load_library() {
    local p
    for p in $(primaries); do
        rc "$p" -x FUNCTION LOAD REPLACE <"$bin/../common/sluice_lua.c.lua" | grep -qx sluice ||
            fail "FUNCTION LOAD on $p"
    done
}
