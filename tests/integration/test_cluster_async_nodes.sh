#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# How the async clients (sluice-gateway, sluice-worker) live through the loss of cluster nodes,
# on a Redis Cluster of 3 primaries and 3 replicas started here and stopped by their PIDs:
#  1. a queue's primary is killed with -9 under the gateway: while the replica is not yet
#     promoted the nodes that answer name the dead one (MOVED, then CLUSTERDOWN); the gateway
#     keeps looking at a short interval (no reconnect delay of 1 s or more in its log) and
#     admits again soon after the promotion, not after a long backoff;
#  2. a worker and a gateway given one seed: the seed dies (its replica takes over), then the
#     queue's own primary dies: both find the promoted replica through the nodes they learnt,
#     and the message admitted on it is processed;
#  3. the cluster goes down (every node but the queue's primary killed): an idle worker whose
#     reads are answered CLUSTERDOWN waits between reads and logs the repeats once, instead of
#     reading again at once (counted on the node: XREADGROUP calls rejected in 3 s).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/cluster_lib.sh"
cluster_start
promoted() { # PORT: waits (30 s at most) until the node is a primary and the cluster is ok
    local i
    for i in $(seq 1 600); do
        [ "$(rc "$1" ROLE 2>/dev/null | head -n 1)" = master ] &&
            rc "$1" CLUSTER INFO 2>/dev/null | grep -q cluster_state:ok && return 0
        sleep 0.05
    done
    fail "$1 was not promoted within 30 s"
}
healthy() { # waits until the gateway on $port answers
    local i
    for i in $(seq 1 100); do
        curl -sf "http://127.0.0.1:$port/healthz" >/dev/null 2>&1 && return 0
        sleep 0.05
    done
}
post() { # QUEUE BODY -> the status code of one POST through the gateway on $port
    curl -s --max-time 2 -o /dev/null -w '%{http_code}' -d "$2" \
        "http://127.0.0.1:$port/v1/queues/$1/messages" || true
}
queue_per_primary "cn$$"
primaries=("${!queue_of[@]}")

# ---- 1. a failover under the gateway: short looks while it is under way ----
x1=${primaries[0]}
q1=${queue_of[$x1]}
r1=$(replica_of "$x1")
[ -n "$r1" ] || fail "no replica of $x1"
gateway_start --redis "$curl" --queue "$q1"
gw1=$!
healthy
[ "$(post "$q1" a)" = 202 ] || fail "POST to $q1 before the failover"
(for i in $(seq 1 1500); do # 20 ms apart, until told to stop (30 s at most)
    [ -e "$tmp/stop" ] && break
    echo "$(date +%s%3N) $(post "$q1" "p$i")"
    sleep 0.02
done) >"$tmp/posts" &
poster=$!
pids+=("$poster")
sleep 0.5
kill -KILL "$(pid_of "$x1")"
promoted "$r1"
promoted_ms=$(date +%s%3N)
for i in $(seq 1 300); do
    awk -v t="$promoted_ms" '$1 >= t && $2 == 202 { f = 1 } END { exit !f }' "$tmp/posts" && break
    sleep 0.1
done
touch "$tmp/stop"
wait "$poster" || true
grep -q 'event=redis_down' "$tmp/gw.log" || fail "the gateway never saw its node go: $(cat "$tmp/gw.log")"
slow=$(grep 'event=redis_down' "$tmp/gw.log" | grep -E 'retry_in_ms=[0-9]{4,}' || true)
[ -z "$slow" ] || fail "the gateway backed off for 1 s or more while nodes answered: $slow"
first_ok=$(awk -v t="$promoted_ms" '$1 >= t && $2 == 202 { print $1; exit }' "$tmp/posts")
[ -n "$first_ok" ] || fail "the gateway admitted nothing within 30 s of the promotion"
[ $((first_ok - promoted_ms)) -le 3000 ] ||
    fail "the gateway admitted again $((first_ok - promoted_ms)) ms after the promotion"
kill -TERM "$gw1" 2>/dev/null || true

# ---- 2. one seed: it dies, then the queue's primary: found again through the nodes learnt ----
b=""
s=""
for p in "${primaries[@]:1}"; do
    if [ -z "$b" ]; then b=$p; else s=$p; fi
done
q2=${queue_of[$b]}
rb=$(replica_of "$b")
rs=$(replica_of "$s")
[ -n "$rb" ] && [ -n "$rs" ] || fail "no replica of $b or $s"
one="redis+cluster://127.0.0.1:$s"
"$bin/sluice-worker" --redis "$one" --queue "$q2" --handler noop --record "$tmp/w2" \
    2>"$tmp/w2.log" >/dev/null &
w2=$!
pids+=("$w2")
gateway_start --redis "$one" --queue "$q2"
gw2=$!
healthy
[ "$(post "$q2" before)" = 202 ] || fail "POST to $q2 through one seed"
wait_lines "$tmp/w2" 1 10
kill -KILL "$(pid_of "$s")"
promoted "$rs"
kill -KILL "$(pid_of "$b")"
promoted "$rb"
"$bin/sluice-enqueue" --redis "redis+cluster://127.0.0.1:$rb" --queue "$q2" after >/dev/null ||
    fail "enqueue on the promoted $rb"
code=""
for i in $(seq 1 150); do # 30 s at most
    code=$(post "$q2" "gw-after")
    [ "$code" = 202 ] && break
    sleep 0.2
done
[ "$code" = 202 ] || fail "the gateway given one seed never came back: $code $(tail -n 2 "$tmp/gw.log")"
wait_lines "$tmp/w2" 3 30
[ "$(awk '{ print $2 }' "$tmp/w2" | sort -u | tr '\n' ' ')" = "after before gw-after " ] ||
    fail "the worker given one seed processed: $(awk '{ print $2 }' "$tmp/w2" | tr '\n' ' ') $(tail -n 2 "$tmp/w2.log")"
grep -q "event=redis_down.* node=127.0.0.1:$b " "$tmp/w2.log" ||
    fail "the worker's redis_down lines do not name the lost node $b: $(grep redis_down "$tmp/w2.log" | head -n 2)"
kill -TERM "$w2" "$gw2" 2>/dev/null || true

# ---- 3. the cluster down under an idle worker: it waits between reads ----
x3=$rb
q3=$q2
"$bin/sluice-worker" --redis "redis+cluster://127.0.0.1:$x3" --queue "$q3" --handler noop \
    --log-level info 2>"$tmp/w3.log" >/dev/null &
pids+=("$!")
for i in $(seq 1 100); do
    [ "$(grep -c 'event=redis_up' "$tmp/w3.log" || true)" -ge 2 ] && break
    sleep 0.05
done
sleep 0.5 # the first read is blocked on the stream
for p in "${ports[@]}"; do
    [ "$p" = "$x3" ] && continue
    pid=$(pid_of "$p")
    kill -KILL "$pid" 2>/dev/null || true
done
for i in $(seq 1 300); do
    rc "$x3" CLUSTER INFO | grep -q cluster_state:fail && break
    sleep 0.1
done
rc "$x3" CLUSTER INFO | grep -q cluster_state:fail || fail "the cluster did not go down"
rejected() {
    rc "$x3" INFO commandstats | tr -d '\r' |
        sed -n 's/^cmdstat_xreadgroup:.*rejected_calls=\([0-9]*\).*/\1/p' | grep . || echo 0
}
sleep 0.5
r0=$(rejected)
l0=$(grep -c 'event=read_failed' "$tmp/w3.log" || true)
sleep 3
r1=$(rejected)
l1=$(grep -c 'event=read_failed' "$tmp/w3.log" || true)
reads=$((r1 - r0))
lines=$((l1 - l0))
[ "$reads" -ge 1 ] && [ "$reads" -le 60 ] ||
    fail "an idle worker sent $reads XREADGROUP in 3 s of CLUSTERDOWN (expected 1..60)"
[ "$lines" -le 10 ] || fail "an idle worker logged $lines read_failed lines in 3 s of CLUSTERDOWN"
[ "$(grep -c 'event=read_failed' "$tmp/w3.log")" -ge 1 ] || fail "no read_failed line at all"
echo "test_cluster_async_nodes: ok (gateway back $((first_ok - promoted_ms)) ms after the promotion; $reads reads, $lines lines in 3 s of CLUSTERDOWN)"
