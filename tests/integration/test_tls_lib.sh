#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The TLS test helpers (tls_lib.sh): a private CA made with openssl and a redis-server that
# speaks TLS only. redis-cli reaches it over TLS with the right CA, and is refused with another
# CA, without a client certificate when the server requires one, and in plain TCP; sluice's
# async worker, given no CA, checks against the system store and refuses the private one.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/tls_lib.sh"

tls_redis_start yes
[ "$(tls_cli SET sluice:tls:probe ok)" = OK ] || fail "SET over TLS"
[ "$(tls_cli GET sluice:tls:probe)" = ok ] || fail "GET over TLS"
tls_cli INFO server | grep -q '^redis_version:7' || fail "INFO over TLS"

# a client certificate is required: without one the server refuses
run 1 '' redis-cli --tls --cacert "$tls_dir/ca.crt" -h 127.0.0.1 -p "$tls_port" PING
grep -q PONG "$tmp/out" && fail "PING without a client certificate answered"
# another CA: the server's certificate is not trusted
run 1 'certificate verify failed' redis-cli --tls --cacert "$tls_dir/other-ca.crt" \
    --cert "$tls_dir/client.crt" --key "$tls_dir/client.key" -h 127.0.0.1 -p "$tls_port" PING
# plain TCP on the TLS port is not Redis
run 1 '' redis-cli -h 127.0.0.1 -p "$tls_port" PING
grep -q PONG "$tmp/out" && fail "plain PING on the TLS port answered"

# the certificate names localhost too (redis-cli checks the chain, not the name: sluice does)
redis-cli --tls --cacert "$tls_dir/ca.crt" --cert "$tls_dir/client.crt" \
    --key "$tls_dir/client.key" -h localhost -p "$tls_port" PING | grep -q PONG ||
    fail "PING to localhost over TLS"
openssl x509 -in "$tls_dir/server.crt" -noout -ext subjectAltName |
    grep -q 'DNS:localhost, IP Address:127.0.0.1' || fail "server certificate names"

# no SLUICE_TLS_CA_FILE: the system store, which does not hold the private CA (exit 3)
# (the blocking connection's TLS is test_tls_conn.sh's)
run 3 'certificate verify failed' \
    env -u SLUICE_TLS_CA_FILE SLUICE_REDIS_URL="$tls_url" "$bin/sluice-worker" -q jobs
echo "test_tls_lib: ok"
