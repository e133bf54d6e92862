#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# fault_input.sh - bad input at the edges (docs/faults.md B1, B2, B3, B13).
#
#   B1  a payload over --max-payload is refused before any Redis call: exit 2 with "limit",
#       even with no server behind the URL; the stream and the FCALL count do not change
#   B2  a payload over the server's proto-max-bulk-len (1mb here, --max-payload 4m): exit 3
#       with the server's reason (or the reset it closes with), quickly; nothing admitted; the
#       server keeps serving and the next admission works
#   B3  an empty payload and a payload of exactly --max-payload bytes are admitted and
#       processed; one byte more is refused
#   B13 a pending entry deleted by an operator (XDEL) while its consumer is gone: the worker's
#       reclaim cleans it up (pending back to 0) and the rest of the queue is processed
set -euo pipefail
. "$(dirname "$0")/lib.sh"
fl_init fault_input

redis_start r
url=$(redis_url r)

b1_too_large() {
    local q=in-b1 big rc=0
    big=$(head -c 2000 /dev/zero | tr '\0' 'x')
    rcli r CONFIG RESETSTAT >/dev/null
    "$BIN/sluice-enqueue" -q $q -r "$url" --max-payload 1k "$big" >"$FL_DIR/b1.out" \
        2>"$FL_DIR/b1.err" || rc=$?
    fl_eq "B1 exit code of a 2000-byte payload with --max-payload 1k" 2 "$rc"
    fl_grep "B1 message" "2000 bytes; the limit is 1024" "$FL_DIR/b1.err"
    fl_eq "B1 stream length" 0 "$(depth r $q)"
    local fcalls
    fcalls=$(rcli r INFO commandstats | grep -c '^cmdstat_fcall:' || true)
    fl_eq "B1 FCALLs reached the server" 0 "$fcalls"
    # no server at all behind the URL: still exit 2 (usage), not 3 (redis)
    rc=0
    "$BIN/sluice-enqueue" -q $q -r redis://127.0.0.1:1 --max-payload 1k "$big" \
        >/dev/null 2>&1 || rc=$?
    fl_eq "B1 exit code with no server behind the URL" 2 "$rc"
    fl_log "B1 ok: refused before Redis (exit 2), stream untouched"
}

b2_proto_max_bulk_len() {
    local q=in-b2 rc=0 t0 took
    rcli r CONFIG SET proto-max-bulk-len 1mb >/dev/null
    head -c $((2 * 1024 * 1024)) /dev/zero | tr '\0' 'y' >"$FL_DIR/b2.in"
    echo >>"$FL_DIR/b2.in"
    t0=$(fl_now_ms)
    timeout 20 "$BIN/sluice-enqueue" -q $q -r "$url" --max-payload 4m --timeout 2000 \
        <"$FL_DIR/b2.in" >"$FL_DIR/b2.out" 2>"$FL_DIR/b2.err" || rc=$?
    took=$(($(fl_now_ms) - t0))
    fl_eq "B2 exit code of a 2 MiB payload over proto-max-bulk-len 1mb" 3 "$rc"
    # Redis answers "invalid bulk length" and closes; when the close lands while the 2 MiB are
    # still being written, the client sees the reset instead (and, honestly, "unknown")
    fl_grep "B2 message names the cause" \
        "bulk length|proto-max-bulk-len|too large|reset by peer|Broken pipe" "$FL_DIR/b2.err"
    fl_le "B2 time to report (ms)" 5000 "$took"
    redis_alive r || fl_fail "B2: redis-server died"
    fl_eq "B2 stream length" 0 "$(depth r $q)"
    rc=0
    "$BIN/sluice-enqueue" -q $q -r "$url" small-after-b2 >/dev/null 2>&1 || rc=$?
    fl_eq "B2 next admission" 0 "$rc"
    fl_eq "B2 stream length after the next admission" 1 "$(depth r $q)"
    rcli r CONFIG SET proto-max-bulk-len 512mb >/dev/null
    fl_log "B2 ok: exit 3 in ${took} ms: $(head -c 160 "$FL_DIR/b2.err")"
}

b3_edges() {
    local q=in-b3 exact rc=0
    exact=$(head -c 1024 /dev/zero | tr '\0' 'z')
    "$BIN/sluice-enqueue" -q $q -r "$url" --ids "" >>"$FL_DIR/b3.adm" 2>"$FL_DIR/b3.err" ||
        fl_fail "B3: empty payload not admitted: $(cat "$FL_DIR/b3.err")"
    "$BIN/sluice-enqueue" -q $q -r "$url" --ids --max-payload 1k "$exact" \
        >>"$FL_DIR/b3.adm" 2>"$FL_DIR/b3.err" ||
        fl_fail "B3: payload of exactly 1024 bytes with --max-payload 1k not admitted"
    "$BIN/sluice-enqueue" -q $q -r "$url" --max-payload 1k "${exact}z" >/dev/null 2>&1 || rc=$?
    fl_eq "B3 exit code of 1025 bytes with --max-payload 1k" 2 "$rc"
    fl_eq "B3 stream length" 2 "$(depth r $q)"
    fl_eq "B3 admitted ids printed" 2 "$(grep -vc = "$FL_DIR/b3.adm")"
    # the worker processes both; its record holds the ids the producer printed
    rm -f "$FL_DIR/processed.rec"
    worker_start b3-worker r $q --max-messages 2 --visibility-timeout 1000
    fl_wait_pid "$FL_PID" 20
    fl_eq "B3 worker exit code" 0 "$FL_RC"
    check_e2e --admitted "$FL_DIR/b3.adm" --processed "$FL_DIR/processed.rec" --redis "$url" \
        --queue $q
    fl_eq "B3 lost" 0 "$(field lost "$CHECK_LINE")"
    fl_eq "B3 checked" 2 "$(field checked "$CHECK_LINE")"
    fl_wait_until 5 "B3 queue drained" 'drained r $q'
    fl_log "B3 ok: empty and exactly-at-limit payloads admitted and processed"
}

b13_deleted_pending() {
    local q=in-b13 key="sluice:{in-b13}:stream" id
    rcli r XGROUP CREATE "$key" workers 0 MKSTREAM >/dev/null
    seq -f 'b13-%g' 1 5 | "$BIN/sluice-enqueue" -q $q -r "$url" --ids >"$FL_DIR/b13.adm"
    # a consumer that read one entry and vanished; then an operator deletes that entry
    id=$(rcli r XREADGROUP GROUP workers ghost COUNT 1 STREAMS "$key" '>' | sed -n 2p)
    [ -n "$id" ] || fl_fail "B13: the ghost consumer read nothing"
    fl_eq "B13 XDEL of the pending entry $id" 1 "$(rcli r XDEL "$key" "$id")"
    fl_eq "B13 pending before the worker" 1 "$(pending r $q)"
    grep -v "^$id " "$FL_DIR/b13.adm" >"$FL_DIR/b13.kept"
    rm -f "$FL_DIR/processed.rec"
    worker_start b13-worker r $q --visibility-timeout 300
    local w=$FL_PID
    fl_wait_until 15 "B13: pending entries back to 0 and the stream empty" 'drained r $q'
    fl_is_child "$w" || fl_fail "B13: the worker exited: $(tail -n 3 "$FL_DIR/b13-worker.err")"
    fl_kill "$w" TERM
    fl_wait_pid "$w" 15
    fl_eq "B13 worker exit code after SIGTERM" 0 "$FL_RC"
    check_e2e --admitted "$FL_DIR/b13.kept" --processed "$FL_DIR/processed.rec" --redis "$url" \
        --queue $q
    fl_eq "B13 checked" 4 "$(field checked "$CHECK_LINE")"
    fl_log "B13 ok: deleted pending entry $id cleaned up, the other 4 processed"
}

b1_too_large
b2_proto_max_bulk_len
b3_edges
b13_deleted_pending
fl_figures "B1 B2 B3 B13 passed"
