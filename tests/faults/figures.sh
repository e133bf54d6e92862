#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# figures.sh - prints the fault suite's closing figures at the end of a ctest run.
#
# Each tests/faults/fault_*.sh writes its figures (kills survived, messages checked, lost,
# duplicates and why) to DIR/NAME.txt when it passes. ctest runs this script before the tests
# (`start`: remembers the time) and after them (`print`: shows the figures written since, and
# names the fault scripts that ran but left none, i.e. failed), through CTEST_CUSTOM_PRE_TEST /
# CTEST_CUSTOM_POST_TEST in the build tree's CTestCustom.cmake (written by
# tests/faults/CMakeLists.txt). A ctest run without fault tests prints nothing. Always exits 0:
# the tests themselves decide pass or fail.
#
#   figures.sh start DIR
#   figures.sh print DIR
set -uo pipefail
cmd=${1:-} dir=${2:-}
[ -n "$dir" ] || exit 0
mkdir -p "$dir" 2>/dev/null || exit 0
case "$cmd" in
start)
    touch "$dir/.stamp"
    ;;
print)
    [ -f "$dir/.stamp" ] || exit 0
    shown=0
    for f in "$dir"/*.txt; do
        [ -f "$f" ] && [ "$f" -nt "$dir/.stamp" ] || continue
        [ "$shown" = 1 ] || echo "== fault suite: closing figures"
        shown=1
        cat "$f"
    done
    # scripts that started in this run (their temp dirs are newer) but wrote no figures
    for d in "$dir"/../fault-*.*; do
        [ -d "$d" ] && [ "$d" -nt "$dir/.stamp" ] || continue
        name=$(basename "$d")
        name=${name#fault-}
        name=${name%.*}
        [ -f "$dir/$name.txt" ] && [ "$dir/$name.txt" -nt "$dir/.stamp" ] && continue
        [ "$shown" = 1 ] || echo "== fault suite: closing figures"
        shown=1
        echo "$name: FAILED (no figures; logs kept in $d)"
    done
    ;;
esac
exit 0
