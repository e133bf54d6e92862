#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# sluice-admin's output is honest about bytes: UTF-8 text in --json as it is, other bytes as
# {"base64": ...}; dead show --json carries tenant and headers; consumer and reason fields
# cannot put terminal escapes on the screen; an exec handler's dead letter says how the command
# ended (exit status or signal).
. "$(dirname "$0")/lib.sh"
q="admout-$$"
read -ra qk <<<"$(queue_keys "$q")"
keys+=("${qk[@]}")

"$bin/sluice-enqueue" --redis "$url" --queue "$q" --tenant "tén" --header "trace=ü1" "é" \
    >/dev/null
printf 'exit3\n' | "$bin/sluice-enqueue" --redis "$url" --queue "$q" >/dev/null
printf '\xff\xfeok\n' | "$bin/sluice-enqueue" --redis "$url" --queue "$q" >/dev/null
printf 'signal\n' | "$bin/sluice-enqueue" --redis "$url" --queue "$q" >/dev/null
handler='exec:p=$(cat); case "$p" in signal) kill -9 $$;; exit3) exit 3;; *) exit 1;; esac'
"$bin/sluice-worker" --redis "$url" --queue "$q" --handler "$handler" --max-deliveries 1 \
    --concurrency 1 --max-messages 4 --log-level error ||
    fail "worker failed"
[ "$(rcli XLEN "sluice:{$q}:dead")" = 4 ] || fail "expected 4 dead letters"

"$bin/sluice-admin" --redis "$url" dead list "$q" --json >"$tmp/list.json"
grep -q '"payload":"é"' "$tmp/list.json" || fail "UTF-8 payload mangled: $(cat "$tmp/list.json")"
grep -q '"tenant":"tén","headers":{"trace":"ü1"}' "$tmp/list.json" ||
    fail "tenant/headers missing: $(cat "$tmp/list.json")"
grep -q '"payload":{"base64":"//5vaw=="}' "$tmp/list.json" ||
    fail "non-UTF-8 payload not base64: $(cat "$tmp/list.json")"
grep -q '"reason":"exec: exited with status 3"' "$tmp/list.json" ||
    fail "exit status not in the reason: $(cat "$tmp/list.json")"
grep -q '"reason":"exec: killed by signal 9 (Killed)"' "$tmp/list.json" ||
    fail "signal not in the reason: $(cat "$tmp/list.json")"
python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$tmp/list.json" ||
    fail "dead list --json is not JSON"
first=$(rcli XRANGE "sluice:{$q}:dead" - + COUNT 1 | head -n 1)
"$bin/sluice-admin" --redis "$url" dead show "$q" "$first" --json >"$tmp/show.json"
grep -q '"tenant":"tén","headers":{"trace":"ü1"}' "$tmp/show.json" ||
    fail "dead show --json lacks tenant/headers: $(cat "$tmp/show.json")"

# escapes written into a dead letter by someone else never reach the terminal
rcli XADD "sluice:{$q}:dead" '*' id 1-0 m "" deliveries 1 consumer "$(printf '\033[31mred')" \
    reason "$(printf '\033[2Jgone')" >/dev/null
"$bin/sluice-admin" --redis "$url" dead list "$q" >"$tmp/list.txt"
if grep -q "$(printf '\033')" "$tmp/list.txt"; then
    fail "dead list printed an escape sequence"
fi
last=$(rcli XREVRANGE "sluice:{$q}:dead" + - COUNT 1 | head -n 1)
"$bin/sluice-admin" --redis "$url" dead show "$q" "$last" >"$tmp/show.txt"
if grep -q "$(printf '\033')" "$tmp/show.txt"; then
    fail "dead show printed an escape sequence"
fi
echo "ok: UTF-8 as is, other bytes base64, tenant and headers, exit status and signal, no escapes"
