#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# What a partitioned queue reports: sluice-enqueue's summary and `sluice-admin capacity Q` give
# the queue's depth and capacity (the sums over its partitions), not one partition's; and with
# one partition unreadable (here: a user whose ACL leaves out Q~1's keys, the same failure as its
# primary being down) `sluice-admin partitions`, `stats` and the gateway's GET /v1/queues/Q
# still show the other partitions and their totals, the unreadable one marked.
. "$(dirname "$0")/lib.sh"
q="pfig-$$"
user="pfig-$$"
A() { "$bin/sluice-admin" --redis "$url" "$@"; }
trap 'for i in "" ~1 ~2; do A purge "$q$i" --yes >/dev/null 2>&1 || true; done
      rcli ACL DELUSER "$user" >/dev/null 2>&1 || true; lib_cleanup' EXIT

run 0 "capacity of $q: 90" A capacity "$q" 90
run 0 'partitions of .*: 3 ' A partitions "$q" 3
# 120 offered into 3 x 30: the summary is the queue's 90 of 90, not one partition's 30 of 30
seq 1 120 | "$bin/sluice-enqueue" --redis "$url" --queue "$q" >"$tmp/e" 2>&1 || true
grep -q '^admitted=90 rejected=30 depth=90 capacity=90 partitions=3$' "$tmp/e" ||
    fail "summary: $(cat "$tmp/e")"
"$bin/sluice-enqueue" --redis "$url" --queue "$q" --json x >"$tmp/e" 2>&1 || true
grep -q '"depth":90,"capacity":90,"partitions":3}' "$tmp/e" || fail "summary --json: $(cat "$tmp/e")"
run 0 "^capacity of $q: 90 in all, 30 in each of its 3 partitions\$" A capacity "$q"
run 0 '"capacity":90,"partitions":3,"per_partition":30' A capacity "$q" --json
run 0 "all together +depth 90 / 90\$" A partitions "$q"

# a user that can read partitions 0 and 2, not 1
rcli ACL SETUSER "$user" reset on ">pw" +@all "~sluice:{$q}:*" "~sluice:{$q~2}:*" >/dev/null
uurl=${url/redis:\/\//redis://$user:pw@}
U() { "$bin/sluice-admin" --redis "$uurl" "$@"; }
run 3 "$q~1 +UNAVAILABLE" U partitions "$q"
grep -qE "^  $q~2 +depth 30 / 30\$" "$tmp/out" || fail "partition 2 not shown: $(cat "$tmp/out")"
grep -qE "^  all together +depth 60 / 60 \(UNAVAILABLE partitions left out\)\$" "$tmp/out" ||
    fail "partitions, sums: $(cat "$tmp/out")"
run 3 '"depths":\[30,null,30\],"depth":60,"capacity":60,"unavailable":1' U partitions "$q" --json
run 3 "UNAVAILABLE 1 partition, not in the totals: $q~1\$" U stats "$q" --sample 0
grep -q "all together: depth 60, waiting 60, in flight 0, capacity 60 " "$tmp/out" ||
    fail "stats, sums: $(cat "$tmp/out")"
run 3 '"all_partitions":\{"depth":60,.*"capacity":60,"unavailable":\[1\]\}' \
    U stats "$q" --sample 0 --json

gateway_start --redis "$uurl" --queue "$q"
for i in $(seq 1 100); do # ready once the partition count is read
    curl -sf "http://127.0.0.1:$port/healthz" >/dev/null 2>&1 && break
    sleep 0.05
done
code=$(curl -s -o "$tmp/info" -w '%{http_code}' "http://127.0.0.1:$port/v1/queues/$q")
[ "$code" = 200 ] || fail "GET /v1/queues/$q: $code $(cat "$tmp/info")"
grep -q '"depth":60,"capacity":60,' "$tmp/info" || fail "GET totals: $(cat "$tmp/info")"
grep -q '"partitions":3,"by_partition":\[{"depth":30,"capacity":30,"pending":0},{"depth":null,"capacity":null,"pending":null,"unavailable":"[^"]*"},{"depth":30,"capacity":30,"pending":0}\],"unavailable":1[,}]' \
    "$tmp/info" || fail "GET by_partition: $(cat "$tmp/info")"
echo "test_partitions_figures: summary and capacity are the queue's (90 of 90); with partition 1" \
    "unreadable, partitions, stats and GET show 0 and 2 (60 of 60) and mark 1"
