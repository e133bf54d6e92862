#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# sluice-gateway as a web client meets it, against the fixture's redis-server: every status
# code (202, 429 + Retry-After, 503 + Retry-After with Redis unavailable, 400, 404, 405, 408 for
# slow headers and bodies, 413, 431 for header floods, 503 over the connection cap), keep-alive
# with many requests on one connection, pipelining, the envelope headers, Idempotency-Key,
# GET /v1/queues/Q, /metrics, /healthz, a bad client not holding up the others (B15),
# Retry-After growing with the backlog against the measured drain rate, usage errors (exit 2)
# and a graceful SIGTERM (exit 0).
set -euo pipefail

bin=${SLUICE_BIN_DIR:?run through ctest}
url=$(cat "${SLUICE_TEST_REDIS_DIR:?}/url")
tmp=$(mktemp -d)
pids=()
q="gw-$$"       # the main queue, capacity 3
rq="gw-ra-$$"   # the Retry-After queue
big="gw-big-$$" # capacity 1,000,000
cleanup() {
    for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
    for x in "$q" "$rq" "$big"; do
        redis-cli -u "$url" DEL "sluice:{$x}:stream" "sluice:{$x}:meta" "sluice:{$x}:stats" \
            "sluice:{$x}:idem:key-$$" >/dev/null 2>&1 || true
    done
    rm -rf "$tmp"
}
trap cleanup EXIT
rcli() { redis-cli -u "$url" "$@"; }
fail() { echo "FAIL: $*" >&2; exit 1; }

# start NAME ARGS...: starts a gateway on a free port; sets $port (waits 5 s at most)
start() {
    local name=$1 i
    shift
    "$bin/sluice-gateway" --listen 127.0.0.1:0 "$@" 2>"$tmp/$name.log" &
    pids+=($!)
    eval "${name}_pid=$!"
    for i in $(seq 1 100); do
        port=$(grep -oE 'event=listening addr=127\.0\.0\.1:[0-9]+' "$tmp/$name.log" |
            cut -d: -f2) || true
        [ -n "$port" ] && return 0
        sleep 0.05
    done
    fail "gateway $name did not start: $(cat "$tmp/$name.log")"
}

# code METHOD URL [curl args...]: prints the status code (headers to $tmp/h, body to $tmp/b)
code() {
    local m=$1 u=$2
    shift 2
    curl -s -X "$m" --max-time 10 -D "$tmp/h" -o "$tmp/b" -w '%{http_code}' "$@" "$u"
}
expect_code() {
    local want=$1 got
    shift
    got=$(code "$@") || true
    [ "$got" = "$want" ] || fail "$1 $2: got $got, want $want: $(cat "$tmp/b" 2>/dev/null)"
}
header() { grep -i "^$1:" "$tmp/h" | head -1 | cut -d' ' -f2- | tr -d '\r'; }
json_num() { grep -oE "\"$1\":[0-9.]+" "$tmp/b" | head -1 | cut -d: -f2; }

# raw PORT BYTES: sends BYTES (printf format) on a fresh connection, prints what comes back
# until the server closes (5 s at most)
raw() {
    timeout 5 bash -c 'exec 3<>/dev/tcp/127.0.0.1/$1; printf "$2" >&3; cat <&3' _ "$1" "$2" || true
}

# ---- usage errors: exit 2, naming the bad value ----
expect_exit() {
    local want=$1 pattern=$2 rc=0
    shift 2
    "$bin/sluice-gateway" "$@" >"$tmp/out" 2>&1 || rc=$?
    [ "$rc" = "$want" ] || fail "sluice-gateway $* exited $rc, want $want: $(cat "$tmp/out")"
    grep -qE -- "$pattern" "$tmp/out" || fail "sluice-gateway $*: no /$pattern/ in $(cat "$tmp/out")"
}
expect_exit 0 "usage: sluice-gateway" --help
expect_exit 2 '"example.invalid" is not an IP address' --listen example.invalid:80 --queue a
expect_exit 2 "listen HOST:PORT is required" --queue a
expect_exit 2 "at least one --queue" --listen 127.0.0.1:0
expect_exit 2 '"a b".*position' --listen 127.0.0.1:0 --queue "a b"
expect_exit 2 "given twice" --listen 127.0.0.1:0 --queue a --queue a:5
expect_exit 2 "max-body" --listen 127.0.0.1:0 --queue a --max-body 99x
expect_exit 2 "scheme|redis" --listen 127.0.0.1:0 --queue a --redis http://x
expect_exit 2 "unrecognized option|unknown option" --listen 127.0.0.1:0 --queue a --bogus

# ---- the main gateway: short timeouts and a small body limit to provoke them quickly ----
start main --redis "$url" --queue "$q:3" --queue "$rq:1000000" --queue "$big:1000000" \
    --max-body 1k --header-timeout 700 --body-timeout 700 --log-level info
main_port=$port
base="http://127.0.0.1:$main_port"
ok=0
for i in $(seq 1 100); do
    [ "$(code GET "$base/healthz")" = 200 ] && ok=1 && break
    sleep 0.05
done
[ "$ok" = 1 ] || fail "/healthz never said 200: $(cat "$tmp/b")"
grep -q '"status":"ok"' "$tmp/b" || fail "healthz body: $(cat "$tmp/b")"

# 202 with id, depth, capacity; the envelope carries request-id and content-type
expect_code 202 POST "$base/v1/queues/$q/messages" --data-binary 'first' \
    -H 'X-Request-Id: abc-123' -H 'Content-Type: text/plain'
grep -qE '^\{"id":"[0-9]+-[0-9]+","depth":1,"capacity":3\}' "$tmp/b" || fail "202 body: $(cat "$tmp/b")"
[ "$(header X-Request-Id)" = abc-123 ] || fail "X-Request-Id not echoed"
id1=$(grep -oE '[0-9]+-[0-9]+' "$tmp/b")
entry=$(rcli --raw XRANGE "sluice:{$q}:stream" "$id1" "$id1" | tr -d '\0')
for want in first request-id abc-123 content-type text/plain; do
    grep -q -- "$want" <<<"$entry" || fail "envelope lacks $want"
done

# Idempotency-Key: the retry is not admitted twice
expect_code 202 POST "$base/v1/queues/$q/messages" -d second -H "Idempotency-Key: key-$$"
id2=$(grep -oE '[0-9]+-[0-9]+' "$tmp/b")
expect_code 202 POST "$base/v1/queues/$q/messages" -d second -H "Idempotency-Key: key-$$"
grep -q "\"id\":\"$id2\"" "$tmp/b" && grep -q '"duplicate":true' "$tmp/b" ||
    fail "duplicate: $(cat "$tmp/b")"
expect_code 400 POST "$base/v1/queues/$q/messages" -d x -H 'Idempotency-Key: has space'

# 202 up to the capacity, then 429 with Retry-After and a JSON body
expect_code 202 POST "$base/v1/queues/$q/messages" -d third
expect_code 429 POST "$base/v1/queues/$q/messages" -d fourth
ra=$(header Retry-After)
[ -n "$ra" ] && [ "$ra" -ge 1 ] || fail "429 without Retry-After"
grep -q '"error":"queue full","depth":3,"capacity":3' "$tmp/b" || fail "429 body: $(cat "$tmp/b")"
[ "$(rcli XLEN "sluice:{$q}:stream")" = 3 ] || fail "depth is not 3"

# GET /v1/queues/Q
expect_code 200 GET "$base/v1/queues/$q"
for f in '"depth":3' '"capacity":3' '"pending":0' '"consumers":0' '"admitted":3' \
    '"rejected":1' '"acked":0' '"drain_rate":' '"full":true'; do
    grep -q "$f" "$tmp/b" || fail "GET /v1/queues/$q lacks $f: $(cat "$tmp/b")"
done

# 404, 405
expect_code 404 POST "$base/v1/queues/nope-$$/messages" -d x
expect_code 404 GET "$base/v1/queues/nope-$$"
expect_code 404 GET "$base/nope"
expect_code 404 POST "$base/v1/queues/$q/other" -d x
expect_code 405 PUT "$base/v1/queues/$q/messages" -d x
[ "$(header Allow)" = "GET, HEAD, POST" ] || fail "405 without Allow: GET, HEAD, POST"
# reading the entries (peek) needs the admin token: without --admin-token-file, 403
expect_code 403 GET "$base/v1/queues/$q/messages"
expect_code 405 DELETE "$base/v1/queues/$q"
expect_code 405 POST "$base/metrics" -d x
expect_code 200 HEAD "$base/healthz" -I

# 413 over --max-body (1k); exactly at the limit is fine
head -c 4096 /dev/zero | tr '\0' a >"$tmp/4k"
head -c 1024 /dev/zero | tr '\0' a >"$tmp/1k"
expect_code 413 POST "$base/v1/queues/$big/messages" --data-binary @"$tmp/4k"
[ "$(header Connection)" = close ] || fail "413 does not close"
expect_code 413 POST "$base/v1/queues/$big/messages" --data-binary @"$tmp/4k" -H 'Expect:' \
    -H 'Transfer-Encoding: chunked'
expect_code 202 POST "$base/v1/queues/$big/messages" --data-binary @"$tmp/1k"
expect_code 202 POST "$base/v1/queues/$big/messages" --data-binary ''

# 431: too many headers, one header too large
flood=()
for i in $(seq 1 100); do flood+=(-H "X-Flood-$i: v"); done
expect_code 431 GET "$base/healthz" "${flood[@]}"
expect_code 431 GET "$base/healthz" -H "X-Big: $(head -c 9000 /dev/zero | tr '\0' b)"

# 400: malformed request line, bad header syntax
out=$(raw "$main_port" 'BLAH / HTTP/1.1\r\nHost: x\r\n\r\n')
grep -q '^HTTP/1.1 400' <<<"$out" || fail "malformed request: $out"
out=$(raw "$main_port" 'GET /healthz HTTP/1.1\r\nBad Header\r\n\r\n')
grep -q '^HTTP/1.1 400' <<<"$out" || fail "bad header: $out"

# keep-alive: 30 requests, one connection
urls=()
for i in $(seq 1 30); do urls+=(-o /dev/null "$base/v1/queues/$big/messages"); done
n=$(curl -s --max-time 10 -w '%{num_connects}\n' -d k "${urls[@]}" | awk '{ s += $1 } END { print s }')
[ "$n" = 1 ] || fail "30 keep-alive requests used $n connections"
# pipelining: 5 requests written at once, 5 answers in order on the same connection
req="POST /v1/queues/$big/messages HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi"
out=$(raw "$main_port" "$req$req$req$req${req}GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
[ "$(grep -c '^HTTP/1.1 202' <<<"$out")" = 5 ] || fail "pipelined: $out"
[ "$(grep -c '^HTTP/1.1 200' <<<"$out")" = 1 ] || fail "pipelined healthz: $out"

# 408: slow headers, slow body; meanwhile others are served at once (B15)
raw "$main_port" "POST /v1/queues/$big/messages HTTP/1.1\r\nHost: x\r\n" >"$tmp/slow1" &
slow1=$!
raw "$main_port" "POST /v1/queues/$big/messages HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nonly-some" >"$tmp/slow2" &
slow2=$!
sleep 0.2
t0=$(date +%s%N)
expect_code 202 POST "$base/v1/queues/$big/messages" -d fast
ms=$((($(date +%s%N) - t0) / 1000000))
[ "$ms" -lt 500 ] || fail "a request waited ${ms} ms behind slow clients"
wait "$slow1" "$slow2"
grep -q '^HTTP/1.1 408' "$tmp/slow1" || fail "slow headers: $(cat "$tmp/slow1")"
grep -q '^HTTP/1.1 408' "$tmp/slow2" || fail "slow body: $(cat "$tmp/slow2")"

# ---- Retry-After grows with the backlog against the measured drain rate ----
rb="$base/v1/queues/$rq/messages"
urls=()
for i in $(seq 1 200); do urls+=(-o /dev/null "$rb"); done
curl -s --max-time 20 -d x "${urls[@]}"
[ "$(rcli XLEN "sluice:{$rq}:stream")" = 200 ] || fail "could not fill $rq"
rcli XGROUP CREATE "sluice:{$rq}:stream" workers 0 >/dev/null
mapfile -t ids < <(rcli --raw XREADGROUP GROUP workers c1 COUNT 200 STREAMS "sluice:{$rq}:stream" '>' |
    grep -aE '^[0-9]+-[0-9]+$')
[ "${#ids[@]}" = 200 ] || fail "read ${#ids[@]} of 200 entries"
# drain 50 entries at ~20/s; the gateway samples the acked counter every second
for i in $(seq 0 9); do
    rcli FCALL sluice_ack 2 "sluice:{$rq}:stream" "sluice:{$rq}:stats" workers \
        "${ids[@]:$((i * 5)):5}" >/dev/null
    sleep 0.25
done
sleep 1.1
expect_code 200 GET "$base/v1/queues/$rq"
rate=$(json_num drain_rate)
awk -v r="$rate" 'BEGIN { exit !(r > 1 && r < 200) }' || fail "drain rate $rate: $(cat "$tmp/b")"
rcli HSET "sluice:{$rq}:meta" capacity 150 >/dev/null # depth 150: one slot short
expect_code 429 POST "$rb" -d x
small=$(header Retry-After)
rcli HSET "sluice:{$rq}:meta" capacity 10 >/dev/null # 141 entries must drain first
expect_code 429 POST "$rb" -d x
large=$(header Retry-After)
[ "$small" -ge 1 ] && [ "$large" -gt "$small" ] && [ "$large" -ge 2 ] && [ "$large" -le 60 ] ||
    fail "Retry-After $small (1 to drain) vs $large (141 to drain) at $rate/s"
grep -q "\"retry_after\":$large" "$tmp/b" || fail "429 body disagrees: $(cat "$tmp/b")"

# /metrics in the Prometheus text format
expect_code 200 GET "$base/metrics"
grep -q '^text/plain; version=0.0.4' <<<"$(header Content-Type)" || fail "metrics content type"
for m in 'sluice_gateway_http_responses_total{code="202"}' \
    'sluice_gateway_http_responses_total{code="429"}' \
    'sluice_gateway_http_responses_total{code="408"} 2' \
    "sluice_gateway_admissions_total{queue=\"$q\",outcome=\"full\"} 1" \
    "sluice_gateway_redis_up{queue=\"$q\"} 1" \
    'sluice_gateway_admission_duration_seconds_bucket{le="+Inf"}' \
    '# TYPE sluice_gateway_admission_duration_seconds histogram'; do
    grep -qF -- "$m" "$tmp/b" || fail "metrics lack $m"
done

# ---- 503 + Retry-After while Redis is unavailable (fail-closed) ----
dead_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null || echo 1)
start dead --redis "redis://127.0.0.1:$dead_port" --queue "$q" --connect-timeout 300 \
    --timeout 500 --log-level info
dbase="http://127.0.0.1:$port"
expect_code 503 POST "$dbase/v1/queues/$q/messages" -d x
[ "$(header Retry-After)" -ge 1 ] || fail "503 without Retry-After"
grep -q '"error":"redis unavailable"' "$tmp/b" || fail "503 body: $(cat "$tmp/b")"
! grep -q "$dead_port" "$tmp/b" || fail "503 body leaks the Redis address"
expect_code 503 GET "$dbase/v1/queues/$q"
expect_code 503 GET "$dbase/healthz"
grep -q "\"$q\":\"down\"" "$tmp/b" || fail "healthz body: $(cat "$tmp/b")"

# ---- over --max-connections: 503 and closed, others unaffected once it frees up ----
start capped --redis "$url" --queue "$big" --max-connections 2 --log-level info
cport=$port
exec 5<>/dev/tcp/127.0.0.1/"$cport"
exec 6<>/dev/tcp/127.0.0.1/"$cport"
sleep 0.1
expect_code 503 GET "http://127.0.0.1:$cport/healthz"
exec 5>&- 6>&-
ok=0
for i in $(seq 1 50); do
    [ "$(code GET "http://127.0.0.1:$cport/healthz")" = 200 ] && ok=1 && break
    sleep 0.05
done
[ "$ok" = 1 ] || fail "capped gateway did not recover"

# ---- graceful stop: SIGTERM -> exit 0 ----
for name in main dead capped; do
    pid_var="${name}_pid"
    kill -TERM "${!pid_var}"
    rc=0
    timeout 10 tail --pid="${!pid_var}" -f /dev/null || fail "$name did not stop"
    wait "${!pid_var}" || rc=$?
    [ "$rc" = 0 ] || fail "$name exited $rc after SIGTERM: $(tail -3 "$tmp/$name.log")"
done
grep -q 'event=listening' "$tmp/main.log" || fail "no listening line"
echo "test_gateway: ok"
