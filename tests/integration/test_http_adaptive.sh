#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# HTTP delivery against sluice-bench-backend (tests/bench/backend.c), a C back end that reports
# how many requests are inside it:
#  - a back end that answers at once: 10,000 deliveries at --concurrency 64 never pause: no gap
#    over 500 ms between two verdicts in the worker's --record (a few ms here; about a second
#    when a batch whose transfers all finished inside libcurl's timer callback waited for the
#    next poll to send its acknowledgements, the next read waiting with it);
#  - a back end serving 8 at a time, 25 ms each (at best 320/s): --concurrency auto reaches
#    >= 0.85 x 320/s (or of the fixed run's rate when the machine is too loaded for 320/s) with
#    the median number inside it <= 16, where a fixed --concurrency 64 keeps about 64 inside.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/http_lib.sh"
q="hadapt-$$"
read -ra qk <<<"$(queue_keys "$q")"
keys+=("${qk[@]}")

fill() { seq 1 "$1" | "$bin/sluice-enqueue" --redis "$url" --queue "$q" --capacity 1000000 \
    --batch 500 >/dev/null; }
acked() { local v; v=$(rcli HGET "sluice:{$q}:stats" acked); echo "${v:-0}"; }
now_ms() { date +%s%3N; }

# ---- an instant back end ----
sink_start fast --report-ms 0
fill 10000
t0=$(now_ms)
timeout 30 "$bin/sluice-worker" --redis "$url" --queue "$q" --concurrency 64 --max-messages 10000 \
    --handler "http://127.0.0.1:$sport/in" --log-level warn --record "$tmp/fast.rec" \
    >"$tmp/out" 2>"$tmp/log" || fail "worker failed: $(tail -5 "$tmp/log")"
el=$(($(now_ms) - t0))
sink_stop
grep -q '^processed=10000 .*http_ok=10000 ' "$tmp/out" || fail "summary: $(cat "$tmp/out")"
conns=$(sed -n 's/^total .*connections=\([0-9]*\).*/\1/p' "$tmp/fast.out")
[ "${conns:-999}" -le 64 ] || fail "$conns connections for a concurrency of 64"
# liveness by count, not by time: the verdicts' wall-clock times (--record's third field) leave
# no gap over 500 ms (a loaded machine slows the run down, it does not stop it for that long)
[ "$(wc -l <"$tmp/fast.rec")" -eq 10000 ] || fail "--record: $(wc -l <"$tmp/fast.rec") lines"
gap=$(awk '{ print $3 }' "$tmp/fast.rec" | sort -n |
    awk 'NR > 1 && $1 - p > g { g = $1 - p } { p = $1 } END { print g + 0 }')
[ "$gap" -le 500 ] || fail "deliveries to an instant back end stalled for $gap ms (of $el ms)"
echo "instant back end: 10,000 deliveries in $el ms over $conns connections, longest gap $gap ms"

# ---- a back end serving 8 at a time, 25 ms each ----
# run NAME CONCURRENCY SECONDS: a worker for that long; the rate from t=3 s on and the median
# of the back end's per-second medians of the requests inside it over the same seconds
run() {
    local name=$1 conc=$2 secs=$3 wpid a0 a1 t1 t2
    rcli DEL "sluice:{$q}:stream" "sluice:{$q}:stats" "sluice:{$q}:meta" >/dev/null
    fill $((secs * 400))
    sink_start "$name" --slots 8 --service-ms 25 --report-ms 1000
    "$bin/sluice-worker" --redis "$url" --queue "$q" --concurrency "$conc" \
        --handler "http://127.0.0.1:$sport/in" --log-level warn >"$tmp/$name.sum" \
        2>"$tmp/$name.log" &
    wpid=$!
    pids+=("$wpid")
    sleep 3
    a0=$(acked) t1=$(now_ms)
    sleep $((secs - 3))
    a1=$(acked) t2=$(now_ms)
    kill -TERM "$wpid"
    wait "$wpid" || fail "$name worker failed: $(tail -5 "$tmp/$name.log")"
    sink_stop
    rate=$(((a1 - a0) * 1000 / (t2 - t1)))
    inside=$(awk '$1 ~ /^t=/ { split($1, t, "="); if (t[2] > 3.5) { split($3, v, "="); print v[2] } }' \
        "$tmp/$name.out" | sort -n | awk '{ a[NR] = $1 } END { print NR ? a[int((NR + 1) / 2)] : -1 }')
    limit=$(sed -n 's/.*concurrency_limit=\([0-9]*\).*/\1/p' "$tmp/$name.sum")
    echo "$name: $rate/s, median inside $inside${limit:+, limit $limit}"
}
run auto auto 9
auto_rate=$rate auto_inside=$inside
run fixed 64 6
fixed_rate=$rate fixed_inside=$inside
[ "$fixed_inside" -ge 48 ] || fail "a fixed 64 kept only $fixed_inside inside the back end"
if [ "$auto_inside" -lt 1 ] || [ "$auto_inside" -gt 16 ]; then
    fail "auto kept a median of $auto_inside inside (at most 16)"
fi
best=320
[ "$fixed_rate" -lt "$best" ] && best=$fixed_rate # a loaded machine: what it could do
[ $((auto_rate * 100)) -ge $((best * 85)) ] ||
    fail "auto reached $auto_rate/s, below 0.85 x $best/s"
echo "ok: auto $auto_rate/s with $auto_inside inside; fixed 64 $fixed_rate/s with $fixed_inside inside"
