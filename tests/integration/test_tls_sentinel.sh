#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# rediss+sentinel:// on both connections, against a TLS-only group of its own (a primary, a
# replica replicating over TLS and one sentinel with quorum 1, all --port 0 with the private
# CA of tls_lib.sh; stopped by their PIDs): the sentinel is asked over TLS and the primary it
# names is reached over TLS (sluice-enqueue, sluice-admin; sluice-gateway admits and
# sluice-worker drains, both subscribed to +switch-master over TLS); another CA is refused with
# the reason (exit 3, sluice-enqueue and sluice-worker); after kill -9 of the primary, the
# sentinel's failover is followed over TLS to the promoted replica by sluice-enqueue, the worker
# and the gateway. Plain redis+sentinel:// and the full groups: test_sentinel.sh,
# test_sentinel_async.sh.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/tls_lib.sh"

tls_certs
export SLUICE_TLS_CA_FILE=$tls_dir/ca.crt
m=tlsm$$
start_node() { # VAR ARGS...: a TLS-only server on a free port, its port in VAR, its PID in VAR_pid
    local var=$1 p
    shift
    for _ in $(seq 1 20); do
        p=$(free_port)
        if tls_redis_spawn "$p" no --tls-replication yes --dbfilename "dump-$p.rdb" "$@"; then
            printf -v "$var" '%s' "$p"
            printf -v "${var}_pid" '%s' "$tls_pid"
            return 0
        fi
    done
    fail "could not start a TLS server"
}
start_node pport
start_node rport --replicaof 127.0.0.1 "$pport"
for _ in $(seq 1 100); do
    tls_cli -p "$pport" INFO replication | grep -q 'state=online' && break
    sleep 0.1
done
tls_cli -p "$pport" INFO replication | grep -q 'state=online' || fail "the replica never came online"
sport=""
for _ in $(seq 1 20); do # the sentinel, over TLS to clients and to the servers it watches
    p=$(free_port)
    cat >"$tls_dir/sentinel-$p.conf" <<EOF
port 0
tls-port $p
bind 127.0.0.1
dir $tls_dir
logfile $tls_dir/sentinel-$p.log
tls-cert-file $tls_dir/server.crt
tls-key-file $tls_dir/server.key
tls-ca-cert-file $tls_dir/ca.crt
tls-replication yes
tls-auth-clients no
sentinel monitor $m 127.0.0.1 $pport 1
sentinel down-after-milliseconds $m 1000
sentinel failover-timeout $m 5000
EOF
    redis-server "$tls_dir/sentinel-$p.conf" --sentinel >/dev/null 2>&1 &
    spid=$!
    pids+=("$spid")
    for _ in $(seq 1 50); do
        tls_cli -p "$p" PING 2>/dev/null | grep -q PONG && sport=$p && break
        kill -0 "$spid" 2>/dev/null || break
        sleep 0.1
    done
    [ -n "$sport" ] && break
    kill -KILL "$spid" 2>/dev/null || true
done
[ -n "$sport" ] || fail "could not start a TLS sentinel"
for _ in $(seq 1 100); do
    tls_cli -p "$sport" SENTINEL REPLICAS "$m" 2>/dev/null | grep -q "$rport" && break
    sleep 0.1
done
surl="rediss+sentinel://127.0.0.1:$sport/$m"
q=tsq.$$

run 0 'admitted=2 rejected=0' "$bin/sluice-enqueue" -r "$surl" -q "$q" a b
[ "$(tls_cli -p "$pport" XLEN "sluice:{$q}:stream")" = 2 ] || fail "not on the primary"
run 0 '' "$bin/sluice-admin" --redis "$surl" --json stats "$q"
grep -q '"depth":2' "$tmp/out" || fail "stats over TLS: $(cat "$tmp/out")"
run 3 'certificate verify failed: [a-z]' env SLUICE_TLS_CA_FILE="$tls_dir/other-ca.crt" \
    "$bin/sluice-enqueue" -r "$surl" -q "$q" --timeout 1000 c
# the async connection: another CA stops the worker with the reason (every sentinel refused
# by the TLS checks); the gateway admits and the worker drains through the sentinel, both
# subscribed to +switch-master over TLS
run 3 'certificate verify failed: [a-z]' env SLUICE_TLS_CA_FILE="$tls_dir/other-ca.crt" \
    timeout 10 "$bin/sluice-worker" --redis "$surl" --queue "$q" --handler noop
gateway_start --redis "$surl" --queue "$q" --log-level info
gpid=${pids[-1]}
post() { # PAYLOAD: answered 202 within 10 s (bounded retries), else the test fails
    local code=""
    for _ in $(seq 1 100); do
        code=$(curl -s --max-time 5 -o /dev/null -w '%{http_code}' -d "$1" \
            "http://127.0.0.1:$port/v1/queues/$q/messages" 2>/dev/null) || true
        [ "$code" = 202 ] && return 0
        sleep 0.1
    done
    fail "the gateway did not admit $1: $code $(tail -n 3 "$tmp/gw.log")"
}
post g1
record_worker "$surl" "$q" 3
grep -q ' g1' "$tmp/w" || fail "the worker drained nothing over TLS: $(tail -n 3 "$tmp/w.log")"
for f in gw w; do # made beside the primary's link: it may come later
    wait_log "$tmp/$f.log" 'event=sentinel_subscribed'
    grep -q 'event=sentinel_subscribed' "$tmp/$f.log" || fail "$f: no +switch-master subscription"
done

# the primary dies: the sentinel promotes the replica, the next call finds it over TLS
kill -KILL "$pport_pid"
run 0 'admitted=1' "$bin/sluice-enqueue" -r "$surl" -q "$q" --timeout 20000 d
[ "$(tls_cli -p "$rport" ROLE | head -n 1)" = master ] || fail "the replica was not promoted"
# entries-added, not XLEN: the running worker may have acknowledged (deleted) it already
n=$(tls_cli -p "$rport" XINFO STREAM "sluice:{$q}:stream" | sed -n '/^entries-added$/{n;p}')
[ "$n" -ge 1 ] || fail "not on the promoted replica: entries-added $n"
post g2 # the gateway and the worker follow the failover (bounded waits)
wait_lines "$tmp/w" 5 15
grep -q ' d ' "$tmp/w" || fail "the worker did not drain d on the promoted replica: $(cat "$tmp/w")"
grep -q ' g2' "$tmp/w" || fail "the worker did not drain on the promoted replica: $(tail -n 3 "$tmp/w.log")"
kill -TERM "$wpid" "$gpid"
wait "$wpid" || fail "worker: $(tail -n 3 "$tmp/w.log")"
wait "$gpid" || fail "gateway: $(tail -n 3 "$tmp/gw.log")"
echo "test_tls_sentinel: ok"
