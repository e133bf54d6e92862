#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Partitioned queues (sluice-admin partitions Q P): Q, Q~1 ... Q~P-1, each its own queue and
# hash tag, capacity split evenly so the whole never exceeds the queue's; producers spread
# messages without a tenant over the partitions and keep a tenant's messages in one (so its
# order holds there); one sluice-worker drains them all, and a plain queue grown to 4
# partitions while its worker and a producer run loses nothing and exceeds nothing.
. "$(dirname "$0")/lib.sh"
q="parts-$$"
A() { "$bin/sluice-admin" --redis "$url" "$@"; }
E() { "$bin/sluice-enqueue" --redis "$url" "$@"; }
purge_all() {
    local i
    for i in "" ~1 ~2; do A purge "$q$i" --yes >/dev/null 2>&1 || true; done
    for i in "" ~1 ~2; do A purge "$q-t$i" --yes >/dev/null 2>&1 || true; done
    for i in "" ~1 ~2 ~3; do A purge "$q-g$i" --yes >/dev/null 2>&1 || true; done
    for i in "" ~1; do A purge "$q-n$i" --yes >/dev/null 2>&1 || true; done
    A purge "$q-one" --yes >/dev/null 2>&1 || true
}
trap 'purge_all; lib_cleanup' EXIT
xlen() { rcli XLEN "sluice:{$1}:stream"; }

# bad input, named
run 2 'partitions: 65 is out of range 1..64' A partitions "$q" 65
run 2 "$q~1 is a partition" A partitions "$q~1" 2
run 2 'queue name has .~. \(0x7e\)' E --queue "$q~0" x

# one partition of a queue without a capacity changes nothing (no capacity pinned to 1000: the
# producers' own --capacity still holds); more than one says what it pinned
run 0 "partitions of $q-one: 1 \(not partitioned\); nothing changed" A partitions "$q-one" 1
[ -z "$(rcli HGET "sluice:{$q-one}:meta" capacity)" ] || fail "partitions 1 set a capacity"
run 1 '^admitted=5 rejected=1 ' E --queue "$q-one" --capacity 5 a b c d e f
run 0 'it had no capacity set, 1000 is now its capacity' A partitions "$q-n" 2

# capacity 300 over 3 partitions: 100 each, never more than 300 in all
run 0 "capacity of $q: 300" A capacity "$q" 300
run 0 'partitions of .*: 3 \(capacity 300 in all, 100 each\)' A partitions "$q" 3
seq 1 400 | E --queue "$q" >"$tmp/e" || true
grep -q '^admitted=300 rejected=100 ' "$tmp/e" || fail "400 offered: $(cat "$tmp/e")"
# each message counted once in the partitions' stats, not once per partition it tried: admitted
# + rejected over the partitions is what was offered - also through the async producer (the
# gateway: 20 more, all refused). A counter that never moved is absent from the hash (HINCRBY
# makes it): the random routing may leave a partition where no second try ended full.
stats_sum() { local i v n=0; for i in "" ~1 ~2; do
    v=$(rcli HGET "sluice:{$q$i}:stats" "$1"); n=$((n + ${v:-0})); done; echo "$n"; }
[ "$(stats_sum admitted)/$(stats_sum rejected)" = 300/100 ] ||
    fail "stats over the partitions: admitted $(stats_sum admitted), rejected $(stats_sum rejected) of 400"
gateway_start --queue "$q"
for _ in $(seq 1 20); do
    curl -s -o /dev/null -w '%{http_code}\n' --data-binary x "http://127.0.0.1:$port/v1/queues/$q/messages"
done >"$tmp/codes"
[ "$(grep -c '^429$' "$tmp/codes")" = 20 ] || fail "gateway on a full queue: $(sort "$tmp/codes" | uniq -c)"
[ "$(stats_sum rejected)" = 120 ] || fail "20 refused by the gateway counted $(($(stats_sum rejected) - 100)) times"
kill -TERM "${pids[-1]}"
for p in "$q" "$q~1" "$q~2"; do
    [ "$(xlen "$p")" = 100 ] || fail "$p holds $(xlen "$p"), want 100"
done
run 2 'only more are allowed' A partitions "$q" 2
run 0 "capacity of $q: 600 in all, 200 in each of its 3 partitions" A capacity "$q" 600
run 0 'partitions 3, all together: depth 300, waiting 300, in flight 0' A stats "$q" --sample 0
run 0 '"all_partitions":\{"depth":300,' A stats "$q" --sample 0 --json

# one worker drains every partition
"$bin/sluice-worker" --redis "$url" --queue "$q" --handler noop --record "$tmp/r" \
    --log-level info 2>"$tmp/w.log" >/dev/null &
wpid=$!
pids+=("$wpid")
wait_lines "$tmp/r" 300
kill -TERM "$wpid"
wait "$wpid" || fail "worker exit: $(tail -n 3 "$tmp/w.log")"
[ "$(grep -c 'event=partition_started' "$tmp/w.log")" = 3 ] || fail "partitions started: $(grep partition "$tmp/w.log")"
[ "$(wc -l <"$tmp/r")" = 300 ] || fail "processed $(wc -l <"$tmp/r") of 300"
[ -z "$(awk '{ print $2 }' "$tmp/r" | sort | uniq -d)" ] || fail "processed twice"

# --max-messages counts the whole process: 30 spread over 3 partitions (about 10 each), a worker
# told to stop after 20 stops after exactly 20, though no partition holds 20
seq 1 30 | E --queue "$q" >"$tmp/e" || true
grep -q '^admitted=30 ' "$tmp/e" || fail "30 offered: $(cat "$tmp/e")"
rc=0
timeout 30 "$bin/sluice-worker" --redis "$url" --queue "$q" --handler noop --max-messages 20 \
    --record "$tmp/r20" >"$tmp/w20.out" 2>"$tmp/w20.log" || rc=$?
[ "$rc" = 0 ] || fail "--max-messages 20 over 3 partitions: exit $rc: $(tail -n 3 "$tmp/w20.log")"
grep -q '^processed=20 .* partitions=3$' "$tmp/w20.out" || fail "summary: $(cat "$tmp/w20.out")"
[ "$(wc -l <"$tmp/r20")" = 20 ] || fail "processed $(wc -l <"$tmp/r20") of 20"
[ $(($(xlen "$q") + $(xlen "$q~1") + $(xlen "$q~2"))) = 10 ] ||
    fail "left: $(xlen "$q") $(xlen "$q~1") $(xlen "$q~2"), want 10 in all"

# A plain queue grows to 4 partitions mid-run: entries waiting, a worker (100/s) and a producer
# (100/s) running; the worker starts workers for the new partitions, the producers spread over
# them, and a burst after the growth fills all four. The total depth (sampled atomically) never
# exceeds the capacity (+3 of rounding), and every admitted entry is processed exactly once.
# The queue holds less than its new share (100) when it grows: above it, the old partition
# keeps what it holds while the new ones fill (docs/cluster.md: what is not yet).
g="$q-g"
gparts=("$g" "$g~1" "$g~2" "$g~3")
total_depth() {
    rcli EVAL "local n = 0 for _, k in ipairs(KEYS) do n = n + redis.call('XLEN', k) end return n" \
        4 "sluice:{$g}:stream" "sluice:{$g~1}:stream" "sluice:{$g~2}:stream" "sluice:{$g~3}:stream"
}
run 0 "capacity of $g: 400" A capacity "$g" 400
seq 1 40 | sed 's/^/p/' | E --queue "$g" --ids >"$tmp/g.pre" || fail "prefill: $(tail -n 1 "$tmp/g.pre")"
"$bin/sluice-worker" --redis "$url" --queue "$g" --handler sleep:10 --concurrency 1 \
    --record "$tmp/g.rec" --log-level info 2>"$tmp/g.log" >"$tmp/g.out" &
gw=$!
pids+=("$gw")
seq 1 200 | sed 's/^/s/' | E --queue "$g" --rate 100 --batch 1 --ids >"$tmp/g.slow" 2>"$tmp/g.slow.err" &
gp=$!
pids+=("$gp")
(while :; do total_depth; sleep 0.05; done) >"$tmp/g.depths" 2>/dev/null &
gs=$!
pids+=("$gs")
# the worker taking entries (waited for: a fixed sleep let a slow start leave 90 waiting), and
# the producer a moment to add some
wait_lines "$tmp/g.rec" 5
sleep 0.2
d0=$(xlen "$g")
[ "$d0" -gt 0 ] && [ "$d0" -lt 90 ] || fail "before the growth $g should hold some entries, under 90: $d0"
run 0 "partitions of $g: 4 \(capacity 400 in all, 100 each\)" A partitions "$g" 4
sleep 1.5 # the worker and the producers look again once a second
seq 1 600 | sed 's/^/b/' | E --queue "$g" --batch 10 --ids >"$tmp/g.burst" || true
grep -q '^admitted=[1-9][0-9]* rejected=[1-9]' "$tmp/g.burst" || fail "burst: $(tail -n 1 "$tmp/g.burst")"
wait "$gp" || true # exit 1 when the burst left it a full partition: rejected, not lost
grep -q '^admitted=' "$tmp/g.slow" || fail "producer: $(cat "$tmp/g.slow.err")"
for i in $(seq 1 150); do # at most 15 s
    [ "$(total_depth)" = 0 ] && break
    sleep 0.1
done
kill "$gs"
kill -TERM "$gw"
wait "$gw" || fail "worker exit: $(tail -n 3 "$tmp/g.log")"
grep -q 'partitions=4$' "$tmp/g.out" || fail "worker summary: $(cat "$tmp/g.out")"
[ "$(grep -c 'event=partition_started' "$tmp/g.log")" = 3 ] || fail "partitions started: $(grep partition "$tmp/g.log")"
max=$(sort -n "$tmp/g.depths" | tail -n 1)
[ "$max" -le 403 ] || fail "the 4 partitions held $max together; capacity 400 (+3 of rounding)"
awk '!/=/ { print $2 }' "$tmp/g.pre" "$tmp/g.slow" "$tmp/g.burst" | sort >"$tmp/g.admitted"
awk '{ print $2 }' "$tmp/g.rec" | sort >"$tmp/g.processed"
diff "$tmp/g.admitted" "$tmp/g.processed" >"$tmp/g.diff" ||
    fail "admitted vs processed (< lost, > not admitted or twice): $(head -n 5 "$tmp/g.diff" | tr '\n' ' ')"
admitted=0
for p in "${gparts[@]}"; do
    n=$(rcli HGET "sluice:{$p}:stats" admitted)
    n=${n:-0}
    admitted=$((admitted + n))
    [ "$p" = "$g" ] || [ "$n" -gt 0 ] || fail "$p got nothing after the growth"
done
[ "$admitted" = "$(wc -l <"$tmp/g.admitted")" ] || fail "counters say $admitted admitted, producers $(wc -l <"$tmp/g.admitted")"

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
# one partition's call fails (its meta holds a bad capacity): what the others admitted is still
# printed with its id and counted, and the failure is said (exit 3)
qe="$q-e"
A capacity "$qe" 300 >/dev/null
A partitions "$qe" 3 >/dev/null
rcli HSET "sluice:{$qe~2}:meta" capacity bogus >/dev/null
rc=0
seq 1 30 | E --queue "$qe" --ids >"$tmp/eids" 2>"$tmp/eerr" || rc=$?
held=$(($(xlen "$qe") + $(xlen "$qe~1")))
[ "$rc" = 3 ] && grep -q 'invalid capacity "bogus"' "$tmp/eerr" || fail "exit $rc: $(cat "$tmp/eerr")"
[ "$held" -gt 0 ] || fail "nothing admitted into the two good partitions"
[ "$(grep -c '^[0-9]*-[0-9]* ' "$tmp/eids")" = "$held" ] ||
    fail "$held admitted, $(grep -c '^[0-9]*-[0-9]* ' "$tmp/eids") ids printed"
grep -q "^admitted=$held " "$tmp/eids" || fail "summary: $(tail -n 1 "$tmp/eids")"
for i in "" ~1 ~2; do A purge "$qe$i" --yes >/dev/null 2>&1 || true; done
echo "test_partitions: ok (growth 1 -> 4 with $d0 waiting: $admitted admitted and processed once," \
    "total depth at most $max of 400)"
