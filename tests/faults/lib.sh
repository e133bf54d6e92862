# shellcheck shell=bash
# shellcheck disable=SC2034 # FL_RC, CHECK_LINE, FL_PID are results for the sourcing script
# SPDX-License-Identifier: MIT
# lib.sh - shared helpers of the fault suite (sourced by tests/faults/fault_*.sh).
#
# Each fault script calls fl_init NAME first. It gets a private temp dir ($FL_DIR), private
# redis-servers (scripts/test-redis, each in its own dir under $FL_DIR), background processes
# started with fl_spawn whose PIDs are remembered, and an EXIT trap that kills every process it
# started by PID (never by name) and stops every redis-server it started (a cluster too, when its
# directory is in FL_CLUSTERS; scripts never replace that trap). Logs are kept when
# the script fails (the path is printed) and removed when it passes.
#
# Environment (set by ctest): SLUICE_BIN_DIR (built binaries), SLUICE_SOURCE_DIR, SLUICE_TEST_TMP.
# Closing figures of each script go to $SLUICE_TEST_TMP/fault-figures/NAME.txt and stdout.

set -euo pipefail

FL_NAME=
FL_DIR=
FL_T0=$(date +%s%N)
FL_PIDS=()
FL_REDIS=()
FL_CLUSTERS=() # directories of scripts/test-redis cluster-start, stopped on exit
BIN=${SLUICE_BIN_DIR:-}
SRC=${SLUICE_SOURCE_DIR:-}

# ---- output and assertions ----

fl_log() {
    local ms=$((($(date +%s%N) - FL_T0) / 1000000))
    printf '[%s %d.%03ds] %s\n' "$FL_NAME" $((ms / 1000)) $((ms % 1000)) "$*"
}

fl_fail() {
    printf 'FAIL [%s]: %s\n' "$FL_NAME" "$*"
    exit 1
}

# fl_eq WHAT EXPECTED SEEN
fl_eq() {
    [ "$2" = "$3" ] || fl_fail "$1: expected '$2', saw '$3'"
}

# fl_le WHAT LIMIT SEEN: SEEN <= LIMIT (integers)
fl_le() {
    [ "$3" -le "$2" ] || fl_fail "$1: expected at most $2, saw $3"
}

# fl_ge WHAT MIN SEEN: SEEN >= MIN (integers)
fl_ge() {
    [ "$3" -ge "$2" ] || fl_fail "$1: expected at least $2, saw $3"
}

# fl_grep WHAT PATTERN FILE: FILE contains PATTERN (extended regex)
fl_grep() {
    grep -Eq -- "$2" "$3" || fl_fail "$1: expected /$2/ in $(basename "$3"), saw: $(tail -n 5 "$3" | tr '\n' '|')"
}

# fl_figures LINE: the closing figures of this script, printed and kept for the suite summary.
fl_figures() {
    local dir=${SLUICE_TEST_TMP:-$FL_DIR}/fault-figures
    mkdir -p "$dir"
    printf '%s: %s\n' "$FL_NAME" "$*" >>"$dir/$FL_NAME.txt"
    printf 'FIGURES %s: %s\n' "$FL_NAME" "$*"
}

fl_now_ms() {
    echo $(($(date +%s%N) / 1000000))
}

# ---- set-up and clean-up ----

fl_init() {
    FL_NAME=$1
    [ -n "$BIN" ] && [ -x "$BIN/sluice-enqueue" ] || {
        echo "FAIL [$FL_NAME]: SLUICE_BIN_DIR ('$BIN') has no sluice-enqueue; run through ctest" >&2
        exit 1
    }
    [ -n "$SRC" ] && [ -x "$SRC/scripts/test-redis" ] || {
        echo "FAIL [$FL_NAME]: SLUICE_SOURCE_DIR ('$SRC') has no scripts/test-redis" >&2
        exit 1
    }
    command -v redis-server >/dev/null || fl_fail "redis-server is not installed"
    local base=${SLUICE_TEST_TMP:-${TMPDIR:-/tmp}}
    mkdir -p "$base"
    FL_DIR=$(mktemp -d "$base/fault-$FL_NAME.XXXXXX")
    rm -f "${SLUICE_TEST_TMP:-$FL_DIR}/fault-figures/$FL_NAME.txt"
    trap fl_cleanup EXIT
    trap 'exit 130' INT TERM
    fl_log "temp dir $FL_DIR"
}

# 1 when PID is alive and a child of this shell (so a recycled PID is never signalled).
fl_is_child() {
    local stat
    stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
    stat=${stat##*) } # fields after the command name: state ppid ...
    set -- $stat
    [ "$2" = "$$" ] && [ "$1" != Z ]
}

fl_cleanup() {
    local rc=$? pid d
    trap - EXIT
    for pid in "${FL_PIDS[@]}"; do
        if fl_is_child "$pid"; then
            kill -KILL "$pid" 2>/dev/null || true
        fi
    done
    for pid in "${FL_PIDS[@]}"; do
        wait "$pid" 2>/dev/null || true
    done
    for d in "${FL_CLUSTERS[@]}"; do
        [ ! -f "$d/ports" ] || "$SRC/scripts/test-redis" cluster-stop "$d" >/dev/null 2>&1 || true
    done
    for d in "${FL_REDIS[@]}"; do
        "$SRC/scripts/test-redis" stop "$d" >/dev/null 2>&1 || true
    done
    if [ "$rc" -eq 0 ] && [ "${SLUICE_KEEP_TMP:-0}" != 1 ]; then
        rm -rf "$FL_DIR"
    else
        fl_log "exit $rc; logs kept in $FL_DIR"
        for f in "$FL_DIR"/*.err; do
            [ -s "$f" ] || continue
            echo "---- last lines of $(basename "$f")"
            tail -n 8 "$f"
        done
    fi
    exit "$rc"
}

# fl_spawn NAME CMD...: starts CMD in the background, stdout to $FL_DIR/NAME.out, stderr to
# $FL_DIR/NAME.err (appended: a restarted process keeps one log). Sets FL_PID.
fl_spawn() {
    local name=$1
    shift
    "$@" >>"$FL_DIR/$name.out" 2>>"$FL_DIR/$name.err" &
    FL_PID=$!
    FL_PIDS+=("$FL_PID")
}

# fl_spawn_in NAME INPUT CMD...: the same with stdin from the file INPUT.
fl_spawn_in() {
    local name=$1 input=$2
    shift 2
    "$@" <"$input" >>"$FL_DIR/$name.out" 2>>"$FL_DIR/$name.err" &
    FL_PID=$!
    FL_PIDS+=("$FL_PID")
}

# fl_kill PID [SIGNAL]: signals PID (default KILL) if it is our child, and reaps it when KILL.
fl_kill() {
    local pid=$1 sig=${2:-KILL}
    fl_is_child "$pid" || return 0
    kill "-$sig" "$pid" 2>/dev/null || true
    if [ "$sig" = KILL ]; then
        wait "$pid" 2>/dev/null || true
    fi
}

# fl_wait_pid PID TIMEOUT_S: waits for PID to exit; sets FL_RC to its exit status. Fails the
# test when it is still running after TIMEOUT_S.
fl_wait_pid() {
    local pid=$1 limit=$(($(fl_now_ms) + $2 * 1000))
    while fl_is_child "$pid"; do
        [ "$(fl_now_ms)" -lt "$limit" ] || fl_fail "process $pid still running after $2 s"
        sleep 0.05
    done
    FL_RC=0
    wait "$pid" 2>/dev/null || FL_RC=$?
}

# fl_wait_until TIMEOUT_S WHAT 'CONDITION': evaluates the shell text CONDITION every 100 ms
# until it succeeds (single-quote it, so that $(...) inside runs at each poll).
fl_wait_until() {
    local secs=$1 what=$2
    shift 2
    local limit=$(($(fl_now_ms) + secs * 1000))
    until eval "$*"; do
        [ "$(fl_now_ms)" -lt "$limit" ] || fl_fail "waited ${secs} s for: $what"
        sleep 0.1
    done
}

# ---- redis-servers (each in $FL_DIR/NAME) ----

# redis_start NAME [test-redis start options]: e.g. redis_start r --fsync always
redis_start() {
    local d=$FL_DIR/$1
    shift
    FL_REDIS+=("$d")
    "$SRC/scripts/test-redis" start "$d" "$@" >/dev/null ||
        fl_fail "could not start redis-server in $d (see $d/redis.log)"
}

redis_url() { cat "$FL_DIR/$1/url"; }
redis_port() { cat "$FL_DIR/$1/port"; }
redis_pid() { cat "$FL_DIR/$1/pid"; }

# rcli NAME ARGS...: redis-cli on the server's unix socket (not through any proxy), as the
# default user with the password in NAME/pass when there is one (redis_set_password).
rcli() {
    local d=$FL_DIR/$1
    shift
    if [ -f "$d/pass" ]; then
        REDISCLI_AUTH=$(cat "$d/pass") redis-cli -s "$d/redis.sock" "$@"
    else
        redis-cli -s "$d/redis.sock" "$@"
    fi
}

# redis_set_password NAME PASS: the default user needs PASS from now on (not kept across a
# restart: CONFIG SET only)
redis_set_password() {
    rcli "$1" CONFIG SET requirepass "$2" >/dev/null
    echo "$2" >"$FL_DIR/$1/pass"
}

redis_kill() { "$SRC/scripts/test-redis" kill "$FL_DIR/$1"; }

redis_restart() {
    "$SRC/scripts/test-redis" restart "$FL_DIR/$1" >/dev/null ||
        fl_fail "could not restart redis-server in $FL_DIR/$1"
}

redis_alive() { rcli "$1" ping 2>/dev/null | grep -q PONG; }

# ---- queues ----

# lines FILE: number of non-empty lines (0 when FILE does not exist)
lines() {
    if [ -f "$1" ]; then grep -c . "$1" || true; else echo 0; fi
}

depth() { rcli "$1" XLEN "sluice:{$2}:stream"; }

# Entries pending in the consumer group (0 when the group does not exist).
pending() {
    local n
    n=$(rcli "$1" XPENDING "sluice:{$2}:stream" workers 2>/dev/null | head -n 1)
    case "$n" in '' | *[!0-9]*) echo 0 ;; *) echo "$n" ;; esac
}

dead_count() { rcli "$1" XLEN "sluice:{$2}:dead"; }

drained() { [ "$(depth "$1" "$2")" = 0 ] && [ "$(pending "$1" "$2")" = 0 ]; }

# ---- sluice processes ----

# worker_start NAME REDIS QUEUE [sluice-worker options]: records into $FL_DIR/processed.rec
worker_start() {
    local name=$1 r=$2 q=$3
    shift 3
    fl_spawn "$name" "$BIN/sluice-worker" --queue "$q" --redis "$(redis_url "$r")" \
        --record "$FL_DIR/processed.rec" --log-level info "$@"
}

# check_e2e [check.py options]: runs the checker; sets CHECK_LINE; fails the test on loss.
check_e2e() {
    local out rc=0
    out=$(python3 "$SRC/tests/faults/check.py" "$@" 2>"$FL_DIR/check.err") || rc=$?
    CHECK_LINE=$out
    fl_log "check: $out"
    [ "$rc" -eq 0 ] || fl_fail "end-to-end check: $out; $(tr '\n' ' ' <"$FL_DIR/check.err")"
}

# field NAME LINE: the value of NAME=VALUE in a summary line.
field() {
    local kv
    for kv in $2; do
        [ "${kv%%=*}" = "$1" ] && { echo "${kv#*=}"; return 0; }
    done
    echo ""
}
