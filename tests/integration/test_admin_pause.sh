#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# sluice-admin pause / resume: a running worker takes nothing new within a few seconds of a
# pause (it still reclaims a crashed consumer's entry) while producers still admit until the
# bucket is full, and drains the queue after resume;
# for the plain stream read, the paced read (sluice_take), a fair queue (sluice_fair_take) and
# the list backend, side by side. The paused state shows in stats (human and JSON), the worker's
# /metrics (sluice_queue_paused) and the gateway's queue info; a partitioned queue is paused in
# every partition. Bounds are counts, with generous waits.
. "$(dirname "$0")/lib.sh"
q="pause-$$"
A() { "$bin/sluice-admin" --redis "$url" "$@"; }
E() { "$bin/sluice-enqueue" --redis "$url" "$@"; }
purge() { A purge "$1" --yes >/dev/null 2>&1 || true; }
modes=(plain paced fair list)
trap 'for m in "${modes[@]}" parts parts~1 parts~2; do purge "$q-$m"; done; lib_cleanup' EXIT
backend() { [ "$1" = list ] && echo list || echo stream; }
lines() { cat "$tmp/r-$1" 2>/dev/null | wc -l; }
# wait_all N: until every mode's worker has processed N entries (20 s at most)
wait_all() {
    local i m done
    for i in $(seq 1 200); do
        done=1
        for m in "${modes[@]}"; do [ "$(lines "$m")" -ge "$1" ] || done=0; done
        [ "$done" = 1 ] && return 0
        sleep 0.1
    done
}

# ---- usage ----
run 2 "unexpected argument 'now'" A pause "$q-plain" now
run 2 "QUEUE is required" A resume

# ---- one worker per read path, each with a few entries to show it runs ----
A limit "$q-paced" set pace drain 1000/1s >/dev/null
A fair "$q-fair" on >/dev/null
for m in "${modes[@]}"; do
    A capacity "$q-$m" 20 >/dev/null
    E --backend "$(backend "$m")" --queue "$q-$m" a1 a2 a3 >/dev/null
    extra=()
    [ "$m" = plain ] && extra=(--metrics 127.0.0.1:0 --log-level info --visibility-timeout 1000)
    "$bin/sluice-worker" --redis "$url" --queue "$q-$m" --backend "$(backend "$m")" \
        --handler noop --concurrency 4 --record "$tmp/r-$m" --log-level error "${extra[@]}" \
        2>"$tmp/log-$m" >/dev/null &
    pids+=("$!")
done
wait_all 3
for m in "${modes[@]}"; do [ "$(lines "$m")" = 3 ] || fail "$m: $(lines "$m") of 3 processed"; done

# ---- pause: nothing new is taken; admission goes on until the bucket is full ----
for m in "${modes[@]}"; do
    run 0 "^paused queue $q-$m: workers take no new entries .* producers still admit until the bucket is full" \
        A pause "$q-$m"
done
run 0 "already paused: queue $q-plain" A pause "$q-plain"
sleep 3 # every worker has read the field (at most once a second, a blocked read at most 1 s)
for m in "${modes[@]}"; do
    seq 1 25 | sed 's/^/p/' | E --backend "$(backend "$m")" --queue "$q-$m" >"$tmp/e-$m" 2>&1 || true
    grep -q 'admitted=20 rejected=5' "$tmp/e-$m" || fail "$m: admission while paused: $(cat "$tmp/e-$m")"
done
sleep 2
for m in "${modes[@]}"; do
    [ "$(lines "$m")" = 3 ] || fail "$m: a paused worker took entries ($(lines "$m") processed)"
done
# a crashed consumer's entry is still reclaimed (and processed) by a paused worker
rcli XREADGROUP GROUP workers ghost COUNT 1 STREAMS "sluice:{$q-plain}:stream" '>' >/dev/null
for i in $(seq 1 100); do [ "$(lines plain)" -ge 4 ] && break; sleep 0.1; done
[ "$(lines plain)" = 4 ] || fail "plain: the ghost's entry was not reclaimed ($(lines plain))"
run 0 "PAUSED +workers take no new entries" A stats "$q-plain" --sample 0
A stats "$q-list" --sample 0 --json >"$tmp/j"
grep -q '"paused":true' "$tmp/j" || fail "stats --json: $(cat "$tmp/j")"
grep -q '"depth":20,' "$tmp/j" || fail "stats --json depth: $(cat "$tmp/j")"

# /metrics of the plain worker, and the gateway's queue info
mport=$(sed -n 's/.*event=metrics_listening.* port=\([0-9]*\).*/\1/p' "$tmp/log-plain" | head -1)
[ -n "$mport" ] || fail "no metrics port: $(cat "$tmp/log-plain")"
# paused_metric V: the worker's /metrics shows sluice_queue_paused V (within 5 s)
paused_metric() {
    local i
    for i in $(seq 1 50); do
        curl -s --max-time 5 "http://127.0.0.1:$mport/metrics" >"$tmp/m" || true
        grep -q "^sluice_queue_paused{[^}]*} $1\$" "$tmp/m" && return 0
        sleep 0.1
    done
    fail "/metrics: $(grep paused "$tmp/m")"
}
paused_metric 1
gateway_start --queue "$q-plain"
curl -s --max-time 5 "http://127.0.0.1:$port/v1/queues/$q-plain" >"$tmp/g"
grep -q '"paused":true' "$tmp/g" || fail "gateway queue info: $(cat "$tmp/g")"

# ---- resume: every worker drains what was admitted ----
for m in "${modes[@]}"; do
    run 0 "^resumed queue $q-$m" A resume "$q-$m"
done
A resume "$q-plain" --json >"$tmp/j"
grep -q '"paused":false,"changed":false' "$tmp/j" || fail "resume --json: $(cat "$tmp/j")"
wait_all 23
for m in "${modes[@]}"; do
    [ "$(lines "$m")" = 23 ] || fail "$m: $(lines "$m") of 23 processed after resume"
done
A stats "$q-plain" --sample 0 --json >"$tmp/j"
grep -q '"paused":false' "$tmp/j" || fail "stats after resume: $(cat "$tmp/j")"
paused_metric 0

# ---- a partitioned queue: every partition ----
A partitions "$q-parts" 3 >/dev/null
E --queue "$q-parts" $(seq 1 6) >/dev/null
run 0 "^paused queue $q-parts \(every partition\).*\(depth 6 / capacity" A pause "$q-parts"
for p in "$q-parts" "$q-parts~1" "$q-parts~2"; do
    [ "$(rcli HGET "sluice:{$p}:meta" paused)" = 1 ] || fail "partition $p not paused"
done
A stats "$q-parts" --sample 0 --json >"$tmp/j"
grep -q '"paused":true' "$tmp/j" || fail "stats of a partitioned queue: $(cat "$tmp/j")"
run 0 "^resumed queue $q-parts" A resume "$q-parts"
for p in "$q-parts" "$q-parts~1" "$q-parts~2"; do
    [ -z "$(rcli HGET "sluice:{$p}:meta" paused)" ] || fail "partition $p still paused"
done
echo ok
