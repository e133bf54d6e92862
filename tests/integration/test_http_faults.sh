#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# HTTP deliveries across faults (docs/faults.md F33): a worker killed (-9) while it delivers, the
# back end down for five seconds, then back answering slowly (1.2 s a request, longer than the
# workers' visibility timeout: their heartbeats keep the leases), with workers draining 150
# messages into it. Nothing is lost or dead-lettered; a message reaches the back end more than
# once only when a delivery was under way at a kill, and then with the same Idempotency-Key, so
# the back end can drop it.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/http_lib.sh"
q="httpf-$$"
use_queue "$q"
backend_start be
port=$bport
be_pid=$bpid
seq 1 150 | xargs "$bin/sluice-enqueue" --redis "$url" --queue "$q" >/dev/null
worker() { # I: a worker delivering 4 at a time, retrying a refused request up to 50 times
    "$bin/sluice-worker" --redis "$url" --queue "$q" --handler "http://127.0.0.1:$port/sleep/50" \
        --concurrency 4 --visibility-timeout 1000 --retry-backoff 100 --max-deliveries 50 \
        >"$tmp/w$1.out" 2>"$tmp/w$1.log" &
    pids+=("$!")
    wpid[$1]=$!
}
worker 1
worker 2
wait_lines "$tmp/be.log" 30 10
kill -KILL "${wpid[1]}" # four deliveries under way
wait "${wpid[1]}" 2>/dev/null || true
wait_lines "$tmp/be.log" 60 10
kill -KILL "$be_pid" # the back end, mid-answer
wait "$be_pid" 2>/dev/null || true
sleep 5
# the outage did not burn the backlog: the worker paused after refused connections (for 100,
# 200, 400 ... ms) instead of reading every waiting entry and failing it (pending: what the
# workers took: 4 each, and 4 more after each pause; about 90 without the pauses)
pending=$(rcli XPENDING "sluice:{$q}:stream" workers | head -n 1)
echo "pending at the end of the outage: $pending"
[ "$pending" -le 48 ] || fail "the outage burnt the backlog: $pending entries taken and refused"
backend_start be2 --port "$port" --delay 1200 # the same port, slow
worker 3 # a second worker again: it would claim an entry whose lease lapsed during a slow answer
for i in $(seq 1 600); do
    [ "$(rcli XLEN "sluice:{$q}:stream")" = 0 ] && break
    sleep 0.1
done
kill -TERM "${wpid[2]}" "${wpid[3]}"
wait "${wpid[2]}" || fail "worker 2 failed: $(tail -5 "$tmp/w2.log")"
wait "${wpid[3]}" || fail "worker 3 failed: $(tail -5 "$tmp/w3.log")"
[ "$(rcli XLEN "sluice:{$q}:stream")" = 0 ] ||
    fail "not drained: $(rcli XLEN "sluice:{$q}:stream") left: $(tail -3 "$tmp/w2.log") $(cat "$tmp/w2.out") $(cat "$tmp/be2.err")"
[ "$(rcli XLEN "sluice:{$q}:dead")" = 0 ] || fail "dead letters: $(rcli XRANGE "sluice:{$q}:dead" - +)"
errs=$(grep -oE 'http_connect_error=[0-9]+' "$tmp/w2.out" | cut -d= -f2)
timeouts=$(cat "$tmp/w2.out" "$tmp/w3.out" | grep -oE 'http_timeout=[0-9]+' | cut -d= -f2 | paste -sd+ | bc)
echo "connect errors during the outage: $errs"
[ "${errs:-0}" -ge 1 ] || fail "the outage was not seen: $(cat "$tmp/w2.out")"
echo "timeouts while the back end was slow: ${timeouts:-0}"
cat "$tmp/be.log" "$tmp/be2.log" >"$tmp/all.log"
python3 - "$tmp/all.log" <<'PY' || fail "deliveries: see above"
import collections, json, sys
rs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
bodies = {r["body"] for r in rs}
missing = sorted(set(str(i) for i in range(1, 151)) - bodies, key=int)
assert not missing, ("never delivered", missing[:10])
per_key = collections.Counter(r["headers"]["idempotency-key"] for r in rs)
per_body = collections.Counter(r["body"] for r in rs)
dups = [k for k, n in per_key.items() if n > 1]
assert len(per_key) == 150, ("keys", len(per_key))  # one key per message, on every delivery
for k in dups:
    assert len({r["body"] for r in rs if r["headers"]["idempotency-key"] == k}) == 1
# under way at a kill: 4 in the killed worker, at most 8 in the back end (2 workers x 4)
assert len(dups) <= 12, ("duplicates", len(dups))
print("ok: 150 of 150 delivered across a worker kill -9, a 5 s back end outage and a slow "
      "back end (1.2 s an answer, visibility timeout 1 s); "
      "%d repeated, each with its Idempotency-Key (%d requests)" % (len(dups), len(rs)))
PY
