#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The blocking clients on a Redis Cluster (3 primaries, 3 replicas, started here with
# scripts/test-redis cluster-start and stopped by their PIDs on exit), through one
# redis+cluster:// URL: three queues whose slots sit on the three primaries admit with
# sluice-enqueue, exactly to their capacity, and their keys are on the primary that owns the
# slot; sluice-admin reads and sets them; the library is on every primary (and replicated);
# sluice-limit counts exactly, with and without scripts, and every algorithm stays exact under
# 8 concurrent processes; a lost reply is reported as unknown and
# not sent again. Then a queue's slot migrates to another
# primary while one producer admits into it: the producer follows ASK (the source's ASK errors,
# the target's ASKING calls) and then MOVED (the source's MOVED errors once the slot is
# reassigned), and nothing is lost: the counts are exact and the capacity holds.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/cluster_lib.sh"
cluster_start
# the first port cluster_start tries is the fixture server's, which answers PING: it must pass
# over it rather than take that server for its node (two tests starting clusters at once)
taken=${url##*:}
! grep -qx "$taken" "$cdir/ports" || fail "the cluster took port $taken, another server's"
[ "${#ports[@]}" -eq 6 ] || fail "expected 6 nodes, got ${#ports[@]}"
[[ "$curl" == redis+cluster://127.0.0.1:* ]] || fail "URL: $curl"
p1=${ports[0]}

# the primaries: port, node id and first..last slot (one range each after cluster create)
declare -A id first last
primary_ports=()
while read -r nid addr flags _ _ _ _ _ range; do
    [[ "$flags" == *master* ]] || continue
    port=${addr#*:}
    port=${port%@*}
    primary_ports+=("$port")
    id[$port]=$nid
    first[$port]=${range%-*}
    last[$port]=${range#*-}
done < <(rc "$p1" CLUSTER NODES)
[ "${#primary_ports[@]}" -eq 3 ] || fail "expected 3 primaries: $(rc "$p1" CLUSTER NODES)"

# one queue per primary
declare -A queue_of
for i in $(seq 1 300); do
    q="cl$$-$i"
    p=$(owner "$q")
    [ -n "${queue_of[$p]:-}" ] || queue_of[$p]=$q
    [ "${#queue_of[@]}" -eq 3 ] && break
done
[ "${#queue_of[@]}" -eq 3 ] || fail "no queue name found for each primary"

E() { "$bin/sluice-enqueue" --redis "$curl" "$@"; }
A() { "$bin/sluice-admin" --redis "$curl" "$@"; }
for p in "${primary_ports[@]}"; do
    q=${queue_of[$p]}
    run 0 '^admitted=3 rejected=0 depth=3 capacity=5$' E --queue "$q" --capacity 5 a b c
    run 1 '^admitted=2 rejected=1 depth=5 capacity=5$' E --queue "$q" --capacity 5 d e f
    # the entries are on the slot's primary itself (no redirection: plain redis-cli)
    [ "$(rc "$p" XLEN "sluice:{$q}:stream")" = 5 ] || fail "$q: not 5 entries on primary $p"
    run 0 "capacity of $q: 8" A capacity "$q" 8
    run 1 '^admitted=3 rejected=1 depth=8 capacity=8$' E --queue "$q" w x y z
    run 0 '"depth":8,"capacity":8,"waiting":8' A stats "$q" --json
    run 0 '"admitted":8,"rejected":2' A stats "$q" --json
    run 0 "depth +8 / 8" A stats "$q"
done

# the library was loaded on every primary, and replicas have it by replication
for p in "${ports[@]}"; do
    for i in $(seq 1 40); do
        rc "$p" FUNCTION LIST LIBRARYNAME sluice | grep -qx sluice && break
        sleep 0.05
    done
    rc "$p" FUNCTION LIST LIBRARYNAME sluice | grep -qx sluice || fail "node $p has no library"
done

# the standalone limiter, scripted and script-less (a MULTI pipeline on the key's node)
L() { "$bin/sluice-limit" --redis "$curl" "$@"; }
ns="clns$$"
run 0 '^allowed=1 remaining=2 ' L "$ns" k=3/10s
run 0 '^allowed=1 remaining=1 ' L "$ns" k=3/10s
run 0 '^allowed=1 remaining=0 ' L "$ns" k=3/10s
run 1 '^allowed=0 limited_by=k ' L "$ns" k=3/10s
run 0 '^allowed=1 remaining=1 ' L --no-scripts "$ns" n=2/10s m=5/10s
run 0 '^allowed=1 remaining=0 ' L --no-scripts "$ns" n=2/10s m=5/10s
run 1 '^allowed=0 limited_by=n ' L --no-scripts "$ns" n=2/10s m=5/10s
# exact under concurrency on the cluster as on one node: 8 processes x 10 calls against 50 an
# hour, every algorithm (the gate: one per 72 s, so 1)
left=$((3600000 - $(date +%s%3N) % 3600000))
[ "$left" -gt 15000 ] || sleep $(((left + 200) / 1000 + 1)) # no fixed window turning over
for alg in gcra window log fixed gate; do
    for p in 1 2 3 4 5 6 7 8; do
        (for i in $(seq 1 10); do L --algorithm "$alg" "$ns" "c-$alg=50/1h" || true; done \
            >"$tmp/lc-$alg-$p" 2>&1) &
        pids+=("$!")
    done
    wait
    want=50
    [ "$alg" = gate ] && want=1
    n=$(cat "$tmp"/lc-"$alg"-* | grep -c '^allowed=1' || true)
    total=$(cat "$tmp"/lc-"$alg"-* | grep -c '^allowed=' || true)
    [ "$total" = 80 ] || fail "cluster limiter $alg: $total answers of 80: $(cat "$tmp"/lc-"$alg"-1)"
    [ "$n" = "$want" ] || fail "cluster limiter $alg: $n of 80 concurrent calls allowed, want $want"
done

# a reply lost on a cluster node (DEBUG SLEEP past the call's deadline, on a connection the
# producer already used) is an unknown outcome, never sent again: exit 3 "may or may not have
# run", and the entry is there exactly once
slow=${primary_ports[2]}
qs=${queue_of[$slow]}
run 0 "capacity of $qs: 20" A capacity "$qs" 20
{ echo first; sleep 0.6; echo late; } | E --queue "$qs" --batch 1 --timeout 500 >"$tmp/slow.out" 2>&1 &
slowprod=$!
pids+=("$slowprod")
sleep 0.3
rc "$slow" DEBUG SLEEP 1.5 >/dev/null
rcode=0
wait "$slowprod" || rcode=$?
[ "$rcode" -eq 3 ] || fail "lost reply: exit $rcode: $(cat "$tmp/slow.out")"
grep -q 'may or may not have run' "$tmp/slow.out" || fail "lost reply: $(cat "$tmp/slow.out")"
[ "$(rc "$slow" XLEN "sluice:{$qs}:stream")" = 10 ] ||
    fail "$qs: $(rc "$slow" XLEN "sluice:{$qs}:stream") entries, not 8 + first + late once"

# ---- a slot migration under a running producer ----
src_port=${primary_ports[0]}
dst_port=${primary_ports[1]}
other_port=${primary_ports[2]}
qm=${queue_of[$src_port]}
slot=$(rc "$p1" CLUSTER KEYSLOT "sluice:{$qm}:stream")
run 0 "capacity of $qm: 1508" A capacity "$qm" 1508 # 8 held + 1500
ask0=$(stat "$src_port" errorstats errorstat_ASK)
moved0=$(stat "$src_port" errorstats errorstat_MOVED)

# 2000 offered at 400/s (about 5 s); the capacity takes 1500 of them
seq 1 2000 | E --queue "$qm" --batch 5 --rate 400 >"$tmp/prod.out" 2>&1 &
prod=$!
pids+=("$prod")
sleep 1
rc "$dst_port" CLUSTER SETSLOT "$slot" IMPORTING "${id[$src_port]}" | grep -q OK || fail "IMPORTING"
rc "$src_port" CLUSTER SETSLOT "$slot" MIGRATING "${id[$dst_port]}" | grep -q OK || fail "MIGRATING"
for i in $(seq 1 20); do
    mapfile -t ks < <(rc "$src_port" CLUSTER GETKEYSINSLOT "$slot" 1000 | grep .) # "" = none
    [ "${#ks[@]}" -eq 0 ] && break
    out=$(rc "$src_port" MIGRATE 127.0.0.1 "$dst_port" "" 0 5000 KEYS "${ks[@]}") ||
        fail "MIGRATE: $out"
done
[ "$(rc "$src_port" CLUSTER COUNTKEYSINSLOT "$slot")" = 0 ] || fail "keys left on the source"
sleep 1 # the producer keeps admitting: ASK from the source, ASKING on the target
ask1=$(stat "$src_port" errorstats errorstat_ASK)
asking1=$(stat "$dst_port" commandstats cmdstat_asking)
moved1=$(stat "$src_port" errorstats errorstat_MOVED)
[ "$ask1" -gt "$ask0" ] || fail "no ASK from the source during the migration"
[ "$asking1" -gt 0 ] || fail "no ASKING on the target: the producer did not follow ASK"
[ "$moved1" -eq "$moved0" ] || fail "MOVED before the slot was reassigned: $(rc "$src_port" INFO errorstats)"
kill -0 "$prod" 2>/dev/null || fail "the producer ended before the slot was reassigned"
for p in "$dst_port" "$src_port" "$other_port"; do
    rc "$p" CLUSTER SETSLOT "$slot" NODE "${id[$dst_port]}" | grep -q OK || fail "SETSLOT NODE on $p"
done
for i in $(seq 1 300); do
    kill -0 "$prod" 2>/dev/null || break
    sleep 0.05
done
kill -0 "$prod" 2>/dev/null && fail "the producer did not finish: $(cat "$tmp/prod.out")"
rcode=0
wait "$prod" || rcode=$?
moved2=$(stat "$src_port" errorstats errorstat_MOVED)
[ "$moved2" -gt "$moved1" ] || fail "no MOVED after the slot was reassigned: the producer stopped early"
# exactly the capacity admitted, the rest refused at once; nothing lost, nothing unknown
[ "$rcode" -eq 1 ] || fail "producer exited $rcode: $(cat "$tmp/prod.out")"
grep -qx 'admitted=1500 rejected=500 depth=1508 capacity=1508' "$tmp/prod.out" ||
    fail "producer: $(cat "$tmp/prod.out")"
[ "$(rc "$dst_port" XLEN "sluice:{$qm}:stream")" = 1508 ] || fail "not 1508 entries on the target"
[ "$(rc "$dst_port" HGET "sluice:{$qm}:stats" admitted)" = 1508 ] || fail "admitted counter"
[ "$(rc "$dst_port" HGET "sluice:{$qm}:stats" rejected)" = 502 ] || fail "rejected counter"
run 0 '"depth":1508,"capacity":1508' A stats "$qm" --json
# purge finds a queue's keys with SCAN on the primary of its slot (the pattern fixes the tag)
run 0 "deleted [0-9]+ keys of queue $qm" A purge "$qm" --yes
[ "$(rc "$dst_port" EXISTS "sluice:{$qm}:stream" "sluice:{$qm}:meta" "sluice:{$qm}:stats")" = 0 ] ||
    fail "purge left keys of $qm"
# ---- TRYAGAIN: a queue's keys split between two nodes in the middle of a migration ----
# The admission names three keys; while only one of them has moved the source answers
# TRYAGAIN, and the producer backs off and sends again within its deadline until the rest has
# moved too (then ASK, then done).
qt=${queue_of[$dst_port]}
tslot=$(rc "$p1" CLUSTER KEYSLOT "sluice:{$qt}:stream")
run 0 "capacity of $qt: 20" A capacity "$qt" 20
try0=$(stat "$dst_port" errorstats errorstat_TRYAGAIN)
rc "$other_port" CLUSTER SETSLOT "$tslot" IMPORTING "${id[$dst_port]}" | grep -q OK || fail "IMPORTING"
rc "$dst_port" CLUSTER SETSLOT "$tslot" MIGRATING "${id[$other_port]}" | grep -q OK || fail "MIGRATING"
rc "$dst_port" MIGRATE 127.0.0.1 "$other_port" "sluice:{$qt}:stats" 0 5000 | grep -q OK ||
    fail "MIGRATE of one key"
E --queue "$qt" --timeout 4000 split >"$tmp/split.out" 2>&1 &
splitprod=$!
pids+=("$splitprod")
sleep 0.5
mapfile -t ks < <(rc "$dst_port" CLUSTER GETKEYSINSLOT "$tslot" 1000 | grep .)
[ "${#ks[@]}" -gt 0 ] || fail "no keys left to migrate in slot $tslot"
rc "$dst_port" MIGRATE 127.0.0.1 "$other_port" "" 0 5000 KEYS "${ks[@]}" | grep -q OK ||
    fail "MIGRATE of the rest"
rcode=0
wait "$splitprod" || rcode=$?
for p in "$other_port" "$dst_port" "$src_port"; do
    rc "$p" CLUSTER SETSLOT "$tslot" NODE "${id[$other_port]}" | grep -q OK || fail "SETSLOT NODE"
done
[ "$rcode" -eq 0 ] || fail "split slot: exit $rcode: $(cat "$tmp/split.out")"
grep -q '^admitted=1 rejected=0 depth=9 ' "$tmp/split.out" || fail "split: $(cat "$tmp/split.out")"
try1=$(stat "$dst_port" errorstats errorstat_TRYAGAIN)
[ "$try1" -gt "$try0" ] || fail "no TRYAGAIN while the keys were split"
[ "$(rc "$other_port" XLEN "sluice:{$qt}:stream")" = 9 ] || fail "split: not 9 entries"

# ---- failover: a primary killed (-9) under a producer that already used it ----
# The producer's connection to the dead primary fails, it rereads the map from another node
# and sends to the promoted replica, which has the library (functions replicate) and the data.
qf=$qs
dead=$slow
replica=$(rc "$p1" CLUSTER NODES | awk -v m="${id[$dead]}" '$4 == m { split($2, a, "[:@]"); print a[2] }')
[ -n "$replica" ] || fail "no replica of $dead"
before=$(rc "$dead" XLEN "sluice:{$qf}:stream")
mkfifo "$tmp/feed"
E --queue "$qf" --batch 1 --timeout 2000 <"$tmp/feed" >"$tmp/fail.out" 2>&1 &
failprod=$!
pids+=("$failprod")
exec 3>"$tmp/feed"
echo before-kill >&3
for i in $(seq 1 100); do # admitted on the primary and replicated
    [ "$(printf 'READONLY\nXLEN sluice:{%s}:stream\n' "$qf" | rc "$replica" | tail -n 1)" = $((before + 1)) ] && break
    sleep 0.05
done
for nd in "$cdir"/node*; do # the dead primary's own PID
    if [ "$(cat "$nd/port")" = "$dead" ]; then
        kill -KILL "$(cat "$nd/pid")"
    fi
done
promoted() { # every surviving primary sees the replica as a primary now
    local p
    for p in "${primary_ports[@]}"; do
        [ "$p" = "$dead" ] && continue
        rc "$p" CLUSTER NODES 2>/dev/null | grep -q ":$replica@.* master " || return 1
    done
}
for i in $(seq 1 300); do # node timeout 2 s, then the election
    promoted && break
    sleep 0.05
done
promoted || fail "replica $replica was not promoted: $(rc "$p1" CLUSTER NODES)"
echo after-failover >&3
exec 3>&-
rcode=0
wait "$failprod" || rcode=$?
[ "$rcode" -eq 0 ] || fail "producer across the failover exited $rcode: $(cat "$tmp/fail.out")"
grep -q '^admitted=2 rejected=0' "$tmp/fail.out" || fail "failover: $(cat "$tmp/fail.out")"
[ "$(rc "$replica" XLEN "sluice:{$qf}:stream")" = $((before + 2)) ] ||
    fail "failover: $(rc "$replica" XLEN "sluice:{$qf}:stream") entries on the promoted replica"
rc "$replica" FUNCTION LIST LIBRARYNAME sluice | grep -qx sluice || fail "no library on $replica"

echo "test_cluster: 3 primaries, admission/admin/limiter through $curl; slot $slot migrated" \
    "under load: ASK $ask0->$ask1 (ASKING $asking1), MOVED $moved1->$moved2, 1500 admitted," \
    "500 refused, none lost; TRYAGAIN $try0->$try1 while slot $tslot was split; a producer" \
    "followed the failover of $dead to $replica"
