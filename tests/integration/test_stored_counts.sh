#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A count sluice keeps in Redis (a lane's credit and weight, meta lane_depth and per_tenant, a
# lane's entries in sluice:{Q}:lanes) holding anything else than a whole number 0..2^53 - written
# by hand: negative, a fraction, 1e300, inf, nan, garbage - reads as none: a fair read still
# reads at most what it asks for (a credit of -5 once made it read COUNT -4: the whole lane), a
# capacity still holds (a lane_depth of -1e300 once let every message in), and no call fails on
# it. Limit state likewise: a gcra value of inf and -inf parts (its debt nan once refused every
# call forever, retry-after LLONG_MIN) and a fixed window's count in no integer's text ("N.0",
# which INCRBY refuses: sluice_limit once failed after counting its other limits) read as what
# they say or as none. On a private server of its own, its memory bounded, each call with a
# deadline.
. "$(dirname "$0")/lib.sh"
private_redis
tcli() { timeout 5 redis-cli -u "$url" "$@" || fail "no reply in 5 s: $*"; }

# a fair queue: lane a holds 6 entries; a read of 1 reads 1 whatever its credit or weight says
q=fcount
p="sluice:{$q}"
rcli XGROUP CREATE "$p:stream" g '$' MKSTREAM >/dev/null
rcli FCALL sluice_fair_config 2 "$p:stream" "$p:meta" on >/dev/null
for i in 1 2 3 4 5 6 7 8 9 10 11 12; do
    rcli FCALL sluice_admit2 3 "$p:stream" "$p:meta" "$p:stats" 100 0 3 a c "m$i" >/dev/null
done
for bad in -5 0.5 -1e300 nan; do
    for h in deficit weights; do
        rcli DEL "$p:deficit" "$p:weights" >/dev/null
        rcli HSET "$p:$h" a "$bad" >/dev/null
        n=$(tcli FCALL sluice_fair_take 2 "$p:stream" "$p:meta" g c1 1 | grep -c '^m$') || true
        [ "$n" = 1 ] || fail "fair read of 1 with $h $bad: $n entries read"
    done
done
# a lane's entries that are no count: the lane reclaim passes over it, no error
rcli HSET "$p:lanes" a abc >/dev/null
r=$(tcli FCALL sluice_lane_reclaim 2 "$p:stream" "$p:stats" g c1 0 0 10 2>&1)
case $r in *ERR*) fail "lane_reclaim with lanes a=abc: $r" ;; esac
# an ack in a lane whose count is no count deletes the entry acked, never the lane's others (a
# count read as none once read 0 after the ack: the lane taken for empty, its stream deleted)
left=$(rcli XLEN "$p:lane:a")
[ "$left" -ge 2 ] || fail "lane a holds $left entries, 2 at least wanted"
id=$(rcli XREADGROUP GROUP g c1 COUNT 1 STREAMS "$p:lane:a" '>' | sed -n 2p)
rcli HSET "$p:lanes" a abc >/dev/null
r=$(tcli FCALL sluice_lane_ack 3 "$p:stream" "$p:stats" "$p:meta" g a "$id")
[ "$r" = 1 ] || fail "lane_ack of $id with lanes a=abc: $r"
[ "$(rcli XLEN "$p:lane:a")" = $((left - 1)) ] ||
    fail "lane a after an ack with its count abc: $(rcli XLEN "$p:lane:a") entries, $((left - 1)) wanted"
[ "$(rcli HGET "$p:lanes" a)" = $((left - 1)) ] || fail "lanes a after the ack: $(rcli HGET "$p:lanes" a)"
# a wake-up token's key of another type is replaced: an admission (after its append) and a read
# (after its XREADGROUP) do not fail on it
rcli DEL "$p:wake" >/dev/null
rcli SET "$p:wake" x >/dev/null
r=$(tcli FCALL sluice_admit2 3 "$p:stream" "$p:meta" "$p:stats" 100 0 3 b c m 2>&1 | head -1)
[ "$r" = 1 ] || fail "admission with a wake key of another type: $r"
[ "$(rcli LLEN "$p:wake")" = 1 ] || fail "no wake-up token: $(rcli TYPE "$p:wake")"
rcli DEL "$p:wake" >/dev/null
rcli SET "$p:wake" x >/dev/null
r=$(tcli FCALL sluice_fair_take 2 "$p:stream" "$p:meta" g c1 1 2>&1 | head -1)
case $r in *ERR* | *WRONGTYPE*) fail "fair read with a wake key of another type: $r" ;; esac

# a fair queue's ring deleted by hand, then a new tenant's entry (the ring holds it alone): the
# lane reclaim pass makes the ring whole again, so every lane is read (the others were left out
# of every read for good)
q=ring
p="sluice:{$q}"
rcli XGROUP CREATE "$p:stream" g '$' MKSTREAM >/dev/null
rcli FCALL sluice_fair_config 2 "$p:stream" "$p:meta" on >/dev/null
for t in r1 r2 r3; do
    rcli FCALL sluice_admit2 3 "$p:stream" "$p:meta" "$p:stats" 100 0 3 "$t" c m1 "$t" c m2 >/dev/null
done
rcli DEL "$p:ring" >/dev/null
rcli FCALL sluice_admit2 3 "$p:stream" "$p:meta" "$p:stats" 100 0 3 r4 c m1 >/dev/null
tcli FCALL sluice_lane_reclaim 2 "$p:stream" "$p:stats" g c1 0 0 10 >/dev/null
n=0
for i in 1 2 3 4 5 6; do
    n=$((n + $(tcli FCALL sluice_fair_take 2 "$p:stream" "$p:meta" g c1 100 | grep -c '^m$' || true)))
done
[ "$n" = 7 ] || fail "fair reads after the ring was deleted: $n of 7 entries read"
[ "$(rcli HGET "$p:meta" lane_wait)" = 0 ] || fail "lane_wait after the reads: $(rcli HGET "$p:meta" lane_wait)"

# a plain queue of capacity 2: a lane_depth no count reads as 0 (the capacity holds); a share
# that is no count reads as none
q=pcount
p="sluice:{$q}"
for bad in -1e300 -inf nan 2.5 abc; do
    rcli DEL "$p:stream" "$p:meta" "$p:stats" >/dev/null
    rcli HSET "$p:meta" capacity 2 lane_depth "$bad" >/dev/null
    r=$(tcli FCALL sluice_admit2 3 "$p:stream" "$p:meta" "$p:stats" 100 0 1 m1 m2 m3 | head -2 |
        tr '\n' ' ')
    [ "$r" = "2 2 " ] || fail "capacity 2, lane_depth $bad: admitted, depth $r"
done
for bad in -5 nan 1e300; do
    rcli DEL "$p:stream" "$p:meta" "$p:stats" >/dev/null
    rcli HSET "$p:meta" per_tenant "$bad" >/dev/null
    r=$(tcli FCALL sluice_admit2 3 "$p:stream" "$p:meta" "$p:stats" 100 0 3 a c m1 2>&1 | head -1)
    [ "$r" = 1 ] || fail "per_tenant $bad: $r"
done

# a counter that is no integer is set anew when written: an admission that appended does not
# fail on it (a stats counter, a list's depth, a tenant's count: HINCRBY failed after the append)
for bad in 2.5 abc 1e300; do
    rcli DEL "$p:stream" "$p:meta" "$p:stats" "$p:list" "$p:tdepth" >/dev/null
    rcli HSET "$p:stats" admitted "$bad" rejected "$bad" >/dev/null
    rcli HSET "$p:meta" capacity 1 >/dev/null
    r=$(tcli FCALL sluice_admit2 3 "$p:stream" "$p:meta" "$p:stats" 100 0 1 m1 m2 2>&1 | head -1)
    [ "$r" = 1 ] || fail "stats counters $bad: $r"
    [ "$(rcli HMGET "$p:stats" admitted rejected | tr '\n' ' ')" = "1 1 " ] ||
        fail "stats counters $bad: $(rcli HMGET "$p:stats" admitted rejected)"
    l="sluice:{lcount}"
    rcli DEL "$l:list" "$l:meta" "$l:stats" >/dev/null
    rcli HSET "$l:meta" list_depth "$bad" >/dev/null
    r=$(tcli FCALL sluice_list_admit2 3 "$l:list" "$l:meta" "$l:stats" 100 0 1 m1 2>&1 | head -1)
    [ "$r" = 1 ] || fail "list_depth $bad: $r"
    rcli DEL "$p:stream" "$p:meta" >/dev/null
    rcli HSET "$p:meta" per_tenant 5 >/dev/null
    rcli HSET "$p:tdepth" a "$bad" >/dev/null
    r=$(tcli FCALL sluice_admit2 3 "$p:stream" "$p:meta" "$p:stats" 100 0 3 b c m0 a c m1 2>&1 |
        head -1)
    [ "$r" = 2 ] || fail "tenant count $bad: $r"
done
# the tenants' counts in a key of another type: read as none, replaced by the counts
rcli DEL "$p:stream" "$p:tdepth" >/dev/null
rcli SET "$p:tdepth" x >/dev/null
r=$(tcli FCALL sluice_admit2 3 "$p:stream" "$p:meta" "$p:stats" 100 0 3 b c m0 a c m1 2>&1 | head -1)
[ "$r" = 2 ] || fail "tenant counts of another type: $r"
[ "$(rcli HGET "$p:tdepth" a)" = 1 ] || fail "tenant counts of another type: $(rcli TYPE "$p:tdepth")"

# limit state: a gcra TAT of inf + -inf reads as none (passes, a TAT near now written back)
nines=$(printf '9%.0s' $(seq 1 400))
k="sluice:{lim}:g"
rcli SET "$k" "$nines -1e400 5 1000" >/dev/null
r=$(tcli FCALL sluice_limit 1 "$k" 1 gcra:5:1000 | tr '\n' ' ')
[ "$r" = "1 0 4 0 200 " ] || fail "gcra TAT inf + -inf: $r"
for tat in "$nines" 9007199254740993; do
    rcli SET "$k" "$tat 5 1000" >/dev/null
    r=$(tcli FCALL sluice_limit 1 "$k" 1 gcra:5:1000 | head -1)
    [ "$r" = 1 ] || fail "gcra TAT $(echo "$tat" | cut -c1-20): $r"
done
# a fixed window's count "N.0": the call counts in every limit once and succeeds, with no error
k="sluice:{lim}:f"
rcli FCALL sluice_limit 1 "$k" 1 fixed:5:100000 >/dev/null
rcli SET "$k" "$(rcli GET "$k").0" KEEPTTL >/dev/null
r=$(tcli FCALL sluice_limit 2 "sluice:{lim}:o" "$k" 1 gcra:5:100000 fixed:5:100000 2>&1 | head -1)
[ "$r" = 1 ] || fail "fixed count N.0 after a gcra limit: $r"
case $(rcli GET "$k") in *.*) fail "fixed count N.0 not replaced: $(rcli GET "$k")" ;; esac
# a fixed window's count with a fraction (base + 0.5) reads as empty: a paced read is not asked to
# read COUNT 3.5 (an error)
q=fraction
p="sluice:{$q}"
rcli XGROUP CREATE "$p:stream" g '$' MKSTREAM >/dev/null
rcli FCALL sluice_limits_config 2 "$p:limits" "$p:meta" set L drain fixed:5:100000 >/dev/null
rcli FCALL sluice_admit2 3 "$p:stream" "$p:meta" "$p:stats" 100 0 1 a b c >/dev/null
rcli FCALL sluice_take 2 "$p:stream" "$p:meta" g c1 1 >/dev/null
k="$p:qlim:L:fixed:"
rcli SET "$k" "$(rcli GET "$k").5" KEEPTTL >/dev/null
r=$(tcli FCALL sluice_take 2 "$p:stream" "$p:meta" g c1 10 2>&1 | head -1)
[ "$r" = "$p:stream" ] || fail "paced read under a fixed count with a fraction: $r"
# a limits version that is no count (meta limits_v written by hand) says the limits changed: a
# refund gives nothing back (it once read as 0, older than any grant: all of it went back)
q=version
p="sluice:{$q}"
rcli XGROUP CREATE "$p:stream" g '$' MKSTREAM >/dev/null
rcli FCALL sluice_limits_config 2 "$p:limits" "$p:meta" set L drain fixed:5:100000 >/dev/null
rcli FCALL sluice_admit2 3 "$p:stream" "$p:meta" "$p:stats" 100 0 1 a b >/dev/null
rcli FCALL sluice_take 2 "$p:stream" "$p:meta" g c1 10 reserve >"$tmp/res"
[ "$(sed -n 4p "$tmp/res")" = 5 ] || fail "limits version: granted '$(sed -n 4p "$tmp/res")' of 5"
rcli HSET "$p:meta" limits_v abc >/dev/null
tcli FCALL sluice_take 2 "$p:stream" "$p:meta" g c1 5 refund "$(sed -n 5p "$tmp/res")" >/dev/null
rcli FCALL sluice_take 2 "$p:stream" "$p:meta" g c1 10 reserve >"$tmp/res"
[ -z "$(sed -n 4p "$tmp/res")" ] || [ "$(sed -n 4p "$tmp/res")" = 0 ] ||
    fail "limits version abc: a refund gave units back (granted '$(sed -n 4p "$tmp/res")' after it)"

# a log's unit scored where no clock is (inf, 1e300) no longer counts forever: removed when full
for score in inf 1e300; do
    k="sluice:{lim}:log:$score"
    rcli ZADD "$k" "$score" m >/dev/null
    r=$(tcli FCALL sluice_limit 1 "$k" 1 log:1:1000 | head -1)
    [ "$r" = 1 ] || fail "log holding a unit scored $score: $r"
    k="sluice:{lim}:log2:$score"
    rcli ZADD "$k" "$score" m >/dev/null
    r=$(tcli FCALL sluice_limit 2 "$k" "sluice:{lim}:g2:$score" 1 log:1:1000 gcra:1:1000 | head -1)
    [ "$r" = 1 ] || fail "log (with a gcra) holding a unit scored $score: $r"
done
echo "ok: stored counts and limit state that are none read as none"
