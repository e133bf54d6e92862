#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# sluice-admin clear: deletes the waiting entries and only those, on a plain stream queue with a
# tenant share, a fair queue (lanes, their counts, the ring, the share) and a list queue. While a
# worker holds entries in flight: without --yes it says what it would delete and exits 2; with
# --yes every derived count is right afterwards (depth, tdepth, lanes, lane_depth, lane_wait,
# lwait, ring), admission accepts exactly capacity - in flight more, capacity and counters stay,
# and the entries in flight are still acknowledged.
. "$(dirname "$0")/lib.sh"
q="clear-$$"
A() { "$bin/sluice-admin" --redis "$url" "$@"; }
E() { "$bin/sluice-enqueue" --redis "$url" "$@"; }
purge() { A purge "$1" --yes >/dev/null 2>&1 || true; }
modes=(plain fair list)
trap 'for m in "${modes[@]}"; do purge "$q-$m"; done; lib_cleanup' EXIT
backend() { [ "$1" = list ] && echo list || echo stream; }
json_field() { # FILE NAME: a number field of a one-line JSON object
    sed -n "s/.*\"$2\":\([0-9]*\).*/\1/p" "$1"
}
hsum() { rcli HVALS "$1" | awk '{ s += $1 } END { print s + 0 }'; }

run 2 "unexpected argument 'all'" A clear "$q-plain" all --yes

# ---- 10 entries each (tenants A x5, B x3, none x2), then a worker holds 3 in flight ----
A fair "$q-fair" on >/dev/null
for m in "${modes[@]}"; do
    b=$(backend "$m")
    A capacity "$q-$m" 20 >/dev/null
    [ "$b" = stream ] && A capacity "$q-$m" 20 --per-tenant 10 >/dev/null
    E --backend "$b" --queue "$q-$m" --tenant A a1 a2 a3 a4 a5 >/dev/null
    E --backend "$b" --queue "$q-$m" --tenant B b1 b2 b3 >/dev/null
    E --backend "$b" --queue "$q-$m" n1 n2 >/dev/null
    "$bin/sluice-worker" --redis "$url" --queue "$q-$m" --backend "$b" --handler sleep:6000 \
        --concurrency 3 --max-messages 3 --log-level error >/dev/null 2>"$tmp/log-$m" &
    pids+=("$!")
    eval "pid_$m=\$!"
done
for m in "${modes[@]}"; do
    for i in $(seq 1 100); do
        A stats "$q-$m" --sample 0 --json >"$tmp/j"
        [ "$(json_field "$tmp/j" in_flight)" = 3 ] && break
        sleep 0.1
    done
    [ "$(json_field "$tmp/j" in_flight)" = 3 ] || fail "$m: no 3 in flight: $(cat "$tmp/j")"
done

# ---- clear ----
for m in "${modes[@]}"; do
    run 2 "would delete the 7 waiting entries of $q-$m \(the 3 in flight stay.*--yes" A clear "$q-$m"
    run 0 "^cleared 7 waiting entries of $q-$m: depth now 3 \(3 in flight, 0 waiting\)" \
        A clear "$q-$m" --yes
    [ "$(rcli HGET "sluice:{$q-$m}:meta" capacity)" = 20 ] || fail "$m: capacity not kept"
    [ "$(rcli HGET "sluice:{$q-$m}:stats" admitted)" = 10 ] || fail "$m: counters not kept"
done
A clear "$q-plain" --yes --json >"$tmp/j" || true
[ "$(json_field "$tmp/j" cleared)" = 0 ] || fail "a second clear: $(cat "$tmp/j")"
for m in plain fair; do # the tenant share counts the 3 in flight only
    [ "$(hsum "sluice:{$q-$m}:tdepth")" = 3 ] || fail "$m: tdepth $(rcli HGETALL "sluice:{$q-$m}:tdepth")"
done
f="sluice:{$q-fair}"
in_lanes=$(hsum "$f:lanes")
[ "$(rcli HGET "$f:meta" lane_depth)" = "$in_lanes" ] || fail "lane_depth != the lanes' sum $in_lanes"
[ "$(rcli HGET "$f:meta" lane_wait)" = 0 ] || fail "lane_wait $(rcli HGET "$f:meta" lane_wait)"
[ "$(rcli HLEN "$f:lwait")" = 0 ] && [ "$(rcli LLEN "$f:ring")" = 0 ] ||
    fail "lwait $(rcli HGETALL "$f:lwait") ring $(rcli LRANGE "$f:ring" 0 -1)"
[ "$(rcli LLEN "sluice:{$q-list}:list")" = 0 ] || fail "list: waiting elements left"

# ---- admission: exactly capacity - in flight = 17 more (tenants C and D: 10 + 7) ----
for m in "${modes[@]}"; do
    b=$(backend "$m")
    run 0 'admitted=10 rejected=0' E --backend "$b" --queue "$q-$m" --tenant C $(seq 1 10)
    run 1 'admitted=7 rejected=3' E --backend "$b" --queue "$q-$m" --tenant D $(seq 1 10)
done

# ---- the entries in flight are acknowledged: the workers end after their 3 ----
for m in "${modes[@]}"; do
    eval "p=\$pid_$m"
    rc=0
    timeout 20 tail --pid="$p" -f /dev/null || rc=$?
    [ "$rc" = 0 ] || fail "$m: the worker did not end"
    wait "$p" || fail "$m: the worker failed: $(cat "$tmp/log-$m")"
    A stats "$q-$m" --sample 0 --json >"$tmp/j"
    [ "$(json_field "$tmp/j" acked)" = 3 ] && [ "$(json_field "$tmp/j" depth)" = 17 ] &&
        [ "$(json_field "$tmp/j" in_flight)" = 0 ] || fail "$m after the acks: $(cat "$tmp/j")"
done
for m in plain fair; do # C 10, D 7: the cleared and the acknowledged are gone
    t="sluice:{$q-$m}:tdepth"
    [ "$(rcli HGET "$t" C)/$(rcli HGET "$t" D)/$(rcli HLEN "$t")" = 10/7/2 ] ||
        fail "$m: tdepth $(rcli HGETALL "$t")"
done
[ "$(rcli HGET "$f:lanes" C)/$(rcli HGET "$f:lanes" D)/$(rcli HLEN "$f:lanes")" = 10/7/2 ] &&
    [ "$(rcli HGET "$f:meta" lane_depth)" = 17 ] && [ "$(rcli HGET "$f:meta" lane_wait)" = 17 ] ||
    fail "fair: lanes $(rcli HGETALL "$f:lanes"), meta $(rcli HGETALL "$f:meta")"
echo ok
