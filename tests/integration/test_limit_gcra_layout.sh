#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# sluice_limit's gcra value in its two layouts: a whole TAT is written "TAT COUNT PERIOD_MS", a
# fractional one "TAT_INT TAT_FRAC COUNT PERIOD_MS" (the layout every value had before); a value
# of either layout is read with its debt, under the limit it was written with or a changed one
# (rescaled and written back in the new limit's terms), and a refused call leaves it as it was.
. "$(dirname "$0")/lib.sh"
ns="sluice:{limtest}:glay:$$"
rcli -x FUNCTION LOAD REPLACE <"$bin/../common/sluice_lua.c.lua" >/dev/null

lim() { rcli FCALL sluice_limit 1 "$1" 1 "$2" | paste -sd' '; }
field() { echo "$1" | cut -d' ' -f"$2"; }
now() { rcli TIME | paste -sd' ' | awk '{ printf "%d%06d", $1, $2 }'; } # Redis time, us
key() { # KEY NAME: a key of this test, deleted on exit
    printf -v "$1" '%s' "$ns:$2"
    keys+=("$ns:$2")
}

# written: a whole T (200 ms) gives a whole TAT, a T of 333333.3 us a fractional one
key k whole
[ "$(field "$(lim "$k" gcra:5:1000)" 1)" = 1 ] || fail "gcra 5/1s refused a first call"
v=$(rcli GET "$k")
[[ "$v" =~ ^([0-9]+)\ 5\ 1000$ ]] || fail "a whole TAT is not written as 'TAT 5 1000': $v"
d=$((BASH_REMATCH[1] - $(now)))
[ "$d" -gt 100000 ] && [ "$d" -le 200000 ] || fail "TAT - now after one call of 5/1s: $d us"
key k frac
[ "$(field "$(lim "$k" gcra:3:1000)" 1)" = 1 ] || fail "gcra 3/1s refused a first call"
v=$(rcli GET "$k")
[[ "$v" =~ ^[0-9]+\ 0\.333[0-9]*\ 3\ 1000$ ]] || fail "a fractional TAT is not 'TAT FRAC 3 1000': $v"

# read, the earlier layout under the same limit: 990 ms of a 1 s period owed, so refused (a
# call needs 200 ms), retry-after what is owed past it, and the value left as it was
key k old
v="$(($(now) + 990000)) 0 5 1000"
rcli SET "$k" "$v" PX 5000 >/dev/null
r=$(lim "$k" gcra:5:1000)
[ "$(field "$r" 1) $(field "$r" 3)" = "0 0" ] && [ "$(field "$r" 4)" -ge 1 ] &&
    [ "$(field "$r" 4)" -le 190 ] || fail "an earlier value owing 990 ms of 5/1s: $r"
[ "$(rcli GET "$k")" = "$v" ] || fail "a refused call changed the value: $(rcli GET "$k")"
# a fraction kept: 790 ms + 0.5 us owed passes, is written with its fraction, and then refuses
rcli SET "$k" "$(($(now) + 790000)) 0.5 5 1000" PX 5000 >/dev/null
[ "$(field "$(lim "$k" gcra:5:1000)" 1)" = 1 ] || fail "an earlier value owing 790 ms refused"
v=$(rcli GET "$k")
[[ "$v" =~ ^[0-9]+\ 0\.5\ 5\ 1000$ ]] || fail "a fraction was not kept: $v"
[ "$(field "$(lim "$k" gcra:5:1000)" 1)" = 0 ] || fail "a fractional value read back as less debt"

# read under a changed limit, either layout: 500 ms owed at 10/1s is 5 of its intervals, which
# at 5/1s are the whole period: refused, and written back as 5/1s's whole TAT with its TTL
for old in "10 1000" "0 10 1000"; do
    key k "changed-${old// /-}"
    rcli SET "$k" "$(($(now) + 500000)) $old" PX 5000 >/dev/null
    r=$(lim "$k" gcra:5:1000)
    [ "$(field "$r" 1)" = 0 ] || fail "'TAT $old' owing 500 ms, read as 5/1s: $r"
    v=$(rcli GET "$k")
    [[ "$v" =~ ^([0-9]+)\ 5\ 1000$ ]] || fail "'TAT $old' not restated as 'TAT 5 1000': $v"
    d=$((BASH_REMATCH[1] - $(now)))
    [ "$d" -gt 800000 ] && [ "$d" -le 1000000 ] || fail "'TAT $old' restated owing $d us"
    ttl=$(rcli PTTL "$k")
    [ "$ttl" -gt 800 ] && [ "$ttl" -le 1001 ] || fail "'TAT $old' restated with PTTL $ttl"
done
echo "ok: gcra values of both layouts written and read, same limit and changed"
