#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The gateway's key for `client` limits: a --client-header value and a peer address live in two
# spaces ("h:VALUE", "ip:ADDR"), so a header naming an address never spends that address's
# budget; --require-client-header refuses a request without the header (400); a header that is a
# list (X-Forwarded-For "client, proxy") is keyed by one entry: the rightmost, or the Nth from
# the right with --trusted-proxies N (the leftmost of a shorter list), never the whole list and
# never an entry the caller wrote to the left of it.
. "$(dirname "$0")/lib.sh"
q="gwc-$$"
keys+=($(queue_keys "$q") "sluice:{$q}:limits")
cleanup_limits() { rcli --scan --pattern "sluice:{$q}:qlim:*" | xargs -r redis-cli -u "$url" DEL >/dev/null; }
trap 'cleanup_limits; lib_cleanup' EXIT
lim="sluice:{$q}:qlim:per-client:log" # qlim:NAME:ALG:VALUE

"$bin/sluice-admin" --redis "$url" limit "$q" set per-client client 2/1h --algorithm log >/dev/null
# post [CURL ARGS...]: one admission, prints the status code (the body is in $tmp/b)
post() { curl -s -o "$tmp/b" -w '%{http_code}' --data-binary x "$@" \
    "http://127.0.0.1:$port/v1/queues/$q/messages"; }
gateway_stop() { kill -TERM "${pids[-1]}"; wait "${pids[-1]}" 2>/dev/null || true; }
# state KEY: the limit's state for client key KEY exists
state() { [ "$(rcli EXISTS "$lim:$1")" = 1 ]; }

# usage errors, exit 2, naming the option
run 2 'trusted-proxies.*1\.\.64' "$bin/sluice-gateway" --listen 127.0.0.1:0 --queue "$q" \
    --client-header X-Forwarded-For --trusted-proxies 0
run 2 'need --client-header' "$bin/sluice-gateway" --listen 127.0.0.1:0 --queue "$q" \
    --trusted-proxies 2
run 2 'need --client-header' "$bin/sluice-gateway" --listen 127.0.0.1:0 --queue "$q" \
    --require-client-header
run 2 '"X Api" is not a header name \(byte 2' "$bin/sluice-gateway" --listen 127.0.0.1:0 \
    --queue "$q" --client-header 'X Api' # a name that can never match a header
run 2 'tenant-header: "X:T" is not a header name' "$bin/sluice-gateway" --listen 127.0.0.1:0 \
    --queue "$q" --tenant-header 'X:T'

# 1. a header naming the peer's address spends its own budget, not the address's
gateway_start --queue "$q" --client-header X-Api-Key
codes="$(post -H 'X-Api-Key: 127.0.0.1') $(post -H 'X-Api-Key: 127.0.0.1') $(post -H 'X-Api-Key: 127.0.0.1')"
[ "$codes" = "202 202 429" ] || fail "header 127.0.0.1 x3: $codes"
[ "$(post)" = 202 ] || fail "no header after a header named the peer's address: $(cat "$tmp/b")"
state "h:127.0.0.1" && state "ip:127.0.0.1" || fail "keys: $(rcli --scan --pattern "$lim:*")"
# a keyed caller over its limit that drops the header gets the address's budget, not a new one
codes="$(post -H 'X-Api-Key: k1') $(post -H 'X-Api-Key: k1') $(post -H 'X-Api-Key: k1')"
[ "$codes" = "202 202 429" ] || fail "k1 x3: $codes"
[ "$(post)" = 202 ] && [ "$(post)" = 429 ] || fail "the address's budget is not 2"
gateway_stop

# 2. --require-client-header: a request without it is 400, naming the header
gateway_start --queue "$q" --client-header X-Api-Key --require-client-header
[ "$(post)" = 400 ] && grep -q '"header x-api-key is required"' "$tmp/b" ||
    fail "missing required header: $(cat "$tmp/b")"
[ "$(post -H 'X-Api-Key: k2')" = 202 ] || fail "k2 with the header required: $(cat "$tmp/b")"
gateway_stop
cleanup_limits

# 3. X-Forwarded-For: the rightmost entry, whatever the caller wrote to its left
gateway_start --queue "$q" --client-header X-Forwarded-For
[ "$(post -H 'X-Forwarded-For: 203.0.113.7, 10.0.0.2')" = 202 ] ||
    fail "X-Forwarded-For a, b: $(cat "$tmp/b")"
state "h:10.0.0.2" || fail "a, b keys: $(rcli --scan --pattern "$lim:*")"
codes="$(post -H 'X-Forwarded-For: 198.51.100.1,10.0.0.2') $(post -H 'X-Forwarded-For: x, 10.0.0.2')"
[ "$codes" = "202 429" ] || fail "other left entries escaped the rightmost one's limit: $codes"
# repeated lines form one list; empty entries and spaces are skipped
[ "$(post -H 'X-Forwarded-For: 10.0.0.3' -H 'X-Forwarded-For: 10.0.0.4 ,, ')" = 202 ] ||
    fail "two lines: $(cat "$tmp/b")"
state "h:10.0.0.4" || fail "two lines keys: $(rcli --scan --pattern "$lim:*")"
[ "$(post -H 'X-Forwarded-For: , ,')" = 400 ] && grep -q 'x-forwarded-for must be' "$tmp/b" ||
    fail "a list without entries: $(cat "$tmp/b")"
[ "$(post -H 'X-Forwarded-For: a"b')" = 400 ] || fail "a quote in the entry: $(cat "$tmp/b")"
gateway_stop
cleanup_limits

# 4. --trusted-proxies 2: the second entry from the right; a shorter list gives its leftmost
gateway_start --queue "$q" --client-header X-Forwarded-For --trusted-proxies 2
[ "$(post -H 'X-Forwarded-For: spoofed, 198.51.100.1, 10.0.0.2')" = 202 ] ||
    fail "3 entries: $(cat "$tmp/b")"
[ "$(post -H 'X-Forwarded-For: 198.51.100.9')" = 202 ] || fail "1 entry: $(cat "$tmp/b")"
state "h:198.51.100.1" && state "h:198.51.100.9" ||
    fail "trusted-proxies 2 keys: $(rcli --scan --pattern "$lim:*")"
[ "$(rcli --scan --pattern "$lim:*" | wc -l)" = 2 ] ||
    fail "trusted-proxies 2 keys: $(rcli --scan --pattern "$lim:*")"
echo "test_gateway_client: ok"
