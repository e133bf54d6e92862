#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# scripts/demo --http --quick on the fixture's server with the built binaries: a 12 s run whose
# live table has a row a second (the back end's slots 8, 16, 4; auto's limit, processed/s,
# latency and requests inside beside a fixed 64's), a summary line per phase, auto's limit lower
# with 4 slots than with 16, and nothing left behind (its queues deleted, its processes gone).
. "$(dirname "$0")/lib.sh"
SLUICE_BIN_DIR=$bin SLUICE_REDIS_URL=$url timeout 40 "${SLUICE_SOURCE_DIR:?}/scripts/demo" \
    --http --quick >"$tmp/demo" 2>&1 || fail "scripts/demo --http --quick failed: $(cat "$tmp/demo")"
q=$(sed -n 's/^auto: *queue \(demo-[0-9]*\)-auto,.*/\1/p' "$tmp/demo")
[ -n "$q" ] || fail "no queue named: $(cat "$tmp/demo")"
grep -qE '^ +\| --concurrency auto +\| --concurrency 64' "$tmp/demo" || fail "header: $(cat "$tmp/demo")"
row='^ +[0-9]+s +(8|16|4) \| +([0-9]+|-) +[0-9,]+ +([0-9]+ ms|-) +([0-9]+|-) \| +[0-9,]+ +([0-9]+ ms|-) +([0-9]+|-)$'
[ "$(grep -cE "$row" "$tmp/demo")" -eq 12 ] || fail "12 rows expected: $(cat "$tmp/demo")"
for s in 8 16 4; do
    grep -qE "^ +$s slots \(at best +[0-9]+/s\): auto +[0-9,]+/s, limit +[0-9]+ \| fixed 64 +[0-9,]+/s$" \
        "$tmp/demo" || fail "no summary for $s slots: $(cat "$tmp/demo")"
done
# auto's limit follows the capacity down: lower at the end of the 4-slot phase than of the 16
l16=$(sed -n 's/^ *16 slots .*limit *\([0-9]*\) |.*/\1/p' "$tmp/demo")
l4=$(sed -n 's/^ *4 slots .*limit *\([0-9]*\) |.*/\1/p' "$tmp/demo")
[ "$l4" -lt "$l16" ] || fail "the limit did not come down from $l16 with 4 slots: $(cat "$tmp/demo")"
# the fixed 64 keeps (about) 64 inside the back end once it runs
grep -E "$row" "$tmp/demo" | tail -n 3 | awk '{ if ($NF < 48) exit 1 }' ||
    fail "a fixed 64 kept fewer inside: $(cat "$tmp/demo")"
[ -z "$(rcli --scan --pattern "sluice:{$q-*")" ] || fail "keys of $q left: $(rcli --scan --pattern "sluice:{$q-*")"
! pgrep -f -- "--queue $q-" >/dev/null || fail "processes of $q left: $(pgrep -af -- "--queue $q-")"
echo "ok: scripts/demo --http --quick prints 12 rows and 3 phase summaries, leaves nothing"
