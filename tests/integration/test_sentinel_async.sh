#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# redis+sentinel:// on the async connection: no sentinel reachable and an unknown master name
# are clear errors (retried like a server that is down); sluice-gateway (--wait-replicas 1)
# admits and sluice-worker drains through the sentinels, with the first sentinel of the URL
# down from the start. kill -9 of the primary under a stream of gateway admissions and a running
# worker: both follow the sentinels' failover by themselves, the gateway is ready on the new
# primary within a few seconds of it and admits again, and every admission answered 202 is
# processed (0 lost). Then a manual failover (SENTINEL FAILOVER,
# the old primary still up and still claiming to be one): both hear +switch-master and move to
# the new primary without a failed call, the worker draining there what is admitted there. Last,
# a primary demoted under the gateway (READONLY) is followed, the refused admission sent again
# to the primary a (scripted) sentinel names then. On a Sentinel group of its own
# (sentinel_lib.sh: a primary, two replicas, 3 sentinels), stopped by PIDs.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sentinel_lib.sh"
m="sluice-am$$"
SENTINEL_REPLICAS=2 sentinel_start "$m"
q="asent-$$"
sentinel_kill 0 # one sentinel of three down (the one asked first): the others answer

# clear errors, retried like a server that is down: no sentinel reachable, an unknown name
timeout 2 "$bin/sluice-worker" --redis "redis+sentinel://127.0.0.1:1/$m" --queue "$q" \
    --handler noop >/dev/null 2>"$tmp/e1.log" || true
grep -q "event=redis_down.*no sentinel reachable for master '$m' (127.0.0.1:1: Connection refused)" \
    "$tmp/e1.log" || fail "no sentinel reachable: $(head -n 3 "$tmp/e1.log")"
timeout 2 "$bin/sluice-worker" --redis "redis+sentinel://127.0.0.1:${sports[1]}/nosuch" \
    --queue "$q" --handler noop >/dev/null 2>"$tmp/e2.log" || true
grep -q "master name unknown to the sentinels for master 'nosuch'" "$tmp/e2.log" ||
    fail "unknown master name: $(head -n 3 "$tmp/e2.log")"

gateway_start --redis "$surl" --queue "$q" --wait-replicas 1 --log-level info
gpid=${pids[-1]}
post() { # PAYLOAD: prints "CODE ID"
    local out
    out=$(curl -s --max-time 5 -w ' %{http_code}' -d "$1" \
        "http://127.0.0.1:$port/v1/queues/$q/messages" 2>/dev/null) || true
    [ "${out##* }" = 202 ] || echo "$out" >"$tmp/refused" # the last refusal, for a failure message
    echo "${out##* } $(echo "$out" | grep -oE '"id":"[0-9]+-[0-9]+"' | cut -d'"' -f4)"
}
code=""
for i in $(seq 1 100); do # the gateway finds the primary (bounded: 10 s)
    code=$(post "first")
    [ "${code%% *}" = 202 ] && break
    sleep 0.1
done
[ "${code%% *}" = 202 ] || fail "the gateway never admitted through the sentinels: $code $(tail -n 3 "$tmp/gw.log")"
record_worker "$surl" "$q" 1
grep -q ' first' "$tmp/w" || fail "the worker drained nothing through the sentinels: $(tail -n 3 "$tmp/w.log")"
wait_log "$tmp/gw.log" 'event=sentinel_subscribed' # made beside the primary's link: may come later
grep -q 'event=sentinel_subscribed' "$tmp/gw.log" || fail "the gateway did not subscribe to +switch-master"

# ---- kill -9 of the primary under admissions (one POST at a time, for at most 25 s) ----
post_loop() { # PREFIX: "SECONDS CODE ID PAYLOAD" per POST, until the file $tmp/stop exists
    local i=0 r start=$SECONDS
    while [ ! -e "$tmp/stop" ] && [ $((SECONDS - start)) -lt 30 ]; do
        i=$((i + 1))
        r=$(post "$1-$i")
        echo "$(date +%s.%N) $r $1-$i"
        sleep 0.02
    done
}
# what the replication looked like (for a failure message)
repl() { # PORT...
    local p
    for p in "$@"; do
        echo "[$p: $(redis-cli -p "$p" INFO replication 2>&1 | tr -d '\r' |
            grep -E '^(role|connected_slaves|slave[0-9]|master_link_status|master_port)' | tr '\n' ' ')]"
    done
}
post_loop fo >"$tmp/fo" &
lpid=$!
pids+=("$lpid")
for i in $(seq 1 50); do # some admitted before the kill (bounded)
    [ "$(grep -c ' 202 ' "$tmp/fo" || true)" -ge 20 ] && break
    sleep 0.1
done
old="127.0.0.1:$pport"
kill_at=$(date +%s.%N)
"$SLUICE_SOURCE_DIR/scripts/test-redis" kill "$sdir/primary"
new=$(wait_failover "$m" "$old" 20)
fo_at=$(date +%s.%N)
for i in $(seq 1 200); do # admissions resume (bounded: 20 s past the failover)
    awk -v t="$fo_at" '$1 > t && $2 == 202' "$tmp/fo" | grep -q . && break
    sleep 0.1
done
sleep 1 # and go on a little
touch "$tmp/stop"
wait "$lpid" || true
awk '$2 == 202 { print $3, $4 }' "$tmp/fo" >"$tmp/fo.adm"
# the gateway is ready on the new primary at most 5 s after the sentinels agreed on it (a bound
# for a loaded machine; it is usually at once, on +switch-master), and admits there again: the
# first 202 after the first refused POST past the kill (one answered just after the kill may
# have been admitted before it). With --wait-replicas 1 that 202 also waits for the other
# replica to follow the new primary, which is Redis's time, so it is reported, not bounded.
ready=$(grep "event=redis_ready.*node=$new" "$tmp/gw.log" | head -n 1 | cut -d' ' -f1)
[ -n "$ready" ] || fail "the gateway never reached $new: $(tail -n 5 "$tmp/gw.log")"
ready=$(date -d "$ready" +%s.%N)
awk -v r="$ready" -v f="$fo_at" 'BEGIN { exit !(r - f <= 5) }' ||
    fail "the gateway was ready on $new $(awk -v r="$ready" -v f="$fo_at" 'BEGIN { print r - f }') s after the failover"
resumed=$(awk -v k="$kill_at" '$1 > k && $2 != 202 { gap = 1 } gap && $2 == 202 { print $1; exit }' "$tmp/fo")
[ -n "$resumed" ] || fail "no admission after the kill: $(tail -n 5 "$tmp/fo") $(cat "$tmp/refused") $(tail -n 5 "$tmp/gw.log") $(repl "${new##*:}" "$rport" "$r2port")"
for i in $(seq 1 200); do # the worker follows too (bounded: 20 s)
    python3 "$SLUICE_SOURCE_DIR/tests/faults/check.py" --admitted "$tmp/fo.adm" \
        --processed "$tmp/w" >"$tmp/chk" 2>/dev/null && break
    sleep 0.1
done
python3 "$SLUICE_SOURCE_DIR/tests/faults/check.py" --admitted "$tmp/fo.adm" --processed "$tmp/w" \
    >"$tmp/chk" || fail "after the failover: $(cat "$tmp/chk") $(tail -n 5 "$tmp/w.log")"
grep -q "event=redis_ready.*node=$new" "$tmp/gw.log" || fail "the gateway never reached $new"
grep -q "event=redis_ready.*node=$new" "$tmp/w.log" || fail "the worker never reached $new"
fo_chk=$(cat "$tmp/chk")

# ---- +switch-master: a manual failover, the old primary still up (and for some seconds still a
# primary in its own eyes: only the subscription tells the clients to move) ----
cur=$new
for i in $(seq 1 40); do # refused while the last failover is being finished (INPROG) or the
    # replica is not seen on the new primary yet (NOGOODSLAVE): bounded, 20 s
    redis-cli -p "${sports[1]}" SENTINEL FAILOVER "$m" >"$tmp/mf" 2>&1 || true
    grep -qx OK "$tmp/mf" && break
    sleep 0.5
done
grep -qx OK "$tmp/mf" || fail "SENTINEL FAILOVER refused: $(cat "$tmp/mf")"
next=$(wait_failover "$m" "$cur" 20)
for f in gw w; do
    for i in $(seq 1 100); do # bounded: 10 s
        grep -q "event=redis_ready.*node=$next" "$tmp/$f.log" && break
        sleep 0.1
    done
    grep -q "event=sentinel_switch_master.* to=$next" "$tmp/$f.log" ||
        fail "$f did not hear +switch-master to $next: $(grep sentinel_ "$tmp/$f.log" | tail -n 5)"
    grep -q "event=redis_ready.*node=$next" "$tmp/$f.log" || fail "$f did not move to $next"
done
# the worker drains there what the gateway admits there (WAIT 1 may not be confirmed yet while
# the old primary is still being turned into a replica: the answer may be 202 or unknown)
n0=$(redis-cli -p "${next##*:}" XLEN "sluice:{$q}:stream")
post "sw-1" >/dev/null
post "sw-2" >/dev/null
wait_lines "$tmp/w" "$(($(wc -l <"$tmp/w") + 2))" 10
grep -q ' sw-2' "$tmp/w" || fail "the worker did not drain on the new primary $next: $(tail -n 3 "$tmp/w.log")"
[ "$(redis-cli -p "${next##*:}" XINFO STREAM "sluice:{$q}:stream" | sed -n '/^entries-added$/{n;p}')" -ge $((n0 + 2)) ] ||
    fail "the admissions after +switch-master did not reach $next"
! grep -q 'level=error' "$tmp/gw.log" "$tmp/w.log" || fail "errors: $(grep -h level=error "$tmp/gw.log" "$tmp/w.log")"
kill -TERM "$wpid" "$gpid"
wait "$wpid" || fail "worker: $(tail -n 3 "$tmp/w.log")"
wait "$gpid" || fail "gateway: $(tail -n 3 "$tmp/gw.log")"

# ---- READONLY: a primary demoted under the gateway (REPLICAOF) refuses the next admission; the
# connection holds it, asks again (a scripted sentinel, now naming the group's primary), checks
# ROLE and sends it there: every POST answered 202, those after the demotion on the primary ----
demoted_start
fake_sentinel_start fake --addr-file "$tmp/addr"
q="$q-ro"
gateway_start --redis "redis+sentinel://127.0.0.1:$fport/$m" --queue "$q" \
    --log-level info
for i in $(seq 1 100); do [ "$(post ro-0 | cut -d' ' -f1)" = 202 ] && break; sleep 0.1; done
echo "127.0.0.1 ${next##*:}" >"$tmp/addr"
redis-cli -p "$dport" REPLICAOF 127.0.0.1 "${next##*:}" >/dev/null
for i in 1 2 3 4 5; do post "ro-$i"; done >"$tmp/ro"
[ "$(grep -c '^202 ' "$tmp/ro")" = 5 ] || fail "POSTs across the demotion: $(cat "$tmp/ro") $(tail -n 3 "$tmp/gw.log")"
grep -q 'event=sentinel_not_primary.*READONLY' "$tmp/gw.log" || fail "no READONLY was followed: $(tail -n 5 "$tmp/gw.log")"
[ "$(redis-cli -p "${next##*:}" XLEN "sluice:{$q}:stream")" = 5 ] ||
    fail "the primary holds $(redis-cli -p "${next##*:}" XLEN "sluice:{$q}:stream") of the 5 admitted after the demotion"
kill -TERM "${pids[-1]}"
wait "${pids[-1]}" || fail "gateway: $(tail -n 3 "$tmp/gw.log")"
echo "test_sentinel_async: ok (failover: $fo_chk; after it the gateway was ready in $(awk -v r="$ready" -v f="$fo_at" 'BEGIN { printf "%.1f", r - f }') s and admitted again in $(awk -v r="$resumed" -v f="$fo_at" 'BEGIN { printf "%.1f", r - f }') s)"
