#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# sluice-gateway at the edges of HTTP (docs/faults.md B18): small valid requests arriving
# together with many large bodies never fail because of them (the coalesced Redis call is split
# by bytes; 503 + Retry-After when Redis cannot take more, never 500); pipelined requests
# followed by a half-close are all answered and admitted; invalid UTF-8 in a header that goes
# into the envelope is a 400 naming the header; the first 429, before any drain rate is known,
# says the Retry-After ceiling, not 1.
set -euo pipefail

bin=${SLUICE_BIN_DIR:?run through ctest}
url=$(cat "${SLUICE_TEST_REDIS_DIR:?}/url")
tmp=$(mktemp -d)
pids=()
q="gwe-$$"
full="gwe-full-$$"
cleanup() {
    for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
    for x in "$q" "$full"; do
        redis-cli -u "$url" DEL "sluice:{$x}:stream" "sluice:{$x}:meta" "sluice:{$x}:stats" \
            >/dev/null 2>&1 || true
    done
    rm -rf "$tmp"
}
trap cleanup EXIT
rcli() { redis-cli -u "$url" "$@"; }
fail() { echo "FAIL: $*" >&2; exit 1; }

"$bin/sluice-gateway" --listen 127.0.0.1:0 --redis "$url" --queue "$q:1000000" \
    --queue "$full:2" --retry-after-max 45 --max-body 2m 2>"$tmp/gw.log" &
pids+=($!)
port=""
for _ in $(seq 1 100); do
    port=$(grep -oE 'addr=127\.0\.0\.1:[0-9]+' "$tmp/gw.log" | head -n 1 | cut -d: -f2) || true
    [ -n "$port" ] && break
    sleep 0.05
done
[ -n "$port" ] || fail "gateway did not start: $(cat "$tmp/gw.log")"

python3 - "$port" "$q" "$full" >"$tmp/py.out" <<'PY'
import socket, sys, threading

port, q, full = int(sys.argv[1]), sys.argv[2], sys.argv[3]

def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)

def post(path, body, extra=b""):
    return (b"POST " + path.encode() + b" HTTP/1.1\r\nHost: x\r\n" + extra +
            b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)

def responses(sock, want, timeout=20):
    """Reads until `want` responses (status, headers, body) or EOF."""
    sock.settimeout(timeout)
    buf, out = b"", []
    while len(out) < want:
        while b"\r\n\r\n" not in buf:
            chunk = sock.recv(65536)
            if not chunk:
                return out
            buf += chunk
        head, buf = buf.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        hdrs = {l.split(":", 1)[0].lower(): l.split(":", 1)[1].strip() for l in lines[1:]}
        n = int(hdrs.get("content-length", "0"))
        while len(buf) < n:
            chunk = sock.recv(65536)
            if not chunk:
                break
            buf += chunk
        out.append((status, hdrs, buf[:n]))
        buf = buf[n:]
    return out

path = "/v1/queues/%s/messages" % q

# 1. pipelined requests, then a half-close at once: every one answered and admitted (three
# rounds: the half-close must meet the gateway at different points of its work)
for _ in range(3):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"".join(post(path, b"pipelined-%d" % i) for i in range(5)))
    s.shutdown(socket.SHUT_WR)
    got = responses(s, 5)
    s.close()
    codes = [r[0] for r in got]
    if codes != [202] * 5:
        fail("5 pipelined POSTs then a half-close: answers %s" % codes)

# 2. invalid UTF-8 in a header carried into the envelope: 400 naming it
for name in (b"X-Request-Id", b"Content-Type"):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(post(path, b"x", name + b": \xff\xfe\r\n"))
    got = responses(s, 1)
    s.close()
    if not got or got[0][0] != 400 or name.decode().encode() not in got[0][2]:
        fail("invalid UTF-8 in %s: %s" % (name.decode(), got[:1]))

# 3. the first 429 of a queue nothing has drained yet: the ceiling (45)
s = socket.create_connection(("127.0.0.1", port))
fpath = "/v1/queues/%s/messages" % full
s.sendall(b"".join(post(fpath, b"f") for _ in range(3)))
got = responses(s, 3)
s.close()
if [r[0] for r in got] != [202, 202, 429] or got[2][1].get("retry-after") != "45":
    fail("first 429: %s" % [(r[0], r[1].get("retry-after")) for r in got])

# 4. 80 connections with 1 MiB bodies and 10 with 5-byte bodies, last bytes sent together
big, small = 80, 10
socks, pending = [], []
for i in range(big + small):
    body = (b"%07d" % i) * (1 << 20 // 7) if i < big else b"small"
    req = post(path, body)
    c = socket.create_connection(("127.0.0.1", port))
    c.sendall(req[:-1])          # all but the last byte
    socks.append(c)
    pending.append(req[-1:])
for c, last in zip(socks, pending):
    c.sendall(last)
results = [None] * len(socks)
def read(i):
    r = responses(socks[i], 1, timeout=30)
    results[i] = r[0] if r else None
threads = [threading.Thread(target=read, args=(i,)) for i in range(len(socks))]
for t in threads:
    t.start()
for t in threads:
    t.join()
for c in socks:
    c.close()
if any(r is None for r in results):
    fail("%d requests got no answer" % sum(r is None for r in results))
codes = [r[0] for r in results]
if 500 in codes:
    fail("a request got 500 next to large bodies: %s" % sorted(set(codes)))
for r in results:
    if r[0] == 503 and "retry-after" not in r[1]:
        fail("503 without Retry-After")
    if r[0] not in (202, 503):
        fail("unexpected answer %d: %r" % (r[0], r[2][:200]))
small_codes = codes[big:]
print("ok: pipelined+half-close 5/5, bad UTF-8 400, first 429 Retry-After 45, "
      "big/small burst: %d x 202, %d x 503 (small ones: %s)" %
      (codes.count(202), codes.count(503), sorted(set(small_codes))))
print("admitted=%d" % codes.count(202))
PY
cat "$tmp/py.out"
admitted=$(sed -n 's/^admitted=//p' "$tmp/py.out")
depth=$(rcli XLEN "sluice:{$q}:stream")
[ "$depth" -eq $((admitted + 15)) ] ||
    fail "202 answers ($admitted + 15 pipelined) disagree with the stream's length $depth"
