#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# fault_redis_pause.sh - Redis stalls, is absent, or drops its clients (docs/faults.md F10-F12).
#
#   F10 redis-server stopped (SIGSTOP) for 3 s: sluice-enqueue --timeout 500 exits 3 with
#       "timed out" within ~1 s (no hang); a long-lived producer's every call returns within its
#       deadline; after SIGCONT the producer and a worker carry on by themselves, nothing lost
#   F11 nothing listening: sluice-enqueue exits 3 at once naming the server; fail-open reports
#       "open" instead; a worker started first logs the failed async connect within the
#       connect timeout, keeps retrying with backoff, and drains the queue once Redis is up
#   F12 CLIENT KILL TYPE normal, 8 times under load, on a server with a password: producers and
#       workers reconnect and re-authenticate by themselves; 0 lost; the idempotent producer's
#       payloads are admitted once each; duplicates only among entries pending at a kill
set -euo pipefail
. "$(dirname "$0")/lib.sh"
fl_init fault_redis_pause

pel_ids() {
    rcli "$1" XPENDING "sluice:{$2}:stream" workers - + 1000000 2>/dev/null | awk 'NR % 4 == 1' || true
}

f10_sigstop() {
    local q=rp-f10 url pid p w t0 took rc=0
    redis_start f10
    url=$(redis_url f10)
    pid=$(redis_pid f10)
    rm -f "$FL_DIR/processed.rec"
    worker_start f10-worker f10 $q --visibility-timeout 2000
    w=$FL_PID
    fl_spawn f10-load "$BIN/sluice-faultload" --redis "$url" --queue $q --count 1500 \
        --prefix f10 --batch 10 --rate 300 --timeout 500 --connect-timeout 500 \
        --deadline 30000 --out "$FL_DIR/f10.adm" --unknown "$FL_DIR/f10.unknown"
    p=$FL_PID
    sleep 1
    kill -STOP "$pid"
    sleep 0.2
    t0=$(fl_now_ms)
    timeout 10 "$BIN/sluice-enqueue" -q $q -r "$url" --timeout 500 during-pause \
        >/dev/null 2>"$FL_DIR/f10-enqueue.err" || rc=$?
    took=$(($(fl_now_ms) - t0))
    fl_eq "F10 sluice-enqueue exit code against a stopped server" 3 "$rc"
    fl_grep "F10 message" "timed out" "$FL_DIR/f10-enqueue.err"
    fl_le "F10 sluice-enqueue time with --timeout 500 (ms)" 1500 "$took"
    sleep 2.6
    kill -CONT "$pid"
    fl_wait_pid "$p" 30
    fl_eq "F10 producer exit ($(cat "$FL_DIR/f10-load.out"))" 0 "$FL_RC"
    local out
    out=$(cat "$FL_DIR/f10-load.out")
    # every call returned within its deadline (500 ms, plus the connect, plus slack)
    fl_le "F10 longest producer call (ms)" 1600 "$(field max_call_ms "$out")"
    [ -n "$(field ETIMEDOUT "$out")$(field EUNKNOWN "$out")" ] ||
        fl_fail "F10: the producer saw no timeout during a 3 s pause: $out"
    fl_wait_until 20 "F10: queue drained after SIGCONT" 'drained f10 $q'
    fl_is_child "$w" || fl_fail "F10: the worker died: $(tail -n 3 "$FL_DIR/f10-worker.err")"
    fl_kill "$w" TERM
    fl_wait_pid "$w" 15
    fl_eq "F10 worker exit code after SIGTERM" 0 "$FL_RC"
    check_e2e --admitted "$FL_DIR/f10.adm" --processed "$FL_DIR/processed.rec" \
        --redis "$url" --queue $q
    F10_LINE="SIGSTOP 3 s: enqueue exit 3 in ${took} ms; producer max_call_ms="
    F10_LINE+="$(field max_call_ms "$out") (timeout 500) checked=$(field checked "$CHECK_LINE") lost=0"
    fl_log "F10 ok: $F10_LINE"
    "$SRC/scripts/test-redis" stop "$FL_DIR/f10"
}

f11_not_running() {
    local q=rp-f11 url w t0 took rc=0 out
    redis_start f11
    url=$(redis_url f11)
    "$SRC/scripts/test-redis" stop "$FL_DIR/f11" # its port is now free and nothing listens
    t0=$(fl_now_ms)
    timeout 10 "$BIN/sluice-enqueue" -q $q -r "$url" hello >/dev/null \
        2>"$FL_DIR/f11-enqueue.err" || rc=$?
    took=$(($(fl_now_ms) - t0))
    fl_eq "F11 sluice-enqueue exit code with no server" 3 "$rc"
    fl_grep "F11 message names the server and the cause" "127.0.0.1:$(redis_port f11).*refused" \
        "$FL_DIR/f11-enqueue.err"
    fl_le "F11 sluice-enqueue time (ms, connect timeout 2000)" 2500 "$took"
    # fail-open: the caller is told to go ahead, nothing is queued, nothing counted admitted
    out=$(timeout 10 "$BIN/sluice-faultload" --redis "$url" --queue $q --count 3 --fail-open \
        --out "$FL_DIR/f11-open.adm" --deadline 5000) || fl_fail "F11: fail-open producer failed: $out"
    fl_eq "F11 fail-open outcomes" 3 "$(field open "$out")"
    fl_eq "F11 fail-open admitted" 0 "$(field admitted "$out")"
    # a worker started before Redis: reports the failed async connect, retries, then drains
    rm -f "$FL_DIR/processed.rec"
    t0=$(fl_now_ms)
    worker_start f11-worker f11 $q --visibility-timeout 1000
    w=$FL_PID
    fl_wait_until 3 "F11: the worker reports the failed connect" \
        'grep -q "event=redis_down.*ECONN" "$FL_DIR/f11-worker.err"'
    took=$(($(fl_now_ms) - t0))
    fl_grep "F11 worker message names the cause" "redis_down.*refused" "$FL_DIR/f11-worker.err"
    sleep 1
    fl_is_child "$w" || fl_fail "F11: the worker gave up instead of retrying"
    local attempts
    attempts=$(grep -c 'event=redis_down status=' "$FL_DIR/f11-worker.err" || true)
    # two connections, exponential backoff from 100 ms: a handful each, not a storm
    fl_le "F11 worker connect attempts in ~1.5 s" 12 "$attempts"
    redis_restart f11
    seq -f 'f11-%g' 1 50 | "$BIN/sluice-enqueue" -q $q -r "$url" --ids >"$FL_DIR/f11.adm"
    fl_wait_until 15 "F11: the worker connects and drains" 'drained f11 $q'
    fl_kill "$w" TERM
    fl_wait_pid "$w" 15
    check_e2e --admitted "$FL_DIR/f11.adm" --processed "$FL_DIR/processed.rec" \
        --redis "$url" --queue $q --max-duplicates 0
    F11_LINE="no server: enqueue exit 3, worker reported the failed connect in ${took} ms"
    F11_LINE+=" ($attempts attempts before Redis came up), then drained 50/50"
    fl_log "F11 ok: $F11_LINE"
    "$SRC/scripts/test-redis" stop "$FL_DIR/f11"
}

f12_client_kill() {
    local q=rp-f12 url pass=s3cr3t-f12 p1 p2 w1 w2 kills=0 deadline n
    redis_start f12
    redis_set_password f12 "$pass"
    url="redis://:$pass@127.0.0.1:$(redis_port f12)"
    rm -f "$FL_DIR/processed.rec" "$FL_DIR/f12.explained"
    fl_spawn f12-w1 "$BIN/sluice-worker" -q $q -r "$url" --record "$FL_DIR/processed.rec" \
        --handler sleep:1 --concurrency 16 --visibility-timeout 1000
    w1=$FL_PID
    fl_spawn f12-w2 "$BIN/sluice-worker" -q $q -r "$url" --record "$FL_DIR/processed.rec" \
        --handler sleep:1 --concurrency 16 --visibility-timeout 1000
    w2=$FL_PID
    fl_spawn f12-batch "$BIN/sluice-faultload" --redis "$url" --queue $q --count 4000 \
        --prefix f12b --batch 20 --rate 800 --out "$FL_DIR/f12.adm" \
        --unknown "$FL_DIR/f12.unknown" --deadline 40000
    p1=$FL_PID
    fl_spawn f12-idem "$BIN/sluice-faultload" --redis "$url" --queue $q --count 500 \
        --prefix f12i --idempotent --rate 100 --out "$FL_DIR/f12.adm" --deadline 40000
    p2=$FL_PID
    deadline=$(($(fl_now_ms) + 60000))
    while fl_is_child "$p1" || fl_is_child "$p2" || [ "$kills" -lt 8 ]; do
        [ "$(fl_now_ms)" -lt "$deadline" ] || fl_fail "F12: not done in 60 s"
        sleep "0.$((40 + RANDOM % 30))"
        pel_ids f12 $q >>"$FL_DIR/f12.explained"
        n=$(rcli f12 CLIENT KILL TYPE normal)
        kills=$((kills + 1))
        pel_ids f12 $q >>"$FL_DIR/f12.explained"
        [ "$n" -ge 1 ] || fl_fail "F12: CLIENT KILL found no client to kill"
    done
    fl_wait_pid "$p1" 10
    fl_eq "F12 batch producer exit ($(cat "$FL_DIR/f12-batch.out"))" 0 "$FL_RC"
    fl_wait_pid "$p2" 10
    fl_eq "F12 idempotent producer exit ($(cat "$FL_DIR/f12-idem.out"))" 0 "$FL_RC"
    fl_wait_until 20 "F12: queue drained" 'drained f12 $q'
    for w in $w1 $w2; do
        fl_is_child "$w" || fl_fail "F12: a worker died"
        fl_kill "$w" TERM
        fl_wait_pid "$w" 15
    done
    if grep -Eq 'NOAUTH|EAUTH' "$FL_DIR"/f12-*.err; then
        fl_fail "F12: a reconnect did not re-authenticate: $(grep -Eh 'NOAUTH|EAUTH' "$FL_DIR"/f12-*.err | head -n 2)"
    fi
    # 4 connections at start, then at least one reconnect per kill
    fl_ge "F12 worker connections made (4 + one per kill at least)" $((4 + kills)) \
        "$(cat "$FL_DIR"/f12-w*.err | grep -c 'event=redis_ready' || true)"
    check_e2e --admitted "$FL_DIR/f12.adm" --processed "$FL_DIR/processed.rec" \
        --redis "$url" --queue $q --explained "$FL_DIR/f12.explained"
    local unknown
    unknown=$(field unknown "$(cat "$FL_DIR/f12-batch.out")")
    fl_eq "F12 admitted (4500 - unknown outcomes)" $((4500 - unknown)) \
        "$(field checked "$CHECK_LINE")"
    fl_eq "F12 payloads admitted under two ids" 0 "$(field payloads_under_two_ids "$CHECK_LINE")"
    F12_LINE="CLIENT KILL x$kills with AUTH: checked=$(field checked "$CHECK_LINE") lost=0"
    F12_LINE+=" duplicates=$(field duplicates "$CHECK_LINE") unknown_outcomes=$unknown"
    fl_log "F12 ok: $F12_LINE"
}

f10_sigstop
f11_not_running
f12_client_kill
fl_figures "F10 $F10_LINE; F11 $F11_LINE; F12 $F12_LINE"
