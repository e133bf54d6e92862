#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# docs/faults.md F23: a handler's child process inherits no Redis socket of the worker (every
# socket the libraries open is close-on-exec), so it cannot write into the worker's
# connections, keep a dead worker's blocking read open, or use its authenticated session.
. "$(dirname "$0")/lib.sh"
q="fds-$$"
read -ra qk <<<"$(queue_keys "$q")"
keys+=("${qk[@]}")

"$bin/sluice-enqueue" --redis "$url" --queue "$q" one two >/dev/null
# the handler records the descriptors it holds (readlink of each /proc/self/fd entry)
cat >"$tmp/handler.sh" <<HANDLER
#!/bin/sh
cat >/dev/null
for f in /proc/\$\$/fd/*; do printf '%s %s\n' "\$f" "\$(readlink "\$f")"; done >"$tmp/fds.\$\$"
HANDLER
chmod +x "$tmp/handler.sh"
timeout 30 "$bin/sluice-worker" --redis "$url" --queue "$q" --handler "exec:$tmp/handler.sh" \
    --max-messages 2 --metrics 127.0.0.1:0 --log-level warn 2>"$tmp/worker.log" ||
    fail "worker failed: $(cat "$tmp/worker.log")"
n=$(find "$tmp" -name 'fds.*' | wc -l)
[ "$n" -eq 2 ] || fail "expected 2 handler runs, found $n"
# stdin, stdout and stderr are the handler's own (stdin is the payload pipe); nothing else
if grep -hvE '/fd/[012] ' "$tmp"/fds.* | grep 'socket:'; then
    fail "an exec handler inherited the sockets above"
fi
echo "ok: handlers held $(cat "$tmp"/fds.* | wc -l) descriptors in all, no socket"
