#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Every binary speaks alike: --version, an EXAMPLES section in --help, bad options reported in
# one style (the binary's name, not its path; no getopt wording), a negative number named as a
# bad value rather than an unknown option, and a queue that does not exist is said to not exist;
# every binary takes --log-level.
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
run 2 "invalid value '-5/1s'" "$bin/sluice-admin" --redis "$url" limit jobs set x queue -5/1s # not the element before it
run 1 "queue nosuchqueue-$$ does not exist" "$bin/sluice-admin" --redis "$url" stats "nosuchqueue-$$"
# per-command help: that command's lines and the options it takes, nothing else
run 0 "dead list QUEUE" "$bin/sluice-admin" dead list --help
grep -q -- "--limit N" "$tmp/out" || fail "dead --help lacks --limit: $(cat "$tmp/out")"
if grep -qE -- "stats QUEUE|--sample" "$tmp/out"; then
    fail "dead --help shows other commands' lines: $(cat "$tmp/out")"
fi
run 0 "--sample MS" "$bin/sluice-admin" stats --help

# --log-level, in every binary: in --help, a bad level is a usage error naming it (exit 2), and
# a level makes the connection's events key=value lines on stderr (the blocking clients are
# quiet by default). A private server whose library is flushed before each run: loading it is an
# event=library_loaded line.
all="sluice-enqueue sluice-worker sluice-admin sluice-gateway sluice-limit sluice-bench"
for b in $all; do
    "$bin/$b" --help >"$tmp/help" 2>&1 || true
    grep -q -- "--log-level" "$tmp/help" || fail "$b --help does not list --log-level"
done
run 2 '^sluice-enqueue: --log-level: "loud" is not error' "$bin/sluice-enqueue" -q x --log-level loud x
run 2 '^sluice-worker: --log-level: "loud" is not error' "$bin/sluice-worker" -q x --log-level loud
run 2 '^sluice-admin: --log-level: "loud" is not error' "$bin/sluice-admin" --log-level loud stats x
run 2 '^sluice-gateway: --log-level: "loud" is not error' "$bin/sluice-gateway" --log-level loud \
    --listen 127.0.0.1:0 -q x
run 2 '^sluice-limit: --log-level: "loud" is not error' "$bin/sluice-limit" --log-level loud ns k=1/s
run 2 '^sluice-bench: --log-level: "loud" is not error' "$bin/sluice-bench" --log-level loud admit
redis-server --port 0 --unixsocket "$tmp/r.sock" --save '' --appendonly no --daemonize no \
    >"$tmp/redis.log" 2>&1 &
pids+=("$!")
for _ in $(seq 1 100); do [ -S "$tmp/r.sock" ] && break; sleep 0.05; done
ru="unix://$tmp/r.sock"
lq="logq-$$"
# logs NAME COMMAND...: with the library flushed, COMMAND exits 0 or 1 and its stderr has an
# event=library_loaded line of prog=NAME
logs() {
    local name=$1 rc=0
    shift
    redis-cli -s "$tmp/r.sock" FUNCTION FLUSH >/dev/null
    "$@" >"$tmp/out" 2>"$tmp/err" || rc=$?
    [ "$rc" -le 1 ] || fail "$* exited $rc: $(cat "$tmp/err")"
    grep -q "level=info prog=$name event=library_loaded" "$tmp/err" ||
        fail "$* logged no event=library_loaded: $(cat "$tmp/err")"
}
logs sluice-enqueue "$bin/sluice-enqueue" -r "$ru" -q "$lq" --log-level info a b
logs sluice-admin "$bin/sluice-admin" -r "$ru" --log-level info capacity "$lq" 10
logs sluice-limit "$bin/sluice-limit" -r "$ru" --log-level info ns k=5/s
logs sluice-worker "$bin/sluice-worker" -r "$ru" -q "$lq" --log-level info --handler noop \
    --max-messages 2
logs sluice-bench "$bin/sluice-bench" --log-level info admit --redis "$ru" --queue "$lq-b" --count 10 \
    --batch-count 10
redis-cli -s "$tmp/r.sock" FUNCTION FLUSH >/dev/null
run 0 'admitted=1' "$bin/sluice-enqueue" -r "$ru" -q "$lq" c # quiet without --log-level
grep -q 'event=' "$tmp/out" && fail "sluice-enqueue logged without --log-level: $(cat "$tmp/out")"

# scripts/demo --help: its whole description (to the last sentence) and every option with its
# default
run 0 'stops everything it started\.$' "${SLUICE_SOURCE_DIR:?}/scripts/demo" --duration 5 --help
for o in '--duration S .*\(20\)' '--workers N .*\(2\)' '--capacity C .*\(500\)' \
    '--rate R .*\(3000' '--work-ms MS .*\(20 ms' '--pace N/DURATION .*\(none' \
    '--quiet-rate R .*\(20\)' '--tenant-pace' '--cluster '; do
    grep -qE -- "^  $o" "$tmp/out" || fail "scripts/demo --help lacks /$o/: $(cat "$tmp/out")"
done
echo "ok: --version, EXAMPLES, one error style, negative values, missing queues, --log-level," \
    "scripts/demo --help"
