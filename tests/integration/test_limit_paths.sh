#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# sluice_limit's shortcuts answer as its general path does: a call of fixed limits only (checked
# without per-limit states) and a call of gate limits only (no TIME read) give, call
# after call, the replies the same limits give on twin keys in a call the general path serves
# (the same limits and one gcra limit that never binds and is full again within 1 ms).
. "$(dirname "$0")/lib.sh"
ns="sluice:{limpaths}:lim:$$"
rcli -x FUNCTION LOAD REPLACE <"$bin/../common/sluice_lua.c.lua" >/dev/null
big=gcra:1000000000:1 # never binds; its reset is below 1 ms
# twin ALG NAME WEIGHT SPEC...: the same call on the keys NAME:i (shortcut) and NAME:g:i (general
# path, with the gcra limit last); prints "allowed", both replies agreeing (retry and reset within
# a second: separate calls, on a loaded machine), else FAIL and the replies
twin() {
    local name=$2 w=$3 i a b
    shift 3
    local ka=() kg=()
    for ((i = 1; i <= $#; i++)); do
        ka+=("$ns:$name:$i") kg+=("$ns:$name:g:$i")
    done
    keys+=("${ka[@]}" "${kg[@]}" "$ns:$name:g:big")
    a=$(rcli FCALL sluice_limit $# "${ka[@]}" "$w" "$@" | paste -sd' ')
    b=$(rcli FCALL sluice_limit $(($# + 1)) "${kg[@]}" "$ns:$name:g:big" "$w" "$@" "$big" |
        paste -sd' ')
    echo "$a" "$b" | awk -v c="$name w=$w $*" '{
        ok = $1 == $6 && $2 == $7 && $3 == $8
        for (i = 4; i <= 5; i++) { d = $i - $(i + 5); if (d < -1000 || d > 1000) ok = 0 }
        if (!ok) { print "FAIL: " c ": shortcut \"" $1 " " $2 " " $3 " " $4 " " $5 "\" general \"" $6 " " $7 " " $8 " " $9 " " $10 "\"" > "/dev/stderr"; exit 1 }
        print $1 }' || exit 1
}
# fixed: two limits, allowed until the second is spent, refused by it, weights, never
out=""
for w in 1 2 1 1 3 1; do
    out+=$(twin fixed f2 "$w" fixed:10:3600000 fixed:4:3600000)
done
[ "$out" = "111000" ] || fail "fixed, two limits: allowed $out"
# a refusing first limit with the longer window wins limited_by; a key of another type
rcli SET "$ns:f3:1" x >/dev/null
rcli SET "$ns:f3:g:1" x >/dev/null
out=$(twin fixed f3 1 fixed:1:3600000 fixed:5:60000)$(twin fixed f3 1 fixed:1:3600000 fixed:5:60000)
[ "$out" = 10 ] || fail "fixed over a string: allowed $out"
# a fixed window is one integer, TAG * 2^31 + count, with the window's end as its TTL
[ "$(($(rcli GET "$ns:f3:1") % 2147483648))" = 1 ] && [ "$(rcli PTTL "$ns:f3:1")" -gt 0 ] ||
    fail "fixed state: $(rcli GET "$ns:f3:1") $(rcli PTTL "$ns:f3:1")"
# a refused call leaves every key as it was: a counted one unchanged, a fresh one not made
before=$(rcli GET "$ns:f3:1")
out=$(twin fixed f3 1 fixed:1:3600000 fixed:5:60000)
[ "$out" = 0 ] && [ "$(rcli GET "$ns:f3:1")" = "$before" ] || fail "fixed refused: $out"
rcli SET "$ns:f6:2" "$before" PX 60000 >/dev/null # spent: the tag of the hour's window, count 1
rcli SET "$ns:f6:g:2" "$before" PX 60000 >/dev/null
out=$(twin fixed f6 1 fixed:5:3600000 fixed:1:3600000)
[ "$out" = 0 ] && [ "$(rcli EXISTS "$ns:f6:1" "$ns:f6:g:1")" = 0 ] || fail "fixed refused, fresh: $out"
# the old layout, a hash {s = window start us, c = count}, is converted in place: its count
# carries over (5 per hour: 3 counted, 2 more pass, then refused)
t=($(rcli TIME))
now=$((t[0] * 1000000 + t[1])) p=3600000000
left=$((p - now % p))
[ "$left" -gt 5000000 ] || { sleep $((left / 1000000 + 1)); t=($(rcli TIME)); now=$((t[0] * 1000000 + t[1])); }
for k in "$ns:f7:1" "$ns:f7:g:1"; do
    rcli HSET "$k" s $((now - now % p)) c 3 >/dev/null
    rcli PEXPIRE "$k" 3600000 >/dev/null
done
out=$(twin fixed f7 1 fixed:5:3600000)$(twin fixed f7 1 fixed:5:3600000)$(twin fixed f7 1 fixed:5:3600000)
[ "$out" = 110 ] || fail "fixed over its old layout: allowed $out"
for k in "$ns:f7:1" "$ns:f7:g:1"; do
    [ "$(rcli TYPE "$k")" = string ] && [ "$(($(rcli GET "$k") % 2147483648))" = 5 ] ||
        fail "fixed old layout not converted: $k $(rcli TYPE "$k")"
done
# an old layout's hash of an earlier window reads as empty
rcli DEL "$ns:f8:1" "$ns:f8:g:1" >/dev/null
for k in "$ns:f8:1" "$ns:f8:g:1"; do
    rcli HSET "$k" s $((now - now % p - p)) c 5 >/dev/null
done
out=$(twin fixed f8 1 fixed:5:3600000)
[ "$out" = 1 ] || fail "fixed over an old window's hash: allowed $out"
# refused by a spent limit while another is empty: reset_ms is the spent one's (the empty one,
# with the longer window, has nothing to refill)
out=$(twin fixed f5 1 fixed:1:60000)$(twin fixed f5 1 fixed:1:60000 fixed:5:3600000)
[ "$out" = 10 ] || fail "fixed, a spent and an empty limit: allowed $out"
out=$(twin fixed f4 20 fixed:10:3600000) # never: the weight is above COUNT
[ "$out" = -1 ] || fail "fixed never: $out"
# gate: open, then closed by the first of two gates
out=$(twin gate g2 1 gate:1:3600000 gate:5:1000)$(twin gate g2 1 gate:1:3600000 gate:5:1000)
[ "$out" = 10 ] || fail "gate, two limits: allowed $out"
# a refused call leaves every gate as it was (the open one stays open); a key holding '1' without
# a TTL, or another type, reads as an open gate and is closed when the call passes
for k in "$ns:g3:1" "$ns:g3:g:1"; do rcli SET "$k" 1 PX 3600000 >/dev/null; done
out=$(twin gate g3 1 gate:1:3600000 gate:5:1000)
[ "$out" = 0 ] && [ "$(rcli EXISTS "$ns:g3:2" "$ns:g3:g:2")" = 0 ] || fail "gate refused: $out"
for k in "$ns:g4:1" "$ns:g4:g:1"; do rcli SET "$k" 1 >/dev/null; done
for k in "$ns:g4:2" "$ns:g4:g:2"; do rcli HSET "$k" a 1 >/dev/null; done
out=$(twin gate g4 2 gate:5:1000 gate:5:1000)
[ "$out" = 1 ] && [ "$(rcli PTTL "$ns:g4:1")" -gt 0 ] && [ "$(rcli TYPE "$ns:g4:2")" = string ] &&
    [ "$(rcli PTTL "$ns:g4:2")" -gt 0 ] || fail "gate over a key without TTL or a hash: $out"
# refused by the second of two gates: the first, open, stays open (a call of several gates reads
# them all before it closes any); one gate over a key holding '1' without a TTL is closed
for k in "$ns:g5:2" "$ns:g5:g:2"; do rcli SET "$k" 1 PX 3600000 >/dev/null; done
out=$(twin gate g5 1 gate:5:1000 gate:1:3600000)
[ "$out" = 0 ] && [ "$(rcli EXISTS "$ns:g5:1" "$ns:g5:g:1")" = 0 ] || fail "gate refused by the second: $out"
for k in "$ns:g6:1" "$ns:g6:g:1"; do rcli SET "$k" 1 >/dev/null; done
out=$(twin gate g6 1 gate:5:1000)$(twin gate g6 1 gate:5:1000)
[ "$out" = 10 ] && [ "$(rcli PTTL "$ns:g6:1")" -gt 0 ] || fail "one gate over a key without TTL: $out"
# several gates with a TTL: only the longest is asked its value, then the next; a string or a hash
# with a TTL that is not a closed gate's reads as open (refused by the third, the one holding '1')
for g in g7 g7:g; do
    rcli SET "$ns:$g:1" x PX 3600000 >/dev/null
    rcli HSET "$ns:$g:2" a 1 >/dev/null
    rcli PEXPIRE "$ns:$g:2" 2000000 >/dev/null
    rcli SET "$ns:$g:3" 1 PX 1000000 >/dev/null
done
out=$(twin gate g7 1 gate:5:1000 gate:5:1000 gate:5:1000)
[ "$out" = 0 ] && [ "$(rcli GET "$ns:g7:1")" = x ] || fail "gates over other values with a TTL: $out"
rcli DEL "$ns:g7:3" "$ns:g7:g:3" >/dev/null
out=$(twin gate g7 1 gate:5:1000 gate:5:1000 gate:5:1000)
[ "$out" = 1 ] && [ "$(rcli GET "$ns:g7:1")" = 1 ] && [ "$(rcli TYPE "$ns:g7:2")" = string ] ||
    fail "gates over other values with a TTL, the closed one gone: $out"
echo "test_limit_paths: ok"
