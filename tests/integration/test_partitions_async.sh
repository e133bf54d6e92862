#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Partitioned queues through the async producer, as sluice-gateway uses it: messages without a
# tenant spread over the partitions (the emptier of two, the second tried before 429), a
# tenant's messages (--tenant-header) all go to the partition the blocking producer picks for
# that tenant, a message with an Idempotency-Key to partition 0, partitions added while the
# gateway runs get messages within a few seconds, and GET /v1/queues/Q shows the queue as one
# with each partition's figures.
. "$(dirname "$0")/lib.sh"
q="pasync-$$"
qt="$q-t"
A() { "$bin/sluice-admin" --redis "$url" "$@"; }
purge_all() {
    local p i
    for p in "$q" "$qt"; do
        for i in "" ~1 ~2 ~3; do A purge "$p$i" --yes >/dev/null 2>&1 || true; done
    done
}
trap 'purge_all; lib_cleanup' EXIT
xlen() { rcli XLEN "sluice:{$1}:stream"; }
# post N QUEUE [curl args...]: N POSTs on one keep-alive connection; prints their status codes
post() {
    local n=$1 queue=$2 i
    shift 2
    local urls=()
    for i in $(seq 1 "$n"); do urls+=(-o /dev/null "http://127.0.0.1:$port/v1/queues/$queue/messages"); done
    curl -s --max-time 60 -w '%{http_code}\n' "$@" "${urls[@]}"
}

run 0 "capacity of $q: 300" A capacity "$q" 300
run 0 'partitions of .*: 3 \(capacity 300 in all, 100 each\)' A partitions "$q" 3
run 0 'partitions of .*: 3 ' A partitions "$qt" 3
gateway_start --queue "$q" --queue "$qt:100000" --tenant-header X-Tenant
for i in $(seq 1 100); do # ready once the partition count is read
    curl -sf "http://127.0.0.1:$port/healthz" >/dev/null 2>&1 && break
    sleep 0.05
done

# 400 offered to 3 partitions of 100: never more than 100 in one, 300 in all; each refusal
# found both of its partitions full
post 400 "$q" -d x >"$tmp/codes"
ok=$(grep -c '^202$' "$tmp/codes" || true)
full=$(grep -c '^429$' "$tmp/codes" || true)
[ $((ok + full)) = 400 ] || fail "400 POSTs: $(sort "$tmp/codes" | uniq -c | tr '\n' ' ')"
[ "$ok" -le 300 ] && [ "$ok" -ge 285 ] || fail "$ok admitted of 400 into 3 x 100"
sum=0
for p in "$q" "$q~1" "$q~2"; do
    n=$(xlen "$p")
    [ "$n" -ge 80 ] && [ "$n" -le 100 ] || fail "$p holds $n (want 80..100: spread, none over)"
    sum=$((sum + n))
done
[ "$sum" = "$ok" ] || fail "$sum entries in the partitions, $ok answered 202"
curl -s "http://127.0.0.1:$port/v1/queues/$q" >"$tmp/info"
grep -q "\"depth\":$ok,\"capacity\":300," "$tmp/info" || fail "info totals: $(cat "$tmp/info")"
grep -q '"partitions":3,"by_partition":\[{"depth":[0-9]*,"capacity":100,"pending":0},{' "$tmp/info" ||
    fail "info by partition: $(cat "$tmp/info")"
[ "$(grep -o '"capacity":100,' "$tmp/info" | wc -l)" = 3 ] || fail "info: $(cat "$tmp/info")"

# an Idempotency-Key goes to partition 0 (one place to find the key again): admitted once
run 0 "capacity of $q: 600" A capacity "$q" 600
before=$(xlen "$q")
for i in 1 2 3; do
    post 1 "$q" -d once -H 'Idempotency-Key: k-1' >>"$tmp/idem"
done
[ "$(tr '\n' ' ' <"$tmp/idem")" = "202 202 202 " ] || fail "idempotent POSTs: $(cat "$tmp/idem")"
[ "$(xlen "$q")" = $((before + 1)) ] || fail "the keyed message is not in partition 0 once"

# tenants: each one's messages in one partition, the same one sluice-enqueue picks
for t in A B C D E F; do
    [ "$(post 10 "$qt" -d "$t-gw" -H "X-Tenant: $t" | grep -cx 202)" = 10 ] || fail "tenant $t: not all 202"
    echo "$t-cli" | "$bin/sluice-enqueue" --redis "$url" --queue "$qt" --tenant "$t" >/dev/null
done
holders_of() {
    local p
    for p in "$qt" "$qt~1" "$qt~2"; do
        if rcli XRANGE "sluice:{$p}:stream" - + | grep -c "$1" >/dev/null; then echo "$p"; fi
    done
}
for t in A B C D E F; do
    gw=$(holders_of "$t-gw")
    [ "$(echo "$gw" | wc -l)" = 1 ] || fail "tenant $t spread over: $(echo "$gw" | tr '\n' ' ')"
    [ "$gw" = "$(holders_of "$t-cli")" ] || fail "tenant $t: gateway to $gw, sluice-enqueue elsewhere"
done
code=$(curl -s -o "$tmp/b" -w '%{http_code}' -H "X-Tenant: $(printf 'a%.0s' $(seq 1 300))" -d x \
    "http://127.0.0.1:$port/v1/queues/$qt/messages")
[ "$code" = 400 ] && grep -q 'x-tenant must be 1-' "$tmp/b" || fail "long tenant: $code $(cat "$tmp/b")"

# growth while the gateway runs: the fourth partition gets messages within a few seconds
run 0 'partitions of .*: 4 ' A partitions "$qt" 4
for i in $(seq 1 40); do
    post 20 "$qt" -d grow >/dev/null
    [ "$(xlen "$qt~3")" -gt 0 ] && break
    sleep 0.1
done
[ "$(xlen "$qt~3")" -gt 0 ] || fail "the gateway never admitted into the added partition"
curl -s "http://127.0.0.1:$port/v1/queues/$qt" | grep -q '"partitions":4,' ||
    fail "info after growth: $(curl -s "http://127.0.0.1:$port/v1/queues/$qt")"
! grep -q 'level=warn\|level=error' "$tmp/gw.log" || fail "gateway: $(grep level= "$tmp/gw.log" | tail -n 3)"
echo "test_partitions_async: $ok of 400 admitted into 3 partitions of 100" \
    "($(xlen "$q"), $(xlen "$q~1"), $(xlen "$q~2") now); tenants kept whole; growth to 4 followed"
