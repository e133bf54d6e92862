#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The server-side hot paths, called with FCALL as the worker calls them: sluice_reclaim reports
# exact delivery counts with one XPENDING for the whole pass; sluice_touch tells exactly which
# ids the consumer lost and resets idle time only for the ones it owns, with one XPENDING and
# one XCLAIM; sluice_list_ack of 1,000 elements on a processing list of 2,000 removes exactly
# those in one pass over the list, keeps the order of the rest and the counters exact.
# Commands are counted with INFO commandstats, so this test runs on its own redis-server (the
# shared fixture's counters move with every other test).
. "$(dirname "$0")/lib.sh"
src=${SLUICE_SOURCE_DIR:?}
own="$tmp/redis"
url=$("$src/scripts/test-redis" start "$own" --no-aof)
pids+=("$(cat "$own/pid")")

# The library this build embeds (same version as the C clients).
rcli -x FUNCTION LOAD REPLACE <"$bin/../common/sluice_lua.c.lua" >/dev/null

q="hot$$"
stream="sluice:{$q}:stream" stats="sluice:{$q}:stats" meta="sluice:{$q}:meta"
proc="sluice:{$q}:proc:w1"
# calls NAME: how many times the server ran command NAME since the last CONFIG RESETSTAT
calls() {
    rcli INFO commandstats | tr -d '\r' | sed -n "s/^cmdstat_$1:calls=\([0-9]*\),.*/\1/p" |
        grep . || echo 0
}
# pending ID: "consumer idle deliveries" of a pending entry
pending() { rcli XPENDING "$stream" g IDLE 0 "$1" "$1" 1 | sed -n '2,4p' | paste -sd' '; }
pending_of() { pending "$1" | cut -d' ' -f1; }
idle_of() { rcli XPENDING "$stream" g "$1" "$1" 1 | paste -sd' ' | cut -d' ' -f3; }
deliveries_of() { rcli XPENDING "$stream" g "$1" "$1" 1 | paste -sd' ' | cut -d' ' -f4; }

rcli XGROUP CREATE "$stream" g 0 MKSTREAM >/dev/null

# 1. reclaim: an entry delivered 3 times reports 4 after the reclaim, one delivered once 2
a=$(rcli XADD "$stream" '*' m body-a)
b=$(rcli XADD "$stream" '*' m body-b)
rcli XREADGROUP GROUP g c1 COUNT 10 STREAMS "$stream" '>' >/dev/null # a and b: 1
rcli XCLAIM "$stream" g c1 0 "$a" >/dev/null                           # a: 2
rcli XCLAIM "$stream" g c1 0 "$a" >/dev/null                           # a: 3
[ "$(deliveries_of "$a") $(deliveries_of "$b")" = "3 1" ] || fail "setup: $(pending "$a")"
sleep 0.1
rcli CONFIG RESETSTAT >/dev/null
r=$(rcli FCALL sluice_reclaim 2 "$stream" "$stats" g c2 50 0-0 10 | grep . | paste -sd' ')
[ "$r" = "0-0 $a body-a 4 $b body-b 2" ] || fail "reclaim reply: $r"
[ "$(calls xpending)" = 1 ] && [ "$(calls xautoclaim)" = 1 ] ||
    fail "reclaim of 2: $(calls xpending) XPENDING, $(calls xautoclaim) XAUTOCLAIM"
[ "$(pending "$a" | cut -d' ' -f1,3) $(pending "$b" | cut -d' ' -f1,3)" = "c2 4 c2 2" ] ||
    fail "reclaim: XPENDING after: $(pending "$a") / $(pending "$b")"
[ "$(rcli HGET "$stats" reclaimed)" = 2 ] || fail "reclaimed counter"
rcli XACK "$stream" g "$a" "$b" >/dev/null
rcli XDEL "$stream" "$a" "$b" >/dev/null

# ... and a pass of 50 entries is 1 XPENDING, not 50; the entries not idle yet stay put
for i in $(seq 1 60); do echo "XADD $stream * m m$i"; done | rcli >/dev/null
rcli XREADGROUP GROUP g c1 COUNT 50 STREAMS "$stream" '>' >/dev/null
sleep 0.1
rcli XREADGROUP GROUP g c1 COUNT 10 STREAMS "$stream" '>' >/dev/null # 10 fresh ones
rcli CONFIG RESETSTAT >/dev/null
r=$(rcli FCALL sluice_reclaim 2 "$stream" "$stats" g c2 80 0-0 100)
xp=$(calls xpending) xa=$(calls xautoclaim)
echo "reclaim of 50 entries: $xp XPENDING, $xa XAUTOCLAIM"
[ "$(echo "$r" | grep -cx 2)" = 50 ] || fail "reclaim of 50: not 50 counts of 2: $r"
[ "$(echo "$r" | grep -c '^m[0-9]*$')" = 50 ] || fail "reclaim of 50: bodies: $r"
[ "$xp" = 1 ] && [ "$xa" = 1 ] || fail "reclaim of 50 made $xp XPENDING calls"
[ "$(rcli XPENDING "$stream" g - + 100 c1 | grep -c '^c1$')" = 10 ] ||
    fail "reclaim took entries that were not idle"
rcli DEL "$stream" "$stats" >/dev/null

# 2. touch: ids whose ms parts differ in length (9 < 10 < 100 as numbers, not as text)
rcli XGROUP CREATE "$stream" g 0 MKSTREAM >/dev/null
for id in 9-1 10-0 10-2 100-1 1000-0; do rcli XADD "$stream" "$id" m x >/dev/null; done
rcli XREADGROUP GROUP g c1 COUNT 10 STREAMS "$stream" '>' >/dev/null
rcli XCLAIM "$stream" g c2 0 10-0 >/dev/null # another worker took 10-0
sleep 0.3
rcli CONFIG RESETSTAT >/dev/null
r=$(rcli FCALL sluice_touch 1 "$stream" g c1 100-1 10-0 9-1 5-5 10-2 | paste -sd' ')
xp=$(calls xpending) xc=$(calls xclaim)
echo "touch of 5 ids: $xp XPENDING, $xc XCLAIM"
[ "$r" = "10-0 5-5" ] || fail "touch reply: '$r' (want the lost 10-0 and never pending 5-5)"
[ "$xp" = 1 ] && [ "$xc" = 1 ] || fail "touch: $xp XPENDING, $xc XCLAIM"
for id in 9-1 10-2 100-1; do
    [ "$(pending_of "$id")" = c1 ] && [ "$(idle_of "$id")" -lt 200 ] && [ "$(deliveries_of "$id")" = 1 ] ||
        fail "touch: owned $id not refreshed, or counted as a delivery: $(pending "$id")"
done
[ "$(pending_of 10-0)" = c2 ] && [ "$(idle_of 10-0)" -ge 300 ] || fail "touch: lost 10-0 touched: $(pending 10-0)"
[ "$(pending_of 1000-0)" = c1 ] && [ "$(idle_of 1000-0)" -ge 300 ] ||
    fail "touch: 1000-0 not in the call but refreshed: $(pending 1000-0)"
[ -z "$(rcli FCALL sluice_touch 1 "$stream" g c1)" ] || fail "touch with no ids"

# ... a range holding more of the consumer's entries than COUNT (#ids + 1000) still answers
# exactly (the ids the reply did not reach are checked one by one)
rcli DEL "$stream" >/dev/null
rcli XGROUP CREATE "$stream" g 0 MKSTREAM >/dev/null
for i in $(seq 1 1100); do echo "XADD $stream $i-1 m x"; done | rcli >/dev/null
rcli XREADGROUP GROUP g c1 COUNT 2000 STREAMS "$stream" '>' >/dev/null
rcli XCLAIM "$stream" g c2 0 1099-1 >/dev/null
sleep 0.3
r=$(rcli FCALL sluice_touch 1 "$stream" g c1 1-1 1100-1 1099-1 | paste -sd' ')
[ "$r" = "1099-1" ] || fail "touch over a full range: '$r'"
[ "$(idle_of 1-1)" -lt 300 ] && [ "$(idle_of 1100-1)" -lt 300 ] && [ "$(idle_of 550-1)" -ge 300 ] ||
    fail "touch over a full range: idle $(idle_of 1-1) $(idle_of 1100-1) $(idle_of 550-1)"
rcli DEL "$stream" >/dev/null

# 3. list_ack: 1,000 of a processing list of 2,000, given in another order than the list's
keys+=("$proc" "$meta" "$stats")
for i in $(seq 1 2000); do echo "LPUSH $proc $i:env-$i"; done | rcli >/dev/null
rcli HSET "$meta" list_depth 2000 backend list >/dev/null
rcli HSET "$stats" acked 5 >/dev/null
{
    printf 'FCALL sluice_list_ack 3 %s %s %s' "$proc" "$meta" "$stats"
    for i in $(seq 1 2 2000 | shuf); do printf ' %s' "$i:env-$i"; done
    echo
} >"$tmp/ack"
rcli CONFIG RESETSTAT >/dev/null
r=$(rcli <"$tmp/ack")
lrem=$(calls lrem) lrange=$(calls lrange) rpush=$(calls rpush)
echo "list_ack of 1000 on 2000: $lrem LREM, $lrange LRANGE, $rpush RPUSH"
[ "$r" = 1000 ] || fail "list_ack of 1000 replied $r"
[ "$lrem" = 0 ] && [ "$lrange" = 1 ] || fail "list_ack of 1000: $lrem LREM, $lrange LRANGE"
want=$(seq 2000 -2 2 | sed 's/.*/&:env-&/')
[ "$(rcli LRANGE "$proc" 0 -1)" = "$want" ] || fail "list_ack: the rest is not the even seqs in order"
[ "$(rcli HGET "$meta" list_depth)" = 1000 ] || fail "list_depth $(rcli HGET "$meta" list_depth)"
[ "$(rcli HGET "$stats" acked)" = 1005 ] || fail "acked $(rcli HGET "$stats" acked)"

# ... a batch with an element given twice and one already gone removes each present one once
args=("2000:env-2000" "2000:env-2000" "3:env-3")
for i in $(seq 2 2 40); do args+=("$i:env-$i"); done
r=$(rcli FCALL sluice_list_ack 3 "$proc" "$meta" "$stats" "${args[@]}")
[ "$r" = 21 ] || fail "list_ack with a repeat and a missing element replied $r"
[ "$(rcli LLEN "$proc")" = 979 ] && [ "$(rcli LINDEX "$proc" 0)" = "1998:env-1998" ] &&
    [ "$(rcli LINDEX "$proc" -1)" = "42:env-42" ] || fail "list_ack: list after the repeat"
[ "$(rcli HGET "$meta" list_depth)" = 979 ] && [ "$(rcli HGET "$stats" acked)" = 1026 ] ||
    fail "list_ack counters after the repeat"

# ... a small batch goes through LREM and gives the same answer
rcli CONFIG RESETSTAT >/dev/null
r=$(rcli FCALL sluice_list_ack 3 "$proc" "$meta" "$stats" 42:env-42 44:env-44 3:env-3)
[ "$r" = 2 ] && [ "$(calls lrem)" = 3 ] && [ "$(calls lrange)" = 0 ] ||
    fail "small list_ack: $r, $(calls lrem) LREM"
[ "$(rcli LINDEX "$proc" -1)" = "46:env-46" ] && [ "$(rcli HGET "$meta" list_depth)" = 977 ] ||
    fail "small list_ack: list or depth"

# ... a user whose ACL predates the rebuild (no LRANGE/LTRIM/RPUSH) is served by LREM, not refused
rcli ACL SETUSER "hot$$" on ">pw$$" resetchannels -@all +fcall +lrem +hget +hincrby '~sluice:*' >/dev/null
args=()
for i in $(seq 46 2 84); do args+=("$i:env-$i"); done
rcli CONFIG RESETSTAT >/dev/null
r=$(redis-cli -u "$url" --user "hot$$" --pass "pw$$" --no-auth-warning \
    FCALL sluice_list_ack 3 "$proc" "$meta" "$stats" "${args[@]}")
[ "$r" = 20 ] && [ "$(calls lrem)" = 20 ] && [ "$(calls lrange)" = 0 ] ||
    fail "list_ack under an LREM-only ACL: $r, $(calls lrem) LREM"
[ "$(rcli LINDEX "$proc" -1)" = "86:env-86" ] && [ "$(rcli HGET "$meta" list_depth)" = 957 ] ||
    fail "list_ack under an LREM-only ACL: list or depth"
rcli ACL DELUSER "hot$$" >/dev/null

# ... acking the whole list leaves no key behind
rcli LRANGE "$proc" 0 -1 | sed 's/^/ /' | tr -d '\n' | sed "s/^/FCALL sluice_list_ack 3 $proc $meta $stats/" >"$tmp/ack"
echo >>"$tmp/ack"
[ "$(rcli <"$tmp/ack")" = 957 ] && [ "$(rcli EXISTS "$proc")" = 0 ] &&
    [ "$(rcli HGET "$meta" list_depth)" = 0 ] || fail "list_ack of everything"

"$src/scripts/test-redis" stop "$own"
echo "ok"
