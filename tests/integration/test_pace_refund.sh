#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The paced read's reserve and refund (sluice_take 'reserve' / 'refund'), called directly and
# through workers: a grant of 100 with 10 entries waiting is charged 10 once the rest is given
# back, in each algorithm a drain limit may use; a refund of the whole grant replies the group's
# last delivered id; gcra gives back by a time bound, also after another reservation (exactly
# 50 of 50 at once), nothing after the limit changed or to a gone key; a refund that can no
# longer be given back (a fixed window that ended) gives nothing back; an old or bad token is
# refused, as a token's time after Redis's (nothing goes back) or a bad mode or count, and a
# token given back already; with an `inflight` limit the reserve reads in the script; three workers reading a trickle (short reads: refunds
# on most of them) never go past the rate.
. "$(dirname "$0")/lib.sh"
q="refund-$$"
s="sluice:{$q}:stream" m="sluice:{$q}:meta" st="sluice:{$q}:stats" l="sluice:{$q}:limits"
read -ra qk <<<"$(queue_keys "$q")"
keys+=("${qk[@]}" "$l")
for a in gcra fixed window log gate; do keys+=("sluice:{$q}:qlim:pace:$a:"); done

"$bin/sluice-enqueue" --redis "$url" --queue "$q" --capacity 100000 one >/dev/null # loads the library
rcli XTRIM "$s" MAXLEN 0 >/dev/null
rcli FCALL sluice_group 2 "$s" "$m" g c >/dev/null
limit() { rcli FCALL sluice_limits_config 2 "$l" "$m" set pace drain "$1" >/dev/null; }
fill() { # N entries more
    local i args=()
    for ((i = 0; i < $1; i++)); do args+=("e$i"); done
    rcli FCALL sluice_admit2 3 "$s" "$m" "$st" 100000 0 1 "${args[@]}" >/dev/null
}
reserve() { # N: sets $grant and $token ('' and '' when held back)
    rcli FCALL sluice_take 2 "$s" "$m" g c "$1" reserve >"$tmp/res"
    grant=$(sed -n 4p "$tmp/res") token=$(sed -n 5p "$tmp/res")
}
refund() { rcli FCALL sluice_take 2 "$s" "$m" g c "$1" refund "$2"; }
readn() { rcli XREADGROUP GROUP g c COUNT "$1" STREAMS "$s" '>' | grep -cE '^[0-9]+-[0-9]+$' || true; }

# ---- 10 waiting, 100 granted: charged 10 after the refund, in every algorithm ----
for spec in gcra:100:10000 fixed:100:60000 window:100:60000:1000 log:100:10000; do
    alg=${spec%%:*}
    limit "$spec"
    fill 10
    reserve 1000
    [ "$grant" = 100 ] || fail "$spec: granted '$grant' of a fresh burst of 100"
    got=$(readn "$grant")
    [ "$got" = 10 ] || fail "$spec: read $got of 10"
    [ -z "$(refund 90 "$token")" ] || fail "$spec: a part refund replied an id"
    reserve 1000
    [ "$grant" = 90 ] || fail "$spec: after the refund of 90, granted '$grant' (expected 90)"
    last=$(rcli XINFO GROUPS "$s" | sed -n '/^last-delivered-id$/{n;p}')
    [ "$(refund 90 "$token")" = "$last" ] || fail "$spec: a whole refund did not reply $last"
    reserve 1000
    [ "$grant" = 90 ] || fail "$spec: after the whole refund, granted '$grant' (expected 90)"
    refund 90 "$token" >/dev/null
    rcli FCALL sluice_limits_config 2 "$l" "$m" del pace >/dev/null
    rcli DEL "sluice:{$q}:qlim:pace:$alg:" >/dev/null
done
# a gate grants one unit: given back, the gate is open again
limit gate:1:60000
reserve 10
[ "$grant" = 1 ] || fail "gate: granted '$grant'"
t1=$token
reserve 10
[ -z "$grant" ] || fail "gate: a closed gate granted '$grant'"
refund 1 "$t1" >/dev/null
reserve 10
[ "$grant" = 1 ] || fail "gate: not open again after the refund (granted '$grant')"
rcli FCALL sluice_limits_config 2 "$l" "$m" del pace >/dev/null

# ---- gcra: a time bound, whatever came in between; nothing once the limit changed ----
# (a unit a second: the figures hold while each step takes less than a second)
# another reservation counted after this one: all 50 go back at once (the debt less 50 s, less
# the time since the reserve beyond 0 s), so the next reservation gets exactly 50
limit gcra:100:100000
reserve 50
t1=$token
reserve 50
[ "$grant" = 50 ] || fail "gcra: the second reservation got '$grant' of 50"
refund 50 "$t1" >/dev/null
reserve 1000
[ "$grant" = 50 ] || fail "gcra: a refund under a later reservation gave back '$grant' units (expected 50)"
rcli DEL "sluice:{$q}:qlim:pace:gcra:" >/dev/null
# ... and less as the reservation ages: 1 s after two of 50 at 100 ms a unit (a debt of 10 s,
# 9 s left), a refund of the first's 50 takes 4 s off the debt, not 5 s (the bound cannot tell
# what came in between: 50 units less the 10 whose time has gone by since), so the next
# reservation gets 50 (a few more as time goes by), not the 60 a cut of 5 s would leave
limit gcra:100:10000
reserve 50
t1=$token
reserve 50
sleep 1
refund 50 "$t1" >/dev/null
reserve 1000
[ "$grant" -ge 50 ] && [ "$grant" -le 55 ] ||
    fail "gcra: a refund 1 s after the reserve gave back '$grant' units (expected 50-55)"
rcli DEL "sluice:{$q}:qlim:pace:gcra:" >/dev/null
# the limit changed between the reserve and the refund (through sluice_limits_config, and
# written into the hash by hand): nothing goes back; the debt of 50 s restated as 25 s of 50
for how in config hand; do
    limit gcra:100:100000
    reserve 50
    t1=$token
    if [ "$how" = config ]; then limit gcra:100:50000; else rcli HSET "$l" pace "drain gcra:100:50000" >/dev/null; fi
    refund 50 "$t1" >/dev/null
    reserve 1000
    [ "$grant" = 50 ] || fail "gcra: a refund after the limit changed ($how) gave back units (granted '$grant', expected 50)"
    rcli DEL "sluice:{$q}:qlim:pace:gcra:" >/dev/null
done
# the key gone (its debt ran out, or deleted): nothing to give back, nothing written
limit gcra:100:100000
reserve 5
t1=$token
rcli DEL "sluice:{$q}:qlim:pace:gcra:" >/dev/null
refund 5 "$t1" >/dev/null
[ "$(rcli EXISTS "sluice:{$q}:qlim:pace:gcra:")" = 0 ] || fail "gcra: a refund to a gone key wrote it"
rcli FCALL sluice_limits_config 2 "$l" "$m" del pace >/dev/null
# ---- what can no longer be given back exactly is not ----
# fixed: the window the units were counted in ended (windows of 4 s, aligned to Redis's clock:
# the next one is waited for, so the three calls after it have nearly 4 s, however loaded)
limit fixed:100:4000
reserve 100
t1=$token
ms=$(rcli TIME | awk 'NR == 1 { s = $1 } NR == 2 { print (s % 4) * 1000 + int($1 / 1000) }')
sleep "$(awk -v ms="$ms" 'BEGIN { printf "%.3f", (4000 - ms) / 1000 + 0.05 }')"
reserve 30
refund 100 "$t1" >/dev/null
reserve 1000
[ "$grant" = 70 ] || fail "fixed: a refund for an ended window changed the next one (granted '$grant', expected 70)"
rcli FCALL sluice_limits_config 2 "$l" "$m" del pace >/dev/null
# a refund is made once a grant: the same token again is refused and gives nothing back (before:
# fixed gave the units back twice, 10 granted where 5 are left)
limit fixed:10:600000
reserve 5
t1=$token
reserve 5
refund 5 "$t1" >/dev/null
[ "$(rcli EXISTS "sluice:{$q}:refunded:${t1%%,*}")" = 1 ] || # named by the grant's exact time
    fail "no refunded:${t1%%,*} after the refund: $(rcli --scan --pattern "sluice:{$q}:refunded:*")"
out=$(rcli FCALL sluice_take 2 "$s" "$m" g c 5 refund "$t1" 2>&1 || true)
[[ "$out" == *"was given back already"* ]] || fail "a token given back twice: '$out'"
reserve 100
[ "$grant" = 5 ] || fail "fixed: after a refund of 5 sent twice, granted '$grant' (expected 5)"
rcli FCALL sluice_limits_config 2 "$l" "$m" del pace >/dev/null
rcli DEL "sluice:{$q}:qlim:pace:fixed:" >/dev/null
# a token that is not one: refused, naming it
rcli FCALL sluice_take 2 "$s" "$m" g c 1 refund junk 2>&1 | grep -q 'token "junk"' ||
    fail "a bad token was not refused"
# a token of the form before (",NAME:ALG,VALUE" a rate): refused, not read as rates
out=$(rcli FCALL sluice_take 2 "$s" "$m" g c 1 refund "1000,5,pace:gcra,1000 0.5 100 1000" 2>&1 || true)
[[ "$out" == *'token "1000,5,pace:gcra,1000 0.5 100 1000"'* ]] || fail "an old token was not refused: $out"
# a time after Redis's (made up, or from another server): none of its units was counted, none
# goes back (fixed and gate gave back a whole grant more than the rate allows)
for spec in fixed:10:600000 window:10:600000:1000 log:10:600000 gate:1:600000; do
    alg=${spec%%:*}
    limit "$spec"
    reserve 100
    n=$grant
    s0=$(rcli TIME | head -1)
    refund "$n" "$((s0 + 60))000000,$n,pace:$alg" >/dev/null
    reserve 100
    [ -z "$grant" ] || fail "$alg: a refund with a time to come gave back units (granted '$grant')"
    rcli FCALL sluice_limits_config 2 "$l" "$m" del pace >/dev/null
    rcli DEL "sluice:{$q}:qlim:pace:$alg:" >/dev/null
done
# bad arguments: refused, naming the value (a mode not known read entries as the read form)
for bad in "5 reserv|mode \"reserv\"" "abc reserve|count \"abc\"" "-3 reserve|count \"-3\"" \
    "-5 refund 1,5,pace:gcra|count \"-5\""; do
    read -ra a <<<"${bad%%|*}"
    out=$(rcli FCALL sluice_take 2 "$s" "$m" g c "${a[@]}" 2>&1 || true)
    [[ "$out" == *"${bad#*|}"* ]] || fail "sluice_take ${bad%%|*}: $out"
done

# ---- inflight: the reserve reads in the script (the count and the read in one step) ----
rcli FCALL sluice_limits_config 2 "$l" "$m" set lease inflight 1000 >/dev/null
limit gcra:100:10000
rcli XTRIM "$s" MAXLEN 0 >/dev/null
fill 3
rcli FCALL sluice_take 2 "$s" "$m" g c 1000 reserve >"$tmp/res"
[ "$(grep -cE '^[0-9]+-[0-9]+$' "$tmp/res")" = 3 ] || fail "inflight: the reserve did not read: $(cat "$tmp/res")"
rcli FCALL sluice_limits_config 2 "$l" "$m" del lease >/dev/null
rcli FCALL sluice_limits_config 2 "$l" "$m" del pace >/dev/null
rcli DEL "$s" "sluice:{$q}:qlim:pace:gcra:" >/dev/null

# ---- three workers, a trickle of 6 entries every 100 ms (60/s) under 10/s, burst 10 ----
rcli FCALL sluice_group 2 "$s" "$m" g c >/dev/null
limit gcra:10:1000
for i in 1 2 3; do
    "$bin/sluice-worker" --redis "$url" --queue "$q" --group g --consumer "w$i" --handler noop \
        --record "$tmp/r$i" --log-level error >/dev/null &
    pids+=("$!")
done
for _ in $(seq 1 25); do # 2.5 s, 150 entries (workers decode envelopes: sluice-enqueue)
    seq 1 6 | "$bin/sluice-enqueue" --redis "$url" --queue "$q" --capacity 100000 >/dev/null
    sleep 0.1
done
sleep 1
cat "$tmp"/r? 2>/dev/null | awk '{ print $3 }' | sort -n >"$tmp/t"
n=$(wc -l <"$tmp/t")
[ "$n" -ge 15 ] || fail "three workers processed $n entries in 3.5 s (10/s)"
# by x ms after the first, at most the burst and x/100 more (2 to spare for the lag between a
# grant and the processing of the first entry)
over=$(awk 'NR == 1 { f = $1 } { if (NR > 10 + ($1 - f) / 100 + 2) { print NR " by " $1 - f " ms"; exit } }' "$tmp/t")
[ -z "$over" ] || fail "past the rate: $over"
dups=$(cat "$tmp"/r? | awk '{ print $1 }' | sort | uniq -d | wc -l)
[ "$dups" = 0 ] || fail "$dups entries processed twice"
echo "ok: refunds exact per algorithm, dropped where they cannot be; $n by three workers within the rate"
