#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The async clients on a Redis Cluster (3 primaries, 3 replicas, started here and stopped by
# their PIDs): workers, the gateway and a fair queue, each on queues whose slots sit on the
# three primaries, through one redis+cluster:// URL (each connection finds the owner of its
# queue's slot by the seeds' MOVED). Then a primary is killed with -9 while a producer with
# --wait-replicas 1 admits into its queue and a worker drains it: the worker and the producer
# follow the promoted replica by themselves, and every admission reported admitted is processed.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/cluster_lib.sh"
cluster_start
p1=${ports[0]}
queue_per_primary "ca$$"
queues=("${queue_of[@]}")
E() { "$bin/sluice-enqueue" --redis "$curl" --capacity 100000 "$@"; }

# ---- workers on each primary's queue ----
for q in "${queues[@]}"; do
    seq 1 300 | sed "s/^/$q-/" | E --queue "$q" >/dev/null
done
for q in "${queues[@]}"; do
    timeout 30 "$bin/sluice-worker" --redis "$curl" --queue "$q" --handler noop \
        --record "$tmp/w-$q" --max-messages 300 >/dev/null 2>"$tmp/w-$q.log" ||
        fail "worker on $q: $(tail -n 3 "$tmp/w-$q.log")"
    [ "$(awk '{ print $2 }' "$tmp/w-$q" | sort -u | wc -l)" = 300 ] || fail "worker on $q"
    [ "$(rc "$(owner "$q")" XLEN "sluice:{$q}:stream")" = 0 ] || fail "$q not drained"
done

# ---- the gateway: one process, queues on three primaries ----
args=()
for q in "${queues[@]}"; do args+=(--queue "$q"); done
gateway_start --redis "$curl" "${args[@]}"
for q in "${queues[@]}"; do
    code=$(curl -s --max-time 10 -o "$tmp/b" -w '%{http_code}' -d "via-gw" \
        "http://127.0.0.1:$port/v1/queues/$q/messages")
    [ "$code" = 202 ] || fail "gateway POST to $q: $code $(cat "$tmp/b")"
    curl -s --max-time 10 "http://127.0.0.1:$port/v1/queues/$q" >"$tmp/b"
    grep -q '"depth":1,' "$tmp/b" || fail "gateway info of $q: $(cat "$tmp/b")"
    # the console reads the queue's consumers in its slot, wherever that is (the worker's group)
    grep -q '"group":"' "$tmp/b" || fail "gateway detail of $q (on $(owner "$q")): $(cat "$tmp/b")"
done
! grep -q 'level=warn' "$tmp/gw.log" || fail "gateway warnings: $(grep level=warn "$tmp/gw.log")"
# a call naming a key outside an async connection's slot is answered at once: the connection is
# not sent from node to node until the call's deadline (the gateway's console calls each queue
# on the connection of its slot: test_gateway_cluster.sh)
"$bin/../tests/test_aconn" --cluster "$curl" "${queues[0]}" "${queues[1]}" >"$tmp/ac" 2>&1 ||
    fail "test_aconn --cluster: $(cat "$tmp/ac")"

# ---- a fair queue on the cluster: its lanes share the queue's slot ----
fq=${queues[0]}
"$bin/sluice-admin" --redis "$curl" fair "$fq" on >/dev/null
seq 1 50 | sed 's/^/fa/' | E --queue "$fq" --tenant A >/dev/null
seq 1 5 | sed 's/^/fb/' | E --queue "$fq" --tenant B >/dev/null
timeout 30 "$bin/sluice-worker" --redis "$curl" --queue "$fq" --handler noop --concurrency 1 \
    --record "$tmp/fair" --max-messages 56 >/dev/null 2>&1
last_b=$(awk '$2 ~ /^fb/ { n = NR } END { print n + 0 }' "$tmp/fair")
[ "$last_b" -gt 0 ] && [ "$last_b" -le 12 ] || fail "fair on a cluster: B's last at $last_b"

# ---- a partitioned queue: 6 partitions, their slots over the primaries, one worker ----
pq="cap$$"
"$bin/sluice-admin" --redis "$curl" capacity "$pq" 600 >/dev/null
"$bin/sluice-admin" --redis "$curl" partitions "$pq" 6 >/dev/null
declare -A on_primary
for i in "" ~1 ~2 ~3 ~4 ~5; do on_primary[$(owner "$pq$i")]=1; done
[ "${#on_primary[@]}" -ge 2 ] || fail "6 partitions on ${#on_primary[@]} primary"
seq 1 700 | sed 's/^/p/' | E --queue "$pq" --capacity 1000 >"$tmp/pe" || true
grep -q '^admitted=600 rejected=100 ' "$tmp/pe" || fail "partitioned admission: $(cat "$tmp/pe")"
"$bin/sluice-worker" --redis "$curl" --queue "$pq" --handler noop --record "$tmp/pw" \
    >/dev/null 2>"$tmp/pw.log" &
ppw=$!
pids+=("$ppw")
wait_lines "$tmp/pw" 600 15
kill -TERM "$ppw"
wait "$ppw" || fail "partitioned worker: $(tail -n 3 "$tmp/pw.log")"
[ "$(awk '{ print $2 }' "$tmp/pw" | sort -u | wc -l)" = 600 ] || fail "partitioned drain"
# the gateway admits into it too, through one connection per partition: 60 POSTs spread over
# all 6 partitions (so over their primaries), and GET shows the queue as one
gateway_start --redis "$curl" --queue "$pq"
for i in $(seq 1 100); do
    curl -sf "http://127.0.0.1:$port/healthz" >/dev/null 2>&1 && break
    sleep 0.05
done
urls=()
for i in $(seq 1 60); do urls+=(-o /dev/null "http://127.0.0.1:$port/v1/queues/$pq/messages"); done
[ "$(curl -s --max-time 30 -w '%{http_code}\n' -d gw "${urls[@]}" | grep -cx 202)" = 60 ] ||
    fail "gateway into the partitioned queue: not 60 x 202"
for i in "" ~1 ~2 ~3 ~4 ~5; do
    n=$(rc "$(owner "$pq$i")" XLEN "sluice:{$pq$i}:stream")
    [ "$n" -gt 0 ] || fail "the gateway left partition $pq$i empty"
done
curl -s --max-time 10 "http://127.0.0.1:$port/v1/queues/$pq" >"$tmp/b"
grep -q '"depth":60,"capacity":600,.*"partitions":6,"by_partition"' "$tmp/b" ||
    fail "gateway info of $pq: $(cat "$tmp/b")"

# ---- a slot migrated under the gateway and a worker: ASK (then ASKING on the new owner), then
# MOVED; every POST answered 202, every message processed once, no redirect error seen ----
mq=${queues[2]}
msrc=$(owner "$mq")
mdst=$(owner "${queues[0]}")
mslot=$(rc "$p1" CLUSTER KEYSLOT "sluice:{$mq}:stream")
nid() { rc "$1" CLUSTER MYID; }
"$bin/sluice-worker" --redis "$curl" --queue "$mq" --handler noop --record "$tmp/mig" \
    --log-level info 2>"$tmp/mig.log" >/dev/null &
mw=$!
pids+=("$mw")
gateway_start --redis "$curl" --queue "$mq" --log-level info
for i in $(seq 1 100); do
    curl -sf "http://127.0.0.1:$port/healthz" >/dev/null 2>&1 && break
    sleep 0.05
done
mpost() { # N PREFIX: N POSTs, one at a time; prints the status codes
    local i
    for i in $(seq 1 "$1"); do
        curl -s --max-time 10 -o /dev/null -w '%{http_code}\n' -d "$2-$i" \
            "http://127.0.0.1:$port/v1/queues/$mq/messages"
    done
}
mpost 20 before >"$tmp/codes"
asking0=$(stat "$mdst" commandstats cmdstat_asking)
rc "$mdst" CLUSTER SETSLOT "$mslot" IMPORTING "$(nid "$msrc")" | grep -q OK || fail "IMPORTING"
rc "$msrc" CLUSTER SETSLOT "$mslot" MIGRATING "$(nid "$mdst")" | grep -q OK || fail "MIGRATING"
for i in $(seq 1 20); do
    mapfile -t ks < <(rc "$msrc" CLUSTER GETKEYSINSLOT "$mslot" 1000 | grep .)
    [ "${#ks[@]}" -eq 0 ] && break
    rc "$msrc" MIGRATE 127.0.0.1 "$mdst" "" 0 5000 KEYS "${ks[@]}" >/dev/null || fail "MIGRATE"
done
[ "$(rc "$msrc" CLUSTER COUNTKEYSINSLOT "$mslot")" = 0 ] || fail "keys left on the source"
mpost 30 during >>"$tmp/codes" # the keys are on the target, the slot still the source's: ASK
asking1=$(stat "$mdst" commandstats cmdstat_asking)
[ "$asking1" -gt "$asking0" ] || fail "no ASKING on the target: the async clients did not follow ASK"
for p in "$mdst" "$msrc" $(printf '%s\n' "${queues[@]}" | while read -r x; do owner "$x"; done | sort -u); do
    rc "$p" CLUSTER SETSLOT "$mslot" NODE "$(nid "$mdst")" >/dev/null
done
mpost 30 after >>"$tmp/codes" # the source answers MOVED now: both follow it to the target
[ "$(grep -cx 202 "$tmp/codes")" = 80 ] ||
    fail "POSTs across the migration: $(sort "$tmp/codes" | uniq -c | tr '\n' ' ')"
wait_lines "$tmp/mig" 81 15 # and the one the first gateway left in this queue
mig() { awk '$2 ~ /^(before|during|after)-/ { print $2 }' "$tmp/mig"; }
[ "$(mig | sort -u | wc -l)" = 80 ] && [ "$(mig | wc -l)" = 80 ] ||
    fail "the worker processed $(mig | sort -u | wc -l) of 80 ($(mig | wc -l) records) across the migration"
[ "$(rc "$mdst" XLEN "sluice:{$mq}:stream")" = 0 ] || fail "$mq not drained on its new owner"
grep -q 'event=cluster_ask' "$tmp/gw.log" || fail "the gateway never used an ask link"
grep -q 'event=cluster_moved' "$tmp/gw.log" || fail "the gateway never followed the MOVED"
kill -TERM "$mw"
wait "$mw" || fail "worker across the migration: $(tail -n 3 "$tmp/mig.log")"
! grep -q 'level=error' "$tmp/mig.log" "$tmp/gw.log" || fail "errors: $(grep -h level=error "$tmp/mig.log" "$tmp/gw.log")"

# ---- failover: kill -9 the primary of a queue under a producer and a worker ----
vq=${queues[1]}
victim=$(owner "$vq")
vpid=""
for d in "$cdir"/node*; do
    [ "$(cat "$d/port")" = "$victim" ] && vpid=$(cat "$d/pid")
done
[ -n "$vpid" ] || fail "no pid for the primary on $victim"
"$bin/sluice-worker" --redis "$curl" --queue "$vq" --handler noop --record "$tmp/fo" \
    --log-level info 2>"$tmp/fo.log" >/dev/null &
wpid=$!
pids+=("$wpid")
"$bin/sluice-faultload" --redis "$curl" --queue "$vq" --count 2000 --rate 400 --batch 10 \
    --prefix fo --wait-replicas 1 --timeout 2000 --deadline 90000 --out "$tmp/fo.adm" \
    --unknown "$tmp/fo.unk" >"$tmp/fo.out" 2>&1 &
ppid=$!
pids+=("$ppid")
sleep 1.5
kill -KILL "$vpid"
# the killed node comes back (its nodes.conf kept) as the replica of the promoted one: until it
# has synced, WAIT 1 has no replica to count, and those admissions are reported unknown
promoted=""
for i in $(seq 1 300); do # a failover takes a few seconds; a retried election, more (30 s at most)
    promoted=$(owner "$vq")
    [ -n "$promoted" ] && [ "$promoted" != "$victim" ] && break
    promoted=""
    sleep 0.1
done
[ -n "$promoted" ] || fail "no replica promoted for $vq within 30 s: $(rc "$(alive)" CLUSTER NODES)"
"$src/scripts/test-redis" cluster-node-restart "$cdir" "$victim" ||
    fail "the killed node did not come back"
wait "$ppid" || fail "producer: $(cat "$tmp/fo.out")"
for i in $(seq 1 300); do # the worker follows the promoted replica by itself
    python3 "$src/tests/faults/check.py" --admitted "$tmp/fo.adm" --processed "$tmp/fo" \
        >"$tmp/chk" 2>/dev/null && break
    sleep 0.1
done
python3 "$src/tests/faults/check.py" --admitted "$tmp/fo.adm" --processed "$tmp/fo" >"$tmp/chk" ||
    fail "after the failover: $(cat "$tmp/chk") $(tail -n 5 "$tmp/fo.log")"
new=$(owner "$vq")
[ -n "$new" ] && [ "$new" != "$victim" ] || fail "no promoted replica for $vq (victim $victim, owner \"$new\"): $(rc "$(alive)" CLUSTER NODES)"
grep -q "event=redis_ready.*node=127.0.0.1:$new" "$tmp/fo.log" ||
    fail "the worker never reached the promoted replica $new: $(tail -n 5 "$tmp/fo.log")"
echo "test_cluster_async: ok ($(cat "$tmp/chk"); producer: $(cat "$tmp/fo.out"))"
