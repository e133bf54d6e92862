#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# sluice-worker --concurrency auto[:MIN-MAX]: the worker drains with an adaptive limit kept
# within MIN..MAX, shown in its summary line and in the sluice_worker_concurrency_limit gauge;
# and --handler-timeout with sleep: a sleep past the deadline is stopped and retried (then dead
# after --max-deliveries), never acknowledged.
. "$(dirname "$0")/lib.sh"
q="cauto-$$"
read -ra qk <<<"$(queue_keys "$q")"
keys+=("${qk[@]}")

"$bin/sluice-enqueue" --redis "$url" --queue "$q" $(seq 1 60) >/dev/null
timeout 60 "$bin/sluice-worker" --redis "$url" --queue "$q" --handler sleep:20 \
    --concurrency auto:2-4 --max-messages 60 --log-level warn >"$tmp/out" 2>"$tmp/log" ||
    fail "worker failed: $(cat "$tmp/log")"
grep -qE '^processed=60 .*concurrency_limit=[234]$' "$tmp/out" ||
    fail "summary: $(cat "$tmp/out")"
[ "$(rcli XLEN "sluice:{$q}:stream")" -eq 0 ] || fail "entries left"

# a sleep of 2 s against a deadline of 100 ms: retried each time, dead after 2 deliveries
"$bin/sluice-enqueue" --redis "$url" --queue "$q" slow >/dev/null
timeout 60 "$bin/sluice-worker" --redis "$url" --queue "$q" --handler sleep:2000 \
    --handler-timeout 100 --visibility-timeout 400 --retry-backoff 0 --max-deliveries 2 \
    --max-messages 2 --log-level warn >"$tmp/out" 2>"$tmp/log" ||
    fail "worker failed: $(cat "$tmp/log")"
grep -qE '^processed=0 failed=0 retried=1 dead=1 ' "$tmp/out" || fail "summary: $(cat "$tmp/out")"
[ "$(grep -c 'event=handler_timeout' "$tmp/log")" -eq 2 ] || fail "timeouts: $(cat "$tmp/log")"
[ "$(rcli XLEN "sluice:{$q}:dead")" -eq 1 ] || fail "not dead-lettered"
echo "ok: auto concurrency within 2-4; timed-out sleeps retried, then dead"
