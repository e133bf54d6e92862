#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# docs/faults.md B16: a capacity in the queue's meta hash that is not an integer 0..2^53 is
# refused as "invalid capacity" before anything is written (no partial batch), by every reader
# alike; capacity 0 is a closed queue; a default capacity of 0 at the command line is a usage
# error rather than a silent 1000.
. "$(dirname "$0")/lib.sh"
q="capacity-$$"
meta="sluice:{$q}:meta"
read -ra qk <<<"$(queue_keys "$q")"
keys+=("${qk[@]}")

for bad in 2.5 1e30 inf nan 0x10 9223372036854775807 9007199254740993 -1 " 5" ""; do
    rcli HSET "$meta" capacity "$bad" >/dev/null
    for backend in stream list; do
        run 3 "invalid capacity" "$bin/sluice-enqueue" --redis "$url" --queue "$q" \
            --backend "$backend" a b c d e
    done
    [ "$(rcli XLEN "sluice:{$q}:stream")" = 0 ] || fail "capacity '$bad' admitted to the stream"
    [ "$(rcli LLEN "sluice:{$q}:list")" = 0 ] || fail "capacity '$bad' admitted to the list"
done
# sluice-admin reads it with the same rule (each stats call takes a second: two values)
for bad in 2.5 0x10; do
    rcli HSET "$meta" capacity "$bad" >/dev/null
    run 0 "INVALID" "$bin/sluice-admin" --redis "$url" stats "$q"
    run 0 '"capacity":null,"capacity_error"' "$bin/sluice-admin" --redis "$url" stats "$q" --json
done

# the largest valid capacity and a leading zero are fine
rcli HSET "$meta" capacity 9007199254740992 >/dev/null
run 0 "admitted=1" "$bin/sluice-enqueue" --redis "$url" --queue "$q" x
rcli DEL "sluice:{$q}:stream" >/dev/null

# 0 closes the queue: everything is rejected as full, nothing written
run 0 "closes the queue" "$bin/sluice-admin" --redis "$url" capacity "$q" 0
[ "$(rcli HGET "$meta" capacity)" = 0 ] || fail "capacity 0 not stored"
run 1 "admitted=0 rejected=3" "$bin/sluice-enqueue" --redis "$url" --queue "$q" a b c
[ "$(rcli XLEN "sluice:{$q}:stream")" = 0 ] || fail "a closed queue admitted"
# sluice-admin stores the number it parsed, never the raw text
run 0 "capacity of" "$bin/sluice-admin" --redis "$url" capacity "$q" 010
[ "$(rcli HGET "$meta" capacity)" = 10 ] || fail "capacity 010 stored as $(rcli HGET "$meta" capacity)"

# a default of 0 is a usage error naming the value, not a silent 1000
run 2 "capacity" "$bin/sluice-enqueue" --redis "$url" --queue "$q" --capacity 0 a
run 2 "capacity" "$bin/sluice-gateway" --redis "$url" --queue "$q:0" --listen 127.0.0.1:0
echo "ok: invalid capacities refused before writing, 0 closes the queue"
