# SPDX-License-Identifier: MIT
# Shared by the HTTP delivery tests (sourced after lib.sh): the scripted back end
# (http_backend.py) and a worker that drains a queue into it.
#   backend_start NAME [ARGS...]  starts a back end logging to $tmp/NAME.log; sets $bport and
#                                  $bpid
#   reqs NAME                      the requests it logged, one JSON object a line
#   drain Q N HANDLER [ARGS...]    sluice-worker until N messages got their verdict
#                                  (stdout: the summary line; log in $tmp/worker.log)
#   use_queue Q [KEY...]           Q's keys (and the KEYs) are deleted on exit
#   sink_start NAME [ARGS...]      sluice-bench-backend (tests/bench/backend.c) reporting to
#                                  $tmp/NAME.out; sets $sport and $spid (sink_stop ends it)
#   workers_start N Q HANDLER [ARGS...]  N sluice-workers of Q in the background, at concurrency
#                                  1 (summary $tmp/wI.out, log $tmp/wI.log); sets wpid[1..N]
#   parts_left Q                   the entries left in the 3 partitions of Q (xlen QUEUE, the
#                                  test's, gives a stream's length)
#   workers_drain Q N              waits (30 s at most) until the back end be logged N requests and
#                                  the 3 partitions of Q are empty, then stops workers 1 and 2
#   proxy_start                    sluice-faultproxy in front of the Redis of $url (redis://),
#                                  its mode file $mode (pass), its port in $tmp/proxy.port
#   hold_partitions Q              the hold of a queue Q of 3 partitions holding 90 messages: 2
#                                  workers into the back end be, whose first answer is 429
#                                  Retry-After: 2; no request from any partition during the hold,
#                                  then all delivered
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
proxy_start() {
    mode=$tmp/proxy.mode
    echo pass >"$mode"
    "$bin/sluice-faultproxy" --listen 127.0.0.1:0 --upstream "${url#redis://}" --mode-file "$mode" \
        --port-file "$tmp/proxy.port" 2>"$tmp/proxy.log" &
    pids+=("$!")
    for _ in $(seq 1 100); do
        [ -s "$tmp/proxy.port" ] && break
        sleep 0.05
    done
    [ -s "$tmp/proxy.port" ] || fail "the proxy did not start: $(cat "$tmp/proxy.log")"
}
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
parts_left() {
    local p
    for p in "" "~1" "~2"; do xlen "$1$p"; done | paste -sd+ | bc
}
workers_drain() {
    local _
    for _ in $(seq 1 300); do
        [ "$(grep -c '"path"' "$tmp/be.log")" -ge "$2" ] && [ "$(parts_left "$1")" = 0 ] && break
        sleep 0.1
    done
    kill -TERM "${wpid[1]}" "${wpid[2]}"
    wait "${wpid[1]}" "${wpid[2]}" || fail "a worker failed: $(cat "$tmp"/w?.log)"
}
hold_partitions() {
    local q=$1 p _
    for p in "" "~1" "~2"; do
        [ "$(xlen "$q$p")" -ge 15 ] || fail "partition $q$p got too few messages"
    done
    workers_start 2 "$q" "http://127.0.0.1:$bport/ra/2/1/100"
    workers_drain "$q" 91
    python3 - "$tmp/be.log" "$q" <<'PY' || fail "the hold: see above"
import json, sys
rs = [json.loads(l) for l in open(sys.argv[1])]
q = sys.argv[2]
assert len(rs) == 91, ("requests", len(rs))
t0 = rs[0]["t"]  # the request answered 429, Retry-After: 2
later = [(r["t"] - t0, r["headers"]["sluice-queue"]) for r in rs[1:]]
# generous bounds (as test_http_hold.sh): a request already under way may land just after the
# 429, and the hold ends with the key's expiry plus a reclaim or read
inside = [(round(d, 2), p) for d, p in later if 0.4 <= d <= 1.6]
assert not inside, ("requests during the hold (+s, partition)", inside)
after = [(d, p) for d, p in later if d > 1.6]
assert after and min(after)[0] >= 1.8, ("first requests after the hold", sorted(after)[:3])
parts = {p for _, p in after}
assert parts == {q, q + "~1", q + "~2"}, ("partitions delivering after the hold", parts)
print("ok: no request from any of 3 partitions from +%.2f s to +%.2f s after the 429 "
      "(Retry-After: 2); 91 requests" % (max([d for d, _ in later if d < 1.6] or [0]),
                                          min(after)[0]))
PY
    [ "$(parts_left "$q")" = 0 ] || fail "entries left: $(parts_left "$q")"
    grep -h 'http_holds=1' "$tmp"/w?.out >/dev/null || fail "no worker counted the hold"
    echo "ok: $(cat "$tmp"/w?.out | tr '\n' ' ')"
}
