#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# sluice-gateway's operator console over HTTP: GET /v1/queues and /v1/queues/Q (figures equal to
# `sluice-admin stats --json`, rates and history; the consumers with their idle time, the latest
# dead letters' reasons, the fair lanes' top tenants with their weights), --discover listing a
# queue it does not serve, GET /v1/events (Server-Sent Events: at least two events, 503 beyond
# 64 streams, ended by a graceful stop), the page under /ui/ with its Content-Security-Policy and
# nosniff (only with --dashboard), and the admin actions: 403 without --admin-token-file, 401
# without or with a wrong bearer token (a cookie does not count), capacity set (200, written to
# the meta), a dead letter replayed by id, bad JSON (400), unknown queue (404), oversized body
# (413), pause (the figures say so; a running worker takes nothing) and resume (it drains), clear
# (only with {"confirm":true}; waiting entries only; a partitioned queue: every partition), dead
# delete by id, the payload reads (peek, inspect, dead letters: token, decoded and escaped
# fields, state, byte limit, bad queries; a list queue's entries by number, waiting or in a
# processing list), and a token file readable by others, or missing,
# refused at start (exit 2).
. "$(dirname "$0")/lib.sh"

q="dash-$$"
q2="dash2-$$"
q3="dash3-$$" # found by --discover
q4="dash4-$$" # fair, with lanes
q5="dash5-$$" # list backend
keys+=($(queue_keys "$q") $(queue_keys "$q2") $(queue_keys "$q3") $(queue_keys "$q4"))
keys+=($(queue_keys "$q5") "sluice:{$q5}:proc:w1")
keys+=("sluice:{$q4}:"{lanes,lwait,weights,ring,wake,lane:acme,lane:beta})
tok=$tmp/token
secret=dash-token-0123456789
auth="Authorization: Bearer $secret"

# code METHOD PATH [curl args...]: the status code (headers in $tmp/h, body in $tmp/b)
code() {
    local m=$1 p=$2
    shift 2
    curl -s -X "$m" --max-time 10 -D "$tmp/h" -o "$tmp/b" -w '%{http_code}' "$@" \
        "http://127.0.0.1:$port$p" || true
}
expect() {
    local want=$1 got
    shift
    got=$(code "$@")
    [ "$got" = "$want" ] || fail "$1 $2: got $got, want $want: $(cat "$tmp/b" 2>/dev/null)"
}
# poll PATH TEXT: GET PATH until its body holds TEXT (10 s at most; the caller then asserts)
poll() {
    for i in $(seq 1 50); do
        code GET "$1" >/dev/null
        grep -qF -- "$2" "$tmp/b" && return 0
        sleep 0.2
    done
}
body_has() { grep -qF -- "$1" "$tmp/b" || fail "body lacks $1: $(head -c 600 "$tmp/b")"; }
header_has() { grep -qiF -- "$1" "$tmp/h" || fail "headers lack $1: $(cat "$tmp/h")"; }

# the token file: readable by others, or missing, is refused at start
printf '%s\n' "$secret" >"$tok"
chmod 644 "$tok"
run 2 'admin-token-file.*readable by its owner only' \
    "$bin/sluice-gateway" --listen 127.0.0.1:0 --redis "$url" --queue "$q" --admin-token-file "$tok"
run 2 'admin-token-file.*No such file' \
    "$bin/sluice-gateway" --listen 127.0.0.1:0 --redis "$url" --queue "$q" \
    --admin-token-file "$tmp/missing"
chmod 600 "$tok"

# a list queue: l1 (the oldest) in flight in w1's processing list, l2 and l3 waiting
"$bin/sluice-enqueue" --redis "$url" --queue "$q5" --backend list l1 l2 l3 >/dev/null
rcli LMOVE "sluice:{$q5}:list" "sluice:{$q5}:proc:w1" RIGHT LEFT >/dev/null
rcli SADD "sluice:{$q5}:procs" "sluice:{$q5}:proc:w1" >/dev/null
gateway_start --queue "$q:5" --queue "$q2" --queue "$q5" --dashboard --admin-token-file "$tok"
gw=${pids[-1]}
for i in 1 2 3; do expect 202 POST "/v1/queues/$q/messages" --data-binary "m$i"; done

# /v1/queues: the sampler catches up within a few seconds
for i in $(seq 1 50); do
    code GET /v1/queues >/dev/null
    grep -qF "\"queue\":\"$q\",\"ready\":true,\"sampled\":true" "$tmp/b" &&
        grep -qF '"depth":3,' "$tmp/b" && break
    sleep 0.2
done
expect 200 GET /v1/queues
for f in "\"queue\":\"$q2\"" '"depth":3,"capacity":5,"waiting":3,"in_flight":0,' \
    '"admitted":3,' '"rates":{"admitted":' '"wait_s":' '"history":{"interval_ms":1000' \
    '"limits":[]' '"admin":true'; do
    body_has "$f"
done
grep -qE "\"queue\":\"$q2\",.*\"wait_s\":0\.000," "$tmp/b" || fail "an empty queue's wait is not 0"
"$bin/sluice-admin" --redis "$url" stats "$q" --json >"$tmp/stats"
# the same figures as sluice-admin (its capacity is null: the meta has none, the gateway's is 5)
grep -qF '"depth":3,' "$tmp/stats" && grep -qF '"waiting":3,"in_flight":0,' "$tmp/stats" ||
    fail "sluice-admin stats differs: $(cat "$tmp/stats")"
expect 200 GET "/v1/queues/$q"
body_has '"waiting":3,"in_flight":0,"rates":{'
body_has '"history":{'
body_has '"group":null,"consumer_list":[],"dead_latest":[],"lanes":{"holding":0,"top":[]}}'
# a dead letter with its reason, and a consumer with its idle time
"$bin/sluice-worker" --redis "$url" --queue "$q" --handler exec:false --max-deliveries 1 \
    --max-messages 1 --consumer "w-$$" >"$tmp/worker.log" 2>&1 || fail "worker: $(cat "$tmp/worker.log")"
rcli XGROUP CREATECONSUMER "sluice:{$q}:stream" workers "c-$$" >/dev/null
expect 200 GET "/v1/queues/$q"
body_has "\"group\":\"workers\",\"consumer_list\":[{\"name\":\"c-$$\",\"pending\":0,\"idle_ms\":"
body_has '"reason":"exec: exited with status 1",'
dead_id=$(grep -oE '"dead_id":"[0-9]+-[0-9]+"' "$tmp/b" | head -1 | cut -d'"' -f4)
body_has "\"consumer\":\"w-$$\",\"deliveries\":1}],\"lanes\":{\"holding\":0,\"top\":[]}}"
expect 404 GET /v1/queues/nope
expect 405 POST /v1/queues
expect 405 POST /v1/events

# the page and its parts
expect 200 GET /ui/
header_has "Content-Security-Policy: default-src 'self'; script-src 'self'"
header_has 'X-Content-Type-Options: nosniff'
header_has 'Content-Type: text/html'
body_has '<script src="app.js" defer></script>'
expect 200 GET /ui/app.js
header_has 'Content-Type: text/javascript'
body_has "new EventSource('/v1/events')"
expect 200 GET /ui/app.css
header_has 'Content-Type: text/css'
expect 404 GET /ui/other

# Server-Sent Events: one event at once, then one a second
curl -s -N --max-time 3 -o "$tmp/events" "http://127.0.0.1:$port/v1/events" || true
n=$(grep -c '^event: queues$' "$tmp/events" || true)
[ "$n" -ge 2 ] || fail "$n events in 3 s: $(head -c 400 "$tmp/events")"
grep -q "^data: {\"interval_ms\":1000,.*\"queue\":\"$q\"" "$tmp/events" || fail "event data"

# admin actions: the token, the body, the queue, the verbs not there yet
expect 401 POST "/v1/admin/queues/$q/capacity" -d '{"capacity":7}'
header_has 'WWW-Authenticate: Bearer'
expect 401 POST "/v1/admin/queues/$q/capacity" -H 'Authorization: Bearer wrong' -d '{"capacity":7}'
expect 401 POST "/v1/admin/queues/$q/capacity" -H "Authorization: Bearer ${secret}x" \
    -d '{"capacity":7}'
expect 401 POST "/v1/admin/queues/$q/capacity" -H "Cookie: token=$secret" -d '{"capacity":7}'
expect 200 POST "/v1/admin/queues/$q/capacity" -H "$auth" -d '{ "capacity" : 7 }'
[ "$(rcli HGET "sluice:{$q}:meta" capacity)" = 7 ] || fail "capacity not written"
for b in '{"capacity":-1}' '{"capacity":"7"}' '{"capacity":7' '{"cap":7}' 'x' ''; do
    expect 400 POST "/v1/admin/queues/$q/capacity" -H "$auth" -d "$b"
done
head -c 5000 /dev/zero | tr '\0' ' ' >"$tmp/big"
expect 413 POST "/v1/admin/queues/$q/capacity" -H "$auth" --data-binary "@$tmp/big"
expect 404 POST /v1/admin/queues/nope/capacity -H "$auth" -d '{"capacity":7}'
expect 404 POST "/v1/admin/queues/$q/unknown" -H "$auth"
expect 405 GET "/v1/admin/queues/$q/capacity" -H "$auth"
# a dead letter replayed by its id (as sluice-admin dead replay Q ID)
for b in '{"ids":[]}' '{"ids":["x"]}' '{"ids":["1-"]}' '{"ids":"1-0"}' '{"ids":["1-0"]'; do
    expect 400 POST "/v1/admin/queues/$q/dead/replay" -H "$auth" -d "$b"
done
expect 200 POST "/v1/admin/queues/$q/dead/replay" -H "$auth" -d "{\"ids\":[\"$dead_id\", \"1-0\"]}"
body_has '{"replayed":1,"not_fitted":0,"skipped_no_body":0,"not_found":1,'
[ "$(rcli XLEN "sluice:{$q}:dead")" = 0 ] || fail "the dead letter is still there"
# pause, resume, clear, dead delete: the token first (a cookie does not count)
for a in pause resume clear dead/delete; do
    expect 401 POST "/v1/admin/queues/$q/$a" -d '{"confirm":true}'
    expect 401 POST "/v1/admin/queues/$q/$a" -H "Cookie: token=$secret" -d '{"confirm":true}'
done
depth() { rcli XLEN "sluice:{$q}:stream"; }
[ "$(depth)" = 3 ] || fail "depth $(depth) before pause, want 3"
expect 200 POST "/v1/admin/queues/$q/pause" -H "$auth"
body_has "{\"queue\":\"$q\",\"paused\":true,\"changed\":true,\"partitions\":1}"
[ "$(rcli HGET "sluice:{$q}:meta" paused)" = 1 ] || fail "pause not written"
expect 200 POST "/v1/admin/queues/$q/pause" -H "$auth"
body_has '"paused":true,"changed":false,'
poll /v1/queues '"full":false,"paused":true,'
body_has '"full":false,"paused":true,'
expect 200 GET "/v1/queues/$q"
body_has '"paused":true,'
# a paused queue: a running worker takes nothing (3 s); resumed, it drains (within 20 s)
"$bin/sluice-worker" --redis "$url" --queue "$q" --handler exec:true --consumer "p-$$" \
    >"$tmp/pworker.log" 2>&1 &
pids+=("$!")
pw=$!
sleep 3
[ "$(depth)" = 3 ] || fail "a paused queue was read: depth $(depth): $(cat "$tmp/pworker.log")"
expect 200 POST "/v1/admin/queues/$q/resume" -H "$auth"
body_has "{\"queue\":\"$q\",\"paused\":false,\"changed\":true,\"partitions\":1}"
[ "$(rcli HEXISTS "sluice:{$q}:meta" paused)" = 0 ] || fail "resume left meta paused"
for i in $(seq 1 100); do
    [ "$(depth)" = 0 ] && break
    sleep 0.2
done
[ "$(depth)" = 0 ] || fail "not drained after resume: depth $(depth)"
kill -TERM "$pw"
wait "$pw" || true
# clear: only with {"confirm":true}; the waiting entries go, the one in flight stays
for i in 1 2 3; do expect 202 POST "/v1/queues/$q/messages" --data-binary "c$i"; done
rcli XREADGROUP GROUP workers "h-$$" COUNT 1 STREAMS "sluice:{$q}:stream" '>' >/dev/null
for b in '' '{}' '{"confirm":false}' '{"confirm":true' 'true'; do
    expect 400 POST "/v1/admin/queues/$q/clear" -H "$auth" -d "$b"
done
[ "$(depth)" = 3 ] || fail "a refused clear deleted: depth $(depth)"
expect 200 POST "/v1/admin/queues/$q/clear" -H "$auth" -d '{ "confirm" : true }'
body_has "{\"queue\":\"$q\",\"cleared\":2,\"partitions\":1}"
[ "$(depth)" = 1 ] || fail "clear left depth $(depth), want the 1 in flight"
# peek and inspect: the token first; decoded entries, escaped, with their state
expect 401 GET "/v1/queues/$q/messages"
expect 401 GET "/v1/queues/$q/messages/1-0" -H "Cookie: token=$secret"
expect 401 GET "/v1/queues/$q/dead"
expect 202 POST "/v1/queues/$q/messages" --data-binary $'say "hi"\n\x01' -H 'X-Request-Id: r-1' \
    -H 'Content-Type: text/plain'
expect 200 GET "/v1/queues/$q/messages?count=5" -H "$auth"
body_has "{\"queue\":\"$q\",\"entries\":[{\"id\":\""
body_has "\"state\":\"in_flight\",\"consumer\":\"h-$$\",\"idle_ms\":"
body_has '"state":"waiting","consumer":null,"idle_ms":null,"deliveries":null,"tenant":null,'
body_has '"headers":{"request-id":"r-1","content-type":"text/plain"},"payload":"say \"hi\"\n\u0001","payload_bytes":10,'
python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$tmp/b" || fail "peek: not JSON"
wid=$(grep -oE '"id":"[0-9]+-[0-9]+","lane":null,"admitted_ms":[0-9]+,"state":"waiting"' "$tmp/b" |
    cut -d'"' -f4)
expect 200 GET "/v1/queues/$q/messages/$wid?bytes=3" -H "$auth"
body_has "{\"queue\":\"$q\",\"entries\":[{\"id\":\"$wid\","
body_has '"payload":"say","payload_bytes":10,"payload_truncated":true}]}'
expect 404 GET "/v1/queues/$q/messages/1-1" -H "$auth"
for t in "messages?count=0" "messages?count=101" "messages?count=x" "messages?bytes=-1" \
    "messages?tenant=%zz" "messages/abc"; do
    expect 400 GET "/v1/queues/$q/$t" -H "$auth"
done
expect 405 DELETE "/v1/queues/$q/messages/$wid" -H "$auth"
# a list queue, as sluice-admin peek and inspect show it: an entry's id is its number; inspect
# finds it waiting in the list or in flight in a processing list
expect 200 GET "/v1/queues/$q5/messages" -H "$auth"
body_has "{\"queue\":\"$q5\",\"entries\":[{\"id\":\"2\",\"lane\":null,\"admitted_ms\":null,\"state\":\"waiting\","
body_has '"payload":"l2"'
body_has '"payload":"l3"'
expect 200 GET "/v1/queues/$q5/messages/3" -H "$auth"
body_has "{\"queue\":\"$q5\",\"entries\":[{\"id\":\"3\",\"lane\":null,\"admitted_ms\":null,\"state\":\"waiting\","
body_has '"payload":"l3"'
expect 200 GET "/v1/queues/$q5/messages/1?bytes=1" -H "$auth"
body_has '{"id":"1","lane":null,"admitted_ms":null,"state":"in_flight","consumer":"w1",'
body_has '"payload":"l","payload_bytes":2,"payload_truncated":true}]}'
expect 404 GET "/v1/queues/$q5/messages/9" -H "$auth"
expect 400 GET "/v1/queues/$q5/messages/1-0" -H "$auth"
body_has 'its entries are numbered'
expect 400 GET "/v1/queues/$q5/messages?tenant=A" -H "$auth"
body_has 'a list queue has no tenant lanes'
rcli XACK "sluice:{$q}:stream" workers "$(rcli XRANGE "sluice:{$q}:stream" - + | head -1)" >/dev/null
# dead delete by id: the named letter goes, an unknown id counts as not found
expect 202 POST "/v1/queues/$q/messages" --data-binary d1
"$bin/sluice-worker" --redis "$url" --queue "$q" --handler exec:false --max-deliveries 1 \
    --max-messages 1 --consumer "w-$$" >"$tmp/worker.log" 2>&1 || fail "worker: $(cat "$tmp/worker.log")"
did=$(rcli XRANGE "sluice:{$q}:dead" - + COUNT 1 | head -1)
[ -n "$did" ] || fail "no dead letter to delete"
expect 200 GET "/v1/queues/$q/dead?count=5&bytes=3" -H "$auth"
body_has "{\"queue\":\"$q\",\"dead_letters\":[{\"dead_id\":\"$did\",\"id\":\""
body_has '"reason":"exec: exited with status 1","tenant":null,"headers":{"request-id":"r-1","content-type":"text/plain"},'
body_has '"payload":"say","payload_bytes":10,"payload_truncated":true}]}'
expect 400 POST "/v1/admin/queues/$q/dead/delete" -H "$auth" -d '{"ids":["x"]}'
expect 200 POST "/v1/admin/queues/$q/dead/delete" -H "$auth" -d "{\"ids\":[\"$did\",\"1-0\"]}"
body_has '{"deleted":1,"not_found":1}'
[ "$(rcli XLEN "sluice:{$q}:dead")" = 0 ] || fail "the dead letter is still there"
# a partitioned queue: pause, clear and resume reach every partition (as sluice-admin does)
"$bin/sluice-admin" --redis "$url" partitions "$q2" 2 >/dev/null
keys+=($(queue_keys "$q2~1"))
rcli XADD "sluice:{$q2~1}:stream" '*' m x >/dev/null
expect 200 POST "/v1/admin/queues/$q2/pause" -H "$auth"
body_has "{\"queue\":\"$q2\",\"paused\":true,\"changed\":true,\"partitions\":2}"
for m in "sluice:{$q2}:meta" "sluice:{$q2~1}:meta"; do
    [ "$(rcli HGET "$m" paused)" = 1 ] || fail "$m not paused"
done
expect 200 POST "/v1/admin/queues/$q2/clear" -H "$auth" -d '{"confirm":true}'
body_has "{\"queue\":\"$q2\",\"cleared\":1,\"partitions\":2}"
[ "$(rcli XLEN "sluice:{$q2~1}:stream")" = 0 ] || fail "partition 1 not cleared"
expect 200 POST "/v1/admin/queues/$q2/resume" -H "$auth"
body_has '"paused":false,"changed":true,"partitions":2}'
[ "$(rcli HEXISTS "sluice:{$q2~1}:meta" paused)" = 0 ] || fail "partition 1 still paused"

# beyond 64 event streams: 503 (the 64 are raw connections that never read)
fds=()
for i in $(seq 1 64); do
    exec {fd}<>"/dev/tcp/127.0.0.1/$port"
    printf 'GET /v1/events HTTP/1.1\r\nHost: x\r\n\r\n' >&"$fd"
    fds+=("$fd")
done
for i in $(seq 1 50); do
    [ "$(code GET /v1/events --max-time 1)" = 503 ] && break
    sleep 0.1
done
expect 503 GET /v1/events --max-time 1
body_has 'too many event streams'
for fd in "${fds[@]}"; do exec {fd}>&-; done

# without a token file: actions 403; without --dashboard: no page
kill -TERM "$gw"
wait "$gw" || fail "gateway exit $?"
"$bin/sluice-admin" --redis "$url" capacity "$q3" 9 >/dev/null
"$bin/sluice-admin" --redis "$url" fair "$q4" on >/dev/null
"$bin/sluice-admin" --redis "$url" fair "$q4" --weight acme=3 >/dev/null
for t in acme acme beta; do
    "$bin/sluice-enqueue" --redis "$url" -q "$q4" --tenant "$t" x >/dev/null
done
gateway_start --queue "$q" --queue "$q4" --discover
expect 403 POST "/v1/admin/queues/$q/capacity" -H "$auth" -d '{"capacity":7}'
body_has 'admin-token-file'
expect 404 GET /ui/
# the fair lanes: the tenants holding the most, with their weights
expect 200 GET "/v1/queues/$q4"
body_has '"lanes":{"holding":2,"top":[{"tenant":"acme","depth":2,"weight":3},{"tenant":"beta","depth":1,"weight":1}]}}'
# --discover: the database's other queues (a SCAN round at the first tick), figures only
poll /v1/queues "\"queue\":\"$q3\""
expect 200 GET /v1/queues
body_has "{\"queue\":\"$q3\",\"backend\":\"stream\",\"depth\":0,\"capacity\":9,"
body_has '"counters":{"admitted":0,'
body_has '"dead":0,"paused":false,"counters":{'
grep -qF "\"discovered\":[" "$tmp/b" && ! grep -oF "\"discovered\":[.*" "$tmp/b" |
    grep -qF "\"queue\":\"$q\"" || fail "a served queue is listed as discovered"

# a graceful stop ends an open event stream at once
curl -s -N --max-time 20 -o "$tmp/events2" "http://127.0.0.1:$port/v1/events" &
c=$!
pids+=("$c")
sleep 1
gw=${pids[-2]}
kill -TERM "$gw"
wait "$gw" || fail "gateway exit $? with an event stream open"
wait "$c" || fail "curl exit $?: the stream did not end cleanly"
grep -q '^event: queues$' "$tmp/events2" || fail "no event before the stop"
echo "test_gateway_dashboard: ok"
