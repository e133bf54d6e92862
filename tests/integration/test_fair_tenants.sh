#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Fair queues and the tenants that come and go: a drained lane leaves no per-tenant state (one-off
# tenants cost nothing once served) and `sluice-admin fair Q` lists many lanes correctly; a
# tenant is a byte string: one with a NUL byte is refused by sluice_admit2, and a worker settles
# an entry of such a lane by its whole name; a weight of a tenant name of 600 bytes is kept
# whole; the admin tools say the plain thing before a worker made the group and on a fair queue.
. "$(dirname "$0")/lib.sh"
q="fairt-$$"
A() { "$bin/sluice-admin" --redis "$url" "$@"; }
purge() { A purge "$1" --yes >/dev/null 2>&1 || true; }
fair_keys() { # every per-queue key of fair queue $1 a test here can leave
    local p="sluice:{$1}:"
    echo "${p}lanes ${p}lwait ${p}ring ${p}deficit ${p}weights ${p}served ${p}wake ${p}limits"
}
trap 'for x in -s -n -w -l; do purge "$q$x"; rcli DEL $(fair_keys "$q$x") >/dev/null 2>&1 || true; done
      lib_cleanup' EXIT
# resp ARGS...: one command over RESP, arguments as Python bytes literals (b'a\x00b'); prints
# the reply (errors too) as Python sees it
resp() {
    python3 - "$url" "$@" <<'EOF'
import ast, socket, sys
host, port = sys.argv[1].split("//")[1].rsplit(":", 1)
s = socket.create_connection((host, int(port)), timeout=10)
args = [ast.literal_eval(a) for a in sys.argv[2:]]
s.sendall(b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args))
f = s.makefile("rb")
def read():
    line = f.readline()
    t, rest = line[:1], line[1:-2]
    if t == b":":
        return int(rest)
    if t in (b"+", b"-"):
        return rest.decode()
    if t == b"$":
        return None if rest == b"-1" else f.read(int(rest) + 2)[:-2]
    return [read() for _ in range(int(rest))]
print(read())
EOF
}
envelope() { # a msgpack envelope {"v": 1, "p": payload} as a Python bytes literal
    printf "b'\\\\x82\\\\xa1v\\\\x01\\\\xa1p\\\\xc4\\\\x%02x%s'" "${#1}" "$1"
}
worker=("$bin/sluice-worker" --redis "$url" --log-level error)

# ---- one-off tenants: 300 lanes, listed right, drained to nothing per tenant ----
s="$q-s"
k="sluice:{$s}:"
A fair "$s" on --weight u-7=5 >/dev/null
args=("b'FCALL'" "b'sluice_admit2'" "b'3'" "b'${k}stream'" "b'${k}meta'" "b'${k}stats'"
    "b'100000'" "b'0'" "b'3'")
for i in $(seq 1 300); do args+=("b'u-$i'" "b''" "$(envelope "p$i")"); done
resp "${args[@]}" >"$tmp/admit"
grep -q "^\[300, 300," "$tmp/admit" || fail "admit2 of 300 tenants: $(head -c 300 "$tmp/admit")"
A fair "$s" --json --limit 1000 >"$tmp/show"
python3 - "$tmp/show" <<'EOF' || fail "fair listing: $(head -c 400 "$tmp/show")"
import json, sys
d = json.load(open(sys.argv[1]))
lanes = {l["tenant"]: l for l in d["lanes"]}
assert d["lanes_holding"] == 300 and len(lanes) == 301, (d["lanes_holding"], len(lanes))
for i in range(1, 301):
    l = lanes["u-%d" % i]
    assert (l["depth"], l["waiting"], l["served"]) == (1, 1, 0), l
    assert l["weight"] == (5 if i == 7 else 1), l
EOF
timeout 60 "${worker[@]}" --queue "$s" --concurrency 50 --max-messages 300 >/dev/null ||
    fail "the worker did not drain 300 entries"
for h in lanes lwait served deficit; do
    [ "$(rcli HLEN "${k}$h")" = 0 ] || fail "drained: $h keeps $(rcli HLEN "${k}$h") fields"
done
[ "$(rcli HGET "${k}weights" u-7)" = 5 ] || fail "a weight went with its lane"
[ "$(rcli HGET "${k}stats" acked)" = 300 ] || fail "acked $(rcli HGET "${k}stats" acked) of 300"

# ---- a tenant is a byte string ----
n="$q-n"
k="sluice:{$n}:"
A fair "$n" on >/dev/null
resp "b'FCALL'" "b'sluice_admit2'" "b'3'" "b'${k}stream'" "b'${k}meta'" "b'${k}stats'" \
    "b'100'" "b'0'" "b'3'" "b'ok'" "b''" "$(envelope a)" "b'a\\x00b'" "b''" "$(envelope b)" >"$tmp/nul"
grep -q 'SLUICECONFIG tenant "a\\000b" of message 2 has a NUL byte' "$tmp/nul" ||
    fail "a tenant with a NUL byte: $(cat "$tmp/nul")"
[ "$(rcli EXISTS "${k}lane:ok")" = 0 ] || fail "a refused call admitted part of its batch"
# a lane with a NUL byte in its name (as one admitted before that check): settled by its name
resp "b'FCALL'" "b'sluice_admit2'" "b'3'" "b'${k}stream'" "b'${k}meta'" "b'${k}stats'" \
    "b'100'" "b'0'" "b'3'" "b'x'" "b''" "$(envelope nul-lane)" >/dev/null
resp "b'RENAME'" "b'${k}lane:x'" "b'${k}lane:a\\x00b'" >/dev/null
for h in lanes lwait; do
    resp "b'HSET'" "b'${k}$h'" "b'a\\x00b'" "b'1'" >/dev/null
    rcli HDEL "${k}$h" x >/dev/null
done
rcli DEL "${k}ring" >/dev/null
resp "b'RPUSH'" "b'${k}ring'" "b'a\\x00b'" >/dev/null
timeout 30 "${worker[@]}" --queue "$n" --max-messages 1 --record "$tmp/rec" >/dev/null ||
    fail "the entry of lane a\\0b was not handled"
grep -q nul-lane "$tmp/rec" || fail "handled: $(cat "$tmp/rec")"
[ "$(rcli HGET "${k}stats" acked)" = 1 ] && [ "$(rcli HGET "${k}meta" lane_depth)" = 0 ] &&
    [ "$(rcli HLEN "${k}lanes")" = 0 ] ||
    fail "the entry of lane a\\0b was not settled: acked $(rcli HGET "${k}stats" acked)," \
        "lane_depth $(rcli HGET "${k}meta" lane_depth)"

# ---- a weight's tenant name of 600 bytes is kept whole ----
w="$q-w"
long=$(printf 't%.0s' $(seq 1 600))
run 0 "^weight of $long on $w: 3\$" A fair "$w" on --weight "$long=3"
[ "$(rcli HGET "sluice:{$w}:weights" "$long")" = 3 ] || fail "the 600-byte name was not kept"

# ---- the plain thing: before a worker made the group, and on a fair queue ----
l="$q-l"
run 0 'fair off, 0 tenant lanes' A fair "$l"
grep -q NOGROUP "$tmp/out" && fail "fair before the group: $(cat "$tmp/out")"
run 0 'applies to fair queues' A limit "$l" set dt drain-tenant 5/1s
A fair "$l" on >/dev/null
run 0 'limit it on' A limit "$l" set it inflight-tenant 2
grep -q 'applies to fair queues' "$tmp/out" && fail "note on a fair queue: $(cat "$tmp/out")"
echo "ok: drained one-off tenants leave no state; listing of 300 lanes; NUL tenants refused," \
    "a NUL lane settled; a 600-byte weight name; no NOGROUP, no note on a fair queue"
