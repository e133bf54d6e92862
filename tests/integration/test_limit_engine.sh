#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# sluice_limit, the limiter engine, called as a client in any language would: each algorithm
# (gcra, window, log, fixed, gate) lets through what it promises and tells when to retry;
# several limits in one call count a request in all of them or in none; a weight above a COUNT
# is "never"; concurrent callers never get more than COUNT; every key has a TTL.
. "$(dirname "$0")/lib.sh"
ns="sluice:{limtest}:lim:$$"

# The library this build embeds (same version as the C clients, so nobody reloads it).
rcli -x FUNCTION LOAD REPLACE <"$bin/../common/sluice_lua.c.lua" >/dev/null

# lim NKEYS KEY... WEIGHT SPEC...: one call, its reply on one line "a b c d e"
lim() { rcli FCALL sluice_limit "$@" | paste -sd' '; }
# limn COUNT NKEYS ...: COUNT calls over one connection, one reply a line
limn() {
    local n=$1 i
    shift
    for ((i = 0; i < n; i++)); do echo "FCALL sluice_limit $*"; done | rcli | paste -d' ' - - - - -
}
field() { echo "$1" | cut -d' ' -f"$2"; }
msleep() { sleep "$(printf '%d.%03d' $(($1 / 1000)) $(($1 % 1000)))"; }
# mk VAR NAME: VAR becomes the key NAME of this test, deleted on exit
mk() {
    printf -v "$1" '%s' "$ns:$2"
    keys+=("$ns:$2")
}

# 1. gcra 5 per second: a burst of 5, the 6th waits at most one emission interval (200 ms)
mk k gcra
r=$(limn 6 1 "$k" 1 gcra:5:1000)
[ "$(echo "$r" | cut -d' ' -f1 | paste -sd' ')" = "1 1 1 1 1 0" ] || fail "gcra burst: $r"
[ "$(echo "$r" | sed -n 5p | cut -d' ' -f3)" = 0 ] || fail "gcra remaining after 5: $r"
last=$(echo "$r" | sed -n 6p)
retry=$(field "$last" 4)
[ "$(field "$last" 2)" = 1 ] && [ "$retry" -gt 0 ] && [ "$retry" -le 200 ] ||
    fail "gcra 6th: $last"
msleep "$retry"
[ "$(field "$(lim 1 "$k" 1 gcra:5:1000)" 1)" = 1 ] || fail "gcra: refused after retry_after"
# a rate change rescales the debt: 2 per 10 s used up is half of 4 per 10 s, 2 more pass
mk k gcra-rate
r=$(limn 3 1 "$k" 1 gcra:2:10000)
[ "$(echo "$r" | cut -d' ' -f1 | paste -sd' ')" = "1 1 0" ] || fail "gcra 2/10s: $r"
r=$(limn 3 1 "$k" 1 gcra:4:10000)
[ "$(echo "$r" | cut -d' ' -f1,3 | paste -sd' ')" = "1 1 1 0 0 0" ] || fail "gcra 4/10s: $r"

# 2. log: global 10 and per category 3 a minute, in one call; refused calls consume nothing
mk g log-global
c() { echo "$ns:log-cat-$1"; }
keys+=("$ns:log-cat-errors" "$ns:log-cat-a" "$ns:log-cat-b" "$ns:log-cat-c" "$ns:never-other")
r=$(limn 10 2 "$g" "$(c errors)" 1 log:10:60000 log:3:60000)
[ "$(echo "$r" | grep -c '^1 0 ')" = 3 ] || fail "log: not 3 allowed for errors: $r"
[ "$(echo "$r" | grep -c '^0 2 0 ')" = 7 ] || fail "log: not 7 refused by the category: $r"
for cat in a b; do
    r=$(limn 3 2 "$g" "$(c $cat)" 1 log:10:60000 log:3:60000)
    [ "$(echo "$r" | grep -c '^1 0 ')" = 3 ] || fail "log: category $cat: $r"
done
[ "$(rcli ZCARD "$g")" = 9 ] || fail "log: refused calls were counted: $(rcli ZCARD "$g")"
r=$(lim 2 "$g" "$(c c)" 1 log:10:60000 log:3:60000)
[ "$r" = "1 0 0 0 60000" ] || fail "log: 10th of the minute: $r"
r=$(lim 2 "$g" "$(c c)" 1 log:10:60000 log:3:60000)
[ "$(field "$r" 1)" = 0 ] && [ "$(field "$r" 2)" = 1 ] && [ "$(field "$r" 3)" = 0 ] ||
    fail "log: not refused by the global limit: $r"
retry=$(field "$r" 4)
[ "$retry" -gt 50000 ] && [ "$retry" -le 60000 ] || fail "log: retry_after $retry"
[ "$(rcli ZCARD "$(c c)")" = 1 ] || fail "log: a refused call was counted in its category"

# 3. never: a weight above a COUNT can never pass, in any algorithm; nothing is written
for spec in gcra:5:1000 window:5:1000:100 log:5:1000 fixed:5:1000 gate:5:1000; do
    mk k "never-${spec%%:*}"
    [ "$(lim 1 "$k" 6 "$spec")" = "-1 1 0 -1 0" ] || fail "never $spec: $(lim 1 "$k" 6 "$spec")"
    r=$(lim 2 "$ns:never-other" "$k" 6 gcra:100:1000 "$spec")
    [ "$r" = "-1 2 0 -1 0" ] || fail "never $spec as limit 2: $r"
    [ "$(rcli EXISTS "$k" "$ns:never-other")" = 0 ] || fail "never $spec wrote something"
done

# 4. gate, one per 2 s: closed for 2 s; a little less is not enough, the rest is
mk k gate
[ "$(lim 1 "$k" 1 gate:1:2000)" = "1 0 0 0 2000" ] || fail "gate: first call"
r=$(lim 1 "$k" 1 gate:1:2000)
retry=$(field "$r" 4)
[ "$(field "$r" 1)" = 0 ] && [ "$retry" -gt 1000 ] && [ "$retry" -le 2001 ] ||
    fail "gate: second call $r"
msleep $((retry - 300))
r=$(lim 1 "$k" 1 gate:1:2000)
[ "$(field "$r" 1)" = 0 ] || fail "gate: passed 300 ms early: $r"
msleep "$(field "$r" 4)"
r=$(lim 1 "$k" 1 gate:1:2000)
[ "$(field "$r" 1)" = 1 ] || fail "gate: refused after retry_after: $r"

# 5. window 4 per second in 100 ms blocks
mk k window
r=$(limn 5 1 "$k" 1 window:4:1000:100)
[ "$(echo "$r" | cut -d' ' -f1 | paste -sd' ')" = "1 1 1 1 0" ] || fail "window: $r"
retry=$(field "$(echo "$r" | sed -n 5p)" 4)
[ "$retry" -gt 0 ] && [ "$retry" -le 1000 ] || fail "window: retry_after $retry"
msleep "$retry"
[ "$(field "$(lim 1 "$k" 1 window:4:1000:100)" 1)" = 1 ] || fail "window: refused after retry"
# two windows of one key share its hash, which lives as long as the longest (a fresh key: the
# one above may still be full, if its first four calls straddled a 100 ms block)
mk k window-two
r=$(lim 2 "$k" "$k" 1 window:4:1000:100 window:20:60000:1000)
[ "$(field "$r" 1)" = 1 ] || fail "window: two windows of one key: $r"
[ "$(rcli PTTL "$k")" -gt 50000 ] || fail "window: shared hash TTL $(rcli PTTL "$k")"
rcli FCALL sluice_limit 2 "$k" "$k" 1 window:4:1000:100 gcra:4:1000 2>&1 |
    grep -q '^SLUICECONFIG key .* given twice' || fail "a key given twice was not refused"

# expired blocks are deleted as time moves: a window's hash keeps at most its blocks + 2 fields
mk k window-trim
for ((i = 0; i < 15; i++)); do
    [ "$(field "$(lim 1 "$k" 1 window:100:500:50)" 1)" = 1 ] || fail "window-trim: refused"
    n=$(rcli HLEN "$k")
    [ "$n" -le 12 ] || fail "window-trim: $n fields for 10 blocks"
    msleep 60
done

# 6. fixed 3 per clock second (the calls start just after a second begins)
ms=$(date +%s%3N)
msleep $((1000 - ms % 1000 + 20))
mk k fixed
r=$(limn 4 1 "$k" 1 fixed:3:1000)
[ "$(echo "$r" | cut -d' ' -f1 | paste -sd' ')" = "1 1 1 0" ] || fail "fixed: $r"
retry=$(field "$(echo "$r" | sed -n 4p)" 4)
[ "$retry" -gt 0 ] && [ "$retry" -le 1000 ] || fail "fixed: retry_after $retry"

# 7. exact under concurrency: 8 clients x 100 calls against 50 an hour
ms=$(date +%s%3N)
left=$((3600000 - ms % 3600000))
if [ "$left" -lt 10000 ]; then # the fixed window must not turn over during the test
    msleep $((left + 100))
fi
for spec in gcra:50:3600000 window:50:3600000:3600 log:50:3600000 fixed:50:3600000 \
    gate:50:3600000; do
    alg=${spec%%:*}
    mk k "conc-$alg"
    cpids=()
    for p in 1 2 3 4 5 6 7 8; do
        limn 100 1 "$k" 1 "$spec" >"$tmp/conc-$alg-$p" &
        cpids+=("$!")
        pids+=("$!")
    done
    wait "${cpids[@]}"
    n=$(cat "$tmp"/conc-"$alg"-* | grep -c '^1 0 ' || true)
    total=$(cat "$tmp"/conc-"$alg"-* | wc -l)
    want=50
    [ "$alg" = gate ] && want=1 # one per 72 s: the first closes the gate for the hour's rest
    [ "$total" = 800 ] || fail "$alg: $total replies of 800"
    [ "$n" = "$want" ] || fail "$alg: $n of 800 concurrent calls allowed, expected $want"
done

# 8. weight: 4 of 10 twice, then refused; with two limits a refused call consumes nothing
mk k weight
r=$(limn 3 1 "$k" 4 gcra:10:1000)
[ "$(echo "$r" | cut -d' ' -f1-3 | paste -sd' ')" = "1 0 6 1 0 2 0 1 0" ] ||
    fail "gcra weight 4 of 10: $r"
mk a multi-a
mk b multi-b
[ "$(field "$(lim 2 "$a" "$b" 2 log:5:60000 fixed:2:3600000)" 1)" = 1 ] || fail "multi: first"
r=$(lim 2 "$a" "$b" 2 log:5:60000 fixed:2:3600000)
[ "$(field "$r" 1)" = 0 ] && [ "$(field "$r" 2)" = 2 ] || fail "multi: not refused by b: $r"
r=$(lim 1 "$a" 3 log:5:60000)
[ "$(field "$r" 1)" = 1 ] && [ "$(field "$r" 3)" = 0 ] || fail "multi: the refused call used a: $r"

# 9. every key expires when idle, no later than its state does
for spec in gcra:5:60000 window:5:60000:1000 log:5:60000 fixed:5:60000 gate:5:60000; do
    mk k "ttl-${spec%%:*}"
    [ "$(field "$(lim 1 "$k" 1 "$spec")" 1)" = 1 ] || fail "ttl $spec: refused"
    ttl=$(rcli PTTL "$k")
    [ "$ttl" -gt 0 ] && [ "$ttl" -le 60001 ] || fail "$k ($spec) has PTTL $ttl"
done
for k in conc-gcra conc-window conc-log conc-fixed conc-gate multi-a multi-b; do
    ttl=$(rcli PTTL "$ns:$k")
    [ "$ttl" -gt 0 ] || fail "$ns:$k has PTTL $ttl"
done

# a key holding another algorithm's state (a key whose algorithm changed) or anything else
# never fails a call: it reads as empty and the counted call replaces it with its own state
# (gcra -> gate passes a fresh gate; every pair of algorithms, and a foreign string and list)
specs=(gcra:5:60000 window:5:60000:1000 log:5:60000 fixed:5:60000 gate:5:60000)
types=(string hash zset string string)
for i in "${!specs[@]}"; do
    for j in "${!specs[@]}" x; do
        [ "$j" = "$i" ] && continue
        mk k "alg-$i-$j"
        if [ "$j" = x ]; then
            rcli RPUSH "$k" a b >/dev/null
        else
            r=$(lim 1 "$k" 2 "${specs[$j]}")
            [ "$(field "$r" 1)" = 1 ] || fail "${specs[$j]}: $r"
        fi
        r=$(lim 1 "$k" 1 "${specs[$i]}")
        [ "$(field "$r" 1)" = 1 ] || fail "${specs[$i]} over ${specs[$j]:-a list}: $r"
        [ "$(rcli TYPE "$k")" = "${types[$i]}" ] && [ "$(rcli PTTL "$k")" -gt 0 ] ||
            fail "${specs[$i]} over ${specs[$j]:-a list}: $(rcli TYPE "$k") $(rcli PTTL "$k")"
    done
done
mk k foreign
rcli SET "$k" garbage >/dev/null
[ "$(field "$(lim 2 "$ns:foreign-log" "$k" 1 log:5:1000 gcra:5:1000)" 1)" = 1 ] ||
    fail "a foreign string failed a gcra call"
rcli GET "$k" | grep -q ' 5 1000$' || fail "gcra did not replace a foreign string: $(rcli GET "$k")"
keys+=("$ns:foreign-log" "$ns:bad1" "$ns:bad2")

# a gcra rate change: the debt carried over is at most the new period, and the key lives as
# long as it (50 of 100/1s used, then 1/1h: refused for at most an hour, and still the next
# second; before, 50 x 1 h of debt in a key that expired 0.5 s later)
mk k gcra-lower
r=$(limn 50 1 "$k" 1 gcra:100:1000)
[ "$(echo "$r" | grep -c '^1 ')" = 50 ] || fail "gcra 100/1s: $r"
r=$(lim 1 "$k" 1 gcra:1:3600000)
retry=$(field "$r" 4) reset=$(field "$r" 5)
[ "$(field "$r" 1)" = 0 ] && [ "$retry" -gt 3000000 ] && [ "$retry" -le 3600000 ] &&
    [ "$reset" -le 3600000 ] || fail "gcra lowered to 1/1h: $r"
ttl=$(rcli PTTL "$k")
[ "$ttl" -gt 3000000 ] && [ "$ttl" -le 3600001 ] || fail "gcra lowered to 1/1h: PTTL $ttl"
sleep 1
[ "$(field "$(lim 1 "$k" 1 gcra:1:3600000)" 1)" = 0 ] || fail "gcra lowered: passed 1 s later"
# raised back: the debt shrinks to the faster rate's terms
[ "$(field "$(lim 1 "$k" 1 gcra:100:1000)" 1)" = 1 ] || fail "gcra raised again: refused"

# one call counts at most 500 units in log limits (a member each, so no call blocks Redis):
# weight 500 in one log passes, 501 (or 2 x 251 in two logs) is refused and writes nothing
mk k log-heavy
mk k2 log-heavy2
[ "$(field "$(lim 1 "$k" 500 log:1000000:60000)" 1)" = 1 ] || fail "log weight 500 refused"
[ "$(rcli ZCARD "$k")" = 500 ] || fail "log weight 500: $(rcli ZCARD "$k") members"
rcli FCALL sluice_limit 1 "$k2" 501 log:1000000:60000 2>&1 |
    grep -q '^SLUICECONFIG weight 501 in 1 log limit(s) is 501 units; a call counts at most 500' ||
    fail "log weight 501 accepted: $(rcli ZCARD "$k2") members"
rcli FCALL sluice_limit 2 "$k" "$k2" 251 log:1000000:60000 log:1000000:60000 2>&1 |
    grep -q '^SLUICECONFIG weight 251 in 2 log limit(s) is 502 units' || fail "2 x 251 accepted"
[ "$(rcli EXISTS "$k2")" = 0 ] && [ "$(rcli ZCARD "$k")" = 500 ] || fail "a refused weight wrote"
# other algorithms take any weight up to their COUNT in constant work
[ "$(field "$(lim 1 "$ns:bad2" 1000000 gcra:1000000:60000)" 1)" = 1 ] || fail "gcra heavy"

# a bad spec names itself and its position, and nothing is written
rcli FCALL sluice_limit 2 "$ns:bad1" "$ns:bad2" 1 gcra:5:1000 window:5:10000:1 2>&1 |
    grep -q '^SLUICECONFIG limit 2 "window:5:10000:1"' || fail "a bad spec was not refused"
[ "$(rcli EXISTS "$ns:bad1")" = 0 ] || fail "a call with a bad spec wrote something"
echo "ok: gcra, window, log, fixed, gate limit exactly; never; weights; multi-limit; TTLs"
