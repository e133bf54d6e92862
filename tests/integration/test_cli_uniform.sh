#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Every binary speaks alike: --version, an EXAMPLES section in --help, bad options reported in
# one style (the binary's name, not its path; no getopt wording), a negative number named as a
# bad value rather than an unknown option, and a queue that does not exist is said to not exist.
. "$(dirname "$0")/lib.sh"

for b in sluice-enqueue sluice-worker sluice-admin sluice-gateway sluice-bench; do
    run 0 "^$b [0-9]+\.[0-9]+\.[0-9]+ \(data model 1" "$bin/$b" --version
    run 0 "^EXAMPLES" "$bin/$b" --help
done
for b in sluice-enqueue sluice-worker sluice-admin sluice-gateway; do
    run 2 "^$b: unknown option '--bogus'" "$bin/$b" --bogus
    grep -q "$bin" "$tmp/out" && fail "$b names itself by its path: $(cat "$tmp/out")"
    grep -q "unrecognized" "$tmp/out" && fail "$b prints getopt's wording: $(cat "$tmp/out")"
done
run 2 "invalid value '-3'" "$bin/sluice-admin" --redis "$url" capacity jobs -3
run 1 "queue nosuchqueue-$$ does not exist" "$bin/sluice-admin" --redis "$url" stats "nosuchqueue-$$"
# per-command help: that command's lines and the options it takes, nothing else
run 0 "dead list QUEUE" "$bin/sluice-admin" dead list --help
grep -q -- "--limit N" "$tmp/out" || fail "dead --help lacks --limit: $(cat "$tmp/out")"
if grep -qE -- "stats QUEUE|--sample" "$tmp/out"; then
    fail "dead --help shows other commands' lines: $(cat "$tmp/out")"
fi
run 0 "--sample MS" "$bin/sluice-admin" stats --help
echo "ok: --version, EXAMPLES, one error style, negative values, missing queues"
