#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# sluice-worker --handler https://...: a back end whose certificate a private CA (made here with
# openssl req) signed is trusted with --http-ca; with another CA the handshake fails with a
# clear line in the log, and the entry is retried (left pending), never dead-lettered.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/http_lib.sh"
q="https-$$"
use_queue "$q"
ec=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes)
for ca in ca other; do
    openssl req -x509 "${ec[@]}" -keyout "$tmp/$ca.key" -out "$tmp/$ca.pem" -days 1 \
        -subj "/CN=sluice test $ca" 2>/dev/null
done
openssl req "${ec[@]}" -keyout "$tmp/srv.key" -out "$tmp/srv.csr" -subj /CN=127.0.0.1 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1\n' >"$tmp/san"
openssl x509 -req -in "$tmp/srv.csr" -CA "$tmp/ca.pem" -CAkey "$tmp/ca.key" -CAcreateserial \
    -out "$tmp/srv.pem" -days 1 -extfile "$tmp/san" 2>/dev/null
backend_start tls --cert "$tmp/srv.pem" --key "$tmp/srv.key"

"$bin/sluice-enqueue" --redis "$url" --queue "$q" secret-payload >/dev/null
# the wrong CA: a TLS failure, retried
drain "$q" 1 "https://127.0.0.1:$bport/ok" --http-ca "$tmp/other.pem" >"$tmp/out"
grep -q 'retried=1' "$tmp/out" && grep -q 'http_tls_error=1' "$tmp/out" && grep -q 'dead=0' "$tmp/out" ||
    fail "wrong CA: $(cat "$tmp/out")"
grep -E 'event=http_failed .*target=https://127\.0\.0\.1:[0-9]+ result=tls_error' "$tmp/worker.log" |
    grep -qi 'certificate' || fail "no clear TLS error: $(cat "$tmp/worker.log")"
[ "$(rcli XLEN "sluice:{$q}:dead")" = 0 ] || fail "wrong CA: dead-lettered"
[ ! -s "$tmp/tls.log" ] || fail "the back end got a request through a failed handshake"
echo "ok: wrong CA: $(grep -o 'detail=.*' "$tmp/worker.log" | head -n 1); entry retried"
# the right CA: delivered (the same entry, its second delivery)
drain "$q" 1 "https://127.0.0.1:$bport/ok" --http-ca "$tmp/ca.pem" >"$tmp/out"
grep -q 'processed=1' "$tmp/out" || fail "private CA: $(cat "$tmp/out")"
grep -q '"body": "secret-payload"' "$tmp/tls.log" || fail "not delivered: $(cat "$tmp/tls.log")"
grep -q '"sluice-deliveries": "2"' "$tmp/tls.log" || fail "not the retried entry: $(cat "$tmp/tls.log")"
echo "ok: https with a private CA (--http-ca) delivered the retried entry"
# the system store does not know the private CA: refused the same way
"$bin/sluice-enqueue" --redis "$url" --queue "$q" two >/dev/null
drain "$q" 1 "https://127.0.0.1:$bport/ok" >"$tmp/out"
grep -q 'http_tls_error=1' "$tmp/out" || fail "system store: $(cat "$tmp/out")"
echo "ok: the system CA store does not trust it"
