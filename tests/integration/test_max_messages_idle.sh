#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# sluice-worker --max-messages on an idle plain queue waits in a blocking read, as without the
# option: the workers of a partitioned queue share one count and poll instead (a blocking read
# would hold what it reserved from the others), but a worker alone with its count does not.
# Counted on a private redis-server: XREADGROUP calls in 3 s of an empty queue.
. "$(dirname "$0")/lib.sh"
src=${SLUICE_SOURCE_DIR:?run through ctest}
rdir=$tmp/redis
trap '"$src/scripts/test-redis" stop "$rdir" >/dev/null 2>&1 || true; lib_cleanup' EXIT
purl=$("$src/scripts/test-redis" start "$rdir" --no-aof) || fail "redis start: $purl"
q="mmi-$$"
"$bin/sluice-enqueue" --redis "$purl" --queue "$q" seed >/dev/null
"$bin/sluice-worker" --redis "$purl" --queue "$q" --handler noop --max-messages 5 \
    --log-level error >/dev/null 2>"$tmp/w.err" &
pids+=("$!")
sleep 1 # the seed processed; the queue is empty from here on
before=$(redis-cli -u "$purl" INFO commandstats | sed -n 's/^cmdstat_xreadgroup:calls=\([0-9]*\).*/\1/p')
sleep 3
after=$(redis-cli -u "$purl" INFO commandstats | sed -n 's/^cmdstat_xreadgroup:calls=\([0-9]*\).*/\1/p')
n=$((after - before))
# blocking reads of 1 s: about 3; polling every 50 ms: about 60
[ "$n" -le 10 ] || fail "an idle --max-messages worker read $n times in 3 s (it polls)"
kill -0 "${pids[-1]}" || fail "the worker exited: $(cat "$tmp/w.err")"
echo "test_max_messages_idle: $n XREADGROUP calls in 3 s idle"
