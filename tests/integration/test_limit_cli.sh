#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# sluice-limit, the standalone limiter from the shell (and so sluice/limit.h, which it calls):
# the seed scenarios with short windows, output and exit codes, usage errors naming the value,
# and the script-less fixed window's documented bound under concurrency.
. "$(dirname "$0")/lib.sh"
ns="limcli$$"
keys+=($(printf "sluice:{$ns}:lim:%s " res c1 c2 a b c w k g nk1 nk2 ck))
L() { "$bin/sluice-limit" --redis "$url" "$@"; }
allowed_count() { grep -c '^allowed=1' "$1" || true; }

# Output and exit codes: allowed 0, limited 1, never 1 (never=1), usage 2, Redis down 3.
run 0 '^allowed=1 remaining=2 retry_after_ms=0 reset_ms=[0-9]+$' L "$ns" k=3/10s
run 0 'remaining=1' L "$ns" k=3/10s
run 0 'remaining=0' L "$ns" k=3/10s
run 1 '^allowed=0 limited_by=k remaining=0 retry_after_ms=[0-9]+ reset_ms=[0-9]+$' L "$ns" k=3/10s
run 1 'never=1 limited_by=k' L --weight 4 "$ns" k=3/10s
run 1 '"allowed":false,"never":false,"limited_by":"k"' L --json "$ns" k=3/10s
run 2 "rate '5' of limit 'k'" L "$ns" k=5
run 2 "duration '3x' needs a unit" L "$ns" k=5/3x
run 2 "precision in 'k=5/1s~2s'" L --algorithm window "$ns" 'k=5/1s~2s'
run 2 "'~PRECISION' in 'k=5/1s~1s' is for the window algorithm only" L "$ns" 'k=5/1s~1s'
run 2 "--algorithm: 'leaky' is not one of" L --algorithm leaky "$ns" k=1/s
run 2 "namespace 'a b'" L 'a b' k=1/s
run 2 'give a NAMESPACE and at least one KEY=RATE' L "$ns"
run 2 'weight' L --weight 0 "$ns" k=1/s
# a count of days that overflowed was taken for 9.6 h; a key twice; a log call too heavy
run 2 "duration '213503982335d' is out of range \(1ms..366d\)" L "$ns" hv=1/213503982335d
run 2 "duration '213503982335d' is out of range" L -a window "$ns" 'hv=10/366d~213503982335d'
run 2 "limit key 'k' is given twice" L "$ns" k=1/s j=1/s k=5/1h
run 2 "weight 501 in 1 log limit\(s\) is more than 500 units" L -a log -w 501 "$ns" hv=1000/1h
[ "$(rcli EXISTS "sluice:{$ns}:lim:hv")" = 0 ] || fail "a refused call wrote hv"
# options after NAMESPACE and the limits; never is a number
run 1 'never=1 limited_by=nk1 remaining=0 retry_after_ms=-1 reset_ms=0$' L "$ns" nk1=3/10s --weight 4
run 1 '"never":true,"limited_by":"nk1","remaining":0,"retry_after_ms":-1,' L "$ns" nk1=3/10s -w 4 --json
# --json stays JSON for a key that is not UTF-8
L --json -w 2 "$ns" "$(printf 'n\xff')=1/1s" >"$tmp/j" || true
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["limited_by"] == {"base64": "bv8="}, d' \
    "$tmp/j" || fail "--json limited_by of a non-UTF-8 key: $(cat "$tmp/j")"
run 3 'redis unavailable' "$bin/sluice-limit" --redis redis://127.0.0.1:1 "$ns" k=1/s
run 0 'EXAMPLES' L --help
run 0 '^sluice-limit [0-9]' L --version

# A resource at 5 per 10 s, each of its consumers at 3 per 10 s (two consumers interleaved):
# c1 gets 3 and is then refused by its own limit; c2 gets the resource's last 2, then the
# resource refuses it although c2 still has room.
for i in 1 2 3 4; do L --algorithm log "$ns" res=5/10s c1=3/10s >>"$tmp/c1" || true; done
for i in 1 2 3; do L --algorithm log "$ns" res=5/10s c2=3/10s >>"$tmp/c2" || true; done
[ "$(allowed_count "$tmp/c1")" = 3 ] || fail "consumer 1: $(cat "$tmp/c1")"
[ "$(sed -n 4p "$tmp/c1" | grep -c 'limited_by=c1')" = 1 ] || fail "c1 4th: $(cat "$tmp/c1")"
[ "$(allowed_count "$tmp/c2")" = 2 ] || fail "consumer 2: $(cat "$tmp/c2")"
grep -q 'limited_by=res' "$tmp/c2" || fail "the resource limit did not refuse c2: $(cat "$tmp/c2")"

# Several limits at once with weights; only allowed requests count: 10/1s is the tight one
# for a burst of weight 3 (3 pass, the 4th is refused), and the refused ones did not consume
# the 120/60s or 240/1h~1m budgets (3 x 3 = 9 used of each).
for i in 1 2 3 4 5; do
    L --algorithm window --weight 3 "$ns" a=10/1s b=120/60s 'c=240/1h~1m' >>"$tmp/w" || true
done
[ "$(allowed_count "$tmp/w")" = 3 ] || fail "weighted windows: $(cat "$tmp/w")"
grep -q 'limited_by=a ' "$tmp/w" || fail "weighted windows: not refused by a: $(cat "$tmp/w")"
[ "$(rcli HGET "sluice:{$ns}:lim:b" 60000:1000:)" = 9 ] || fail "b counted refusals"
[ "$(rcli HGET "sluice:{$ns}:lim:c" 3600000:60000:)" = 9 ] || fail "c counted refusals"

# A uniform gate, one per 2 s: the refused call's retry-after is honest. Sleeping 300 ms less
# than it is still refused; sleeping the rest passes.
run 0 'allowed=1' L --algorithm gate "$ns" g=1/2s
run 1 'limited_by=g' L --algorithm gate "$ns" g=1/2s
ra=$(sed -n 's/.*retry_after_ms=\([0-9]*\).*/\1/p' "$tmp/out")
[ "$ra" -gt 1000 ] && [ "$ra" -le 2001 ] || fail "gate retry-after $ra"
sleep "$(awk -v r="$ra" 'BEGIN { printf "%.3f", (r - 300) / 1000 }')"
run 1 'limited_by=g' L --algorithm gate "$ns" g=1/2s
ra2=$(sed -n 's/.*retry_after_ms=\([0-9]*\).*/\1/p' "$tmp/out")
sleep "$(awk -v r="$ra2" 'BEGIN { printf "%.3f", r / 1000 }')"
run 0 'allowed=1' L --algorithm gate "$ns" g=1/2s

# Without scripts (MULTI + INCRBY + PEXPIRE NX): 8 processes x 25 calls against 50 per hour
# allow exactly 50 (INCRBY is atomic), and the counter also holds the refusals (200): the
# documented difference from the function.
for p in 1 2 3 4 5 6 7 8; do
    (for i in $(seq 1 25); do L --no-scripts "$ns" ck=50/1h || true; done >"$tmp/ns$p") &
done
wait
[ "$(cat "$tmp"/ns* | grep -c '^allowed=1')" = 50 ] || fail "no-scripts allowed $(cat "$tmp"/ns* | grep -c '^allowed=1')"
[ "$(rcli GET "sluice:{$ns}:lim:ck")" = 200 ] || fail "no-scripts counter $(rcli GET "sluice:{$ns}:lim:ck")"
ttl=$(rcli PTTL "sluice:{$ns}:lim:ck")
[ "$ttl" -gt 0 ] && [ "$ttl" -le 3600000 ] || fail "no-scripts key TTL $ttl"
run 2 '--no-scripts works with the fixed algorithm only' L --no-scripts --algorithm log "$ns" k=1/s
# a weight no limit can allow is refused before anything is counted, scripts or not
run 1 'never=1 limited_by=nk2' L --no-scripts --weight 5 "$ns" nk1=10/1h nk2=4/1h
[ "$(rcli EXISTS "sluice:{$ns}:lim:nk1")" = 0 ] || fail "never counted in nk1"
echo "test_limit_cli: ok"
