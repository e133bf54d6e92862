#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# rediss:// on the async connection (sluice-gateway with its async producers and console
# connections, sluice-worker) against a TLS-only redis-server with a private CA: messages
# admitted through the gateway and drained by a worker, none lost; another CA and another
# server name each stop the worker and the gateway with exit 3 and the reason; a server that
# requires client certificates refuses a worker without one (exit 3) and serves one with; a
# connection the server closed comes back resuming its TLS session; a restart of the server
# under a running gateway and worker is followed by both; the insecure switch; a server that
# does not answer times the handshake out.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/tls_lib.sh"

tls_redis_start no
export SLUICE_TLS_CA_FILE=$tls_dir/ca.crt SLUICE_REDIS_URL=$tls_url
# a client certificate (the server does not ask for one until tls-auth-clients is set below)
export SLUICE_TLS_CERT_FILE=$tls_dir/client.crt SLUICE_TLS_KEY_FILE=$tls_dir/client.key
q=tlsa.$$

# the transport under TLS: 3 x 8 MB requests and replies, thousands of calls in flight when the
# connection is closed from a reply callback (test_aconn_edges.c)
"$bin/../tests/test_aconn_edges" --tls "$tls_url" "$tls_dir/ca.crt" >"$tmp/edges" 2>&1 ||
    fail "test_aconn_edges --tls: $(tail -n 5 "$tmp/edges")"

# post N FROM: N messages through the gateway, each answered 202
post() {
    local i c
    for i in $(seq "$2" $(($2 + $1 - 1))); do
        c=$(curl -s -o /dev/null -w '%{http_code}' --max-time 10 -d "m$i" \
            "http://127.0.0.1:$port/v1/queues/$q/messages") || true
        [ "$c" = 202 ] || fail "POST m$i over TLS: $c: $(cat "$tmp/gw.log")"
    done
}
xlen() { tls_cli XLEN "sluice:{$q}:stream"; }

# admitted through the gateway (the async producer), read by its console connection, drained
# by a worker: 20 in, 20 processed
gateway_start --redis "$tls_url" --queue "$q" --log-level debug
gw=${pids[-1]}
post 20 1
[ "$(xlen)" = 20 ] || fail "not in the stream over TLS: $(xlen)"
c=$(curl -s -o "$tmp/q.json" -w '%{http_code}' --max-time 10 "http://127.0.0.1:$port/v1/queues/$q")
[ "$c" = 200 ] && grep -q '"depth":20' "$tmp/q.json" || fail "GET over TLS: $c $(cat "$tmp/q.json")"
run 0 'processed=20 failed=0' "$bin/sluice-worker" -q "$q" -H noop --max-messages 20
grep -q 'event=tls_connected' "$tmp/gw.log" || fail "no TLS connection logged: $(cat "$tmp/gw.log")"

# another CA, another server name: exit 3 naming the reason, not "unavailable"
run 3 'certificate verify failed: [a-z]' env SLUICE_TLS_CA_FILE="$tls_dir/other-ca.crt" \
    "$bin/sluice-worker" -q "$q" -H noop
grep -q unavailable "$tmp/out" && fail "a verification failure reported as unavailable"
run 3 'hostname mismatch \(the certificate does not name other.example' \
    env SLUICE_TLS_SERVER_NAME=other.example "$bin/sluice-worker" -q "$q" -H noop
run 3 'sluice-gateway: queue .*certificate verify failed: [a-z]' \
    env SLUICE_TLS_CA_FILE="$tls_dir/other-ca.crt" timeout 20 "$bin/sluice-gateway" \
    --listen 127.0.0.1:0 --queue "$q" --redis "$tls_url"
# a CA file that cannot be read: exit 3 naming it
run 3 "cannot load the CA certificates from $tmp/none.crt" \
    env SLUICE_TLS_CA_FILE="$tmp/none.crt" "$bin/sluice-worker" -q "$q" -H noop
# a usage error in the TLS options: exit 2
run 2 'SLUICE_TLS_KEY_FILE' env -u SLUICE_TLS_KEY_FILE "$bin/sluice-worker" -q "$q" -H noop

# client certificates required: a worker without one is refused, one with drains (the
# gateway's new connections have one too)
tls_cli CONFIG SET tls-auth-clients yes >/dev/null
run 3 'certificate required' env -u SLUICE_TLS_CERT_FILE -u SLUICE_TLS_KEY_FILE \
    "$bin/sluice-worker" -q "$q" -H noop
post 2 21
run 0 'processed=2 failed=0' "$bin/sluice-worker" -q "$q" -H noop --max-messages 2

# a worker that runs on: the server closes its connections, they come back resuming the
# session; then the server restarts (empty, client certificates required) and the gateway and
# the worker both follow: every message posted after the restart is processed
"$bin/sluice-worker" -q "$q" -H noop --max-messages 5 --log-level debug >"$tmp/w.out" 2>&1 &
wk=$!
pids+=("$wk")
for i in $(seq 1 50); do
    grep -q 'event=redis_ready' "$tmp/w.out" && break
    sleep 0.1
done
tls_cli CLIENT KILL TYPE normal >/dev/null
for i in $(seq 1 100); do
    grep -q 'event=tls_connected .*resumed=1' "$tmp/w.out" && break
    sleep 0.1
done
grep -q 'event=tls_connected .*resumed=1' "$tmp/w.out" ||
    fail "no resumed session after CLIENT KILL: $(cat "$tmp/w.out")"
tls_redis_restart yes
kill -0 "$gw" || fail "the gateway exited at the restart: $(cat "$tmp/gw.log")"
ok=0
for i in $(seq 1 100); do # the gateway answers 503 until its producer is back
    c=$(curl -s -o /dev/null -w '%{http_code}' --max-time 10 -d "r$i" \
        "http://127.0.0.1:$port/v1/queues/$q/messages") || true
    if [ "$c" = 202 ]; then
        ok=$((ok + 1))
        [ "$ok" = 5 ] && break
    fi
    sleep 0.1
done
[ "$ok" = 5 ] || fail "the gateway did not come back after the restart: $(tail -n 20 "$tmp/gw.log")"
rc=0
timeout 30 tail --pid="$wk" -f /dev/null || rc=$?
wait "$wk" || rc=$?
[ "$rc" = 0 ] || fail "the worker across the restart exited $rc: $(tail -n 20 "$tmp/w.out")"
grep -q 'processed=5 failed=0' "$tmp/w.out" || fail "across a restart: $(tail -n 5 "$tmp/w.out")"
kill -TERM "$gw"
wait "$gw" || fail "the gateway's exit after SIGTERM: $(tail -n 5 "$tmp/gw.log")"

# the insecure switch: no check, loudly
run 0 'admitted=1' "$bin/sluice-enqueue" -q "$q" x
run 0 'event=tls_insecure_skip_verify' env SLUICE_TLS_CA_FILE="$tls_dir/other-ca.crt" \
    SLUICE_TLS_INSECURE_SKIP_VERIFY=1 "$bin/sluice-worker" -q "$q" -H noop --max-messages 1 \
    --log-level warn
grep -q 'processed=1 failed=0' "$tmp/out" || fail "insecure: $(cat "$tmp/out")"
# a server that does not answer: the connect timeout (2 s) bounds the TLS handshake, retried
kill -STOP "$tls_pid"
"$bin/sluice-worker" -q "$q" -H noop >"$tmp/stop.out" 2>&1 &
wk=$!
pids+=("$wk")
wait_lines "$tmp/stop.out" 3 6
kill -KILL "$wk"
wait "$wk" 2>/dev/null || true
kill -CONT "$tls_pid"
grep -q 'status=ETIMEDOUT .*the TLS handshake did not finish within 2000 ms' "$tmp/stop.out" ||
    fail "a stopped server: $(cat "$tmp/stop.out")"
echo "test_tls_async: ok"
