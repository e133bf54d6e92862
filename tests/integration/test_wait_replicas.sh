#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# --wait-replicas N: an admission is reported admitted only once N replicas confirmed it (WAIT);
# short of them it is "outcome unknown" (appended on the primary, may be lost if it fails over),
# never "admitted". On a primary and a replica of its own, stopped by their PIDs.
. "$(dirname "$0")/lib.sh"
rp="$tmp/primary" rr="$tmp/replica"
stop_servers() {
    "$SLUICE_SOURCE_DIR/scripts/test-redis" stop "$rr" >/dev/null 2>&1 || true
    "$SLUICE_SOURCE_DIR/scripts/test-redis" stop "$rp" >/dev/null 2>&1 || true
}
trap 'stop_servers; lib_cleanup' EXIT
"$SLUICE_SOURCE_DIR/scripts/test-redis" start "$rp" --no-aof -- --repl-diskless-sync-delay 0 >/dev/null
pport=$(cat "$rp/port")
"$SLUICE_SOURCE_DIR/scripts/test-redis" start "$rr" --no-aof -- --replicaof 127.0.0.1 "$pport" >/dev/null
purl="redis://127.0.0.1:$pport"
for i in $(seq 1 100); do
    redis-cli -p "$pport" INFO replication | grep -q 'state=online' && break
    sleep 0.1
done
redis-cli -p "$pport" INFO replication | grep -q 'state=online' || fail "the replica never came online"
q="wait-$$"
E() { "$bin/sluice-enqueue" --redis "$purl" --queue "$q" "$@"; }
rlen() { redis-cli -p "$(cat "$1/port")" XLEN "sluice:{$q}:stream"; }

# bad values are named, nothing is sent
run 2 'wait-replicas: 17 is out of range 0..16' E --wait-replicas 17 x
run 2 'wait timeout 9000 ms is out of range' E --wait-replicas 1 --wait-timeout 9000 x
[ "$(rlen "$rp")" = 0 ] || fail "a refused call admitted something"

# one replica asked, one there: admitted, and the replica has it when the call returns
run 0 'admitted=2 rejected=0' E --wait-replicas 1 a b
[ "$(rlen "$rr")" = 2 ] || fail "confirmed, but the replica holds $(rlen "$rr")"
seq 1 500 | E --wait-replicas 1 --capacity 10000 >"$tmp/batch" || fail "batch: $(cat "$tmp/batch")"
grep -q '^admitted=500 ' "$tmp/batch" || fail "batch: $(cat "$tmp/batch")"

# the gateway: 202 once confirmed (its async producer sends WAIT right behind the admission)
run 2 'wait timeout 5000 ms is out of range' "$bin/sluice-gateway" --listen 127.0.0.1:0 \
    --redis "$purl" --queue "$q" --wait-replicas 1 --wait-timeout 5000
gateway_start --redis "$purl" --queue "$q" --wait-replicas 1 --wait-timeout 300
post() { curl -s --max-time 10 -o "$tmp/b" -w '%{http_code}' -d "$1" "http://127.0.0.1:$port/v1/queues/$q/messages"; }
[ "$(post via-gateway)" = 202 ] || fail "gateway with its replica: $(cat "$tmp/b")"

# two asked, one there: unknown (exit 3), says how many confirmed; the entry is on the primary
run 3 'outcome unknown.*1 of 2 replica\(s\) confirmed it within 200 ms' \
    E --wait-replicas 2 --wait-timeout 200 c
[ "$(rlen "$rp")" = 504 ] || fail "the unconfirmed entry is not on the primary"

# the replica gone: unknown again; without --wait-replicas the same admission is admitted
"$SLUICE_SOURCE_DIR/scripts/test-redis" stop "$rr" >/dev/null
run 3 '0 of 1 replica\(s\) confirmed' E --wait-replicas 1 --wait-timeout 100 d
[ "$(post lost-replica)" = 503 ] && grep -q 'outcome unknown' "$tmp/b" ||
    fail "gateway without its replica: $(cat "$tmp/b")"
run 0 'admitted=1' E e

# a batch that is partly full: the admitted one becomes unknown (and is on the primary), the
# rejected one is not appended
run 0 'capacity of .*: 508' "$bin/sluice-admin" --redis "$purl" capacity "$q" 508
run 3 'outcome unknown.*0 of 1' E --wait-replicas 1 --wait-timeout 100 f g
[ "$(rlen "$rp")" = 508 ] || fail "after the partly full batch: $(rlen "$rp")"
echo "test_wait_replicas: ok"
