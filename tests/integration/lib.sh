# SPDX-License-Identifier: MIT
# Shared by the integration shell tests (sourced, not run): the fixture's binaries and Redis
# URL, a temporary directory, processes and keys cleaned up on exit, and the assertions.
#   pids+=("$!")          a process to kill -9 on exit
#   keys+=("KEY" ...)     Redis keys to delete on exit
#   run CODE PATTERN COMMAND...   the command exits CODE and prints a line matching PATTERN
#                                 (stdout and stderr, kept in $tmp/out)
set -euo pipefail

bin=${SLUICE_BIN_DIR:?run through ctest}
url=$(cat "${SLUICE_TEST_REDIS_DIR:?}/url")
tmp=$(mktemp -d)
pids=()
keys=()
lib_cleanup() {
    local p
    for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
    if [ "${#keys[@]}" -gt 0 ]; then
        redis-cli -u "$url" DEL "${keys[@]}" >/dev/null 2>&1 || true
    fi
    rm -rf "$tmp"
}
trap lib_cleanup EXIT
rcli() { redis-cli -u "$url" "$@"; }
fail() { echo "FAIL: $*" >&2; exit 1; }
run() {
    local want=$1 pattern=$2 rc=0
    shift 2
    "$@" >"$tmp/out" 2>&1 || rc=$?
    [ "$rc" -eq "$want" ] || fail "$* exited $rc, expected $want: $(cat "$tmp/out")"
    grep -qE -- "$pattern" "$tmp/out" || fail "$*: output lacks /$pattern/: $(cat "$tmp/out")"
}
# queue_keys Q: every key a queue of either backend can have
queue_keys() {
    local q=$1
    echo "sluice:{$q}:stream sluice:{$q}:list sluice:{$q}:meta sluice:{$q}:stats sluice:{$q}:dead sluice:{$q}:procs"
}
# wait_lines FILE N [SECONDS]: waits (10 s unless told) until FILE has at least N lines; the
# caller then checks what it needs (a timeout is not a failure by itself)
wait_lines() {
    local i
    for i in $(seq 1 $((${3:-10} * 10))); do
        [ "$(cat "$1" 2>/dev/null | wc -l)" -ge "$2" ] && return 0
        sleep 0.1
    done
    return 0
}
# wait_log FILE PATTERN [SECONDS]: waits (10 s unless told) for a line matching PATTERN in FILE;
# the caller then checks what it needs (a timeout is not a failure by itself)
wait_log() {
    local i
    for i in $(seq 1 $((${3:-10} * 10))); do
        grep -qE -- "$2" "$1" 2>/dev/null && return 0
        sleep 0.1
    done
    return 0
}
# free_port [OFFSET]: a loopback port no socket uses (nor port + OFFSET: a cluster node's bus),
# below the kernel's ephemeral range (scripts/test-redis free-port says why). Another test may
# still bind it first: a caller starting a server there checks the one answering is its own.
free_port() { "${SLUICE_SOURCE_DIR:?run through ctest}/scripts/test-redis" free-port "$@" || exit 1; }
# record_worker URL QUEUE N: sluice-worker (noop handler, killed on exit) recording what it
# processed in $tmp/w (its log in $tmp/w.log; its PID in $wpid), then waits (10 s at most) for
# N lines there.
record_worker() {
    "$bin/sluice-worker" --redis "$1" --queue "$2" --handler noop --record "$tmp/w" \
        --log-level info >/dev/null 2>"$tmp/w.log" &
    wpid=$!
    pids+=("$wpid")
    wait_lines "$tmp/w" "$3" 10
}
# gateway_start ARGS...: sluice-gateway on a free loopback port (killed on exit); sets $port.
# A --redis in ARGS overrides the fixture's server (the last one given wins).
gateway_start() {
    # the log is emptied here, not only by the child's redirection: the loop below may read it
    # before the child opens it, and a previous gateway's address would be taken for this one's
    : >"$tmp/gw.log"
    "$bin/sluice-gateway" --listen 127.0.0.1:0 --redis "$url" "$@" 2>"$tmp/gw.log" &
    pids+=("$!")
    port=""
    local i
    for i in $(seq 1 100); do
        port=$(grep -oE 'addr=127\.0\.0\.1:[0-9]+' "$tmp/gw.log" | head -n 1 | cut -d: -f2) || true
        [ -n "$port" ] && return 0
        sleep 0.05
    done
    fail "gateway did not start: $(cat "$tmp/gw.log")"
}
# private_redis: a redis-server of the test's own (killed on exit), its memory bounded (1 GB of
# address space: a call that grows without bound fails there, not on the machine), the library
# loaded; points $url (and rcli) at it. For tests that write values by hand that may hang a call.
private_redis() {
    local srv="$tmp/redis"
    (
        ulimit -v 1000000
        "${SLUICE_SOURCE_DIR:?run through ctest}/scripts/test-redis" start "$srv" --no-aof >/dev/null
    )
    pids+=("$(cat "$srv/pid")")
    url=$(cat "$srv/url")
    rcli -x FUNCTION LOAD REPLACE <"$bin/../common/sluice_lua.c.lua" >/dev/null
}
