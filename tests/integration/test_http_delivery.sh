#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# sluice-worker --handler http://...: what a request carries (body, envelope headers, Sluice-*,
# Idempotency-Key, extra headers from the command line and a file, a Standard Webhooks signature
# verified by an independent implementation), --record seeing each delivery, connections kept
# alive (at most the concurrency),
# and every verdict of docs/delivery.md's table, against a scripted local back end.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/http_lib.sh"
q="http-$$"
backend_start be --secret-file "$tmp/secret"
base="http://127.0.0.1:$bport"
enqueue() { "$bin/sluice-enqueue" --redis "$url" --queue "$@" >/dev/null; }
field() { grep -oE "(^| )$1=[0-9]+" "$tmp/out" | cut -d= -f2; }
expect() { # FIELD VALUE: in the worker's summary line
    [ "$(field "$1")" = "$2" ] || fail "$1 is '$(field "$1")', expected $2: $(cat "$tmp/out")"
}
dead_reason() { rcli XRANGE "sluice:{$1}:dead" - + | grep -A1 '^reason$' | tail -n 1; }
ok_reqs() { reqs be | grep -c "\"path\": \"$1\"" || true; }

# ---- a request: headers, signature, keep-alive ----
printf 'whsec_%s\n' "$(head -c 32 /dev/urandom | base64)" >"$tmp/secret"
printf '# the back end wants these\nAuthorization: Bearer s3cret\n\nX-From-File: yes\n' >"$tmp/hdrs"
use_queue "$q-a"
for i in $(seq 1 40); do echo "{\"n\":$i}"; done >"$tmp/bodies"
xargs -d '\n' "$bin/sluice-enqueue" --redis "$url" --queue "$q-a" --tenant acme \
    --header content-type=application/json --header request-id=req-7 <"$tmp/bodies" >/dev/null
drain "$q-a" 40 "$base/ok" --concurrency 4 --sign-secret-file "$tmp/secret" \
    --http-header 'X-Extra: one' --http-header-file "$tmp/hdrs" --record "$tmp/rec" >"$tmp/out"
expect processed 40
expect http_ok 40
# --record sees HTTP deliveries: a line "ID PAYLOAD WALL_MS" for each
[ "$(awk '{ print $2 }' "$tmp/rec" | sort)" = "$(sort "$tmp/bodies")" ] ||
    fail "--record: $(head -3 "$tmp/rec")"
[ "$(awk '{ print $1 }' "$tmp/rec" | sort -u | wc -l)" -eq 40 ] || fail "--record ids: $(head -3 "$tmp/rec")"
python3 - "$tmp/be.log" "$q-a" <<'PY' || fail "requests: see above"
import json, sys
rs = [json.loads(l) for l in open(sys.argv[1])]
q = sys.argv[2]
assert len(rs) == 40, len(rs)
bodies = sorted(r["body"] for r in rs)
assert bodies == sorted('{"n":%d}' % i for i in range(1, 41)), bodies[:3]
for r in rs:
    h = r["headers"]
    assert r["path"] == "/ok"
    assert h["content-type"] == "application/json", h
    assert h["x-request-id"] == "req-7", h
    assert h["sluice-queue"] == q and h["sluice-tenant"] == "acme", h
    assert h["sluice-deliveries"] == "1", h
    assert h["idempotency-key"] == q + ":" + h["sluice-id"], h
    assert h["x-extra"] == "one" and h["authorization"] == "Bearer s3cret", h
    assert h["x-from-file"] == "yes", h
    assert h["webhook-id"] == q + ":" + h["sluice-id"], h
    assert r["sig_ok"] is True, ("signature does not verify", h)
conns = {r["conn"] for r in rs}
assert len(conns) <= 4, ("connections", len(conns))
print("ok: 40 requests, signed and verified by hmac/hashlib, on %d connections" % len(conns))
PY
: >"$tmp/be.log"

# a host name: resolved off the loop (libcurl's resolver thread)
use_queue "$q-dns"
enqueue "$q-dns" by-name
drain "$q-dns" 1 "http://localhost:$bport/ok" >"$tmp/out"
expect processed 1
grep -q '"body": "by-name"' "$tmp/be.log" || fail "http://localhost: not delivered"
: >"$tmp/be.log"

# ---- verdicts ----
# 2xx done was above. A message answered C once, then 200: retried, then done.
for c in 500 503 429 408 425 502; do
    use_queue "$q-r$c"
    enqueue "$q-r$c" "m$c"
    drain "$q-r$c" 2 "$base/first/$c/1" >"$tmp/out"
    expect processed 1
    expect retried 1
    expect dead 0
    case $c in 429 | 503) expect http_throttled 1 ;; *) expect http_server_error 1 ;; esac
done
echo "ok: 500 503 429 408 425 502 retried, then done"

# 429 with Retry-After, in seconds and as an HTTP date: the retry waits for it
for mode in ra radate; do
    use_queue "$q-$mode"
    enqueue "$q-$mode" "m-$mode"
    : >"$tmp/be.log"
    drain "$q-$mode" 2 "$base/$mode/2/1" >"$tmp/out"
    expect processed 1
    expect http_throttled 1
    expect http_holds 1
    python3 - "$tmp/be.log" "$mode" <<'PY' || fail "Retry-After ($mode) not honoured"
import json, sys
ts = [json.loads(l)["t"] for l in open(sys.argv[1])]
assert len(ts) == 2, ts
# an HTTP date has whole seconds: 2 s from now may be read as just over 1 s
assert ts[1] - ts[0] >= (1.8 if sys.argv[2] == "ra" else 0.9), ts[1] - ts[0]
print("ok: Retry-After (%s) honoured: retried after %.2f s" % (sys.argv[2], ts[1] - ts[0]))
PY
done

# other 4xx: dead at once, with the start of the answer's body
use_queue "$q-404"
enqueue "$q-404" m404
drain "$q-404" 1 "$base/code/404" >"$tmp/out"
expect dead 1
expect http_rejected 1
[ "$(dead_reason "$q-404")" = "http 404: answer 404 from the back end" ] ||
    fail "dead letter reason: '$(dead_reason "$q-404")'"
echo "ok: 404 dead with reason '$(dead_reason "$q-404")'"

# 3xx: not followed (dead), followed with --http-follow
use_queue "$q-301"
enqueue "$q-301" m301
drain "$q-301" 1 "$base/redirect" >"$tmp/out"
expect dead 1
expect http_redirect 1
dead_reason "$q-301" | grep -q '^http 301: redirect to .*/ok not followed' ||
    fail "301 reason: '$(dead_reason "$q-301")'"
use_queue "$q-follow"
enqueue "$q-follow" mfollow
: >"$tmp/be.log"
drain "$q-follow" 1 "$base/redirect" --http-follow >"$tmp/out"
expect processed 1
[ "$(ok_reqs /ok)" = 1 ] || fail "--http-follow: the redirect's target got no POST: $(reqs be)"
reqs be | grep '"path": "/ok"' | grep -q '"body": "mfollow"' || fail "the redirected POST lost its body"
echo "ok: 301 dead unless --http-follow, which posts the body to the new place"

# connection refused and a deadline passed: retried (pending again), never dead
use_queue "$q-refused"
enqueue "$q-refused" mref
drain "$q-refused" 1 "http://127.0.0.1:1/x" >"$tmp/out"
expect retried 1
expect http_connect_error 1
expect dead 0
[ "$(rcli XLEN "sluice:{$q-refused}:stream")" = 1 ] || fail "refused: the entry is gone"
grep -q 'event=http_failed .*result=connect_error' "$tmp/worker.log" ||
    fail "no http_failed line: $(cat "$tmp/worker.log")"
use_queue "$q-slow"
enqueue "$q-slow" mslow
drain "$q-slow" 1 "$base/sleep/5000" --handler-timeout 300 >"$tmp/out"
expect retried 1
expect http_timeout 1
expect dead 0
echo "ok: refused connection and --handler-timeout retried, entry kept"

# stopped past the grace period with requests under way: abandoned, left pending (F32)
use_queue "$q-grace"
enqueue "$q-grace" g1 g2 g3
"$bin/sluice-worker" --redis "$url" --queue "$q-grace" --handler "$base/sleep/5000" -c 4 \
    --grace 200 2>"$tmp/wg.log" >"$tmp/out" &
pids+=("$!")
wg=$!
for i in $(seq 1 50); do
    [ "$(grep -c '"path": "/sleep/5000"' "$tmp/be.log")" -ge 3 ] && break
    sleep 0.1
done
kill -TERM "$wg"
wait "$wg" || fail "grace: the worker failed: $(cat "$tmp/wg.log")"
[ "$(grep -c 'event=abandoned' "$tmp/wg.log")" = 3 ] || fail "grace: $(cat "$tmp/wg.log")"
[ "$(rcli XLEN "sluice:{$q-grace}:stream")" = 3 ] || fail "grace: entries gone"
echo "ok: stopped past the grace period: 3 requests abandoned, their entries pending"

# /metrics counts deliveries by answer
use_queue "$q-m"
enqueue "$q-m" m1 m2
"$bin/sluice-worker" --redis "$url" --queue "$q-m" --handler "$base/code/404" \
    --metrics 127.0.0.1:0 2>"$tmp/wm.log" >/dev/null &
pids+=("$!")
wm=$!
got=""
for i in $(seq 1 100); do
    mport=$(grep -oE 'event=metrics_listening .*port=[0-9]+' "$tmp/wm.log" | grep -oE '[0-9]+$') || true
    if [ -n "$mport" ]; then
        got=$(curl -s "http://127.0.0.1:$mport/metrics" | grep '^sluice_worker_http_deliveries_total' || true)
        echo "$got" | grep -q 'result="rejected"} 2' && break
    fi
    sleep 0.1
done
kill -TERM "$wm"
wait "$wm" || true
echo "$got" | grep -q 'result="rejected"} 2' || fail "metrics: '$got' $(cat "$tmp/wm.log")"
echo "$got" | grep -q 'result="ok"} 0' || fail "metrics: '$got'"
echo "ok: /metrics: $(echo "$got" | grep rejected)"

# a usage error names the bad value
run 2 'is not an http' "$bin/sluice-worker" --queue "$q" --handler 'http://'
run 2 'user or password' "$bin/sluice-worker" --queue "$q" --handler 'http://u:p@127.0.0.1/x'
run 2 'header "Bad Header: x" is not' "$bin/sluice-worker" --queue "$q" --handler "$base/ok" \
    --http-header 'Bad Header: x'
run 2 'sign-secret-file: cannot read' "$bin/sluice-worker" --queue "$q" --handler "$base/ok" \
    --sign-secret-file "$tmp/nope"
run 2 'need an http' "$bin/sluice-worker" --queue "$q" --handler noop --http-follow
echo "ok: bad URLs, headers and files refused with exit 2"
