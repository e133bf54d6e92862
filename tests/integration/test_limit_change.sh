#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A queue's limits changed as operators change them, and limits of both kinds side by side:
# a limit set again with another algorithm (or deleted and set) never trips an admission on the
# old state, nor does a key of the wrong type, and a batch mixing tenants is never failed by
# one of them; the standalone limiter's keys never meet a queue's limit state, whatever the
# namespace and key.
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

echo "test_limit_change: ok"
