#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A queue's limits changed as operators change them, and limits of both kinds side by side:
# a limit set again with another algorithm (or deleted and set) never trips an admission on the
# old state, nor does a key of the wrong type, and a batch mixing tenants is never failed by
# one of them; the standalone limiter's keys never meet a queue's limit state, whatever the
# namespace and key; `limit list` and `limit show` speak as the operator wrote; the gateway's
# RateLimit-Policy states a sub-second limit in whole seconds without changing its rate.
. "$(dirname "$0")/lib.sh"
q="lchg-$$"
keys+=($(queue_keys "$q") "sluice:{$q}:limits" "sluice:{$q}:lim:global:")
cleanup_state() { rcli --scan --pattern "sluice:{$q}:*lim:*" | xargs -r redis-cli -u "$url" DEL >/dev/null; }
trap 'cleanup_state; lib_cleanup' EXIT
A() { "$bin/sluice-admin" --redis "$url" "$@"; }
E() { "$bin/sluice-enqueue" --redis "$url" --queue "$q" "$@"; }
L() { "$bin/sluice-limit" --redis "$url" "$@"; }
# batch T1 T2 ...: one admission call of one message per tenant; prints the reply on one line
batch() {
    local t args=()
    for t in "$@"; do args+=("$t" '' "m-$t"); done
    rcli FCALL sluice_admit2 3 "sluice:{$q}:stream" "sluice:{$q}:meta" "sluice:{$q}:stats" \
        1000 0 3 "${args[@]}" 2>&1 | paste -sd' '
}

# every algorithm after every other on a tenant limit that tenant acme has used: each
# admission passes, and a batch of acme between two other tenants admits the other two
run 0 'admitted=2' E --capacity 1000 --tenant acme a1 a2
prev=none
for alg in fixed gcra log window gate fixed; do
    run 0 "limit per-t on $q: tenant $alg" A limit "$q" set per-t tenant 50/1d --algorithm "$alg"
    run 0 'admitted=1 ' E --tenant acme "after-$prev"
    r=$(batch other1 acme other2) # acme may be limited (a gate), never an error
    echo "$r" | grep -qE '^[23] [0-9]+ 1000 0 -1 [0-9]+-[0-9]+ ' || fail "batch $prev -> $alg: $r"
    prev=$alg
done
# deleted and set again with another algorithm: the same
run 0 'deleted' A limit "$q" del per-t
run 0 'limit per-t' A limit "$q" set per-t tenant 50/1d --algorithm gcra
run 0 'admitted=1 ' E --tenant acme after-del
# a state key of the wrong type (whatever put it there) reads as empty and is replaced
k="sluice:{$q}:qlim:per-t:gcra:acme"
rcli DEL "$k" >/dev/null
rcli RPUSH "$k" x >/dev/null
r=$(batch other1 acme other2)
[ "$(echo "$r" | cut -d' ' -f1)" = 3 ] || fail "batch over a list: $r"
[ "$(rcli TYPE "$k")" = string ] || fail "the list was not replaced: $(rcli TYPE "$k")"
# the limit still limits: 50 a day, 4 used by acme under gcra now
seq 1 60 | E --tenant acme >"$tmp/acme" 2>&1 || true
grep -qE '^admitted=4[0-9] rejected=1[0-9] .*limited=1[0-9] \(by per-t' "$tmp/acme" ||
    fail "per-t no longer limits: $(cat "$tmp/acme")"
run 0 'deleted' A limit "$q" del per-t

# the standalone limiter, with the queue's name as its namespace and keys shaped like the
# queue's state, neither spends nor poisons the queue's limits
run 0 'limit global' A limit "$q" set global queue 2/1h --algorithm log
run 0 'allowed=1' L --algorithm log "$q" 'global:=2/1h'
run 0 'allowed=1' L --algorithm log "$q" 'global:log:=2/1h'
run 0 'allowed=1' L "$q" 'qlim:global:log:=5/1m'
run 0 'admitted=1 ' E g1
run 0 'admitted=1 ' E g2
run 1 'limited=1 \(by global' E g3
run 0 'deleted' A limit "$q" del global

# messages without a tenant share the tenant '' of a per-tenant limit: leaving the tenant out
# does not escape it (docs/limits.md)
run 0 'limit one' A limit "$q" set one tenant 1/1h
run 0 'admitted=1 ' E u1
run 1 'limited=1 \(by one' E u2
run 0 'admitted=1 ' E --tenant someone u3
run 0 'deleted' A limit "$q" del one

# list and show: rates as they are written, state in words
run 0 'limit w30' A limit "$q" set w30 tenant 10/30m --algorithm window
run 0 'limit g90' A limit "$q" set g90 queue 3/90s
run 0 'limit f1h' A limit "$q" set f1h queue 100/1h --algorithm fixed
A limit "$q" list >"$tmp/list"
grep -qE '^w30 +tenant +window +10/30m~30s ' "$tmp/list" || fail "list: $(cat "$tmp/list")"
grep -qE '^g90 +queue +gcra +3/90s ' "$tmp/list" || fail "list: $(cat "$tmp/list")"
run 0 'admitted=2' E --tenant t1 s1 s2
run 0 '1 of 3 left now .* full again in [0-9]+ ms' A limit "$q" show g90
run 0 'window 1800000:30000: 2 counted in the window' A limit "$q" show w30 t1
run 0 'fixed window: 2 counted, ends in [0-9]+ ms' A limit "$q" show f1h
run 0 'no state: nothing counted' A limit "$q" show w30 nobody
run 2 "queue $q has no limit 'nope'" A limit "$q" show nope
run 0 'deleted' A limit "$q" del w30
run 0 'deleted' A limit "$q" del g90

# the gateway: a limit of 1 per 900 ms is stated as 10 per 9 s, not 1 per second
run 0 'limit sub' A limit "$q" set sub client 1/900ms --algorithm log
gateway_start --queue "$q" --client-header X-Api-Key
post() { curl -s -D "$tmp/h" -o "$tmp/b" -w '%{http_code}' -H "X-Api-Key: k1" --data-binary x \
    "http://127.0.0.1:$port/v1/queues/$q/messages"; }
codes="$(post) $(post)"
[ "$codes" = "202 429" ] || fail "gateway 1/900ms: $codes $(cat "$tmp/b")"
tr -d '\r' <"$tmp/h" | grep -q '^RateLimit-Policy: "sub";q=10;w=9$' ||
    fail "policy: $(cat "$tmp/h")"
echo "test_limit_change: ok"
