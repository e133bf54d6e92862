#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The binaries as a user meets them: --help, exit codes, clear errors naming the bad value
# (B10, B11), sluice-enqueue's outcomes, the exec handler's exit codes (0 done, 75 retry,
# other failed), the list backend end to end, and a graceful SIGTERM that loses nothing.
set -euo pipefail

bin=${SLUICE_BIN_DIR:?run through ctest}
url=$(cat "${SLUICE_TEST_REDIS_DIR:?}/url")
tmp=$(mktemp -d)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
    rm -rf "$tmp"
}
trap cleanup EXIT
q="cli-$$"
rcli() { redis-cli -u "$url" "$@"; }
fail() { echo "FAIL: $*" >&2; exit 1; }

# expect CODE PATTERN -- command...: exit code and a stderr/stdout line matching PATTERN
expect() {
    local want=$1 pattern=$2 rc=0
    shift 3
    "$@" >"$tmp/out" 2>&1 || rc=$?
    [ "$rc" -eq "$want" ] || fail "$* exited $rc, expected $want: $(cat "$tmp/out")"
    grep -qE -- "$pattern" "$tmp/out" || fail "$*: output lacks /$pattern/: $(cat "$tmp/out")"
}

for b in sluice-enqueue sluice-worker; do
    expect 0 "usage: $b" -- "$bin/$b" --help
    expect 2 "unknown option '--bogus'" -- "$bin/$b" --queue x --bogus
done

# B10: bad queue names are refused before any Redis call (an unreachable URL proves it)
for name in "has space" "a{b}" "a*b" "a:b" "" "$(printf 'x%.0s' $(seq 1 100))"; do
    expect 2 "queue name" -- "$bin/sluice-enqueue" --redis redis://127.0.0.1:1 --queue "$name" p
    expect 2 "queue name" -- "$bin/sluice-worker" --redis redis://127.0.0.1:1 --queue "$name"
done
# B11: malformed URLs, out-of-range numbers, unknown values
expect 2 "port 70000" -- "$bin/sluice-enqueue" --redis redis://127.0.0.1:70000 --queue "$q" p
expect 2 "scheme" -- "$bin/sluice-enqueue" --redis http://127.0.0.1 --queue "$q" p
expect 2 '"-5"|-5' -- "$bin/sluice-enqueue" --redis "$url" --queue "$q" --capacity -5 p
expect 2 '"0" is out of range|0 is out of range' -- "$bin/sluice-worker" --queue "$q" --concurrency 0
expect 2 "sleep:abc" -- "$bin/sluice-worker" --queue "$q" --handler sleep:abc
expect 2 '"tape"' -- "$bin/sluice-worker" --queue "$q" --backend tape
# Redis unavailable: exit 3 with the reason
expect 3 "refused" -- "$bin/sluice-enqueue" --redis redis://127.0.0.1:1 --queue "$q" p

# Outcomes: all admitted -> 0; some rejected -> 1; summary line
expect 0 "admitted=2 rejected=0 depth=2 capacity=3" -- \
    "$bin/sluice-enqueue" --redis "$url" --queue "$q" --capacity 3 a b
expect 1 "admitted=1 rejected=1 depth=3 capacity=3" -- \
    "$bin/sluice-enqueue" --redis "$url" --queue "$q" --capacity 3 c d
printf 'l1\nl2\nl3\n' >"$tmp/lines"
expect 1 "admitted=0 rejected=3" -- \
    "$bin/sluice-enqueue" --redis "$url" --queue "$q" --capacity 3 --batch 2 <"$tmp/lines"
[ "$(rcli XLEN "sluice:{$q}:stream")" = 3 ] || fail "depth is not 3"
# a payload over --max-payload is reported with its line, the others still go in
printf 'ok\n%s\nok2\n' "$(printf 'y%.0s' $(seq 1 40))" >"$tmp/lines"
expect 2 "line 2: payload is 40 bytes; the limit is 32" -- \
    "$bin/sluice-enqueue" --redis "$url" --queue "$q-big" --max-payload 32 <"$tmp/lines"
[ "$(rcli XLEN "sluice:{$q-big}:stream")" = 2 ] || fail "valid lines were not admitted"

# Drain with --max-messages: depth back to 0, stream empty, counters right
expect 0 "processed=3" -- "$bin/sluice-worker" --redis "$url" --queue "$q" --max-messages 3 \
    --log-level warn
[ "$(rcli XLEN "sluice:{$q}:stream")" = 0 ] || fail "stream not empty after draining"
[ "$(rcli HGET "sluice:{$q}:stats" acked)" = 3 ] || fail "acked counter is not 3"

# exec handler: exit 0 done, 75 retry, anything else failed (dead letter)
qe="$q-exec"
"$bin/sluice-enqueue" --redis "$url" --queue "$qe" ok retry fail >/dev/null
cat >"$tmp/h.sh" <<'EOF'
p=$(cat)
case "$p" in ok) exit 0 ;; retry) [ "$SLUICE_DELIVERIES" -ge 2 ] && exit 0; exit 75 ;; *) exit 3 ;; esac
EOF
expect 0 "processed=2 failed=1 retried=1 dead=1" -- \
    "$bin/sluice-worker" --redis "$url" --queue "$qe" --handler "exec:sh $tmp/h.sh" \
    --max-messages 4 --visibility-timeout 500 --retry-backoff 50 --log-level warn
[ "$(rcli XLEN "sluice:{$qe}:dead")" = 1 ] || fail "failed message not dead-lettered"
rcli XRANGE "sluice:{$qe}:dead" - + | grep -q "exec: exited with status 3" || fail "dead reason missing"

# list backend end to end
ql="$q-list"
expect 1 "admitted=2 rejected=1" -- \
    "$bin/sluice-enqueue" --redis "$url" --queue "$ql" --backend list --capacity 2 x y z
expect 0 "processed=2" -- "$bin/sluice-worker" --redis "$url" --queue "$ql" --backend list \
    --max-messages 2 --log-level warn
[ "$(rcli HGET "sluice:{$ql}:meta" list_depth)" = 0 ] || fail "list depth did not return to 0"
[ "$(rcli LLEN "sluice:{$ql}:list")" = 0 ] || fail "list not empty"

# Graceful SIGTERM: in-flight work finishes and is acknowledged; nothing pending, nothing lost
qg="$q-term"
seq 1 200 | "$bin/sluice-enqueue" --redis "$url" --queue "$qg" >/dev/null
"$bin/sluice-worker" --redis "$url" --queue "$qg" --handler sleep:100 --concurrency 20 \
    --log-level warn >"$tmp/w.out" 2>&1 &
wpid=$!
pids+=("$wpid")
for _ in $(seq 1 50); do
    [ "$(rcli HGET "sluice:{$qg}:stats" acked)" != "" ] && break
    sleep 0.1
done
kill -TERM "$wpid"
rc=0
wait "$wpid" || rc=$?
[ "$rc" -eq 0 ] || fail "worker exited $rc after SIGTERM: $(cat "$tmp/w.out")"
pending=$(rcli XPENDING "sluice:{$qg}:stream" workers | head -n 1)
[ "$pending" = 0 ] || fail "$pending entries left pending after a graceful stop"
acked=$(rcli HGET "sluice:{$qg}:stats" acked)
left=$(rcli XLEN "sluice:{$qg}:stream")
[ $((acked + left)) -eq 200 ] || fail "acked $acked + left $left != 200"

for k in "$q" "$q-big" "$qe" "$ql" "$qg"; do
    rcli DEL "sluice:{$k}:stream" "sluice:{$k}:stats" "sluice:{$k}:meta" "sluice:{$k}:dead" \
        "sluice:{$k}:list" "sluice:{$k}:procs" >/dev/null
done
echo "test_cli: ok"
