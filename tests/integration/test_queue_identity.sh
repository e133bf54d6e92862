#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# docs/faults.md B19, one queue = one backend and one consumer group: a list producer on a
# stream queue (or the reverse) is refused rather than splitting the queue; a worker of a
# second group is refused (each group would delete what it acknowledged, so who sees an entry
# would be timing); group and consumer names are checked like the queue name; a worker is
# visible as a consumer as soon as it starts, before its first read.
. "$(dirname "$0")/lib.sh"
q="ident-$$"
read -ra qk <<<"$(queue_keys "$q")"
keys+=("${qk[@]}")

run 0 "admitted=2" "$bin/sluice-enqueue" --redis "$url" --queue "$q" a b
run 3 "is a stream queue" "$bin/sluice-enqueue" --redis "$url" --queue "$q" --backend list c
[ "$(rcli LLEN "sluice:{$q}:list")" = 0 ] || fail "the list producer split the queue"
[ "$(rcli HGET "sluice:{$q}:meta" backend)" = stream ] || fail "backend not recorded"

for g in "bad group" "" "$(printf 'g%.0s' $(seq 1 130))"; do
    run 2 "group name" "$bin/sluice-worker" --redis "$url" --queue "$q" --group "$g"
done

# a worker registers itself before it reads anything
"$bin/sluice-worker" --redis "$url" --queue "$q" --group first --consumer early \
    --handler sleep:0 --concurrency 1 --max-messages 2 --log-level error &
pids+=($!)
wait "${pids[-1]}" || fail "worker of group first failed"
"$bin/sluice-worker" --redis "$url" --queue "$q" --group first --consumer idle \
    --handler sleep:0 --log-level error &
idle=$!
pids+=("$idle")
for _ in $(seq 1 100); do
    rcli XINFO CONSUMERS "sluice:{$q}:stream" first | grep -qx idle && break
    sleep 0.05
done
rcli XINFO CONSUMERS "sluice:{$q}:stream" first | grep -qx idle ||
    fail "a started worker is not a visible consumer before its first read"
kill -TERM "$idle"
wait "$idle" || fail "idle worker exited $?"

# a second group is refused, with the group in force named
run 3 'drained by group "first"' timeout 20 "$bin/sluice-worker" --redis "$url" --queue "$q" \
    --group second --handler sleep:0
[ "$(rcli XINFO GROUPS "sluice:{$q}:stream" | grep -c '^second$' || true)" = 0 ] ||
    fail "the second group was created"
echo "ok: backend and group recorded and enforced, names checked, consumers visible at start"
