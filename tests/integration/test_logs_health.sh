#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Logs and health endpoints as an operator meets them: while Redis is down each reconnect
# attempt is one line naming the connection and the queue (not two); the gateway's
# event=listening line is a normal log line (timestamp, level) that obeys --log-level; the
# worker's metrics port answers /healthz; /metrics of the worker and the gateway pass
# `promtool check metrics` when promtool is installed.
set -euo pipefail

bin=${SLUICE_BIN_DIR:?run through ctest}
src=${SLUICE_SOURCE_DIR:?run through ctest}
tmp=$(mktemp -d)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
    "$src/scripts/test-redis" stop "$tmp/redis" >/dev/null 2>&1 || true
    rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
url=$("$src/scripts/test-redis" start "$tmp/redis" --no-aof)
q="logs-$$"

# --- the worker: /healthz, /metrics, one line per reconnect attempt
# (a group name with a quote: label values must be escaped for the exposition format)
"$bin/sluice-worker" --redis "$url" --queue "$q" --group 'g"1' --handler sleep:0 \
    --metrics 127.0.0.1:0 --log-level info 2>"$tmp/worker.log" &
pids+=($!)
mport=""
for _ in $(seq 1 100); do
    mport=$(grep -oE 'event=metrics_listening addr=127\.0\.0\.1 port=[0-9]+' "$tmp/worker.log" |
        grep -oE '[0-9]+$') || true
    [ -n "$mport" ] && break
    sleep 0.05
done
[ -n "$mport" ] || fail "no metrics port: $(cat "$tmp/worker.log")"
for _ in $(seq 1 60); do # ready once the first figures came from Redis
    [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$mport/healthz")" = 200 ] && break
    sleep 0.1
done
code=$(curl -s -o "$tmp/h" -w '%{http_code}' "http://127.0.0.1:$mport/healthz")
[ "$code" = 200 ] || fail "worker /healthz: $code $(cat "$tmp/h")"
curl -sf "http://127.0.0.1:$mport/metrics" >"$tmp/worker.metrics" || fail "worker /metrics"
grep -q 'group="g\\"1"' "$tmp/worker.metrics" ||
    fail "group label not escaped: $(grep -m1 group= "$tmp/worker.metrics")"

"$src/scripts/test-redis" stop "$tmp/redis" >/dev/null
sleep 3
"$src/scripts/test-redis" restart "$tmp/redis" >/dev/null
for _ in $(seq 1 100); do
    grep -q 'event=redis_up conn=read' <(sed -n '/event=redis_down/,$p' "$tmp/worker.log") && break
    sleep 0.05
done
grep 'event=redis_down' "$tmp/worker.log" >"$tmp/down" || fail "no redis_down line"
grep -q "conn=read queue=$q" "$tmp/down" && grep -q "conn=cmd queue=$q" "$tmp/down" ||
    fail "redis_down lines do not name the connection and queue: $(head -3 "$tmp/down")"
dups=$(grep -oE 'conn=[a-z]+ queue=[^ ]+ status=[A-Z]+ attempt=[0-9]+' "$tmp/down" |
    sed 's/ status=[A-Z]*//' | sort | uniq -d | head -3)
[ -z "$dups" ] || fail "more than one line for one reconnect attempt: $dups"
lines=$(wc -l <"$tmp/down")
[ "$lines" -le 40 ] || fail "$lines redis_down lines in about 3 s"

# --- the gateway: the listening line is a log line and obeys --log-level
"$bin/sluice-gateway" --listen 127.0.0.1:0 --redis "$url" --queue "$q" --log-level error \
    2>"$tmp/gw-quiet.log" &
quiet=$!
pids+=("$quiet")
sleep 0.5
kill -TERM "$quiet"
wait "$quiet" || true
if grep -q "event=listening" "$tmp/gw-quiet.log"; then
    fail "--log-level error still printed: $(cat "$tmp/gw-quiet.log")"
fi
"$bin/sluice-gateway" --listen 127.0.0.1:0 --redis "$url" --queue "$q" 2>"$tmp/gw.log" &
pids+=($!)
gport=""
for _ in $(seq 1 100); do
    gport=$(grep -oE 'event=listening addr=127\.0\.0\.1:[0-9]+' "$tmp/gw.log" | cut -d: -f2) || true
    [ -n "$gport" ] && break
    sleep 0.05
done
[ -n "$gport" ] || fail "gateway did not log event=listening: $(cat "$tmp/gw.log")"
grep -qE '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]+Z level=info prog=sluice-gateway event=listening' \
    "$tmp/gw.log" || fail "listening line lacks timestamp and level: $(cat "$tmp/gw.log")"
curl -s -o /dev/null -X POST --data x "http://127.0.0.1:$gport/v1/queues/$q/messages"
curl -s -o /dev/null "http://127.0.0.1:$gport/nowhere" # a 404: not logged at info
sleep 0.2
if grep -q "status=404" "$tmp/gw.log"; then
    fail "a 4xx was logged at info: $(grep status=404 "$tmp/gw.log")"
fi
curl -sf "http://127.0.0.1:$gport/metrics" >"$tmp/gw.metrics" || fail "gateway /metrics"

if command -v promtool >/dev/null 2>&1; then
    for f in worker gw; do
        promtool check metrics <"$tmp/$f.metrics" >"$tmp/$f.prom" 2>&1 ||
            fail "promtool check metrics on the $f: $(cat "$tmp/$f.prom")"
    done
    prom="promtool check metrics passed on both"
else
    prom="promtool not installed: metrics syntax not checked (apt-get install prometheus)"
fi
echo "ok: $lines redis_down lines, one per attempt; listening line obeys --log-level; /healthz 200; $prom"
