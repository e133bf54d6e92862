#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# redis+sentinel:// on the blocking connection: sluice-enqueue (with --wait-replicas) and
# sluice-admin find the primary through the sentinels; an unknown master name and no reachable
# sentinel are clear errors (exit 3); a sentinel naming a replica is caught by ROLE; a primary
# demoted under a running connection (READONLY) is followed; a user without ROLE is a clear
# error; after kill -9 of the primary under a running sluice-enqueue the same connection follows
# the sentinels' failover, with the data on the new primary; one sentinel of three down still
# works. rediss+sentinel://: test_tls_sentinel.sh; the async clients through Sentinel are
# test_sentinel_async.sh's.
# On a Sentinel group of its own (sentinel_lib.sh) and scripted sentinels (fake_sentinel.py),
# stopped by PIDs.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sentinel_lib.sh"
m="sluice-m$$"
sentinel_start "$m"
q="sent-$$"
E() { "$bin/sluice-enqueue" --redis "$1" --queue "$q" "${@:2}"; }
xlen() { redis-cli -p "$1" XLEN "sluice:{$q}:stream"; }

# through the sentinels, WAIT answered by the replica
run 0 'admitted=2 rejected=0' E "$surl" --wait-replicas 1 a b
[ "$(xlen "$pport")" = 2 ] || fail "the primary holds $(xlen "$pport") entries, expected 2"
run 0 "$q" "$bin/sluice-admin" --redis "$surl" stats "$q" --sample 0
"$bin/sluice-admin" --redis "$surl" stats "$q" --sample 0 --json >"$tmp/stats" ||
    fail "admin stats: $(cat "$tmp/stats")"
python3 -c 'import json, sys; sys.exit(json.load(open(sys.argv[1]))["depth"] != 2)' "$tmp/stats" ||
    fail "admin stats through the sentinels: $(cat "$tmp/stats")"
# sluice-limit, with scripts and with MULTI/EXEC (--no-scripts, a pipelined transaction)
run 0 '^allowed=1 remaining=2 ' "$bin/sluice-limit" --redis "$surl" "$q" k=3/10s
run 0 '^allowed=1 remaining=1 ' "$bin/sluice-limit" --redis "$surl" "$q" k=3/10s
run 0 '^allowed=1 ' "$bin/sluice-limit" --redis "$surl" --no-scripts -a fixed "$q" f=3/10s

# clear errors
run 3 "master name unknown to the sentinels for master 'nosuch'" \
    E "redis+sentinel://127.0.0.1:${sports[0]},127.0.0.1:${sports[1]}/nosuch" x
grep -q "127.0.0.1:${sports[1]}" "$tmp/out" || fail "the sentinels are not named: $(cat "$tmp/out")"
run 3 'no sentinel reachable' E "redis+sentinel://127.0.0.1:1/$m" x
grep -q '127.0.0.1:1' "$tmp/out" || fail "the sentinel is not named: $(cat "$tmp/out")"
# a sentinel that names the replica: ROLE says so; alone it is a clear error when the deadline
# passes, before real sentinels the next one is asked and the call goes to the primary
fake_sentinel_start fake --host 127.0.0.1 --port "$rport"
run 3 "127.0.0.1:$rport answered ROLE slave \(not the primary\)" \
    E "redis+sentinel://127.0.0.1:$fport/$m" --timeout 1000 x
n=$(xlen "$pport")
run 0 'admitted=1 rejected=0' \
    E "redis+sentinel://127.0.0.1:$fport,127.0.0.1:${sports[1]}/$m" --timeout 3000 y
[ "$(xlen "$pport")" = $((n + 1)) ] || fail "the primary holds $(xlen "$pport") entries, expected $((n + 1))"
# READONLY: a primary demoted under a running connection (REPLICAOF) refuses the next write;
# the connection asks again (a scripted sentinel, now naming the group's primary), checks it and
# sends the call again: it did not run. Every payload admitted, none twice.
demoted_start
fake_sentinel_start fake2 --addr-file "$tmp/addr"
qd="$q-ro"
for i in $(seq 1 20); do echo "$i"; sleep 0.1; done |
    timeout 30 "$bin/sluice-enqueue" --redis "redis+sentinel://127.0.0.1:$fport/$m" \
        --queue "$qd" --batch 1 --timeout 10000 --ids --log-level info >"$tmp/ro" 2>&1 &
rpid=$!
sleep 0.8
echo "127.0.0.1 $pport" >"$tmp/addr"
redis-cli -p "$dport" REPLICAOF 127.0.0.1 "$pport" >/dev/null
wait "$rpid" || fail "sluice-enqueue across the demotion: $(cat "$tmp/ro")"
grep -q 'event=sentinel_not_primary' "$tmp/ro" || fail "no READONLY was followed: $(cat "$tmp/ro")"
[ "$(grep -cE '^[0-9]+-[0-9]+ [0-9]+$' "$tmp/ro")" = 20 ] || fail "not 20 admitted: $(cat "$tmp/ro")"
"$SLUICE_SOURCE_DIR/scripts/test-redis" stop "$tmp/demoted"

# a data-node user that may not run ROLE: a clear error at once, not a retry until the deadline
redis-cli -p "$pport" ACL SETUSER norole on '>pw' '~*' '&*' +@all -role >/dev/null
run 3 "NOPERM.*'role'" E "redis+sentinel://norole:pw@127.0.0.1:${sports[0]}/$m?sentinel_password=" --timeout 30000 x
redis-cli -p "$pport" ACL DELUSER norole >/dev/null

# kill -9 of the primary under a running sluice-enqueue (one connection, a payload every
# 100 ms, a 15 s call deadline): the sentinels promote the replica and the same connection
# follows. Every payload reported admitted is on the new primary, but for at most one admitted
# in the last instant before the kill (replication is asynchronous without --wait-replicas); a
# payload in flight at the kill may be reported as outcome unknown (exit 3), never re-sent.
seq 1 40 | timeout 40 "$bin/sluice-enqueue" --redis "$surl" --queue "$q" --rate 10 --batch 1 \
    --timeout 15000 --ids >"$tmp/long" 2>&1 &
lpid=$!
pids+=("$lpid")
sleep 1.5
old="127.0.0.1:$pport"
"$SLUICE_SOURCE_DIR/scripts/test-redis" kill "$sdir/primary"
new=$(wait_failover "$m" "$old" 20)
[ "${new##*:}" = "$rport" ] || fail "the sentinels promoted $new, expected the replica $rport"
lrc=0
wait "$lpid" || lrc=$?
[ "$lrc" = 0 ] || [ "$lrc" = 3 ] || fail "sluice-enqueue across the failover exited $lrc: $(cat "$tmp/long")"
# exit 0: it went on to the end; exit 3: it stopped at the payload in flight at the kill, whose
# outcome it cannot know, and said so (the payloads before it were admitted)
if [ "$lrc" = 0 ]; then
    grep -qE '^[0-9]+-[0-9]+ 40$' "$tmp/long" || fail "the last payload was not admitted: $(cat "$tmp/long")"
    least=38
else
    grep -qE 'may or may not have run|outcome unknown' "$tmp/long" || fail "exit 3 without an outcome-unknown report: $(cat "$tmp/long")"
    least=10 # 1.5 s at 10/s before the kill, less a slow start
fi
missing=0 admitted=0
while read -r id _; do
    admitted=$((admitted + 1))
    [ -n "$(redis-cli -p "$rport" XRANGE "sluice:{$q}:stream" "$id" "$id")" ] || missing=$((missing + 1))
done < <(grep -E '^[0-9]+-[0-9]+ ' "$tmp/long")
[ "$admitted" -ge "$least" ] || fail "only $admitted of 40 admitted across the failover: $(cat "$tmp/long")"
[ "$missing" -le 1 ] || fail "$missing admitted payloads are not on the new primary"
n=$(xlen "$rport")
run 0 'admitted=1 rejected=0' E "$surl" c
[ "$(xlen "$rport")" = $((n + 1)) ] || fail "the new primary holds $(xlen "$rport") entries, expected $((n + 1))"

# one sentinel of three down (the one asked first): the others answer
sentinel_kill 0
run 0 'admitted=1 rejected=0' E "$surl" d
[ "$(xlen "$rport")" = $((n + 2)) ] || fail "the new primary holds $(xlen "$rport") entries, expected $((n + 2))"
run 0 "$q" "$bin/sluice-admin" --redis "$surl" stats "$q" --sample 0
echo "ok"
