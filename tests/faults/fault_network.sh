#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# fault_network.sh - a bad network between the clients and Redis (docs/faults.md F12, F13), made by
# sluice-faultproxy (tests/faults/proxy.c): every producer and worker connects through it.
#
# Under steady load (a batch producer, an idempotent producer, two workers) the proxy goes
#   pass -> delay 150 ms -> blackhole 3 s -> pass -> reset 1.5 s -> pass
#   delay      everything still correct, only slower
#   blackhole  calls time out within their deadlines (no hang: the producers' longest call is
#              bounded), clients give up on the connection and reconnect once it heals; bytes
#              held by the "network" are delivered late, as after a real partition
#   reset      connections are reset: errors, then reconnects
# Afterwards: 0 lost; the idempotent producer's payloads admitted once each (its retries after
# unknown outcomes are deduplicated); duplicates only among entries pending when a fault began
# or ended (F13: no duplicates beyond the retries made).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
fl_init fault_network

q=net
redis_start r
mode=$FL_DIR/proxy.mode
echo pass >"$mode"
fl_spawn proxy "$BIN/sluice-faultproxy" --listen 127.0.0.1:0 --upstream "127.0.0.1:$(redis_port r)" \
    --mode-file "$mode" --port-file "$FL_DIR/proxy.port"
proxy=$FL_PID
fl_wait_until 5 "the proxy listens" '[ -s "$FL_DIR/proxy.port" ]'
url="redis://127.0.0.1:$(cat "$FL_DIR/proxy.port")"
direct=$(redis_url r)

pel_ids() {
    rcli r XPENDING "sluice:{$q}:stream" workers - + 1000000 2>/dev/null | awk 'NR % 4 == 1' || true
}

# set_mode MODE: switches the proxy, noting what is pending on both sides of the switch
set_mode() {
    pel_ids >>"$FL_DIR/net.explained"
    echo "$1" >"$mode.tmp"
    mv "$mode.tmp" "$mode"
    fl_log "proxy: $1"
    sleep 0.2 # the proxy re-reads its mode file every 100 ms
    pel_ids >>"$FL_DIR/net.explained"
}

# sanity: the proxy really is in the path (a blackhole stops a call through it)
rc=0
echo blackhole >"$mode"
sleep 0.3
timeout 10 "$BIN/sluice-enqueue" -q net-probe -r "$url" --timeout 300 probe >/dev/null 2>&1 || rc=$?
fl_eq "a call through the blackholed proxy" 3 "$rc"
echo pass >"$mode"
sleep 0.3

workers=()
for i in 1 2; do
    fl_spawn "w$i" "$BIN/sluice-worker" -q $q -r "$url" --record "$FL_DIR/processed.rec" \
        --handler sleep:1 --concurrency 16 --visibility-timeout 2000
    workers+=("$FL_PID")
done
fl_spawn batch "$BIN/sluice-faultload" --redis "$url" --queue $q --count 4000 --prefix nb \
    --batch 20 --rate 350 --timeout 1000 --connect-timeout 1000 --deadline 60000 \
    --out "$FL_DIR/net.adm" --unknown "$FL_DIR/net.unknown"
p1=$FL_PID
fl_spawn idem "$BIN/sluice-faultload" --redis "$url" --queue $q --count 600 --prefix ni \
    --idempotent --rate 50 --timeout 1000 --connect-timeout 1000 --deadline 60000 \
    --out "$FL_DIR/net.adm"
p2=$FL_PID

sleep 1.5
set_mode "delay 150"
sleep 2.5
set_mode blackhole
sleep 3
set_mode pass
sleep 2
set_mode reset
sleep 1.5
set_mode pass

fl_wait_pid "$p1" 60
fl_eq "batch producer exit ($(cat "$FL_DIR/batch.out"))" 0 "$FL_RC"
fl_wait_pid "$p2" 60
fl_eq "idempotent producer exit ($(cat "$FL_DIR/idem.out"))" 0 "$FL_RC"
fl_wait_until 30 "queue drained after the network healed" 'drained r $q'
for w in "${workers[@]}"; do
    fl_is_child "$w" || fl_fail "a worker died: $(tail -n 3 "$FL_DIR/w1.err" "$FL_DIR/w2.err")"
    fl_kill "$w" TERM
    fl_wait_pid "$w" 20
    fl_eq "worker exit code after SIGTERM" 0 "$FL_RC"
done

batch=$(cat "$FL_DIR/batch.out")
idem=$(cat "$FL_DIR/idem.out")
# no hang: the longest call is bounded by its deadline (1 s) plus a connect (1 s) plus slack
fl_le "batch producer's longest call (ms)" 2600 "$(field max_call_ms "$batch")"
fl_le "idempotent producer's longest call (ms)" 2600 "$(field max_call_ms "$idem")"
[ -n "$(field ETIMEDOUT "$batch")$(field EUNKNOWN "$batch")" ] ||
    fl_fail "the batch producer saw no timeout during a 3 s blackhole: $batch"
[ -n "$(field ECONN "$batch")$(field ECONN "$idem")$(field EUNKNOWN "$batch")" ] ||
    fl_fail "no producer saw a connection error during resets: $batch / $idem"
fl_ge "worker reconnects" 2 "$(cat "$FL_DIR"/w*.err | grep -c 'event=redis_ready' || true)"

check_e2e --admitted "$FL_DIR/net.adm" --processed "$FL_DIR/processed.rec" --redis "$direct" \
    --queue $q --explained "$FL_DIR/net.explained"
unknown=$(field unknown "$batch")
fl_eq "admitted (4600 offered - unknown outcomes)" $((4600 - unknown)) \
    "$(field checked "$CHECK_LINE")"
fl_eq "payloads admitted under two ids (idempotent retries)" 0 \
    "$(field payloads_under_two_ids "$CHECK_LINE")"
fl_kill "$proxy" TERM
fl_wait_pid "$proxy" 5
fl_eq "proxy exit code after SIGTERM" 0 "$FL_RC"
fl_figures "network via proxy (delay 150 ms, blackhole 3 s, reset 1.5 s):" \
    "checked=$(field checked "$CHECK_LINE") lost=0 duplicates=$(field duplicates "$CHECK_LINE")" \
    "(all pending at a fault switch) unknown_outcomes=$unknown" \
    "idempotent_retries=$(field EUNKNOWN "$idem" | sed 's/^$/0/')" \
    "max_call_ms=$(field max_call_ms "$batch")"
