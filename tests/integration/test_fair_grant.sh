#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# sluice_fair_grant and sluice_fair_refund called as a worker calls them (the lanes read with
# XREADGROUP in between): a grant gives a lane no more than its count; a rate that has granted
# all it allows refuses the next grant (a wait, nothing granted); a lane emptied between grant
# and read (trimmed) reads short, and the refund gives exactly the units not read back to the
# gcra rate (the next grant gets those, no more), or none when made long after the grant, and
# to fixed, window and log rates (drain-tenant and drain) as well; a read that failed is
# refunded `unread` and its lane counted again (once: the same refund again is refused); two
# workers granted one lane in turn read disjoint entries, all of them; a grant never read (its worker died) is counted again by the
# reclaim pass over the lanes (sluice_lane_reclaim), so its entries are granted again; under
# inflight-tenant the grant reads in the function, and a reclaim pass leases nothing twice; a
# grant and a read through sluice_fair_take on one lane count its entries out once.
. "$(dirname "$0")/lib.sh"
q="fair-grant-$$"
A() { "$bin/sluice-admin" --redis "$url" "$@"; }
trap 'A purge "$q" --yes >/dev/null 2>&1 || true; rcli DEL "sluice:{$q}:lim:pool" >/dev/null 2>&1 || true; lib_cleanup' EXIT
S="sluice:{$q}:stream" M="sluice:{$q}:meta" ST="sluice:{$q}:stats"
admit() { # TENANT COUNT
    local args=() i
    for ((i = 0; i < $2; i++)); do args+=("$1" '' "m$i"); done
    rcli FCALL sluice_admit2 3 "$S" "$M" "$ST" 1000 0 3 "${args[@]}" >/dev/null
}
grant() { # CONSUMER N: the reply's lines on one line, without empty ones and the grant's time
    rcli FCALL sluice_fair_grant 2 "$S" "$M" workers "$1" "$2" | grep -v '^$' | paste -sd' ' - |
        tee "$tmp/grant" | sed -E 's/ [0-9]{13,}$//'
}
since() { grep -oE '[0-9]{13,}$' "$tmp/grant"; } # the last grant's time (us)
refund() { rcli FCALL sluice_fair_refund 2 "$S" "$M" "$@"; }
lread() { # CONSUMER LANE COUNT: how many entries XREADGROUP gives
    rcli XREADGROUP GROUP workers "$1" COUNT "$3" STREAMS "sluice:{$q}:lane:$2" '>' |
        grep -cE '^[0-9]+-[0-9]+$' || true
}

run 0 'fair .*: on' A fair "$q" on
rcli FCALL sluice_group 2 "$S" "$M" workers c1 >/dev/null
# the pool's drain rate: 5 per 100 s (a unit every 20 s: none comes back during the test)
rcli FCALL sluice_limits_config 2 "sluice:{$q}:limits" "$M" set pool drain gcra:5:100000 >/dev/null

# a grant gives a lane what its count says, within the rate: 3 of 3 asked 10
admit a 3
[ "$(grant c1 10)" = "a 3 0" ] || fail "first grant: $(grant c1 10)"
[ "$(rcli HGET "sluice:{$q}:served" a)" = 3 ] || fail "served a after the grant"
# the lane emptied before the read: trimmed to 1, the read gives 1, the refund gives back 2
rcli XTRIM "sluice:{$q}:lane:a" MAXLEN 1 >/dev/null
[ "$(lread c1 a 3)" = 1 ] || fail "the read after the trim"
# (a refund long after its grant gives nothing back: the grant's debt would have run out; the
# limits' version dropped, as on a queue configured before it, so that the time bound says so,
# not the version - a refund with a time before the limits' last change gives nothing either)
rcli HDEL "$M" limits_v >/dev/null
[ "$(refund short 1000000 x 3 2)" = 0 ] || fail "a refund with an old time gave back units"
[ "$(refund short "$(since)" a 3 2)" = 2 ] || fail "refund of 2"
[ -z "$(rcli HGET "sluice:{$q}:lwait" a)" ] || fail "a short read counted again"
[ "$(rcli HGET "sluice:{$q}:served" a)" = 1 ] || fail "served a after the refund"
# the rate: 3 counted, 2 given back, so 4 are left of its 5 ... the next grant gets 4 of 6
admit b 6
[ "$(grant c1 10)" = "b 4 0" ] || fail "the grant after the refund"
# ... and then none: refused, a wait (ms) and no lane
out=$(grant c1 10)
[[ "$out" =~ ^[0-9]+$ ]] && [ "$out" -gt 0 ] || fail "a refused grant: '$out'"
[ "$(lread c1 b 4)" = 4 ] || fail "the granted read of b"
rcli FCALL sluice_limits_config 2 "sluice:{$q}:limits" "$M" del pool >/dev/null

# two workers granted one lane in turn, reading in the other order: disjoint, all of them
admit c 10
g1=$(grant c1 4) g2=$(grant c2 10)
[ "$g1" = "b 2 c 2 0" ] || fail "grant of c1: $g1"
[ "$g2" = "c 8 0" ] || fail "grant of c2: $g2"
[ "$(lread c2 c 8)" = 8 ] && [ "$(lread c1 c 2)" = 2 ] && [ "$(lread c1 b 2)" = 2 ] ||
    fail "the two workers' reads"
[ "$(rcli XPENDING "sluice:{$q}:lane:c" workers | head -n 1)" = 10 ] || fail "10 of c in flight"
[ "$(grant c1 10)" = "-1" ] || fail "nothing left: $(grant c1 10)"

# a grant never read: the reclaim pass over the lanes counts its entries again
admit d 3
[ "$(grant c1 10)" = "d 3 0" ] || fail "grant of d"
[ -z "$(rcli HGET "sluice:{$q}:lwait" d)" ] && [ "$(rcli LPOS "sluice:{$q}:ring" d)" = "" ] ||
    fail "d out of the ring after its grant"
rcli FCALL sluice_lane_reclaim 2 "$S" "$ST" workers c3 60000 0 100 >/dev/null
[ "$(rcli HGET "sluice:{$q}:lwait" d)" = 3 ] || fail "d counted again: $(rcli HGET "sluice:{$q}:lwait" d)"
out=$(grant c3 10)
[ "$out" = "d 3 0" ] || fail "d granted again: $out" # (a: trimmed by hand, not counted again)
[ "$(lread c3 d 3)" = 3 ] || fail "d read"

# a grant whose read failed (nothing read): refunded `unread`, counted again, granted again
admit e 2
[ "$(grant c1 10)" = "e 2 0" ] || fail "grant of e"
[ "$(refund unread "$(since)" e 2 2)" = 0 ] || fail "refund of e"
[ "$(rcli HGET "sluice:{$q}:lwait" e)" = 2 ] && [ "$(rcli HGET "sluice:{$q}:meta" lane_wait)" = 2 ] ||
    fail "e counted again"
e_at=$(since)
[ "$(grant c1 10)" = "e 2 0" ] && [ "$(lread c1 e 2)" = 2 ] || fail "e granted and read again"
[ "$(rcli EXISTS "sluice:{$q}:refunded:$e_at:unread")" = 1 ] || fail "no refunded:$e_at:unread"
out=$(refund unread "$e_at" e 2 2 2>&1 || true) # the same refund again: refused, nothing counted
[[ "$out" == *"was made already"* ]] && [ -z "$(rcli HGET "sluice:{$q}:lwait" e)" ] ||
    fail "an unread refund sent twice: '$out', lwait of e '$(rcli HGET "sluice:{$q}:lwait" e)'"
out=$(refund later 0 e 2 2 2>&1 || true)
[[ "$out" == *"takes short or unread"* ]] || fail "a bad mode: $out"
out=$(refund short 0 e 2 3 2>&1 || true)
[[ "$out" == *'counts "2", "3" of lane 1'* ]] || fail "a bad count: $out"
out=$(refund unread soon e 2 2 2>&1 || true)
[[ "$out" == *'time "soon"'* ]] || fail "a bad time: $out"
# a bad triple after a good one: refused before anything is written (e was counted again)
out=$(refund unread "$(since)" e 2 2 e 2 0 2>&1 || true)
[[ "$out" == *'counts "2", "0" of lane 2'* ]] && [ -z "$(rcli HGET "sluice:{$q}:lwait" e)" ] ||
    fail "a refused refund wrote: $out, lwait e '$(rcli HGET "sluice:{$q}:lwait" e)'"

# every algorithm of the `drain-tenant` and `drain` rates gets back what a short read did not
# get (fixed: in its window, of 366 days; window: while its block counts; log: while its units
# live): 3 granted, 1 read, 2 back in each rate (the reply: 4), so the next grant gets 2 more
L="sluice:{$q}:limits"
for spec in fixed:3:31622400000 window:3:100000:1000 log:3:100000; do
    t="f${spec%%:*}"
    rcli FCALL sluice_limits_config 2 "$L" "$M" set ten drain-tenant "$spec" >/dev/null
    rcli FCALL sluice_limits_config 2 "$L" "$M" set pool drain "$spec" >/dev/null
    admit "$t" 3
    [ "$(grant c1 10)" = "$t 3 0" ] || fail "$spec: the grant of 3"
    rcli XTRIM "sluice:{$q}:lane:$t" MAXLEN 1 >/dev/null
    [ "$(lread c1 "$t" 3)" = 1 ] || fail "$spec: the read after the trim"
    out=$(refund short "$(since)" "$t" 3 2)
    [ "$out" = 4 ] || fail "$spec: the refund gave back $out (expected 2 + 2)"
    admit "$t" 2
    out=$(grant c1 10)
    [ "$out" = "$t 2 0" ] || fail "$spec: the grant after the refund: '$out' (expected $t 2 0)"
    [ "$(lread c1 "$t" 2)" = 2 ] || fail "$spec: the read of 2"
    rcli FCALL sluice_limits_config 2 "$L" "$M" del ten >/dev/null
    rcli FCALL sluice_limits_config 2 "$L" "$M" del pool >/dev/null
done

# under an `inflight-tenant` count a grant reads in the function (a pending count must be read and
# added to in one step): a grant the worker has not read yet is no lease, and the reclaim pass,
# which cannot tell it from a grant whose worker died, would count its entries again, so the next
# grant would lease them twice (4 in flight under inflight-tenant 2)
rcli FCALL sluice_limits_config 2 "$L" "$M" set lease inflight-tenant 2 >/dev/null
admit g 5
out=$(rcli FCALL sluice_fair_grant 2 "$S" "$M" workers c1 10 | grep -cE '^[0-9]+-[0-9]+$' || true)
[ "$out" = 2 ] || fail "inflight-tenant 2: the grant read $out entries in the function (expected 2)"
rcli FCALL sluice_lane_reclaim 2 "$S" "$ST" workers c3 60000 0 100 >/dev/null
out=$(grant c2 10)
pending=$(rcli XPENDING "sluice:{$q}:lane:g" workers | head -n 1)
[ "$pending" = 2 ] && [[ "$out" != *"g "* ]] ||
    fail "inflight-tenant 2: after the reclaim pass the next grant gave '$out' with $pending in flight"
rcli FCALL sluice_limits_config 2 "$L" "$M" del lease >/dev/null
[ "$(grant c1 10)" = "g 3 0" ] && [ "$(lread c1 g 3)" = 3 ] || fail "the rest of g"

# a grant and a read through sluice_fair_take on one lane (an older worker beside a newer one, or
# the read after a NOGROUP): fair_take reads the entries the grant counted out as well, and counts
# out only what the lane's count still has, so the counts end at 0, not below (-3 before)
w0=$(rcli HGET "sluice:{$q}:meta" lane_wait)
admit h 6
[ "$(grant c2 3)" = "h 3 0" ] || fail "the grant of 3 of h"
out=$(rcli FCALL sluice_fair_take 2 "$S" "$M" workers c1 10 | grep -cE '^[0-9]+-[0-9]+$' || true)
[ "$out" = 6 ] || fail "fair_take beside a grant read $out of h's 6"
[ "$(lread c2 h 3)" = 0 ] || fail "the grant's read after fair_take's"
w1=$(rcli HGET "sluice:{$q}:meta" lane_wait)
[ "$w1" = "$w0" ] && [ -z "$(rcli HGET "sluice:{$q}:lwait" h)" ] ||
    fail "a grant and fair_take on one lane: lane_wait $w0 -> $w1, lwait of h '$(rcli HGET "sluice:{$q}:lwait" h)'"

# ---- two workers draining 20 lanes, one lane without its group although served says it has one
# (its stream deleted and made again by hand): its native read fails (NOGROUP), the worker gives
# the grant back and reads once through sluice_fair_take, which makes the group; every entry is
# processed once ----
q2="$q-w"
trap 'A purge "$q" --yes >/dev/null 2>&1 || true; A purge "$q2" --yes >/dev/null 2>&1 || true; lib_cleanup' EXIT
run 0 'fair .*: on' A fair "$q2" on
for t in $(seq 0 19); do
    seq 1 10 | sed "s/^/t$t-/" | "$bin/sluice-enqueue" --redis "$url" --queue "$q2" --tenant "t$t" >/dev/null
done
rcli HSET "sluice:{$q2}:served" t5 1 >/dev/null
for w in 1 2; do
    "$bin/sluice-worker" --redis "$url" --queue "$q2" --handler noop --concurrency 7 \
        --record "$tmp/w$w" --log-level info >/dev/null 2>"$tmp/w$w.log" &
    pids+=("$!")
done
for _ in $(seq 1 100); do
    [ "$(rcli HGET "sluice:{$q2}:stats" acked)" = 200 ] && break
    sleep 0.1
done
[ "$(rcli HGET "sluice:{$q2}:stats" acked)" = 200 ] || fail "acked: $(rcli HGET "sluice:{$q2}:stats" acked)"
[ "$(cat "$tmp/w1" "$tmp/w2" | awk '{ print $2 }' | sort -u | wc -l)" = 200 ] &&
    [ "$(cat "$tmp/w1" "$tmp/w2" | wc -l)" = 200 ] || fail "processed: $(cat "$tmp/w1" "$tmp/w2" | wc -l)"
grep -q 'event=lane_group_missing' "$tmp/w1.log" "$tmp/w2.log" || fail "no lane without its group"
grep -qE 'event=(read_failed|fair_refund_failed)' "$tmp/w1.log" "$tmp/w2.log" &&
    fail "a read or a refund failed: $(grep -hE 'event=(read|fair_refund)_failed' "$tmp"/w?.log)"
[ "$(rcli HGET "sluice:{$q2}:meta" lane_wait)" = 0 ] || fail "lane_wait: $(rcli HGET "sluice:{$q2}:meta" lane_wait)"
echo "ok: grants within counts and rates, refund exact, two readers disjoint, a lost grant recounted;"
echo "    two workers drain 20 lanes once each, a lane without its group read through fair_take"
