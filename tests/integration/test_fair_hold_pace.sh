#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A fair queue held by a rate with no burst keeps that rate: under `drain-tenant 1/100ms
# --algorithm gate` (one entry every 100 ms, 10 a second) one tenant's backlog drains at about
# 10 a second, as a plain queue's `drain` gate does. Each hold is one interval; a worker whose
# hold ends late loses what a gate cannot give back later (gcra and log have a burst that makes
# up for it). Redis at its default hz 10 (a blocked command's timeout is checked 10 times a
# second): a wait that ends on a BLPOP timeout ends up to 100 ms late.
. "$(dirname "$0")/lib.sh"
q="fhold-$$"
A() { "$bin/sluice-admin" --redis "$url" "$@"; }
hz=$(rcli CONFIG GET hz | sed -n 2p)
trap 'rcli CONFIG SET hz "$hz" >/dev/null 2>&1 || true; A purge "$q" --yes >/dev/null 2>&1 || true
      lib_cleanup' EXIT
rcli CONFIG SET hz 10 >/dev/null
acked() { rcli HGET "sluice:{$q}:stats" acked; }

run 0 'fair .*: on' A fair "$q" on
seq 1 300 | "$bin/sluice-enqueue" --redis "$url" --queue "$q" --tenant T >"$tmp/e" 2>&1 ||
    fail "enqueue: $(cat "$tmp/e")"
run 0 'drain-tenant gate' A limit "$q" set pace drain-tenant 1/100ms --algorithm gate
"$bin/sluice-worker" --redis "$url" --queue "$q" -c 8 --log-level warn >"$tmp/w" 2>&1 &
pids+=("$!")
sleep 1
a=$(acked)
sleep 5
b=$(acked)
got=$((b - a))
# 50 in 5 s at the gate's rate; a loaded machine may lose a few, not a third
[ "$got" -ge 38 ] || fail "drain-tenant 1/100ms (gate): $got processed in 5 s, expected about 50"
[ "$got" -le 56 ] || fail "drain-tenant 1/100ms (gate): $got processed in 5 s, more than the rate"
echo "test_fair_hold_pace: drain-tenant 1/100ms (gate) on a fair queue: $got processed in 5 s (50 at the rate)"
