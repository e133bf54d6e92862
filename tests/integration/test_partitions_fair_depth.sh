#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# `sluice-admin partitions Q` on a fair partitioned queue: a partition's depth is what it holds,
# its tenants' lanes included (meta lane_depth), as stats Q, the enqueue summary and GET
# /v1/queues/Q count it; the stream's length alone leaves out every tenant's entry.
. "$(dirname "$0")/lib.sh"
q="pfair-$$"
A() { "$bin/sluice-admin" --redis "$url" "$@"; }
trap 'for i in "" ~1 ~2; do A purge "$q$i" --yes >/dev/null 2>&1 || true; done; lib_cleanup' EXIT

run 0 'fair .*: on' A fair "$q" on
run 0 "capacity of $q: 300" A capacity "$q" 300
run 0 'partitions of .*: 3 ' A partitions "$q" 3
for t in t1 t2 t3 t4 t5 t6; do
    seq 1 10 | "$bin/sluice-enqueue" --redis "$url" --queue "$q" --tenant "$t" >"$tmp/e" 2>&1 ||
        fail "enqueue $t: $(cat "$tmp/e")"
done
grep -q '^admitted=10 rejected=0 depth=60 capacity=300 partitions=3$' "$tmp/e" ||
    fail "summary: $(cat "$tmp/e")"
run 0 "all together: depth 60, waiting 60, in flight 0, capacity 300 " A stats "$q" --sample 0
run 0 "all together +depth 60 / 300\$" A partitions "$q"
run 0 '"depth":60,"capacity":300,' A partitions "$q" --json
echo "test_partitions_fair_depth: 60 entries in the lanes of a fair queue of 3 partitions:" \
    "partitions Q says depth 60, as stats Q and the enqueue summary do"
