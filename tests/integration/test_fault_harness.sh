#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The fault suite's harness (tests/faults/lib.sh) stops what it started when a script fails. No
# fault script replaces the harness's EXIT trap: two did, to stop their Redis Cluster first, and
# under `set -e` their trap's `(exit $rc)` ended the shell before the harness's cleanup ran, so
# a failed run left its redis-servers behind (a cluster goes in FL_CLUSTERS instead). And a
# script that fails after starting a redis-server leaves none running.
. "$(dirname "$0")/lib.sh"
src=${SLUICE_SOURCE_DIR:?run through ctest}

# 1. no fault script sets an EXIT trap of its own
if grep -n 'trap .*EXIT' "$src"/tests/faults/fault_*.sh >"$tmp/traps"; then
    fail "a fault script replaces the harness's EXIT trap: $(cat "$tmp/traps")"
fi

# 2. a fault script that fails: the harness stops its server by PID
cat >"$tmp/probe.sh" <<EOF
. "$src/tests/faults/lib.sh"
fl_init harness_probe
redis_start r
redis_pid r >"$tmp/pid"
FL_CLUSTERS+=("\$FL_DIR/cluster") # a cluster that never started is passed over
fl_fail "on purpose"
EOF
rc=0
SLUICE_TEST_TMP=$tmp bash "$tmp/probe.sh" >"$tmp/probe.out" 2>&1 || rc=$?
[ "$rc" = 1 ] && grep -q 'FAIL \[harness_probe\]: on purpose' "$tmp/probe.out" ||
    fail "the probe exited $rc: $(cat "$tmp/probe.out")"
pid=$(cat "$tmp/pid")
for _ in $(seq 1 50); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
done
if kill -0 "$pid" 2>/dev/null; then
    kill "$pid"
    fail "the failed probe left its redis-server ($pid) running"
fi
echo "ok: no fault script replaces the harness's trap; a failed one leaves no redis-server running"
