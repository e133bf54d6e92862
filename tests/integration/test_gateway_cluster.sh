#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The gateway's admin actions and payload reads on a Redis Cluster (3 primaries, 3 replicas,
# started here and stopped by their PIDs), for queues whose slots sit on the three primaries and
# a partitioned queue whose partitions spread over them: pause and resume, capacity, clear, peek,
# inspect, the dead letters, replay and delete through POST /v1/admin/queues/{q}/... and GET
# /v1/queues/{q}/messages|dead, each checked with sluice-admin (or on the slot's owner). Each
# queue's calls go to the owner of its slot (or its partition's), not to one node for all.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/cluster_lib.sh"
cluster_start
queue_per_primary "gc$$"
queues=("${queue_of[@]}")
A() { "$bin/sluice-admin" --redis "$curl" "$@"; }
E() { "$bin/sluice-enqueue" --redis "$curl" --capacity 1000 "$@"; }
# a partitioned queue: 4 partitions, on at least two primaries
pq="gcp$$"
A partitions "$pq" 4 >/dev/null
declare -A on_primary
for i in "" ~1 ~2 ~3; do on_primary[$(owner "$pq$i")]=1; done
[ "${#on_primary[@]}" -ge 2 ] || fail "4 partitions on ${#on_primary[@]} primary"

secret=cluster-token-0123456789
printf '%s' "$secret" >"$tmp/token"
chmod 600 "$tmp/token"
auth="Authorization: Bearer $secret"
args=()
for q in "${queues[@]}"; do
    seq 1 3 | sed "s/^/$q-/" | E --queue "$q" >/dev/null
    args+=(--queue "$q")
done
gateway_start --redis "$curl" "${args[@]}" --queue "$pq" --admin-token-file "$tmp/token"
gw=${pids[-1]}

# code METHOD PATH [curl args...]: the status code (body in $tmp/b)
code() {
    local m=$1 p=$2
    shift 2
    curl -s -X "$m" --max-time 10 -o "$tmp/b" -w '%{http_code}' "$@" \
        "http://127.0.0.1:$port$p" || true
}
# expect CODE METHOD PATH [curl args...]: a 503 (a connection still coming up) is asked again,
# 10 s at most
expect() {
    local want=$1 got i
    shift
    for i in $(seq 1 50); do
        got=$(code "$@")
        [ "$got" = 503 ] || break
        sleep 0.2
    done
    [ "$got" = "$want" ] || fail "$1 $2: got $got, want $want: $(cat "$tmp/b" 2>/dev/null)"
}
body_has() { grep -qF -- "$1" "$tmp/b" || fail "body lacks $1: $(head -c 600 "$tmp/b")"; }
stats_has() { # QUEUE TEXT: sluice-admin stats --json of QUEUE holds TEXT
    A stats "$1" --json >"$tmp/s" || fail "stats $1"
    grep -qF -- "$2" "$tmp/s" || fail "stats $1 lacks $2: $(cat "$tmp/s")"
}

for q in "${queues[@]}"; do
    expect 200 POST "/v1/admin/queues/$q/pause" -H "$auth"
    body_has "{\"queue\":\"$q\",\"paused\":true,\"changed\":true,\"partitions\":1}"
    stats_has "$q" '"paused":true'
    expect 200 POST "/v1/admin/queues/$q/resume" -H "$auth"
    stats_has "$q" '"paused":false'
    expect 200 POST "/v1/admin/queues/$q/capacity" -H "$auth" -d '{"capacity":50}'
    stats_has "$q" '"capacity":50,'
    # peek and inspect: the three waiting entries, decoded
    expect 200 GET "/v1/queues/$q/messages?count=5" -H "$auth"
    body_has "{\"queue\":\"$q\",\"entries\":[{\"id\":\""
    body_has "\"payload\":\"$q-3\""
    id=$(grep -oE '"id":"[0-9]+-[0-9]+"' "$tmp/b" | head -n 1 | cut -d'"' -f4)
    expect 200 GET "/v1/queues/$q/messages/$id" -H "$auth"
    body_has "\"payload\":\"$q-1\""
    # a dead letter: read, replayed, read again and deleted
    did=$(rc "$(owner "$q")" XADD "sluice:{$q}:dead" '*' id 1-1 reason test deliveries 1)
    expect 200 GET "/v1/queues/$q/dead?count=5" -H "$auth"
    body_has "{\"queue\":\"$q\",\"dead_letters\":[{\"dead_id\":\"$did\","
    expect 200 POST "/v1/admin/queues/$q/dead/replay" -H "$auth" -d '{"ids":["1-0"]}'
    body_has '"not_found":1,'
    expect 200 POST "/v1/admin/queues/$q/dead/delete" -H "$auth" -d "{\"ids\":[\"$did\"]}"
    body_has '{"deleted":1,"not_found":0}'
    [ "$(rc "$(owner "$q")" XLEN "sluice:{$q}:dead")" = 0 ] || fail "$q: dead letter not deleted"
    # clear: the three waiting entries go, the capacity stays
    expect 200 POST "/v1/admin/queues/$q/clear" -H "$auth" -d '{"confirm":true}'
    body_has "{\"queue\":\"$q\",\"cleared\":3,\"partitions\":1}"
    stats_has "$q" '"depth":0,'
    stats_has "$q" '"capacity":50,'
done

# the partitioned queue: every partition, on its own primary, paused, cleared and resumed
for i in "" ~1 ~2 ~3; do
    rc "$(owner "$pq$i")" XADD "sluice:{$pq$i}:stream" '*' m x >/dev/null
done
expect 200 POST "/v1/admin/queues/$pq/pause" -H "$auth"
body_has "{\"queue\":\"$pq\",\"paused\":true,\"changed\":true,\"partitions\":4}"
for i in "" ~1 ~2 ~3; do
    [ "$(rc "$(owner "$pq$i")" HGET "sluice:{$pq$i}:meta" paused)" = 1 ] || fail "$pq$i not paused"
done
expect 200 POST "/v1/admin/queues/$pq/clear" -H "$auth" -d '{"confirm":true}'
body_has "{\"queue\":\"$pq\",\"cleared\":4,\"partitions\":4}"
expect 200 POST "/v1/admin/queues/$pq/resume" -H "$auth"
body_has '"paused":false,"changed":true,"partitions":4}'
for i in "" ~1 ~2 ~3; do
    [ "$(rc "$(owner "$pq$i")" XLEN "sluice:{$pq$i}:stream")" = 0 ] || fail "$pq$i not cleared"
    [ "$(rc "$(owner "$pq$i")" HEXISTS "sluice:{$pq$i}:meta" paused)" = 0 ] ||
        fail "$pq$i still paused"
done
# no call was sent to a node that does not own its slot
! grep -q 'level=warn' "$tmp/gw.log" || fail "gateway warnings: $(grep level=warn "$tmp/gw.log")"
# a graceful stop closes every connection of the set (the sanitizer build checks the memory)
kill -TERM "$gw"
wait "$gw" || fail "gateway exit $?: $(tail -n 5 "$tmp/gw.log")"
echo "OK"
