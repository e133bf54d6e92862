#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Partitioned queues (sluice-admin partitions Q P): Q, Q~1 ... Q~P-1, each its own queue and
# hash tag, capacity split evenly so the whole never exceeds the queue's; producers spread
# messages without a tenant over the partitions and keep a tenant's messages in one (so its
# order holds there); one sluice-worker drains them all, and partitions added while it runs
# are picked up and lose nothing.
. "$(dirname "$0")/lib.sh"
q="parts-$$"
A() { "$bin/sluice-admin" --redis "$url" "$@"; }
E() { "$bin/sluice-enqueue" --redis "$url" "$@"; }
purge_all() {
    local i
    for i in "" ~1 ~2 ~3 ~4 ~5; do A purge "$q$i" --yes >/dev/null 2>&1 || true; done
    for i in "" ~1 ~2; do A purge "$q-t$i" --yes >/dev/null 2>&1 || true; done
}
trap 'purge_all; lib_cleanup' EXIT
xlen() { rcli XLEN "sluice:{$1}:stream"; }

# bad input, named
run 2 'partitions: 65 is out of range 1..64' A partitions "$q" 65
run 2 "$q~1 is a partition" A partitions "$q~1" 2
run 2 'queue name has .~. \(0x7e\)' E --queue "$q~0" x

# capacity 300 over 3 partitions: 100 each, never more than 300 in all
run 0 "capacity of $q: 300" A capacity "$q" 300
run 0 'partitions of .*: 3 \(capacity 300 in all, 100 each\)' A partitions "$q" 3
seq 1 400 | E --queue "$q" >"$tmp/e" || true
grep -q '^admitted=300 rejected=100 ' "$tmp/e" || fail "400 offered: $(cat "$tmp/e")"
for p in "$q" "$q~1" "$q~2"; do
    [ "$(xlen "$p")" = 100 ] || fail "$p holds $(xlen "$p"), want 100"
done
run 2 'only more are allowed' A partitions "$q" 2
run 0 "capacity of $q: 600 in all, 200 in each of its 3 partitions" A capacity "$q" 600
run 0 'partitions 3, all together: depth 300, waiting 300, in flight 0' A stats "$q" --sample 0
run 0 '"all_partitions":\{"depth":300,' A stats "$q" --sample 0 --json

# one worker drains every partition; partitions added while it runs are picked up
"$bin/sluice-worker" --redis "$url" --queue "$q" --handler noop --record "$tmp/r" \
    --log-level info 2>"$tmp/w.log" >/dev/null &
wpid=$!
pids+=("$wpid")
wait_lines "$tmp/r" 300
run 0 'partitions of .*: 5 ' A partitions "$q" 5
sleep 1.5 # the worker and the producers look again once a second
seq 1 500 | sed 's/^/g/' | E --queue "$q" --capacity 10 >/dev/null || true
for i in $(seq 1 100); do
    n=0
    for p in "$q" "$q~1" "$q~2" "$q~3" "$q~4"; do n=$((n + $(xlen "$p"))); done
    [ "$n" = 0 ] && break
    sleep 0.1
done
kill -TERM "$wpid"
wait "$wpid" || fail "worker exit: $(tail -n 3 "$tmp/w.log")"
[ "$(grep -c 'event=partition_started' "$tmp/w.log")" = 5 ] || fail "partitions started: $(grep partition "$tmp/w.log")"
admitted=$(rcli HGET "sluice:{$q}:stats" admitted)
for p in "$q~1" "$q~2" "$q~3" "$q~4"; do
    admitted=$((admitted + $(rcli HGET "sluice:{$p}:stats" admitted)))
done
[ "$(wc -l <"$tmp/r")" = "$admitted" ] || fail "processed $(wc -l <"$tmp/r") of $admitted admitted"
[ -z "$(awk '{ print $2 }' "$tmp/r" | sort | uniq -d)" ] || fail "processed twice"
for p in "$q~3" "$q~4"; do
    [ "$(rcli HGET "sluice:{$p}:stats" admitted)" -gt 0 ] || fail "$p got nothing after the growth"
done

# a tenant's messages go to one partition, in order
qt="$q-t"
run 0 'partitions of .*: 3 ' A partitions "$qt" 3
for t in A B C D; do
    seq 1 20 | sed "s/^/$t-/" | E --queue "$qt" --tenant "$t" --capacity 1000 >/dev/null
done
for t in A B C D; do # each tenant's entries sit in one partition
    holders=0
    for p in "$qt" "$qt~1" "$qt~2"; do
        rcli XRANGE "sluice:{$p}:stream" - + | grep -q "$t-" && holders=$((holders + 1))
    done
    [ "$holders" = 1 ] || fail "tenant $t spread over $holders partitions"
done
"$bin/sluice-worker" --redis "$url" --queue "$qt" --handler noop --concurrency 1 \
    --record "$tmp/t" >/dev/null 2>&1 &
tpid=$!
pids+=("$tpid")
wait_lines "$tmp/t" 80
kill -TERM "$tpid"
wait "$tpid" || true
[ "$(wc -l <"$tmp/t")" = 80 ] || fail "tenants: processed $(wc -l <"$tmp/t") of 80"
for t in A B C D; do # concurrency 1 per partition: a tenant's entries come in their order
    grep " $t-" "$tmp/t" | awk '{ split($2, a, "-"); print a[2] }' >"$tmp/order"
    sort -n -c "$tmp/order" 2>/dev/null || fail "tenant $t out of order: $(tr '\n' ' ' <"$tmp/order")"
done
echo "test_partitions: ok"
