#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A partitioned queue's configuration is the queue's: sluice-admin limit, fair and capacity
# --per-tenant write it into every partition. Whole-queue scopes (queue, client, drain,
# inflight) are split like the capacity, ceil(N / P) each, with the whole kept in the queue's
# meta; per-tenant scopes, weights and the share are copied; growing the queue splits the whole
# again and gives the new partitions everything; limit list counts refusals in all partitions;
# admission honours the split.
. "$(dirname "$0")/lib.sh"
q="pconf-$$"
A() { "$bin/sluice-admin" --redis "$url" "$@"; }
trap 'for i in "" ~1 ~2 ~3 ~4; do A purge "$q$i" --yes >/dev/null 2>&1 || true; done; lib_cleanup' EXIT
limits_of() { rcli HGETALL "sluice:{$1}:limits" | paste -sd' '; }

run 0 "capacity of $q: 300" A capacity "$q" 300
run 0 'partitions of .*: 3 ' A partitions "$q" 3
run 0 'in each of its 3 partitions: gcra +10/1h \(its share of the whole' \
    A limit "$q" set g queue 30/1h
run 0 'in each of its 3 partitions: gcra +5/1h \(as it is: a tenant lives in one' \
    A limit "$q" set t tenant 5/1h
run 0 'in each of its 3 partitions: leases +3 ' A limit "$q" set i inflight 7
run 0 "fair $q: on" A fair "$q" on --weight A=3
run 0 'per-tenant share: no tenant holds more than 50 ' A capacity "$q" 300 --per-tenant 50
for p in "$q" "$q~1" "$q~2"; do
    [ "$(limits_of "$p")" = "g queue gcra:10:3600000 t tenant gcra:5:3600000 i inflight 3" ] ||
        fail "$p limits: $(limits_of "$p")"
    [ "$(rcli HMGET "sluice:{$p}:meta" fair per_tenant | paste -sd' ')" = "1 50" ] ||
        fail "$p fair/share: $(rcli HMGET "sluice:{$p}:meta" fair per_tenant)"
    [ "$(rcli HGET "sluice:{$p}:weights" A)" = 3 ] || fail "$p weight of A"
done
[ "$(rcli HGET "sluice:{$q}:meta" limit_whole:g)" = "queue gcra:30:3600000" ] || fail "whole of g"

# growth: the whole split again over 5, the new partitions configured like the others
run 0 'partitions of .*: 5 ' A partitions "$q" 5
for p in "$q" "$q~1" "$q~2" "$q~3" "$q~4"; do
    [ "$(limits_of "$p")" = "g queue gcra:6:3600000 t tenant gcra:5:3600000 i inflight 2" ] ||
        fail "after growth, $p limits: $(limits_of "$p")"
    [ "$(rcli HMGET "sluice:{$p}:meta" fair per_tenant | paste -sd' ')" = "1 50" ] ||
        fail "after growth, $p fair/share"
    [ "$(rcli HGET "sluice:{$p}:weights" A)" = 3 ] || fail "after growth, $p weight of A"
done

# admission honours the split: 30 an hour in all, never more, however the messages spread
run 0 'limit i on .* deleted' A limit "$q" del i
run 0 'limit t on .* deleted' A limit "$q" del t # (it would count messages without a tenant too)
seq 1 60 | "$bin/sluice-enqueue" --redis "$url" --queue "$q" >"$tmp/e" 2>&1 || true
admitted=$(sed -n 's/^admitted=\([0-9]*\) .*/\1/p' "$tmp/e")
limited=$(grep -o 'limited=[0-9]*' "$tmp/e" | cut -d= -f2)
[ -n "$admitted" ] && [ "$admitted" -le 30 ] && [ "$admitted" -ge 20 ] ||
    fail "60 offered against 30/1h over 5 partitions: $(cat "$tmp/e")"
[ $((admitted + limited)) = 60 ] || fail "not all 60 answered: $(cat "$tmp/e")"
run 0 "^g +queue +gcra +6/1h +$limited\$" A limit "$q" list
[ "$(A limit "$q" list --json | grep -o '"limited":[0-9]*' | tail -n 1)" = "\"limited\":$limited" ] ||
    fail "limit list --json: $(A limit "$q" list --json)"

# a limit deleted goes from every partition, and its whole with it
run 0 "limit g on $q deleted" A limit "$q" del g
for p in "$q" "$q~1" "$q~2" "$q~3" "$q~4"; do
    [ -z "$(limits_of "$p")" ] || fail "after del, $p: $(limits_of "$p")"
done
[ "$(rcli HEXISTS "sluice:{$q}:meta" limit_whole:g)" = 0 ] || fail "the whole of g stayed"
# a name with room for Q~9 but not Q~10: partitions 12 is refused before anything is written
long="plong$$-$(printf 'L%.0s' $(seq 1 60))"
long=${long:0:62}
trap 'for i in "" ~1 ~2 ~3 ~4; do A purge "$q$i" --yes >/dev/null 2>&1 || true; done
      for i in "" $(seq -f "~%g" 1 9); do rcli DEL "sluice:{$long$i}:meta" >/dev/null || true; done
      lib_cleanup' EXIT
run 0 "capacity of $long: 600" A capacity "$long" 600
run 2 "partition 10 of $long: the name would be longer than 64" A partitions "$long" 12
[ "$(rcli HMGET "sluice:{$long}:meta" capacity partitions | paste -sd' ')" = "600 " ] ||
    fail "a refused partitions call changed the meta: $(rcli HGETALL "sluice:{$long}:meta")"
for i in $(seq 1 9); do
    [ "$(rcli EXISTS "sluice:{$long~$i}:meta")" = 0 ] || fail "a refused call wrote $long~$i"
done
run 0 "capacity of $long: 600" A capacity "$long"

echo "test_partitions_config: limits split and copied over 3 then 5 partitions; $admitted of 60" \
    "admitted against 30/1h, $limited limited, counted in all partitions"
