#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# valgrind finds no leaks and no memory errors in the producer and the worker on a short run:
# sluice-enqueue admitting from stdin, sluice-worker draining with the exec and sleep handlers,
# and the C integration test of the worker library. (Skipped in the ASan build by scripts/test.)
set -euo pipefail

bin=${SLUICE_BIN_DIR:?run through ctest}
url=$(cat "${SLUICE_TEST_REDIS_DIR:?}/url")
command -v valgrind >/dev/null || { echo "valgrind is not installed (scripts/setup installs it)"; exit 1; }
q="vg-$$"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"; redis-cli -u "$url" DEL "sluice:{$q}:stream" "sluice:{$q}:stats" "sluice:{$q}:meta" "sluice:{$q}:dead" "sluice:{$q}:limits" "sluice:{$q}:lim:k" "sluice:{$q}:lim:g" "sluice:{$q}:lim:n" "sluice:{$q}:qlim:pace:gcra:" >/dev/null' EXIT

vg() {
    valgrind --quiet --leak-check=full --show-leak-kinds=definite,indirect,possible \
        --errors-for-leak-kinds=definite,indirect,possible --error-exitcode=99 \
        --log-file="$tmp/vg.%p" "$@"
}
check() {
    local rc=$1 what=$2
    if [ "$rc" -eq 99 ] || grep -qs "ERROR SUMMARY: [1-9]" "$tmp"/vg.* ||
        grep -qs "definitely lost: [1-9]" "$tmp"/vg.*; then
        cat "$tmp"/vg.* >&2
        echo "FAIL: valgrind reports errors or leaks in $what" >&2
        exit 1
    fi
    rm -f "$tmp"/vg.*
}

rc=0
seq 1 300 | vg "$bin/sluice-enqueue" --redis "$url" --queue "$q" --batch 50 >/dev/null || rc=$?
check "$rc" sluice-enqueue
[ "$rc" -eq 0 ] || { echo "FAIL: sluice-enqueue exited $rc" >&2; exit 1; }

rc=0
vg "$bin/sluice-worker" --redis "$url" --queue "$q" --handler sleep:1 --max-messages 250 \
    --log-level warn >/dev/null || rc=$?
check "$rc" "sluice-worker (sleep)"
[ "$rc" -eq 0 ] || { echo "FAIL: sluice-worker exited $rc" >&2; exit 1; }

rc=0
vg "$bin/sluice-worker" --redis "$url" --queue "$q" --handler 'exec:cat >/dev/null' \
    --max-messages 50 --log-level warn >/dev/null || rc=$?
check "$rc" "sluice-worker (exec)"
[ "$(redis-cli -u "$url" XLEN "sluice:{$q}:stream")" = 0 ] || { echo "FAIL: not drained" >&2; exit 1; }
# the limiter, both ways (a refusal, a script-less call), and a paced worker
for args in "$q k=2/1h g=5/1s" "$q k=2/1h" "$q k=2/1h" "--no-scripts $q n=1/1h"; do
    rc=0
    # shellcheck disable=SC2086
    vg "$bin/sluice-limit" --redis "$url" $args >/dev/null || rc=$?
    check "$rc" "sluice-limit $args"
done
"$bin/sluice-admin" --redis "$url" limit "$q" set pace drain 1000/1s >/dev/null
seq 1 20 | "$bin/sluice-enqueue" --redis "$url" --queue "$q" >/dev/null
rc=0
vg "$bin/sluice-worker" --redis "$url" --queue "$q" --max-messages 20 --log-level warn \
    >/dev/null || rc=$?
check "$rc" "sluice-worker (paced)"
[ "$(redis-cli -u "$url" XLEN "sluice:{$q}:stream")" = 0 ] || { echo "FAIL: paced: not drained" >&2; exit 1; }
echo "test_valgrind: ok (no leaks, no errors)"
