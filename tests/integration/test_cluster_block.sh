#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The blocking clients at the edges of a Redis Cluster's life, on their own cluster (3
# primaries, 3 replicas, started here with scripts/test-redis cluster-start and stopped by
# their PIDs on exit):
#   - in a migration's ASK phase, --wait-replicas waits on the node that took the write (the
#     importing one), not on the slot's owner in the map;
#   - at the end of a migration the nodes learn the new owner one by one, and meanwhile the
#     source answers MOVED to the target and the target MOVED to the source: a call keeps
#     following (with pauses) until its deadline, and is admitted once the target knows;
#   - a URL of the wrong kind is refused, by the blocking tools and the worker alike: a
#     redis+cluster:// seed that is a plain Redis, a redis:// URL at a cluster node;
#   - a missing password is an authentication error, not "unavailable";
#   - a primary killed (-9): calls made before its replica is promoted wait for the promotion
#     within their --timeout, and a stdin-fed sluice-enqueue goes on.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/cluster_lib.sh"
cluster_start
E() { "$bin/sluice-enqueue" --redis "$curl" "$@"; }
# migrate QUEUE: the ASK phase of its slot's move to another primary (keys moved, slot not yet
# reassigned); sets msrc, mdst, mslot
migrate() {
    msrc=$(owner "$1")
    mdst=$(primaries | grep -vx "$msrc" | head -n 1)
    mslot=$(rc "$msrc" CLUSTER KEYSLOT "sluice:{$1}:stream")
    rc "$mdst" CLUSTER SETSLOT "$mslot" IMPORTING "$(rc "$msrc" CLUSTER MYID)" | grep -q OK ||
        fail "IMPORTING"
    rc "$msrc" CLUSTER SETSLOT "$mslot" MIGRATING "$(rc "$mdst" CLUSTER MYID)" | grep -q OK ||
        fail "MIGRATING"
    mapfile -t ks < <(rc "$msrc" CLUSTER GETKEYSINSLOT "$mslot" 100 | grep .)
    rc "$msrc" MIGRATE 127.0.0.1 "$mdst" "" 0 5000 KEYS "${ks[@]}" | grep -q OK || fail "MIGRATE"
}
settle() { # every primary learns that mdst owns mslot
    local p
    for p in $(primaries); do rc "$p" CLUSTER SETSLOT "$mslot" NODE "$(rc "$mdst" CLUSTER MYID)" >/dev/null; done
}

# ---- --wait-replicas in the ASK phase: WAIT where the admission ran ----
# The importing node's replica is stopped: the WAIT behind an admission it took must time out
# (outcome unknown, exit 3). Asked of the source, whose replica is in sync, it said 1 at once.
qw="bw$$"
run 0 '^admitted=1 ' E --queue "$qw" --wait-replicas 1 a
migrate "$qw"
rpid=$(pid_of "$(replica_of "$mdst")")
[ -n "$rpid" ] || fail "no replica of $mdst"
waits0=$(stat "$mdst" commandstats cmdstat_wait)
kill -STOP "$rpid"
run 3 'may or may not' E --queue "$qw" --wait-replicas 1 --wait-timeout 300 b
kill -CONT "$rpid"
[ "$(stat "$mdst" commandstats cmdstat_wait)" -gt "$waits0" ] ||
    fail "the WAIT did not go to the importing node $mdst"
settle
run 0 '^admitted=1 rejected=0 depth=3 ' E --queue "$qw" --wait-replicas 1 --wait-timeout 5000 c

# ---- a MOVED ping-pong: every node but the target knows the new owner ----
qp="bp$$"
run 0 '^admitted=1 ' E --queue "$qp" a
migrate "$qp"
for p in $(primaries); do
    [ "$p" = "$mdst" ] || rc "$p" CLUSTER SETSLOT "$mslot" NODE "$(rc "$mdst" CLUSTER MYID)" >/dev/null
done
# it never settles within this call's deadline: a timeout that says so, not the raw MOVED
run 3 'MOVED .* still redirected when the deadline \(600 ms\) passed' E --queue "$qp" --timeout 600 b
grep -q 'timed out' "$tmp/out" || fail "ping-pong: not a timeout: $(cat "$tmp/out")"
# the target learns 1 s after the call starts: the call is admitted within its deadline
(sleep 1 && rc "$mdst" CLUSTER SETSLOT "$mslot" NODE "$(rc "$mdst" CLUSTER MYID)" >/dev/null) &
late=$!
pids+=("$late")
run 0 '^admitted=1 rejected=0 depth=2 ' E --queue "$qp" --timeout 8000 c
wait "$late" || true
[ "$(rc "$mdst" XLEN "sluice:{$qp}:stream")" = 2 ] || fail "ping-pong: not 2 entries on $mdst"

# ---- URLs of the wrong kind ----
plain=${url#redis://}
bad="redis+cluster://$plain,127.0.0.1:${ports[0]}"
qm="bm$$"
run 3 "$plain: not a cluster node" E --redis "$bad" --queue "$qm" x
run 3 "$plain: not a cluster node" "$bin/sluice-admin" --redis "$bad" stats "$qm"
run 3 "$plain: not a cluster node" timeout 20 "$bin/sluice-worker" --redis "$bad" --queue "$qm"
run 3 'this server is a cluster node; use redis\+cluster://' \
    "$bin/sluice-enqueue" --redis "redis://127.0.0.1:${ports[0]}" --queue "$qm" x
run 3 'this server is a cluster node; use redis\+cluster://' \
    timeout 20 "$bin/sluice-worker" --redis "redis://127.0.0.1:${ports[0]}" --queue "$qm"
[ "$(rcli EXISTS "sluice:{$qm}:stream" "sluice:{$qm}:meta")" = 0 ] ||
    fail "the plain server got keys of $qm"

# ---- a cluster that wants a password, and a URL without one ----
for p in "${ports[@]}"; do rc "$p" CONFIG SET requirepass "pw$$" >/dev/null; done
run 3 'authentication failed.*NOAUTH' E --queue "$qm" x
run 0 '^admitted=1 ' E --redis "redis+cluster://:pw$$@127.0.0.1:${ports[0]}" --queue "$qm" x
for p in "${ports[@]}"; do redis-cli -a "pw$$" --no-auth-warning -p "$p" CONFIG SET requirepass "" >/dev/null; done

# ---- failover: a primary killed under a stdin-fed producer ----
qf="bf$$"
dead=$(owner "$qf")
replica=$(replica_of "$dead")
[ -n "$replica" ] || fail "no replica of $dead"
mkfifo "$tmp/feed"
trap '' PIPE # a producer that exited early is reported below, not by a signal here
feed() { echo "$1" >&3 2>/dev/null || true; }
E --queue "$qf" --batch 1 --timeout 20000 <"$tmp/feed" >"$tmp/feed.out" 2>&1 &
feeder=$!
pids+=("$feeder")
exec 3>"$tmp/feed"
feed one
for i in $(seq 1 100); do # admitted on the primary and replicated
    [ "$(printf 'READONLY\nXLEN sluice:{%s}:stream\n' "$qf" | rc "$replica" | tail -n 1)" = 1 ] && break
    sleep 0.05
done
dpid=$(pid_of "$dead")
kill -KILL "$dpid"
for i in $(seq 1 100); do # gone, its sockets closed: what follows is sent after the kill
    kill -0 "$dpid" 2>/dev/null || break
    sleep 0.05
done
feed two # before the promotion (cluster-node-timeout 2 s, then the election)
E --queue "$qf" --timeout 20000 three >"$tmp/one.out" 2>&1 &
single=$!
pids+=("$single")
rcode=0
wait "$single" || rcode=$?
[ "$rcode" -eq 0 ] || fail "an admission during the failover exited $rcode: $(cat "$tmp/one.out")"
feed four
exec 3>&-
rcode=0
wait "$feeder" || rcode=$?
[ "$rcode" -eq 0 ] || fail "the stdin-fed producer exited $rcode: $(cat "$tmp/feed.out")"
grep -q '^admitted=3 rejected=0' "$tmp/feed.out" || fail "failover: $(cat "$tmp/feed.out")"
[ "$(rc "$replica" XLEN "sluice:{$qf}:stream")" = 4 ] ||
    fail "failover: $(rc "$replica" XLEN "sluice:{$qf}:stream") entries on the promoted replica"

echo "test_cluster_block: WAIT on the importing node, a MOVED ping-pong followed to its end," \
    "URLs of the wrong kind refused, NOAUTH reported, a failover of $dead ridden out"
