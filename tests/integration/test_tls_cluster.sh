#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# rediss+cluster:// on the blocking connection (and the async one: sluice-worker), against a Redis Cluster of 3 TLS-only primaries
# of its own (--port 0, tls-cluster yes: the bus is TLS too; the private CA of tls_lib.sh),
# stopped by their PIDs: sluice-enqueue and sluice-admin through it, the seeds and every node
# verified; another CA is refused with the reason (exit 3). A node announces its IP address, so
# its certificate must name that address (IP SAN), or SLUICE_TLS_SERVER_NAME a name every
# node's certificate carries: with certificates naming only localhost, a seed reached by that
# name is accepted but the nodes it names by IP are refused ("IP address mismatch"), and
# accepted with SLUICE_TLS_SERVER_NAME=localhost. A slot migration (MIGRATING, the keys
# moved, the slot reassigned) under a running sluice-enqueue loses nothing: every payload is
# admitted once, all on the new owner; a worker over rediss+cluster:// drains a queue of a
# node that is not a seed, and the migrated queue from its new owner.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/tls_lib.sh"

tls_certs
tls_cert dnsonly "/CN=localhost" ca "DNS:localhost" # names no IP address
chmod 600 "$tls_dir/dnsonly.key"
export SLUICE_TLS_CA_FILE=$tls_dir/ca.crt
cports=()
# no failover here: a node timeout long enough that a node stalled on a loaded machine is not
# marked failed (which takes the cluster down), nor a slow TLS handshake on the bus dropped
for n in 1 2 3; do
    for _ in $(seq 1 20); do
        p=$(free_port 10000) # its bus on p + 10000
        if tls_redis_spawn "$p" no --cluster-enabled yes --cluster-config-file "nodes-$p.conf" \
            --cluster-node-timeout 10000 --tls-cluster yes; then
            cports+=("$p")
            break
        fi
    done
done
[ "${#cports[@]}" = 3 ] || fail "could not start 3 TLS cluster nodes"
tc() { tls_cli -p "$@"; } # tc PORT ARGS...: redis-cli over TLS to one node
tc "${cports[0]}" CLUSTER ADDSLOTSRANGE 0 5460 >/dev/null
tc "${cports[1]}" CLUSTER ADDSLOTSRANGE 5461 10922 >/dev/null
tc "${cports[2]}" CLUSTER ADDSLOTSRANGE 10923 16383 >/dev/null
tc "${cports[0]}" CLUSTER MEET 127.0.0.1 "${cports[1]}" >/dev/null
tc "${cports[0]}" CLUSTER MEET 127.0.0.1 "${cports[2]}" >/dev/null
# ready: every node says cluster_state:ok and knows the 3 primaries, each connected with its
# slots (none in handshake, failed or without an address)
node_ready() { # PORT
    tc "$1" CLUSTER INFO >"$tmp/cinfo" 2>/dev/null || return 1
    tc "$1" CLUSTER NODES >"$tmp/cnodes" 2>/dev/null || return 1
    grep -q '^cluster_state:ok' "$tmp/cinfo" &&
        [ "$(awk '$3 ~ /master/ && $3 !~ /fail|handshake|noaddr/ && $8 == "connected" &&
            NF >= 9' "$tmp/cnodes" | wc -l)" = 3 ]
}
for _ in $(seq 1 200); do
    ok=0
    for p in "${cports[@]}"; do
        node_ready "$p" && ok=$((ok + 1))
    done
    [ "$ok" = 3 ] && break
    sleep 0.1
done
[ "$ok" = 3 ] || fail "the TLS cluster was not ready in 20 s: $(cat "$tmp/cinfo" "$tmp/cnodes")"
curl="rediss+cluster://127.0.0.1:${cports[0]},127.0.0.1:${cports[1]}"
owner() { # QUEUE: the port of the primary serving its slot, as the first node sees it
    local s
    s=$(tc "${cports[0]}" CLUSTER KEYSLOT "sluice:{$1}:stream")
    tc "${cports[0]}" CLUSTER NODES | awk -v s="$s" '$3 ~ /master/ { for (i = 9; i <= NF; i++) {
        split($i, r, "-"); if (r[2] == "") r[2] = r[1]
        if (s >= r[1] && s <= r[2]) { split($2, a, "[:@]"); print a[2] } } }'
}
enq() { "$bin/sluice-enqueue" --redis "$curl" "$@"; }

# ---- through the cluster: queues on every primary, stats, the map and redirects over TLS ----
# two queue names on each primary, picked by their slots (names that differ in one character
# have related CRC16 slots: six of them can all fall on one primary, then nothing is redirected)
tqs=()
for p in "${cports[@]}"; do
    n=0
    for i in $(seq 1 200); do
        [ "$(owner "tq$i.$$")" = "$p" ] || continue
        tqs+=("tq$i.$$")
        n=$((n + 1))
        [ "$n" = 2 ] && break
    done
    [ "$n" = 2 ] || fail "no two queue names on the primary at $p: $(tc "${cports[0]}" CLUSTER NODES)"
done
for tq in "${tqs[@]}"; do
    run 0 'admitted=2 rejected=0' enq -q "$tq" a b
done
for tq in "${tqs[@]}"; do
    [ "$(tc "$(owner "$tq")" XLEN "sluice:{$tq}:stream")" = 2 ] || fail "$tq not on its owner"
done
run 0 '' "$bin/sluice-admin" --redis "$curl" --json stats "${tqs[2]}"
grep -q '"depth":2' "$tmp/out" || fail "stats over TLS: $(cat "$tmp/out")"
# the async connection over rediss+cluster:// too: a worker drains a queue of the node that is
# not a seed (reached at the address the cluster announces)
q3=""
for i in $(seq 1 60); do
    [ "$(owner "tw$i.$$")" = "${cports[2]}" ] && q3=tw$i.$$ && break
done
[ -n "$q3" ] || fail "no queue name on the third node"
run 0 'admitted=3' enq -q "$q3" x y z
run 0 'processed=3 failed=0' "$bin/sluice-worker" --redis "$curl" -q "$q3" -H noop --max-messages 3
[ "$(tc "${cports[2]}" XLEN "sluice:{$q3}:stream")" = 0 ] || fail "the worker left entries in $q3"
# seeds by name: the seed is checked against localhost, the nodes against 127.0.0.1
run 0 'admitted=1' enq -r "rediss+cluster://localhost:${cports[2]}" -q "${tqs[0]}" c
run 3 'certificate verify failed: [a-z]' \
    env SLUICE_TLS_CA_FILE="$tls_dir/other-ca.crt" "$bin/sluice-admin" --redis "$curl" stats "${tqs[0]}"
grep -q unavailable "$tmp/out" && fail "a verification failure reported as unavailable"

# ---- the nodes' certificates name only localhost: the addresses the cluster announces fail ----
for p in "${cports[@]}"; do
    tc "$p" CONFIG SET tls-cert-file "$tls_dir/dnsonly.crt" tls-key-file "$tls_dir/dnsonly.key" \
        >/dev/null
done
# a queue the seed does not serve: its node is reached by the IP address it announces
q=${tqs[0]}
run 3 'certificate verify failed: IP address mismatch \(the certificate does not name 127.0.0.1' \
    enq -r "rediss+cluster://localhost:${cports[2]}" -q "$q" --timeout 1500 d
run 0 'admitted=1' env SLUICE_TLS_SERVER_NAME=localhost \
    "$bin/sluice-enqueue" -r "rediss+cluster://127.0.0.1:${cports[2]}" -q "$q" e
for p in "${cports[@]}"; do
    tc "$p" CONFIG SET tls-cert-file "$tls_dir/server.crt" tls-key-file "$tls_dir/server.key" \
        >/dev/null
done

# ---- a slot migration under a running sluice-enqueue: 0 lost ----
q=mig.$$
run 0 'admitted=1' enq -q "$q" first
msrc=$(owner "$q")
mdst=${cports[0]}
[ "$mdst" != "$msrc" ] || mdst=${cports[1]}
mslot=$(tc "$msrc" CLUSTER KEYSLOT "sluice:{$q}:stream")
total=1500 # 30 rounds of 50, ~40 ms apart: the admissions span the migration's phases
for r in $(seq 1 30); do
    seq -f "$r-%g" 1 50
    sleep 0.04
done | enq -q "$q" -C 100000 --batch 10 --timeout 10000 >"$tmp/mig.out" 2>&1 &
ep=$!
pids+=("$ep")
for _ in $(seq 1 50); do
    [ "$(tc "$msrc" XLEN "sluice:{$q}:stream")" -gt 100 ] && break
    sleep 0.05
done
before=$(tc "$msrc" XLEN "sluice:{$q}:stream")
[ "$before" -le "$total" ] || fail "all admitted before the migration began: nothing tested"
tc "$mdst" CLUSTER SETSLOT "$mslot" IMPORTING "$(tc "$msrc" CLUSTER MYID)" | grep -q OK ||
    fail "IMPORTING"
tc "$msrc" CLUSTER SETSLOT "$mslot" MIGRATING "$(tc "$mdst" CLUSTER MYID)" | grep -q OK ||
    fail "MIGRATING"
sleep 0.3
mapfile -t ks < <(tc "$msrc" CLUSTER GETKEYSINSLOT "$mslot" 100 | grep .)
tc "$msrc" MIGRATE 127.0.0.1 "$mdst" "" 0 5000 KEYS "${ks[@]}" | grep -q OK || fail "MIGRATE"
sleep 0.3 # the ASK phase: the keys on the target, the slot still the source's
mapfile -t ks < <(tc "$msrc" CLUSTER GETKEYSINSLOT "$mslot" 100 | grep .)
[ "${#ks[@]}" = 0 ] || tc "$msrc" MIGRATE 127.0.0.1 "$mdst" "" 0 5000 KEYS "${ks[@]}" >/dev/null
for p in "${cports[@]}"; do
    tc "$p" CLUSTER SETSLOT "$mslot" NODE "$(tc "$mdst" CLUSTER MYID)" >/dev/null
done
rc=0
wait "$ep" || rc=$?
[ "$rc" = 0 ] || fail "enqueue across the migration exited $rc: $(tail -n 3 "$tmp/mig.out")"
grep -q "admitted=$total rejected=0" "$tmp/mig.out" || fail "migration: $(tail -n 3 "$tmp/mig.out")"
[ "$(owner "$q")" = "$mdst" ] || fail "the slot did not move"
n=$(tc "$mdst" XLEN "sluice:{$q}:stream")
[ "$n" = $((total + 1)) ] || fail "after the migration: $n entries on the new owner, not $((total + 1))"
run 0 '' "$bin/sluice-admin" --redis "$curl" --json stats "$q"
grep -q "\"depth\":$((total + 1))" "$tmp/out" || fail "stats after the migration: $(cat "$tmp/out")"
# ... and drains the migrated queue from its new owner
run 0 "processed=$((total + 1)) failed=0" "$bin/sluice-worker" --redis "$curl" -q "$q" -H noop \
    --max-messages $((total + 1))
echo "test_tls_cluster: ok"
