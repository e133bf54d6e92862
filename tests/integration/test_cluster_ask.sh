#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The async connection's ASK and MOVED handling under load, on its own Redis Cluster (3
# primaries, 3 replicas, started here and stopped by their PIDs): sluice-faultaprod (one
# sluice_aproducer, an admission every millisecond) admits into a queue whose slot is migrated.
#
# The migration ends while calls sent on the ask link wait for their replies: the target is
# stopped (SIGSTOP) for a moment with calls in flight on the ask link, the source is told the
# slot is the target's, and the next call answered MOVED moves the connection to the target.
# The calls sent on the ask link ran (or will, once the target runs again): each must be called
# back with what the target answered - admitted - never "cancelled" (which a web handler turns
# into a retry, so into a duplicate). Every callback runs once, within its deadline, and Redis
# holds exactly the admitted payloads.
. "$(dirname "$0")/lib.sh"
src=${SLUICE_SOURCE_DIR:?run through ctest}
cdir=$tmp/cluster
trap 'for d in "$cdir"/node*; do kill -CONT "$(cat "$d/pid" 2>/dev/null)" 2>/dev/null; done
      "$src/scripts/test-redis" cluster-stop "$cdir" >/dev/null 2>&1 || true; lib_cleanup' EXIT
curl=$("$src/scripts/test-redis" cluster-start "$cdir") || fail "cluster-start: $curl"
mapfile -t ports <"$cdir/ports"
rc() { redis-cli -p "$@"; }
primaries() {
    rc "${ports[0]}" CLUSTER NODES | awk '$3 ~ /master/ && $3 !~ /fail/ {
        split($2, a, "[:@]"); print a[2] }'
}
owner() { # queue -> port of the primary of its slot
    local s
    s=$(rc "${ports[0]}" CLUSTER KEYSLOT "sluice:{$1}:stream")
    rc "${ports[0]}" CLUSTER NODES | awk -v s="$s" '$3 ~ /master/ && $3 !~ /fail/ {
        for (i = 9; i <= NF; i++) { split($i, r, "-"); if (r[2] == "") r[2] = r[1]
            if (s >= r[1] && s <= r[2]) { split($2, a, "[:@]"); print a[2] } } }'
}
pid_of() { # port -> pid of that node
    local d
    for d in "$cdir"/node*; do
        if [ "$(cat "$d/port")" = "$1" ]; then cat "$d/pid"; fi
    done
}
q="ask$$"
msrc=$(owner "$q")
mdst=$(primaries | grep -vx "$msrc" | head -n 1)
[ -n "$msrc" ] && [ -n "$mdst" ] || fail "no source and target for $q"
slot=$(rc "$msrc" CLUSTER KEYSLOT "sluice:{$q}:stream")
sid=$(rc "$msrc" CLUSTER MYID)
did=$(rc "$mdst" CLUSTER MYID)
dpid=$(pid_of "$mdst")
"$bin/sluice-admin" --redis "$curl" capacity "$q" 1000000 >/dev/null

"$bin/sluice-faultaprod" --redis "$curl" --queue "$q" --count 4000 --per-tick 2 \
    --timeout 3000 --log-level info --out "$tmp/out" >"$tmp/sum" 2>"$tmp/log" &
lp=$!
pids+=("$lp")
sleep 0.5
rc "$mdst" CLUSTER SETSLOT "$slot" IMPORTING "$sid" | grep -q OK || fail "IMPORTING"
rc "$msrc" CLUSTER SETSLOT "$slot" MIGRATING "$did" | grep -q OK || fail "MIGRATING"
mapfile -t ks < <(rc "$msrc" CLUSTER GETKEYSINSLOT "$slot" 100 | grep .)
rc "$msrc" MIGRATE 127.0.0.1 "$mdst" "" 0 5000 KEYS "${ks[@]}" | grep -q OK || fail "MIGRATE"
sleep 0.3 # the calls answered ASK go on the ask link to the target
kill -STOP "$dpid"
sleep 0.02 # calls in flight on the ask link
rc "$msrc" CLUSTER SETSLOT "$slot" NODE "$did" >/dev/null
sleep 0.1 # the next call on the source is answered MOVED
kill -CONT "$dpid"
for p in $(primaries); do rc "$p" CLUSTER SETSLOT "$slot" NODE "$did" >/dev/null; done
wait "$lp" || fail "the callback contract: $(cat "$tmp/sum") $(grep -v level= "$tmp/log" | head -n 3)"
grep -q 'event=cluster_ask' "$tmp/log" || fail "no ask link was used"
grep -q 'event=cluster_moved' "$tmp/log" || fail "the MOVED was not followed"
bad=$(awk '$2 != 0 { print $3 }' "$tmp/out" | sort | uniq -c | tr '\n' ' ')
[ -z "$bad" ] || fail "not admitted across the migration: $bad ($(cat "$tmp/sum"))"
awk '{ print $1 }' "$tmp/out" | sort >"$tmp/admitted"
rc "$mdst" XRANGE "sluice:{$q}:stream" - + | grep -ao 'a-[0-9]*' | sort >"$tmp/held"
cmp -s "$tmp/admitted" "$tmp/held" ||
    fail "Redis holds $(wc -l <"$tmp/held") payloads, $(wc -l <"$tmp/admitted") admitted"
echo "test_cluster_ask: ok ($(cat "$tmp/sum"))"
