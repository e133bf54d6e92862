#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# --concurrency auto follows a back end whose capacity changes: sluice-bench-backend serves 8
# requests at a time (25 ms each), 16 from t=5 s, 4 from t=13 s; the worker's limit, sampled from
# its /metrics (sluice_worker_concurrency_limit) every 200 ms, sits below 16 with 8 slots, rises
# to at least 14 (7/8 of the new capacity) after the change to 16, and falls to at most 8 (twice
# the new capacity) after the change to 4, each before the next change: 8 s. On a quiet machine
# each move takes well under a second (docs/delivery.md#adaptive-concurrency); the bound is the
# phase, not 5 s, so that a loaded 2-core machine (latency noise slows the gradient) still passes.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/http_lib.sh"
q="hfollow-$$"
read -ra qk <<<"$(queue_keys "$q")"
keys+=("${qk[@]}")
now_ms() { date +%s%3N; }

seq 1 9000 | "$bin/sluice-enqueue" --redis "$url" --queue "$q" --capacity 1000000 --batch 500 >/dev/null
sink_start be --slots 8,16@5,4@13 --service-ms 25 --report-ms 1000
t0=$(now_ms) # the back end's clock of phases started a moment before
"$bin/sluice-worker" --redis "$url" --queue "$q" --concurrency auto \
    --handler "http://127.0.0.1:$sport/in" --metrics 127.0.0.1:0 --log-level info \
    >"$tmp/w.out" 2>"$tmp/w.log" &
wpid=$!
pids+=("$wpid")
mport=
for _ in $(seq 1 100); do
    mport=$(sed -n 's/.*event=metrics_listening addr=127.0.0.1 port=\([0-9]*\).*/\1/p' "$tmp/w.log")
    [ -n "$mport" ] && break
    sleep 0.05
done
[ -n "$mport" ] || fail "no /metrics: $(cat "$tmp/w.log")"
# "MS LIMIT" a line, MS since t0, until t0 + 21 s (at most 150 samples)
for _ in $(seq 1 150); do
    t=$(($(now_ms) - t0))
    [ "$t" -lt 21000 ] || break
    l=$(curl -s --max-time 1 "http://127.0.0.1:$mport/metrics" |
        awk '/^sluice_worker_concurrency_limit/ { print $2 }') || true
    [ -n "$l" ] && echo "$t $l" >>"$tmp/samples"
    sleep 0.2
done
kill -TERM "$wpid"
wait "$wpid" || fail "worker failed: $(tail -5 "$tmp/w.log")"
sink_stop
python3 - "$tmp/samples" <<'PY' || fail "the limit did not follow: $(cat "$tmp/be.out")"
import sys
s = [tuple(map(int, l.split())) for l in open(sys.argv[1])]
def phase(a, b):
    return [(t, l) for t, l in s if a <= t < b]
def first(ps, ok):
    return next(((t, l) for t, l in ps if ok(l)), None)
p8, p16, p4 = phase(2000, 5000), phase(5000, 13000), phase(13000, 21000)
assert len(p8) >= 5 and len(p16) >= 10 and len(p4) >= 10, ("too few samples", len(s))
l8 = sorted(l for _, l in p8)[len(p8) // 2]
assert l8 < 16, ("8 slots: the limit's median is already", l8)
up = first(p16, lambda l: l >= 14)
assert up, ("16 slots: the limit never reached 14", p16)
down = first(p4, lambda l: l <= 8)
assert down, ("4 slots: the limit never came down to 8", p4)
print("ok: limit %d with 8 slots; %d %.1f s after the change to 16; %d %.1f s after the change "
      "to 4" % (l8, up[1], (up[0] - 5000) / 1000, down[1], (down[0] - 13000) / 1000))
PY
grep -q 'concurrency_limit=' "$tmp/w.out" || fail "summary: $(cat "$tmp/w.out")"
