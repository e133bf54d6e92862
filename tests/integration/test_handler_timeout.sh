#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# --handler-timeout: an exec: command that ignores SIGTERM and hangs is killed with its whole
# process group (SIGTERM, then SIGKILL after the grace), its entry is retried (not acked, not
# dead-lettered, not heartbeated forever) and the second delivery succeeds; no process of the
# first command's group is left.
. "$(dirname "$0")/lib.sh"
q="htimeout-$$"
read -ra qk <<<"$(queue_keys "$q")"
keys+=("${qk[@]}")

"$bin/sluice-enqueue" --redis "$url" --queue "$q" hang-once >/dev/null
# first delivery: ignore SIGTERM and hang (a child in the same group); later ones succeed
cat >"$tmp/handler.sh" <<HANDLER
#!/bin/sh
cat >/dev/null
echo "\$(ps -o pgid= -p \$\$ | tr -d ' ') \$SLUICE_DELIVERIES" >>"$tmp/runs"
if [ "\$SLUICE_DELIVERIES" = 1 ]; then
    trap '' TERM
    sleep 1000 &
    echo \$! >"$tmp/sleep.pid"
    wait
fi
exit 0
HANDLER
chmod +x "$tmp/handler.sh"
start=$(date +%s)
timeout 40 "$bin/sluice-worker" --redis "$url" --queue "$q" --handler "exec:$tmp/handler.sh" \
    --handler-timeout 1000 --visibility-timeout 2000 --retry-backoff 100 --max-messages 2 \
    2>"$tmp/worker.log" || fail "worker failed: $(cat "$tmp/worker.log")"
elapsed=$(($(date +%s) - start))
grep -q 'event=handler_timeout' "$tmp/worker.log" || fail "no timeout logged: $(cat "$tmp/worker.log")"
[ "$(wc -l <"$tmp/runs")" -eq 2 ] || fail "expected 2 deliveries: $(cat "$tmp/runs")"
read -r pgid d1 < <(sed -n 1p "$tmp/runs")
d2=$(sed -n 2p "$tmp/runs" | cut -d' ' -f2)
[ "$d1" = 1 ] && [ "$d2" = 2 ] || fail "deliveries $d1, $d2; expected 1, 2"
sleeper=$(cat "$tmp/sleep.pid")
# the command ran in a process group of its own: nothing of it is left
[ "$pgid" != "$(ps -o pgid= -p $$ | tr -d ' ')" ] || fail "the command ran in the test's group"
# killed processes may take a moment to be reaped (a zombie counts as gone)
alive() { [ -n "$(ps -o stat= -p "$1" 2>/dev/null | grep -v Z)" ]; }
for _ in $(seq 1 30); do alive "$sleeper" || break; sleep 0.1; done
if alive "$sleeper"; then
    kill -KILL "$sleeper" 2>/dev/null || true
    fail "process $sleeper of the timed-out command survived"
fi
left=$(ps -o pid=,stat= -g "$pgid" 2>/dev/null | grep -v Z || true)
if [ -n "$left" ]; then
    kill -KILL -- "-$pgid" 2>/dev/null || true
    fail "process group $pgid still has: $left"
fi
[ "$(rcli XLEN "sluice:{$q}:dead")" -eq 0 ] || fail "the entry was dead-lettered"
[ "$(rcli XLEN "sluice:{$q}:stream")" -eq 0 ] || fail "the entry is still in the stream"
echo "ok: hung command killed with its group, entry retried and done (${elapsed}s)"
# bad values name themselves and exit 2
run 2 'handler-timeout.*-5' "$bin/sluice-worker" --queue "$q" --handler-timeout -5
run 2 'auto:9-3' "$bin/sluice-worker" --queue "$q" --concurrency auto:9-3
run 2 'autox' "$bin/sluice-worker" --queue "$q" --concurrency autox
