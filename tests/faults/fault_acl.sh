#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# fault_acl.sh - least privilege (docs/faults.md B12).
#
# The ACL lines below are the ones docs/guarantees.md (Least privilege) gives; this test proves them on
# Redis 7.0: an admin loads the library, then
#   - the producer user admits (also with an idempotency key) and can do nothing else that
#     matters: no reading payloads, no deleting, trimming, acking, changing capacity, loading or
#     flushing functions, touching keys outside sluice:*, writing the dead stream. (Redis 7.0
#     cannot limit FCALL to one function or forbid a command outside a function: the producer
#     can XADD to a bucket directly, bypassing the capacity check. That is documented.)
#   - a producer user limited to one queue gets NOPERM for another: exit 3, clear message
#   - the worker user drains, retries (XCLAIM), reclaims (XAUTOCLAIM), keeps a long job
#     (touch), dead-letters an undecodable entry, and can do nothing else that matters
#   - without a permission it needs, each fails clearly (exit 3, "not permitted by the redis
#     ACL") instead of retrying forever: a producer without XADD, a worker without XREADGROUP,
#     a worker without XACK
#   - after an admin's FUNCTION FLUSH the producer user cannot reload the library: exit 3 with
#     the reason; once an admin reloads it, it works again
#   - on a Redis Cluster (3 primaries, 3 replicas, started here), the same users with the
#     docs/guarantees.md's cluster rules (CLUSTER SHARDS/SLOTS, ASKING, EXISTS on meta) admit with
#     sluice-enqueue and the gateway and drain with sluice-worker; without those rules the
#     producer exits 3 and the worker exits 3 ("not permitted by the redis ACL") instead of
#     retrying forever
set -euo pipefail
. "$(dirname "$0")/lib.sh"
fl_init fault_acl
cdir=$FL_DIR/cluster
FL_CLUSTERS+=("$cdir") # stopped by the harness on exit, whatever the outcome

redis_start r
port=$(redis_port r)
admin_url=$(redis_url r)

# The documented ACL lines (keep in sync with docs/guarantees.md, Least privilege).
PRODUCER_ACL=(resetchannels -@all +fcall +xlen +hget +hmget '~sluice:*'
    '(+xadd ~sluice:*:stream)' '(+hincrby ~sluice:*:stats)' '(+get +set ~sluice:*:idem:*)'
    '(+hsetnx ~sluice:*:meta)')
WORKER_ACL=(resetchannels -@all +fcall +xreadgroup '+xgroup|create' '+xgroup|createconsumer'
    '+xgroup|delconsumer' '+xinfo|groups' +hget +xack +xdel +xclaim +xautoclaim +xpending +xrange +hincrby '~sluice:*'
    '(+xadd ~sluice:*:dead)' '(+hsetnx ~sluice:*:meta)')
# What both users need in addition on a Redis Cluster (docs/guarantees.md, the same section).
CLUSTER_ACL=('+cluster|shards' '+cluster|slots' +asking '(+exists ~sluice:*:meta)')

acl_user() { # NAME PASS RULES...
    local name=$1 pass=$2
    shift 2
    rcli r ACL SETUSER "$name" reset on ">$pass" "$@" >/dev/null ||
        fl_fail "ACL SETUSER $name $* was refused"
}

# as USER PASS ARGS...: one command over TCP as USER; prints the reply
as() {
    local user=$1 pass=$2
    shift 2
    redis-cli -p "$port" --user "$user" --pass "$pass" --no-auth-warning "$@" 2>&1
}

# denied USER PASS ARGS...: the command must be refused with NOPERM
denied() {
    local out
    out=$(as "$@" | head -n 1)
    case "$out" in
    NOPERM*) ;;
    *) fl_fail "user $1 ran '${*:3}' (expected NOPERM): $out" ;;
    esac
}

acl_user producer ppass "${PRODUCER_ACL[@]}"
acl_user worker wpass "${WORKER_ACL[@]}"
purl="redis://producer:ppass@127.0.0.1:$port"
wurl="redis://worker:wpass@127.0.0.1:$port"
q=acl-q

# an admin loads the library (the users below may not)
"$BIN/sluice-enqueue" -q acl-setup -r "$admin_url" setup >/dev/null

producer_works() {
    seq -f 'acl-%g' 1 20 | "$BIN/sluice-enqueue" -q $q -r "$purl" --ids >"$FL_DIR/acl.adm" ||
        fl_fail "the producer user could not admit: $(cat "$FL_DIR/acl.adm")"
    for _ in 1 2; do
        "$BIN/sluice-enqueue" -q $q -r "$purl" --ids --idempotency-key order-1 acl-idem \
            >>"$FL_DIR/acl.adm" || fl_fail "the producer user could not admit with a key"
    done
    fl_eq "stream length after 20 + one idempotent admission twice" 21 "$(depth r $q)"
    # slow and retry payloads for the worker below
    printf '%s\n' acl-slow-1 acl-retry-1 acl-retry-2 |
        "$BIN/sluice-enqueue" -q $q -r "$purl" --ids >>"$FL_DIR/acl.adm"
    fl_log "producer user: admitted 24 (and a duplicate caught by its idempotency key)"
}

producer_denied() {
    local s="sluice:{$q}:stream"
    denied producer ppass XRANGE "$s" - +
    denied producer ppass XREADGROUP GROUP workers x STREAMS "$s" '>'
    denied producer ppass XACK "$s" workers 0-1
    denied producer ppass XDEL "$s" 0-1
    denied producer ppass XTRIM "$s" MAXLEN 0
    denied producer ppass DEL "$s"
    denied producer ppass HSET "sluice:{$q}:meta" capacity 1000000
    denied producer ppass XADD "sluice:{$q}:dead" '*' m x
    denied producer ppass SET other:key x
    denied producer ppass GET "sluice:{$q}:meta"
    denied producer ppass KEYS '*'
    denied producer ppass FLUSHALL
    denied producer ppass FUNCTION LOAD REPLACE "#!lua name=x
redis.register_function('x', function() return 1 end)"
    denied producer ppass FUNCTION FLUSH
    denied producer ppass CONFIG SET maxmemory 1
    denied producer ppass ACL SETUSER producer +@all
    fl_log "producer user: 16 other commands refused with NOPERM"
}

producer_nopem_clear() {
    local rc=0
    # limited to one queue: another queue is refused before anything runs
    acl_user producer-orders opass resetchannels -@all +fcall +xlen +hget +hmget '~sluice:{orders}:*' \
        '(+xadd ~sluice:*:stream)' '(+hincrby ~sluice:*:stats)' '(+hsetnx ~sluice:*:meta)'
    "$BIN/sluice-enqueue" -q orders -r "redis://producer-orders:opass@127.0.0.1:$port" ok \
        >/dev/null 2>"$FL_DIR/orders.err" || fl_fail "producer-orders cannot admit to orders"
    "$BIN/sluice-enqueue" -q payments -r "redis://producer-orders:opass@127.0.0.1:$port" x \
        >/dev/null 2>"$FL_DIR/payments.err" || rc=$?
    fl_eq "exit code of a producer limited to queue orders admitting to payments" 3 "$rc"
    fl_grep "its message" "not permitted by the redis ACL.*NOPERM" "$FL_DIR/payments.err"
    # a command the admission function runs is missing (XADD)
    acl_user producer-noxadd npass resetchannels -@all +fcall +xlen +hget +hmget +hincrby +hsetnx \
        '~sluice:*'
    rc=0
    timeout 10 "$BIN/sluice-enqueue" -q $q -r "redis://producer-noxadd:npass@127.0.0.1:$port" \
        x >/dev/null 2>"$FL_DIR/noxadd.err" || rc=$?
    fl_eq "exit code of a producer user without XADD" 3 "$rc"
    fl_grep "its message says it is a permission problem" "not permitted by the redis ACL" \
        "$FL_DIR/noxadd.err"
    fl_log "producer NOPERM is clear: $(head -c 200 "$FL_DIR/noxadd.err")"
}

worker_works() {
    local w bad
    # an undecodable entry, written by an admin: the worker must dead-letter it
    bad=$(rcli r XADD "sluice:{$q}:stream" '*' m not-msgpack)
    rm -f "$FL_DIR/processed.rec"
    local handler='exec:p=$(cat); case "$p" in *retry*) [ "$SLUICE_DELIVERIES" -ge 2 ] || exit 75;; *slow*) sleep 1;; esac; exit 0'
    fl_spawn acl-worker "$BIN/sluice-worker" -q $q -r "$wurl" --record "$FL_DIR/processed.rec" \
        --handler "$handler" --visibility-timeout 600 --retry-backoff 100 --max-deliveries 3
    w=$FL_PID
    fl_wait_until 20 "the worker user drains the queue" 'drained r $q'
    fl_is_child "$w" || fl_fail "the worker user's worker exited: $(tail -n 3 "$FL_DIR/acl-worker.err")"
    fl_kill "$w" TERM
    fl_wait_pid "$w" 15
    fl_eq "worker exit code after SIGTERM" 0 "$FL_RC"
    fl_eq "consumers left after a clean stop" 0 \
        "$(rcli r XINFO CONSUMERS "sluice:{$q}:stream" workers | grep -c '^name$' || true)"
    if grep -Eq 'NOPERM|ENOPERM|EREDIS' "$FL_DIR/acl-worker.err"; then
        fl_fail "the worker user hit a permission error: $(grep -Eh 'NOPERM|EREDIS' "$FL_DIR/acl-worker.err" | head -n 2)"
    fi
    fl_grep "the retries went through XCLAIM" "retried=[1-9]" "$FL_DIR/acl-worker.out"
    fl_grep "the retried entries came back through XAUTOCLAIM" "reclaimed=[1-9]" \
        "$FL_DIR/acl-worker.out"
    fl_eq "dead letters" 1 "$(dead_count r $q)"
    rcli r XRANGE "sluice:{$q}:dead" - + | grep -qx "$bad" ||
        fl_fail "the undecodable entry $bad is not in the dead stream"
    check_e2e --admitted "$FL_DIR/acl.adm" --processed "$FL_DIR/processed.rec" \
        --redis "$admin_url" --queue $q --max-duplicates 0
    fl_eq "checked" 24 "$(field checked "$CHECK_LINE")"
    fl_log "worker user: processed, retried, reclaimed, kept a 1 s job (visibility 600 ms), dead-lettered"
}

worker_denied() {
    local s="sluice:{$q}:stream"
    denied worker wpass XADD "$s" '*' m x
    denied worker wpass HSET "sluice:{$q}:meta" capacity 1
    denied worker wpass DEL "$s"
    denied worker wpass XTRIM "$s" MAXLEN 0
    denied worker wpass SET other:key x
    denied worker wpass FLUSHALL
    denied worker wpass FUNCTION FLUSH
    denied worker wpass CONFIG SET maxmemory 1
    fl_log "worker user: 8 other commands refused with NOPERM"
}

worker_nopem_clear() { # NAME: a worker user missing one permission must stop, clearly
    local name=$1 w
    shift
    acl_user "$name" xpass "$@"
    "$BIN/sluice-enqueue" -q acl-w -r "$admin_url" one >/dev/null
    fl_spawn "$name" "$BIN/sluice-worker" -q acl-w -r "redis://$name:xpass@127.0.0.1:$port" \
        --visibility-timeout 1000
    w=$FL_PID
    local limit=$(($(fl_now_ms) + 15000))
    while fl_is_child "$w" && [ "$(fl_now_ms)" -lt "$limit" ]; do
        sleep 0.1
    done
    fl_is_child "$w" && fl_fail "a worker as $name (missing a permission) still runs after 15 s (grace 10 s + 5)" \
        "($(grep -c . "$FL_DIR/$name.err") log lines: $(tail -n 1 "$FL_DIR/$name.err"))"
    fl_wait_pid "$w" 1
    fl_eq "exit code of a worker as $name" 3 "$FL_RC"
    fl_grep "its message ($name)" "not permitted by the redis ACL" "$FL_DIR/$name.err"
}

library_flushed() {
    local rc=0
    rcli r FUNCTION FLUSH >/dev/null
    timeout 10 "$BIN/sluice-enqueue" -q $q -r "$purl" after-flush >/dev/null \
        2>"$FL_DIR/flushed.err" || rc=$?
    fl_eq "producer user after FUNCTION FLUSH: exit code" 3 "$rc"
    fl_grep "its message names the library" "FUNCTION LOAD|not loaded|unction not found" \
        "$FL_DIR/flushed.err"
    "$BIN/sluice-enqueue" -q acl-setup -r "$admin_url" reload >/dev/null # the admin reloads
    "$BIN/sluice-enqueue" -q $q -r "$purl" after-reload >/dev/null ||
        fl_fail "the producer user cannot admit after the admin reloaded the library"
    fl_log "after FUNCTION FLUSH: producer user exit 3: $(head -c 200 "$FL_DIR/flushed.err")"
}

# cluster_users: the documented users on a Redis Cluster, with and without the cluster rules
cluster_users() {
    local curl ports p rc=0 i w gwport=""
    curl=$(TEST_REDIS_FIRST_PORT=$port "$SRC/scripts/test-redis" cluster-start "$cdir") ||
        fl_fail "cluster-start: $curl"
    mapfile -t ports <"$cdir/ports"
    for p in "${ports[@]}"; do # ACL users are per node: every node gets them
        redis-cli -p "$p" ACL SETUSER cproducer reset on '>ppass' "${PRODUCER_ACL[@]}" \
            "${CLUSTER_ACL[@]}" >/dev/null
        redis-cli -p "$p" ACL SETUSER cworker reset on '>wpass' "${WORKER_ACL[@]}" \
            "${CLUSTER_ACL[@]}" >/dev/null
        redis-cli -p "$p" ACL SETUSER bproducer reset on '>ppass' "${PRODUCER_ACL[@]}" >/dev/null
        redis-cli -p "$p" ACL SETUSER bworker reset on '>wpass' "${WORKER_ACL[@]}" >/dev/null
    done
    as_url() { echo "redis+cluster://$1@127.0.0.1:${ports[0]},127.0.0.1:${ports[1]}"; }
    "$BIN/sluice-enqueue" -q acl-c -r "$curl" setup >/dev/null # an admin loads the library
    seq -f 'c-%g' 1 20 | "$BIN/sluice-enqueue" -q acl-c -r "$(as_url cproducer:ppass)" \
        >"$FL_DIR/c-enq.out" 2>&1 || fl_fail "cluster producer user: $(cat "$FL_DIR/c-enq.out")"
    fl_grep "the cluster producer user admits" "^admitted=20 " "$FL_DIR/c-enq.out"
    fl_spawn c-gw "$BIN/sluice-gateway" --listen 127.0.0.1:0 -r "$(as_url cproducer:ppass)" \
        --queue acl-c
    for i in $(seq 1 100); do
        gwport=$(grep -oE 'addr=127\.0\.0\.1:[0-9]+' "$FL_DIR/c-gw.err" | head -n 1 | cut -d: -f2) || true
        [ -n "$gwport" ] && curl -sf "http://127.0.0.1:$gwport/healthz" >/dev/null 2>&1 && break
        sleep 0.1
    done
    fl_eq "the cluster producer user's gateway: POST" 202 "$(curl -s -o /dev/null \
        -w '%{http_code}' --data gw "http://127.0.0.1:$gwport/v1/queues/acl-c/messages")"
    timeout 30 "$BIN/sluice-worker" -q acl-c -r "$(as_url cworker:wpass)" --handler noop \
        --max-messages 22 >"$FL_DIR/c-w.out" 2>"$FL_DIR/c-w.err" || rc=$?
    fl_eq "the cluster worker user drains 22 (exit code)" 0 "$rc"
    fl_grep "the cluster worker user processed them" "^processed=22 " "$FL_DIR/c-w.out"
    # the single-server rules alone are not enough on a cluster: both stop, exit 3, and say why
    rc=0
    timeout 10 "$BIN/sluice-enqueue" -q acl-c -r "$(as_url bproducer:ppass)" x >/dev/null \
        2>"$FL_DIR/b-enq.err" || rc=$?
    fl_eq "a producer user without the cluster rules: exit code" 3 "$rc"
    fl_grep "its message names the ACL and the refused command" \
        "not permitted by the redis ACL.*NOPERM.*cluster" "$FL_DIR/b-enq.err"
    "$BIN/sluice-enqueue" -q acl-c -r "$curl" one >/dev/null
    fl_spawn b-w "$BIN/sluice-worker" -q acl-c -r "$(as_url bworker:wpass)" --handler noop
    w=$FL_PID
    fl_wait_pid "$w" 15
    fl_eq "a worker user without the cluster rules: exit code" 3 "$FL_RC"
    fl_grep "its message" "not permitted by the redis ACL" "$FL_DIR/b-w.err"
    fl_log "cluster: users with the cluster rules admit (enqueue, gateway) and drain; without" \
        "them the producer and the worker exit 3"
}

# A queue with a gcra limit, admitted by a producer with docs/guarantees.md's extra rules for limits
# (no EXISTS among them): the functions' check for a migrating slot must not take the ACL's
# refusal of EXISTS for a migration (every limited admission answered TRYAGAIN, for ever).
limits_work() {
    local lq=acl-lim out rc=0
    "$BIN/sluice-admin" --redis "$admin_url" limit $lq set per-tenant tenant 5/1h >/dev/null ||
        fl_fail "limit set on $lq"
    acl_user plim lpass "${PRODUCER_ACL[@]}" +time '(+hgetall ~sluice:*:limits)' \
        '(+get +set ~sluice:*:qlim:*)'
    out=$(seq -f 'lim-%g' 1 6 | "$BIN/sluice-enqueue" -q $lq --tenant t1 --timeout 2000 \
        -r "redis://plim:lpass@127.0.0.1:$port" 2>&1) || rc=$?
    fl_eq "a limited run's exit code (one message limited): $out" 1 "$rc"
    case "$out" in
    *"admitted=5 "*"limited=1"*) ;;
    *) fl_fail "the limits producer user: $out" ;;
    esac
    fl_log "limits producer user: 5 admitted, the 6th limited by per-tenant (gcra)"
}

producer_works
producer_denied
limits_work
worker_works
worker_denied
library_flushed
producer_nopem_clear
worker_nopem_clear worker-noread resetchannels -@all '~sluice:*' +fcall '+xgroup|create' \
    '+xgroup|createconsumer' '+xinfo|groups' +hget +hsetnx +xack +xdel +xclaim +xautoclaim +xpending +xrange +hincrby
worker_nopem_clear worker-noack resetchannels -@all '~sluice:*' +fcall +xreadgroup \
    '+xgroup|create' '+xgroup|createconsumer' '+xinfo|groups' +hget +hsetnx +xdel +xclaim +xautoclaim +xpending +xrange +hincrby
cluster_users
fl_figures "B12/least privilege: producer and worker ACL users work (admit, idempotency, read," \
    "ack, retry, reclaim, touch, dead letter); 24 other commands refused with NOPERM;" \
    "missing permissions reported with exit 3; on a cluster with the cluster rules too, and" \
    "exit 3 without them"
