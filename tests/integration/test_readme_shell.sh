#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The README's "From the shell" example runs as written (on a queue of its own, the worker told
# to stop after the 1000 messages): the two payloads are admitted, `seq 1 100000` fills the
# bucket and is refused beyond it, the process.sh it shows handles every message.
. "$(dirname "$0")/lib.sh"
q="readme-$$"
read -ra qk <<<"$(queue_keys "$q")"
keys+=("${qk[@]}")
readme=${SLUICE_SOURCE_DIR:?}/README.md

# the first sh block after the heading
awk '/^### From the shell/ { on = 1 } on && /^```sh/ { inside = 1; next }
     inside && /^```/ { exit } inside { print }' "$readme" >"$tmp/block.sh"
grep -q 'sluice-worker' "$tmp/block.sh" || fail "no shell block under From the shell"
sed -i -e "s#^export SLUICE_REDIS_URL=.*#export SLUICE_REDIS_URL=$url#" \
    -e "s/\bjobs\b/$q/g" \
    -e 's/^\(sluice-worker .*--concurrency 8\)/\1 --max-messages 1000 --log-level warn/' \
    "$tmp/block.sh"
grep -q -- '--max-messages 1000' "$tmp/block.sh" || fail "the worker line changed: $(cat "$tmp/block.sh")"
mkdir "$tmp/run"
(cd "$tmp/run" && PATH="$bin:$PATH" timeout 60 bash "$tmp/block.sh") >"$tmp/out" 2>&1 || true
grep -q "^admitted=2 rejected=0 depth=2 capacity=1000$" "$tmp/out" || fail "hello world: $(cat "$tmp/out")"
grep -q "^admitted=998 rejected=99002 depth=1000 capacity=1000$" "$tmp/out" ||
    fail "seq 1 100000: $(cat "$tmp/out")"
grep -q "^processed=1000 failed=0 retried=0 dead=0" "$tmp/out" || fail "worker: $(cat "$tmp/out")"
[ "$(wc -l <"$tmp/run/processed.log")" = 1000 ] || fail "process.sh logged $(wc -l <"$tmp/run/processed.log")"
grep -q "delivery 1: hello$" "$tmp/run/processed.log" || fail "processed.log: $(head -n 3 "$tmp/run/processed.log")"
echo "test_readme_shell: ok"
