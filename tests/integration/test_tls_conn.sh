#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# rediss:// on the blocking connection (sluice-enqueue, sluice-admin, sluice-limit) against a
# TLS-only redis-server with a private CA: admission and stats through the CA of
# SLUICE_TLS_CA_FILE; another CA, another server name and an expired certificate are each
# refused with exit 3 and the reason; a server that requires client certificates is reached
# with SLUICE_TLS_CERT_FILE / KEY_FILE and refuses a client without; AUTH over TLS; batches of
# about 1 MB; a stopped server times the handshake out; a connection the server closed comes
# back resuming its TLS session; a restart of the server while a producer runs is followed by
# a reconnect. The async binaries over TLS: test_tls_async.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/tls_lib.sh"

tls_redis_start no
export SLUICE_TLS_CA_FILE=$tls_dir/ca.crt SLUICE_REDIS_URL=$tls_url
q=tlsq.$$

run 0 'admitted=2 rejected=0' "$bin/sluice-enqueue" -q "$q" one two
[ "$(tls_cli XLEN "sluice:{$q}:stream")" = 2 ] || fail "not in the stream over TLS"
run 0 '' "$bin/sluice-admin" --json stats "$q"
grep -q '"depth":2' "$tmp/out" || fail "stats over TLS: $(cat "$tmp/out")"
run 0 'allowed' "$bin/sluice-limit" "ns$$" "k=5/s"
# the name in the URL is checked too: localhost is in the certificate
run 0 'admitted=1' "$bin/sluice-enqueue" -r "rediss://localhost:$tls_port" -q "$q" three

# batches of about 1 MB each way: many TLS records per call, read back in pieces
seq 1 3000 | awk '{ printf "%s-%01000d\n", $1, 0 }' >"$tmp/big"
run 0 'admitted=3000 rejected=0' "$bin/sluice-enqueue" -q "$q.big" -C 100000 --batch 1000 \
    <"$tmp/big"
[ "$(tls_cli XLEN "sluice:{$q.big}:stream")" = 3000 ] || fail "the big batches"
# a server that does not answer: the connect timeout bounds the handshake
kill -STOP "$tls_pid"
run 3 'timed out' "$bin/sluice-admin" stats "$q"
kill -CONT "$tls_pid"

# another CA, another server name: exit 3 with the reason, nothing sent
run 3 'certificate verify failed: [a-z]' \
    env SLUICE_TLS_CA_FILE="$tls_dir/other-ca.crt" "$bin/sluice-admin" stats "$q"
mismatch='certificate verify failed: hostname mismatch \(the certificate does not name other.example'
run 3 "$mismatch" env SLUICE_TLS_SERVER_NAME=other.example "$bin/sluice-enqueue" -q "$q" four
grep -q unavailable "$tmp/out" && fail "a verification failure reported as unavailable"
run 3 'certificate verify failed' \
    env SLUICE_TLS_CA_FILE="$tls_dir/other-ca.crt" "$bin/sluice-limit" "ns$$" "k=5/s"
# an expired certificate (the server's own key and names, valid until yesterday)
openssl x509 -req -in "$tls_dir/server.csr" -CA "$tls_dir/ca.crt" -CAkey "$tls_dir/ca.key" \
    -CAcreateserial -days -1 -extfile "$tls_dir/server.ext" -out "$tls_dir/expired.crt" 2>/dev/null
tls_cli CONFIG SET tls-cert-file "$tls_dir/expired.crt" >/dev/null
run 3 'certificate verify failed: certificate has expired' "$bin/sluice-enqueue" -q "$q" expired
tls_cli --insecure CONFIG SET tls-cert-file "$tls_dir/server.crt" >/dev/null
# the insecure switch: no check, loudly
run 0 'event=tls_insecure_skip_verify' env SLUICE_TLS_CA_FILE="$tls_dir/other-ca.crt" \
    SLUICE_TLS_INSECURE_SKIP_VERIFY=1 "$bin/sluice-enqueue" --log-level warn -q "$q" five
# plain TCP to the TLS port is not mistaken for a server
run 3 '' env SLUICE_REDIS_URL="redis://127.0.0.1:$tls_port" "$bin/sluice-enqueue" \
    --timeout 500 -q "$q" six

# client certificates required: refused without, admitted with
tls_cli CONFIG SET tls-auth-clients yes >/dev/null
run 3 'alert certificate required' "$bin/sluice-enqueue" -q "$q" seven
run 0 'admitted=1' env SLUICE_TLS_CERT_FILE="$tls_dir/client.crt" \
    SLUICE_TLS_KEY_FILE="$tls_dir/client.key" "$bin/sluice-enqueue" -q "$q" eight
run 2 'SLUICE_TLS_KEY_FILE' env SLUICE_TLS_CERT_FILE="$tls_dir/client.crt" \
    "$bin/sluice-admin" stats "$q"
export SLUICE_TLS_CERT_FILE=$tls_dir/client.crt SLUICE_TLS_KEY_FILE=$tls_dir/client.key

# AUTH over TLS
tls_cli CONFIG SET requirepass 's3cret' >/dev/null
run 3 'NOAUTH|AUTH' "$bin/sluice-admin" stats "$q"
run 0 'admitted=1' "$bin/sluice-enqueue" -r "rediss://:s3cret@127.0.0.1:$tls_port" -q "$q" nine
tls_cli -a s3cret --no-auth-warning CONFIG SET requirepass '' >/dev/null

# enqueue_two OUT LEVEL: a sluice-enqueue (log level LEVEL, output in OUT) of two payloads, the
# second once $tmp/go exists (through a pipe: a server started meanwhile inherits no end of it);
# returns once the first is admitted, the PID in $two
enqueue_two() {
    local out=$1 n i
    rm -f "$tmp/go"
    n=$(tls_cli XLEN "sluice:{$q}:stream")
    {
        echo first
        for i in $(seq 1 100); do [ -e "$tmp/go" ] && break; sleep 0.1; done
        echo second
    } | "$bin/sluice-enqueue" -q "$q" --batch 1 --log-level "$2" >"$out" 2>&1 &
    two=$!
    pids+=("$two")
    for i in $(seq 1 50); do
        [ "$(tls_cli XLEN "sluice:{$q}:stream")" -gt "$n" ] && return 0
        sleep 0.1
    done
    fail "the first payload was not admitted: $(cat "$out")"
}

# a connection the server closed comes back resuming its TLS session (a shorter handshake)
enqueue_two "$tmp/resume.out" debug
tls_cli CLIENT KILL TYPE normal >/dev/null
touch "$tmp/go"
wait "$two" || fail "enqueue across CLIENT KILL: $(cat "$tmp/resume.out")"
grep -q 'event=tls_connected .*resumed=0' "$tmp/resume.out" &&
    grep -q 'event=tls_connected .*resumed=1' "$tmp/resume.out" ||
    fail "no resumed session: $(cat "$tmp/resume.out")"

# a restart of the server under a running producer: the next payload reconnects (and reloads
# the library on the empty server)
enqueue_two "$tmp/enq.out" info
tls_redis_restart yes
touch "$tmp/go"
rc=0
wait "$two" || rc=$?
[ "$rc" = 0 ] || fail "enqueue across a restart exited $rc: $(cat "$tmp/enq.out")"
grep -q 'admitted=2 rejected=0' "$tmp/enq.out" || fail "across a restart: $(cat "$tmp/enq.out")"
grep -q 'event=reconnect' "$tmp/enq.out" || fail "no reconnect logged: $(cat "$tmp/enq.out")"
[ "$(tls_cli XLEN "sluice:{$q}:stream")" = 1 ] ||
    fail "after the restart: $(tls_cli XLEN "sluice:{$q}:stream")"
echo "test_tls_conn: ok"
