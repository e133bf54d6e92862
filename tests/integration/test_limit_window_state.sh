#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A window's hash whose last block is one no clock gives (past 2^52, inf, NaN, negative, not
# whole) reads as empty, in sluice_limit and in an admission: the call passes at once and the
# record writes the current block (such a block once made the check loop over blocks that round
# to the same double, forever, growing the script's memory: so this runs on a private server of
# its own, its memory bounded, each call with a deadline).
. "$(dirname "$0")/lib.sh"
private_redis
spec=window:5:86400000:864000
pre=86400000:864000:
q=wstate
p="sluice:{$q}"
rcli FCALL sluice_limits_config 2 "$p:limits" "$p:meta" set w queue "$spec" >/dev/null
for last in 1e300 -1e300 18014398509481984 inf nan -5 2.5; do
    # sluice_limit on a key of its own
    k="sluice:{lim}:w:$last"
    rcli HSET "$k" "$pre" 3 "${pre}l" "$last" >/dev/null
    r=$(timeout 5 redis-cli -u "$url" FCALL sluice_limit 1 "$k" 1 "$spec" | head -1) ||
        fail "sluice_limit on a window whose last block is $last: no reply in 5 s"
    [ "$r" = 1 ] || fail "sluice_limit on a window whose last block is $last: $r"
    [ "$(rcli HGET "$k" "$pre")" = 1 ] || fail "last block $last: total $(rcli HGET "$k" "$pre")"
    # one message admitted under the queue's window (the admission's own path)
    rcli HSET "$p:qlim:w:window:" "$pre" 3 "${pre}l" "$last" >/dev/null
    r=$(timeout 5 redis-cli -u "$url" FCALL sluice_admit2 3 "$p:stream" "$p:meta" "$p:stats" \
        1000 0 1 m | head -1) || fail "admission under a window whose last block is $last: no reply"
    [ "$r" = 1 ] || fail "admission under a window whose last block is $last: $r"
    [ "$(rcli HGET "$p:qlim:w:window:" "$pre")" = 1 ] ||
        fail "admission, last block $last: total $(rcli HGET "$p:qlim:w:window:" "$pre")"
    rcli DEL "$p:qlim:w:window:" >/dev/null
done
echo "ok: a window's last block no clock gives reads as empty"
