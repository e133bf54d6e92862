#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# sluice_lane_ack keeps a fair queue's counts (meta lane_depth, stats acked, the lanes hash)
# equal to the entries it settled: written once a call, and written too when a bad id in a
# later lane ends the call with an error (the lanes before it stay settled and counted).
. "$(dirname "$0")/lib.sh"
q="lane-ack-$$"
A() { "$bin/sluice-admin" --redis "$url" "$@"; }
trap 'A purge "$q" --yes >/dev/null 2>&1 || true; lib_cleanup' EXIT
K=("sluice:{$q}:stream" "sluice:{$q}:stats" "sluice:{$q}:meta")
counts() { # lane_depth acked lanes-hash (tenant count ...)
    echo "$(rcli HGET "sluice:{$q}:meta" lane_depth) $(rcli HGET "sluice:{$q}:stats" acked)" \
        "$(rcli HGETALL "sluice:{$q}:lanes" | paste -sd' ' -)"
}

run 0 'fair .*: on' A fair "$q" on
rcli FCALL sluice_admit2 3 "sluice:{$q}:stream" "sluice:{$q}:meta" "sluice:{$q}:stats" 100 0 3 \
    t0 '' a t1 '' b t0 '' c >/dev/null
rcli FCALL sluice_group 2 "sluice:{$q}:stream" "sluice:{$q}:meta" workers c1 >/dev/null
mapfile -t ids0 < <(rcli XRANGE "sluice:{$q}:lane:t0" - + | grep -E '^[0-9]+-[0-9]+$')
mapfile -t ids1 < <(rcli XRANGE "sluice:{$q}:lane:t1" - + | grep -E '^[0-9]+-[0-9]+$')
[ "${#ids0[@]}" = 2 ] && [ "${#ids1[@]}" = 1 ] || fail "lanes: ${ids0[*]} / ${ids1[*]}"
rcli FCALL sluice_fair_take 2 "sluice:{$q}:stream" "sluice:{$q}:meta" workers c1 10 >/dev/null
[ "$(counts)" = "3  t0 2 t1 1" ] || fail "after the read: $(counts)"

# a bad id in the second lane: an error, the first lane's entry settled and counted
out=$(rcli FCALL sluice_lane_ack 3 "${K[@]}" workers t0 "${ids0[0]}" t1 bad-id 2>&1 || true)
echo "$out" | grep -q 'Invalid stream ID' || fail "a bad id: $out"
[ "$(counts)" = "2 1 t0 1 t1 1" ] || fail "after the refused call: $(counts)"
[ "$(rcli XPENDING "sluice:{$q}:lane:t0" workers | head -n 1)" = 1 ] || fail "t0 in flight"

# the rest in one call: every count at zero, the lanes gone
[ "$(rcli FCALL sluice_lane_ack 3 "${K[@]}" workers t0 "${ids0[1]}" t1 "${ids1[0]}")" = 2 ] ||
    fail "the rest acked"
[ "$(counts)" = "0 3 " ] || fail "after the last acks: $(counts)"
[ "$(rcli EXISTS "sluice:{$q}:lane:t0" "sluice:{$q}:lane:t1")" = 0 ] || fail "lanes left"
echo "ok: lane_ack's counts match what it settled, on an error too"
