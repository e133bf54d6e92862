#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# sluice-admin peek / inspect: entries decoded (admitted time, state with the consumer holding it
# and its deliveries, tenant, headers, the payload cut at --bytes and escaped: a terminal escape
# never reaches the screen, JSON escapes it), on a stream queue, the lanes of a fair queue and
# the list backend (waiting, and in flight in a processing list); an unknown id exits 1, a bad
# one 2.
. "$(dirname "$0")/lib.sh"
q="inspect-$$"
A() { "$bin/sluice-admin" --redis "$url" "$@"; }
E() { "$bin/sluice-enqueue" --redis "$url" "$@"; }
purge() { A purge "$1" --yes >/dev/null 2>&1 || true; }
trap 'for x in s f l; do purge "$q-$x"; done; lib_cleanup' EXIT
esc=$(printf '\033')

# ---- usage ----
run 2 'usage: inspect QUEUE ID' A inspect "$q-s"
run 2 '"nope" is not an entry id' A inspect "$q-s" nope
run 2 "'--tenant' does not apply to 'stats'" A stats "$q-s" --tenant A
run 2 '--count: 5000 is out of range' A peek "$q-s" --count 5000
run 2 '"0" is out of range|0 is out of range' A peek "$q-s" --bytes 0

# ---- a stream queue: one entry in flight, two waiting ----
s="sluice:{$q-s}:stream"
E --queue "$q-s" --tenant acme --header request-id=r1 "red ${esc}[31m alert" second third >/dev/null
rcli XGROUP CREATE "$s" workers 0 >/dev/null
rcli XREADGROUP GROUP workers holder COUNT 1 STREAMS "$s" '>' >/dev/null
first=$(rcli XRANGE "$s" - + COUNT 1 | head -1)
run 0 'state +in flight: consumer holder, idle [0-9.]+m?s, deliveries 1' A peek "$q-s"
grep -qE 'payload +15 bytes: red \\x1b\[31m alert' "$tmp/out" || fail "escaping: $(cat "$tmp/out")"
! grep -q "$esc" "$tmp/out" || fail "a terminal escape reached the output"
[ "$(grep -cE '^entry ' "$tmp/out")" = 3 ] && [ "$(grep -cE 'state +waiting' "$tmp/out")" = 2 ] ||
    fail "peek: $(cat "$tmp/out")"
grep -qE 'header +request-id: r1' "$tmp/out" && grep -qE 'tenant +acme' "$tmp/out" ||
    fail "peek envelope: $(cat "$tmp/out")"
A peek "$q-s" --count 1 --bytes 3 --json >"$tmp/j"
python3 - "$tmp/j" "$first" <<'PY' || fail "peek --json: $(cat "$tmp/j")"
import json, sys
j = json.load(open(sys.argv[1])); e = j["entries"]
assert len(e) == 1 and e[0]["id"] == sys.argv[2] and e[0]["state"] == "in_flight"
assert e[0]["consumer"] == "holder" and e[0]["deliveries"] == 1 and e[0]["idle_ms"] >= 0
assert e[0]["payload"] == "red" and e[0]["payload_bytes"] == 15 and e[0]["payload_truncated"]
assert e[0]["tenant"] == "acme" and e[0]["headers"] == {"request-id": "r1"}
assert e[0]["admitted_ms"] == int(sys.argv[2].split("-")[0])
PY
run 0 "^entry $first" A inspect "$q-s" "$first" --bytes 5
grep -qE 'payload +15 bytes: red \\x1b\.\.\.' "$tmp/out" || fail "inspect --bytes: $(cat "$tmp/out")"
run 1 "no entry 1-1 in queue $q-s" A inspect "$q-s" 1-1
A inspect "$q-s" "$first" --json | grep -qE '"payload":"red \\u001b\[31m alert"' ||
    fail "inspect --json escaping"

# ---- a fair queue: inspect finds an entry in its lane; peek --tenant reads the lane ----
A fair "$q-f" on >/dev/null
E --queue "$q-f" --tenant A a1 a2 >/dev/null
E --queue "$q-f" n1 >/dev/null
lane_id=$(rcli XRANGE "sluice:{$q-f}:lane:A" - + COUNT 1 | head -1)
run 0 "^entry $lane_id \(lane A\)" A inspect "$q-f" "$lane_id"
run 0 "payload +2 bytes: a2" A peek "$q-f" --tenant A
run 0 "1 tenant lane holds entries besides" A peek "$q-f"
grep -qE 'payload +2 bytes: n1' "$tmp/out" || fail "peek of the stream lane: $(cat "$tmp/out")"

# ---- the list backend: waiting, and in flight in a processing list ----
E --queue "$q-l" --backend list l1 l2 l3 >/dev/null
rcli LMOVE "sluice:{$q-l}:list" "sluice:{$q-l}:proc:w1" RIGHT LEFT >/dev/null
rcli SADD "sluice:{$q-l}:procs" "sluice:{$q-l}:proc:w1" >/dev/null
run 0 'state +in flight: consumer w1' A inspect "$q-l" 1
run 0 'payload +2 bytes: l3' A inspect "$q-l" 3
run 1 "no entry 9 in queue $q-l" A inspect "$q-l" 9
run 0 '^entry 2' A peek "$q-l" --count 1
run 2 'the list backend has no tenant lanes' A peek "$q-l" --tenant A
echo ok
