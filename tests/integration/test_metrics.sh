#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# sluice-worker --metrics: the Prometheus endpoint. Counters and the handler histogram follow
# the work done; the queue depth / lag / pending gauges follow the queue (what an autoscaler
# reads); 404 / 405 / 431 for anything but GET /metrics; the connection cap (64) and the 5 s
# read timeout; bad addresses refused with exit 2; and the endpoint never keeps a stopping
# worker alive.
set -euo pipefail

bin=${SLUICE_BIN_DIR:?run through ctest}
url=$(cat "${SLUICE_TEST_REDIS_DIR:?}/url")
tmp=$(mktemp -d)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
    rm -rf "$tmp"
}
trap cleanup EXIT
q="metrics-$$"
rcli() { redis-cli -u "$url" "$@"; }
fail() { echo "FAIL: $*" >&2; exit 1; }
command -v curl >/dev/null || fail "curl is needed for this test"

# metric NAME: the value of the first sample of NAME (labels included in NAME when given)
metric() { grep -F "$1" "$tmp/m" | grep -v '^#' | head -1 | awk '{print $NF}'; }
scrape() { curl -s --max-time 5 "http://127.0.0.1:$port/metrics" >"$tmp/m"; }

# poll SECONDS CONDITION: scrapes every 0.2 s until CONDITION (a shell expression) holds
poll() {
    local n=$(($1 * 5))
    shift
    for _ in $(seq 1 "$n"); do
        scrape || true
        if eval "$@"; then return 0; fi
        sleep 0.2
    done
    return 1
}

# ---- bad addresses: exit 2 with the value named ----
for a in nonsense 256.1.1.1:9100 127.0.0.1:99999; do
    rc=0
    "$bin/sluice-worker" --redis "$url" --queue "$q" --metrics "$a" >"$tmp/out" 2>&1 || rc=$?
    [ "$rc" = 2 ] || fail "--metrics $a exited $rc, expected 2"
    grep -q -- "--metrics" "$tmp/out" || fail "--metrics $a: no message: $(cat "$tmp/out")"
done

# ---- a worker on a free port (port 0; the log names the one it got) ----
"$bin/sluice-enqueue" --redis "$url" --queue "$q" --capacity 100 $(seq -f 'm%g' 1 10) >/dev/null
# worker_start QUEUE WORKER-ARGS...: a worker with --metrics on a free port (port 0; its log, in
# $tmp/log, names the one it got); sets $wpid and $port
worker_start() {
    local queue=$1
    shift
    # emptied here, not only by the child's redirection: the loop below may read it first, and
    # find it missing or the previous worker's port in it
    : >"$tmp/log"
    "$bin/sluice-worker" --redis "$url" --queue "$queue" "$@" --metrics 127.0.0.1:0 \
        --log-level info 2>"$tmp/log" >/dev/null &
    wpid=$!
    pids+=("$wpid")
    port=""
    for _ in $(seq 1 50); do
        port=$(sed -n 's/.*event=metrics_listening.* port=\([0-9]*\).*/\1/p' "$tmp/log" | head -1)
        [ -n "$port" ] && return 0
        sleep 0.1
    done
    fail "no metrics_listening line: $(cat "$tmp/log")"
}
worker_start "$q" --concurrency 1 --handler sleep:400

# the port is taken now: a second endpoint on it is refused
rc=0
"$bin/sluice-worker" --redis "$url" --queue "$q" --metrics "127.0.0.1:$port" >"$tmp/out" 2>&1 ||
    rc=$?
[ "$rc" = 2 ] && grep -q "cannot listen on 127.0.0.1:$port" "$tmp/out" ||
    fail "a taken port: exit $rc: $(cat "$tmp/out")"

# while the worker is busy (one at a time, 400 ms each): depth, lag and pending are exposed
gauges='d=$(metric "sluice_queue_depth{queue=\"$q\""); l=$(metric "sluice_queue_lag{queue=\"$q\"");
        p=$(metric "sluice_queue_pending{queue=\"$q\""); [ -n "$d" ] && [ "$d" -ge 5 ] &&
        [ -n "$l" ] && [ "$l" -ge 4 ] && [ "$p" = 1 ]'
poll 4 "$gauges" || fail "depth/lag/pending gauges: $(grep sluice_queue "$tmp/m")"
curl -s -i --max-time 5 "http://127.0.0.1:$port/metrics" >"$tmp/h"
grep -qi '^content-type: text/plain; version=0.0.4' "$tmp/h" || fail "content type: $(head -5 "$tmp/h")"
grep -q "^sluice_worker_in_flight{queue=\"$q\",consumer=\"[^\"]*\"} 1" "$tmp/m" ||
    fail "in_flight is not 1: $(grep in_flight "$tmp/m")"
grep -q "^sluice_worker_concurrency_limit{queue=\"$q\",consumer=\"[^\"]*\"} 1$" "$tmp/m" ||
    fail "concurrency_limit is not 1: $(grep concurrency_limit "$tmp/m")"

# after the work: counters and histogram match, the gauges fall to 0
poll 10 '[ "$(metric sluice_worker_processed_total)" = 10 ]' ||
    fail "processed_total: $(grep processed_total "$tmp/m")"
poll 3 '[ "$(metric sluice_queue_depth)" = 0 ] && [ "$(metric sluice_queue_lag)" = 0 ]' ||
    fail "gauges did not fall to 0: $(grep sluice_queue "$tmp/m")"
[ "$(metric 'le="+Inf"')" = 10 ] || fail "histogram +Inf bucket: $(grep handler_seconds "$tmp/m")"
[ "$(metric sluice_worker_handler_seconds_count)" = 10 ] || fail "histogram count"
[ "$(metric 'le="0.25"')" = 0 ] || fail "400 ms handlers in the 0.25 s bucket"
[ "$(metric 'le="0.5"')" -ge 1 ] || fail "no 400 ms handler in the 0.5 s bucket"
sum=$(metric sluice_worker_handler_seconds_sum)
awk -v s="$sum" 'BEGIN { exit !(s >= 3.9 && s < 60) }' || fail "histogram sum $sum for 10 x 0.4 s"
for name in failed_total retried_total dead_total reclaimed_total; do
    [ "$(metric "sluice_worker_$name")" = 0 ] || fail "sluice_worker_$name is not 0"
done
grep -q '^# TYPE sluice_worker_handler_seconds histogram' "$tmp/m" || fail "histogram TYPE line"

# ---- HTTP edges: 404, 405, 431 ----
code() { curl -s -o /dev/null -w '%{http_code}' --max-time 5 "$@"; }
[ "$(code "http://127.0.0.1:$port/")" = 404 ] || fail "/ is not 404"
[ "$(code "http://127.0.0.1:$port/metricsx")" = 404 ] || fail "/metricsx is not 404"
[ "$(code -X POST "http://127.0.0.1:$port/metrics")" = 405 ] || fail "POST is not 405"
[ "$(code -H "X-Big: $(head -c 9000 /dev/zero | tr '\0' a)" "http://127.0.0.1:$port/metrics")" = 431 ] ||
    fail "a 9 KiB request is not 431"

# ---- at most 64 connections; an idle one is closed after 5 s ----
if command -v python3 >/dev/null; then
    python3 - "$port" <<'EOF' || fail "connection cap / read timeout"
import socket, sys, time
port = int(sys.argv[1])
idle = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(64)]
time.sleep(0.3)
extra = socket.create_connection(("127.0.0.1", port), timeout=3)
try:
    extra.sendall(b"GET /metrics HTTP/1.0\r\n\r\n")
    got = extra.recv(100)
except ConnectionResetError:
    got = b""  # closed on accept, before our request was read
if got:
    sys.exit("the 65th connection was served: %r" % got[:40])
t0 = time.time()
if idle[0].recv(10) != b"" or not 3.5 < time.time() - t0 + 0.3 < 8:
    sys.exit("an idle connection was not closed after ~5 s")
for s in idle:
    s.close()
EOF
    scrape && grep -q sluice_worker_processed_total "$tmp/m" || fail "not serving after the cap"
fi

# ---- SIGTERM: the endpoint does not keep the worker alive ----
kill -TERM "$wpid"
for _ in $(seq 1 30); do kill -0 "$wpid" 2>/dev/null || break; sleep 0.1; done
kill -0 "$wpid" 2>/dev/null && fail "worker with --metrics still running 3 s after SIGTERM"
wait "$wpid" || fail "worker exited $? after SIGTERM"
for k in stream meta stats dead; do rcli DEL "sluice:{$q}:$k" >/dev/null; done

# ---- a partitioned queue: one endpoint for all partitions, totals and a series per partition ----
pq="$q-p"
A() { "$bin/sluice-admin" --redis "$url" "$@"; }
A capacity "$pq" 300 >/dev/null
E10() { seq -f 'p%g' 1 10 | "$bin/sluice-enqueue" --redis "$url" --queue "$1" >/dev/null; }
E10 "$pq" # 10 in each partition: the first before it is partitioned (no routing then)
A partitions "$pq" 3 >/dev/null
E10 "$pq~1" # a partition named on its own is a plain queue
E10 "$pq~2"
worker_start "$pq" --concurrency 1 --handler sleep:800
# three workers (one per partition), one at a time each (for 8 s): 3 in flight, the depths add up
poll 5 '[ "$(metric "sluice_queue_pending{queue=\"$pq\"")" = 3 ]' ||
    fail "partitioned: pending: $(grep -v '^#' "$tmp/m" | grep -E 'queue_(depth|pending)')"
sum=0
for i in 0 1 2; do
    v=$(metric "sluice_queue_partition_depth{queue=\"$pq\",group=\"workers\",partition=\"$i\"}")
    [ -n "$v" ] && [ "$v" -gt 0 ] || fail "partition $i depth: $(grep partition_depth "$tmp/m")"
    sum=$((sum + v))
done
[ "$sum" = "$(metric "sluice_queue_depth{queue=\"$pq\"")" ] || fail "partition depths $sum != total"
poll 10 '[ "$(metric "sluice_worker_processed_total{queue=\"$pq\"")" -ge 6 ]' ||
    fail "partitioned: processed_total: $(grep processed_total "$tmp/m")"
A partitions "$pq" 4 >/dev/null # the added partition appears in the metrics within seconds
poll 5 'grep -q "partition=\"3\"" "$tmp/m"' || fail "partition 3 never in the metrics"
kill -TERM "$wpid"
for _ in $(seq 1 50); do kill -0 "$wpid" 2>/dev/null || break; sleep 0.1; done
kill -0 "$wpid" 2>/dev/null && fail "partitioned worker with --metrics still running 5 s after SIGTERM"
wait "$wpid" || fail "partitioned worker exited $? after SIGTERM"
for i in "" ~1 ~2 ~3; do A purge "$pq$i" --yes >/dev/null; done

# ---- a plain queue partitioned while its worker runs: the endpoint follows the partitions ----
gq="$q-g"
worker_start "$gq" --concurrency 1 --handler sleep:800
poll 5 '[ "$(metric "sluice_queue_depth{queue=\"$gq\"")" = 0 ]' || fail "plain: no depth"
! grep -q partition_depth "$tmp/m" || fail "a plain queue shows partition series"
A capacity "$gq" 300 >/dev/null
A partitions "$gq" 2 >/dev/null
E10 "$gq~1"
poll 8 '[ "$(metric "sluice_queue_partition_depth{queue=\"$gq\",group=\"workers\",partition=\"1\"}")" -gt 0 ] 2>/dev/null' ||
    fail "grown plain queue: no partition 1 series: $(grep -E 'queue_(depth|partition)' "$tmp/m")"
poll 8 '[ "$(metric "sluice_worker_processed_total{queue=\"$gq\"")" -ge 2 ]' ||
    fail "grown plain queue: processed_total does not count the new partition's worker"
kill -TERM "$wpid"
for _ in $(seq 1 50); do kill -0 "$wpid" 2>/dev/null || break; sleep 0.1; done
kill -0 "$wpid" 2>/dev/null && fail "grown plain queue's worker still running 5 s after SIGTERM"
wait "$wpid" || fail "grown plain queue's worker exited $? after SIGTERM"
for i in "" ~1; do A purge "$gq$i" --yes >/dev/null; done
echo "test_metrics: ok"
