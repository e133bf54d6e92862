#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The async connection's ASK and MOVED handling under load, on its own Redis Cluster (3
# primaries, 3 replicas, started here and stopped by their PIDs): sluice-faultaprod (one
# sluice_aproducer, an admission every millisecond) admits into a queue whose slot is migrated.
#
# The migration ends while calls sent on the ask link wait for their replies: the target is
# stopped (SIGSTOP) for a moment with calls in flight on the ask link, the source is told the
# slot is the target's, and the next call answered MOVED moves the connection to the target.
# The calls sent on the ask link ran (or will, once the target runs again): each must be called
# back with what the target answered - admitted - never "cancelled" (which a web handler turns
# into a retry, so into a duplicate). Every callback runs once, within its deadline, and Redis
# holds exactly the admitted payloads.
#
# With --wait-replicas, the WAIT sent behind each call follows the call to the node that ran it
# (see the second part below).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/cluster_lib.sh"
cluster_start
q="ask$$"
msrc=$(owner "$q")
mdst=$(primaries | grep -vx "$msrc" | head -n 1)
[ -n "$msrc" ] && [ -n "$mdst" ] || fail "no source and target for $q"
slot=$(rc "$msrc" CLUSTER KEYSLOT "sluice:{$q}:stream")
sid=$(rc "$msrc" CLUSTER MYID)
did=$(rc "$mdst" CLUSTER MYID)
dpid=$(pid_of "$mdst")
"$bin/sluice-admin" --redis "$curl" capacity "$q" 1000000 >/dev/null

"$bin/sluice-faultaprod" --redis "$curl" --queue "$q" --count 4000 --per-tick 2 \
    --timeout 3000 --log-level info --out "$tmp/out" >"$tmp/sum" 2>"$tmp/log" &
lp=$!
pids+=("$lp")
sleep 0.5
rc "$mdst" CLUSTER SETSLOT "$slot" IMPORTING "$sid" | grep -q OK || fail "IMPORTING"
rc "$msrc" CLUSTER SETSLOT "$slot" MIGRATING "$did" | grep -q OK || fail "MIGRATING"
mapfile -t ks < <(rc "$msrc" CLUSTER GETKEYSINSLOT "$slot" 100 | grep .)
rc "$msrc" MIGRATE 127.0.0.1 "$mdst" "" 0 5000 KEYS "${ks[@]}" | grep -q OK || fail "MIGRATE"
sleep 0.3 # the calls answered ASK go on the ask link to the target
kill -STOP "$dpid"
sleep 0.02 # calls in flight on the ask link
rc "$msrc" CLUSTER SETSLOT "$slot" NODE "$did" >/dev/null
sleep 0.1 # the next call on the source is answered MOVED
kill -CONT "$dpid"
for p in $(primaries); do rc "$p" CLUSTER SETSLOT "$slot" NODE "$did" >/dev/null; done
wait "$lp" || fail "the callback contract: $(cat "$tmp/sum") $(grep -v level= "$tmp/log" | head -n 3)"
grep -q 'event=cluster_ask' "$tmp/log" || fail "no ask link was used"
grep -q 'event=cluster_moved' "$tmp/log" || fail "the MOVED was not followed"
bad=$(awk '$2 != 0 { print $3 }' "$tmp/out" | sort | uniq -c | tr '\n' ' ')
[ -z "$bad" ] || fail "not admitted across the migration: $bad ($(cat "$tmp/sum"))"
awk '{ print $1 }' "$tmp/out" | sort >"$tmp/admitted"
rc "$mdst" XRANGE "sluice:{$q}:stream" - + | grep -ao 'a-[0-9]*' | sort >"$tmp/held"
cmp -s "$tmp/admitted" "$tmp/held" ||
    fail "Redis holds $(wc -l <"$tmp/held") payloads, $(wc -l <"$tmp/admitted") admitted"

# ---- --wait-replicas across a migration: the WAIT behind a call goes where the call went ----
# The target's replica is stopped while calls run on the target (through the ask link, then at
# the slot's new owner after the MOVED): a WAIT answered by the source would count the source's
# replicas and confirm writes the target's replica never saw. Sent after the call on the
# target, it times out: those admissions are reported unknown, never admitted.
q2="askw$$"
wsrc=$(owner "$q2")
wdst=$(primaries | grep -vx "$wsrc" | head -n 1)
wslot=$(rc "$wsrc" CLUSTER KEYSLOT "sluice:{$q2}:stream")
wsid=$(rc "$wsrc" CLUSTER MYID)
wdid=$(rc "$wdst" CLUSTER MYID)
rport=$(rc "$wdst" CLUSTER REPLICAS "$wdid" | awk 'NR == 1 { split($2, a, "[:@]"); print a[2] }')
rpid=$(pid_of "$rport")
[ -n "$rpid" ] || fail "no replica of $wdst"
"$bin/sluice-admin" --redis "$curl" capacity "$q2" 1000000 >/dev/null
"$bin/sluice-faultaprod" --redis "$curl" --queue "$q2" --count 1500 --per-tick 1 \
    --timeout 3000 --wait-replicas 1 --wait-timeout 200 --prefix w --out "$tmp/wout" \
    >"$tmp/wsum" 2>"$tmp/wlog" &
lp=$!
pids+=("$lp")
sleep 0.3
kill -STOP "$rpid"
rc "$wdst" CLUSTER SETSLOT "$wslot" IMPORTING "$wsid" | grep -q OK || fail "IMPORTING"
rc "$wsrc" CLUSTER SETSLOT "$wslot" MIGRATING "$wdid" | grep -q OK || fail "MIGRATING"
mapfile -t ks < <(rc "$wsrc" CLUSTER GETKEYSINSLOT "$wslot" 100 | grep .)
rc "$wsrc" MIGRATE 127.0.0.1 "$wdst" "" 0 5000 KEYS "${ks[@]}" | grep -q OK || fail "MIGRATE"
sleep 0.5 # calls through the ask link, each WAIT behind its call on the target
rc "$wsrc" CLUSTER SETSLOT "$wslot" NODE "$wdid" >/dev/null
sleep 0.5 # calls answered MOVED, sent again to the target with their WAIT
kill -CONT "$rpid"
for p in $(primaries); do rc "$p" CLUSTER SETSLOT "$wslot" NODE "$wdid" >/dev/null; done
wait "$lp" || fail "the callback contract with WAIT: $(cat "$tmp/wsum")"
unknown=$(awk '$3 == "EUNKNOWN"' "$tmp/wout" | wc -l)
[ "$unknown" -gt 0 ] ||
    fail "calls ran on the target while its replica was stopped, none reported unknown: the WAIT was answered elsewhere ($(cat "$tmp/wsum"))"
others=$(awk '$2 != 0 && $3 != "EUNKNOWN" { print $3 }' "$tmp/wout" | sort | uniq -c | tr '\n' ' ')
[ -z "$others" ] || fail "with --wait-replicas across the migration: $others"
echo "test_cluster_ask: ok ($(cat "$tmp/sum"); with WAIT: $(cat "$tmp/wsum"))"
