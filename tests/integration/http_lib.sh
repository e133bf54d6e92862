# SPDX-License-Identifier: MIT
# Shared by the HTTP delivery tests (sourced after lib.sh): the scripted back end
# (http_backend.py) and a worker that drains a queue into it.
#   backend_start NAME [ARGS...]  starts a back end logging to $tmp/NAME.log; sets $bport and
#                                  $bpid
#   reqs NAME                      the requests it logged, one JSON object a line
#   drain Q N HANDLER [ARGS...]    sluice-worker until N messages got their verdict
#                                  (stdout: the summary line; log in $tmp/worker.log)
#   use_queue Q [KEY...]           Q's keys (and the KEYs) are deleted on exit
#   wait_log FILE PATTERN [SECONDS] waits (10 s unless told) for a line matching PATTERN
#   sink_start NAME [ARGS...]      sluice-bench-backend (tests/bench/backend.c) reporting to
#                                  $tmp/NAME.out; sets $sport and $spid (sink_stop ends it)
#   workers_start N Q HANDLER [ARGS...]  N sluice-workers of Q in the background, at concurrency
#                                  1 (summary $tmp/wI.out, log $tmp/wI.log); sets wpid[1..N]
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
backend_start() {
    local name=$1 i
    shift
    rm -f "$tmp/$name.port" # a previous back end's port must not be taken for this one's
    python3 "$here/http_backend.py" --port-file "$tmp/$name.port" --log "$tmp/$name.log" "$@" \
        2>"$tmp/$name.err" &
    pids+=("$!")
    bpid=$!
    touch "$tmp/$name.log"
    for i in $(seq 1 100); do
        [ -s "$tmp/$name.port" ] && break
        sleep 0.05
    done
    bport=$(cat "$tmp/$name.port" 2>/dev/null) || fail "back end $name did not start: $(cat "$tmp/$name.err")"
}
reqs() { cat "$tmp/$1.log"; }
drain() {
    local q=$1 n=$2 handler=$3
    shift 3
    timeout 30 "$bin/sluice-worker" --redis "$url" --queue "$q" --handler "$handler" \
        --max-messages "$n" --visibility-timeout 2000 --retry-backoff 100 --log-level info \
        "$@" 2>"$tmp/worker.log" || fail "worker failed: $(tail -5 "$tmp/worker.log")"
}
use_queue() {
    local k
    read -ra k <<<"$(queue_keys "$1")"
    shift
    keys+=("${k[@]}" "$@")
}
wait_log() {
    local i
    for i in $(seq 1 $((${3:-10} * 10))); do
        grep -qE -- "$2" "$1" 2>/dev/null && return 0
        sleep 0.1
    done
    return 0
}
sink_start() {
    local name=$1 _i
    shift
    "$bin/sluice-bench-backend" --port-file "$tmp/$name.port" "$@" >"$tmp/$name.out" \
        2>"$tmp/$name.err" &
    spid=$!
    pids+=("$spid")
    for _i in $(seq 1 100); do
        [ -s "$tmp/$name.port" ] && break
        sleep 0.05
    done
    sport=$(cat "$tmp/$name.port" 2>/dev/null) || fail "back end did not start: $(cat "$tmp/$name.err")"
}
sink_stop() { kill -TERM "$spid"; wait "$spid" || true; }
workers_start() {
    local n=$1 q=$2 handler=$3 i
    shift 3
    for i in $(seq 1 "$n"); do
        "$bin/sluice-worker" --redis "$url" --queue "$q" --handler "$handler" --concurrency 1 \
            --visibility-timeout 2000 --retry-backoff 100 --block 200 "$@" >"$tmp/w$i.out" \
            2>"$tmp/w$i.log" &
        pids+=("$!")
        wpid[$i]=$!
    done
}
