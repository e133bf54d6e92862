#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# An admission's fixed windows, counted by the check's own INCRBY (taken back when no message
# used it): the counts, TTLs and keys are those of a read then a write - units counted only for
# the messages admitted, none for one limited by another limit or full, no key left by a refused
# message on a fresh key, a key of another type replaced, the old layout's hash converted; the
# same for one message under limits of scope queue only, which has its own path.
. "$(dirname "$0")/lib.sh"
q="afix-$$"
p="sluice:{$q}"
keys+=($(queue_keys "$q") "$p:limits")
cleanup_state() { rcli --scan --pattern "$p:qlim:*" | xargs -r redis-cli -u "$url" DEL >/dev/null; }
trap 'cleanup_state; lib_cleanup' EXIT
cfg() { rcli FCALL sluice_limits_config 2 "$p:limits" "$p:meta" "$@" >/dev/null; }
# admit CAP STRIDE ARGS...: one sluice_admit2 call; prints its outcomes, one word each ("id",
# a limit's name, 0 for full)
admit() {
    local cap=$1
    shift
    rcli --json FCALL sluice_admit2 3 "$p:stream" "$p:meta" "$p:stats" "$cap" 0 "$@" |
        sed -E 's/^\[([^,]*,){5}//; s/\]$//; s/\[("[^"]*")[^]]*\]/\1/g; s/"[0-9]+-[0-9]+"/id/g' |
        tr -d '"' | tr ',' ' '
}
count() { # the units counted in fixed key $1 (value mod 2^31), or "none"
    local v
    v=$(rcli GET "$1")
    [ -n "$v" ] && echo $((v % 2147483648)) || echo none
}
run 0 'admitted=1' "$bin/sluice-enqueue" --redis "$url" --queue "$q" seed # loads the library
k="$p:qlim:a:fixed:"
cfg set a queue fixed:3:86400000
# 5 in one call: 3 admitted, 2 limited by a; counted 3, with the window's end as TTL
out=$(admit 1000 1 m1 m2 m3 m4 m5)
[ "$out" = "id id id a a" ] || fail "a batch of 5 under 3: $out"
[ "$(count "$k")" = 3 ] || fail "counted after the batch: $(count "$k")"
ttl=$(rcli PTTL "$k")
[ "$ttl" -gt 0 ] && [ "$ttl" -le 86400000 ] || fail "TTL $ttl"
out=$(admit 1000 1 m6)
[ "$out" = a ] && [ "$(count "$k")" = 3 ] || fail "a refused call: $out, counted $(count "$k")"
# full: nothing counted
cfg set a queue fixed:30:86400000
depth=$(rcli XLEN "$p:stream")
out=$(admit "$depth" 1 m7)
[ "$out" = 0 ] && [ "$(count "$k")" = 3 ] || fail "a full call: $out, counted $(count "$k")"
out=$(admit 1000 1 m8 m9)
[ "$out" = "id id" ] && [ "$(count "$k")" = 5 ] || fail "two more: $out, counted $(count "$k")"
# one message under limits of scope queue only (its own path): the fixed unit taken back when
# another limit refuses; the refusing limit with the longest retry-after named (l: 1 h, g: 60 s)
cfg set g queue gate:1:60000
cfg set l queue log:1:3600000
out=$(admit 1000 1 m10)
[ "$out" = id ] && [ "$(count "$k")" = 6 ] || fail "one under a, g, l: $out, counted $(count "$k")"
out=$(admit 1000 1 m11)
[ "$out" = l ] && [ "$(count "$k")" = 6 ] || fail "one refused by g, l: $out, counted $(count "$k")"
[ "$(rcli HGET "$p:stats" limited:l)" = 1 ] && [ -z "$(rcli HGET "$p:stats" limited:g)" ] ||
    fail "limited:l $(rcli HGET "$p:stats" limited:l), limited:g $(rcli HGET "$p:stats" limited:g)"
cfg del g
cfg del l
# per tenant, beside a queue limit z that refuses: the tenant's fresh key is not left behind
cfg del a
cfg set t tenant fixed:5:86400000
cfg set z queue log:1:86400000
out=$(admit 1000 3 t1 '' x1 t2 '' x2)
[ "$out" = "id z" ] || fail "t1 then t2 under z: $out"
[ "$(count "$p:qlim:t:fixed:t1")" = 1 ] || fail "t1 counted $(count "$p:qlim:t:fixed:t1")"
[ "$(rcli EXISTS "$p:qlim:t:fixed:t2")" = 0 ] || fail "t2's key made by a refused message"
cfg del z
# a key of another type reads as empty and is replaced; an old layout's hash is converted
rcli RPUSH "$p:qlim:t:fixed:t3" x >/dev/null
out=$(admit 1000 3 t3 '' y1)
[ "$out" = id ] && [ "$(count "$p:qlim:t:fixed:t3")" = 1 ] || fail "over a list: $out"
now=$(rcli TIME | head -1)
start=$(( (now / 86400) * 86400000000 ))
rcli HSET "$p:qlim:t:fixed:t4" s "$start" c 4 >/dev/null
out=$(admit 1000 3 t4 '' z1 t4 '' z2)
[ "$out" = "id t" ] && [ "$(count "$p:qlim:t:fixed:t4")" = 5 ] ||
    fail "over the old layout: $out, counted $(count "$p:qlim:t:fixed:t4")"
echo "test_admission_fixed: ok"
