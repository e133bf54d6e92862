#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# sluice-admin against the fixture's redis-server: every subcommand, human and --json output,
# exit codes (0 ok, 1 nothing to do / did not fit, 2 usage, 3 redis unavailable), capacity
# changes honoured by producers, dead-letter replay respecting capacity (and not counting as
# rejections), consumer pruning that never orphans a pending entry, and purge needing --yes.
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
q="admin-$$"
admin() { "$bin/sluice-admin" --redis "$url" "$@"; }
rcli() { redis-cli -u "$url" "$@"; }
fail() { echo "FAIL: $*" >&2; exit 1; }

# expect CODE PATTERN -- command...: exit code and an output line matching PATTERN
expect() {
    local want=$1 pattern=$2 rc=0
    shift 3
    "$@" >"$tmp/out" 2>&1 || rc=$?
    [ "$rc" -eq "$want" ] || fail "$* exited $rc, expected $want: $(cat "$tmp/out")"
    grep -qE -- "$pattern" "$tmp/out" || fail "$*: output lacks /$pattern/: $(cat "$tmp/out")"
}

# json FILE EXPR: evaluates a Python expression over the parsed object `j` (must be true)
json() {
    if command -v python3 >/dev/null; then
        python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); sys.exit(0 if eval(sys.argv[2]) else 1)' \
            "$1" "$2" || fail "JSON check failed: $2 on $(cat "$1")"
    else
        grep -q '^{' "$1" || fail "not JSON: $(cat "$1")"
    fi
}

# ---- usage and bad input (2), before any Redis call: an unreachable URL proves it ----
expect 0 "usage: sluice-admin" -- "$bin/sluice-admin" --help
expect 2 "usage: sluice-admin" -- "$bin/sluice-admin"
expect 2 "unknown command 'bogus'" -- "$bin/sluice-admin" bogus "$q"
expect 2 "unknown option '--bogus'" -- "$bin/sluice-admin" stats "$q" --bogus
expect 2 "'--prune' does not apply to 'stats'" -- "$bin/sluice-admin" stats "$q" --prune 5
expect 2 "QUEUE is required" -- "$bin/sluice-admin" stats
for name in "has space" "a{b}" "a*b" "$(printf 'x%.0s' $(seq 1 70))"; do
    expect 2 "QUEUE \"" -- "$bin/sluice-admin" --redis redis://127.0.0.1:1 stats "$name"
done
expect 2 '"5x" is not a number' -- "$bin/sluice-admin" --redis redis://127.0.0.1:1 capacity "$q" 5x
expect 2 "'-1'" -- "$bin/sluice-admin" --redis redis://127.0.0.1:1 capacity "$q" -1
expect 2 '-1 is out of range' -- "$bin/sluice-admin" --redis redis://127.0.0.1:1 capacity "$q" -- -1
expect 2 '"abc" is not a number' -- "$bin/sluice-admin" stats "$q" --sample abc
expect 2 '"soon" is not a number' -- "$bin/sluice-admin" consumers "$q" --prune soon
expect 2 '"x-1" is not a dead-letter id' -- "$bin/sluice-admin" dead show "$q" x-1
expect 2 "unknown action 'undo'" -- "$bin/sluice-admin" --redis "$url" dead undo "$q"
expect 2 '"tape" is not stream or list' -- "$bin/sluice-admin" stats "$q" --backend tape

# ---- redis unavailable (3), for every subcommand ----
for cmd in "stats $q" "watch $q --count 1" "capacity $q" "capacity $q 5" "dead list $q" \
    "dead replay $q" "consumers $q" "purge $q --yes"; do
    # shellcheck disable=SC2086
    expect 3 "refused" -- "$bin/sluice-admin" --redis redis://127.0.0.1:1 $cmd
done

# ---- capacity: shown, set, honoured by producers on their next admission ----
expect 0 "not set" -- admin capacity "$q"
admin capacity "$q" --json >"$tmp/j" && json "$tmp/j" 'j["capacity"] is None'
expect 0 "capacity of $q: 5 \(was not set" -- admin capacity "$q" 5
admin capacity "$q" --json >"$tmp/j" && json "$tmp/j" 'j["capacity"] == 5'
expect 1 "admitted=5 rejected=1 depth=5 capacity=5" -- \
    "$bin/sluice-enqueue" --redis "$url" --queue "$q" --capacity 1000 p1 p2 p3 p4 p5 p6

# ---- stats: depth / capacity, waiting vs in flight, consumers, counters and rates ----
rcli XGROUP CREATE "sluice:{$q}:stream" workers 0 >/dev/null
rcli XREADGROUP GROUP workers c1 COUNT 2 STREAMS "sluice:{$q}:stream" '>' >/dev/null
expect 0 "depth +5 / 5" -- admin stats "$q" --sample 0
grep -qE "waiting +3 +in flight 2" "$tmp/out" || fail "stats: waiting/in flight: $(cat "$tmp/out")"
grep -qE "^ +c1 +2 " "$tmp/out" || fail "stats: consumer c1 with 2 pending: $(cat "$tmp/out")"
admin stats "$q" --sample 0 --json >"$tmp/j"
json "$tmp/j" 'all(k in j for k in ("depth","capacity","pending","dead","consumers"))'
json "$tmp/j" 'j["depth"]==5 and j["capacity"]==5 and j["pending"]==2 and j["waiting"]==3'
json "$tmp/j" 'j["consumers"][0]["name"]=="c1" and j["consumers"][0]["pending"]==2'
json "$tmp/j" 'j["counters"]["admitted"]==5 and j["counters"]["rejected"]==1 and j["rates"] is None'
admin stats "$q" --sample 200 --json >"$tmp/j"
json "$tmp/j" 'j["rates"] is not None and j["sample_ms"] >= 200'

# ---- watch: refreshes, bounded by --count, stops on SIGINT ----
expect 0 "sluice-admin watch $q" -- admin watch "$q" --count 2 --interval 100
[ "$(grep -c "sluice-admin watch $q" "$tmp/out")" -eq 2 ] || fail "watch: not 2 frames"
grep -q $'\033' "$tmp/out" && fail "watch: screen escapes written to a file"
head -1 "$tmp/out" | grep -q "^sluice-admin watch $q" || fail "watch: first line is not a frame"
[ "$(awk -v h="sluice-admin watch $q" 'NR > 1 && index($0, h) == 1 && prev != "" { bad = 1 }
    { prev = $0 } END { print bad + 0 }' "$tmp/out")" = 0 ] || fail "watch: frames not separated"
admin watch "$q" --count 2 --interval 100 --json >"$tmp/w"
[ "$(wc -l <"$tmp/w")" -eq 2 ] || fail "watch --json: not 2 lines"
tail -1 "$tmp/w" >"$tmp/j" && json "$tmp/j" 'j["rates"] is not None and j["depth"]==5'
"$bin/sluice-admin" --redis "$url" watch "$q" --interval 100 >/dev/null &
wpid=$!
pids+=("$wpid")
sleep 0.5
kill -INT "$wpid"
for _ in $(seq 1 50); do kill -0 "$wpid" 2>/dev/null || break; sleep 0.1; done
kill -0 "$wpid" 2>/dev/null && fail "watch did not stop on SIGINT"
wait "$wpid" || fail "watch exited $? after SIGINT, expected 0"

# ---- dead letters: created by a worker whose handler fails ----
qd="$q-dead"
admin capacity "$qd" 3 >/dev/null
"$bin/sluice-enqueue" --redis "$url" --queue "$qd" d1 d2 d3 >/dev/null
expect 0 "dead=3" -- "$bin/sluice-worker" --redis "$url" --queue "$qd" --handler exec:false \
    --max-messages 3 --log-level error
expect 0 "dead letters of $qd: 3" -- admin dead list "$qd"
admin dead list "$qd" --json >"$tmp/j"
json "$tmp/j" 'j["dead"]==3 and sorted(e["payload"] for e in j["entries"])==["d1","d2","d3"]'
# the oldest dead letter (the handler finishes in any order) and its payload
first=$(rcli XRANGE "sluice:{$qd}:dead" - + COUNT 1 | head -1)
oldest=$(admin dead show "$qd" "$first" | sed -n 's/^ *payload *2 bytes: //p')
case "$oldest" in d[123]) ;; *) fail "dead show $first: no payload d1..d3: '$oldest'" ;; esac
expect 1 "no dead letter 1-1" -- admin dead show "$qd" 1-1

# replay respects capacity: 2 waiting of 3 -> one fits, two stay; no rejection is counted
"$bin/sluice-enqueue" --redis "$url" --queue "$qd" w1 w2 >/dev/null
rejected_before=$(rcli HGET "sluice:{$qd}:stats" rejected)
expect 1 "2 did not fit" -- admin dead replay "$qd"
grep -q "replayed 1 dead letter into $qd" "$tmp/out" || fail "replay: $(cat "$tmp/out")"
[ "$(rcli XLEN "sluice:{$qd}:stream")" = 3 ] || fail "replay went over capacity"
[ "$(rcli XLEN "sluice:{$qd}:dead")" = 2 ] || fail "replay did not delete exactly the replayed one"
[ "$(rcli HGET "sluice:{$qd}:stats" rejected)" = "$rejected_before" ] ||
    fail "replay counted rejections"
rcli --raw XRANGE "sluice:{$qd}:stream" - + | grep -q "$oldest" ||
    fail "the oldest dead letter ($oldest) was not the one replayed"
rc=0
admin dead replay "$qd" --json >"$tmp/j" || rc=$?
[ "$rc" = 1 ] || fail "replay with nothing fitting exited $rc, expected 1"
json "$tmp/j" 'j["replayed"]==0 and j["not_fitted"]==2 and len(j["kept"])==2'
# with room: the named one first, then the rest; then nothing is left to do
admin capacity "$qd" 10 >/dev/null
second=$(rcli XREVRANGE "sluice:{$qd}:dead" + - COUNT 1 | head -1)
expect 0 "replayed 1 dead letter" -- admin dead replay "$qd" "$second" "$second"
expect 0 "replayed 1 dead letter" -- admin dead replay "$qd"
expect 1 "nothing to replay" -- admin dead replay "$qd"
[ "$(rcli XLEN "sluice:{$qd}:stream")" = 5 ] || fail "depth after replays is not 5"
# a letter with no body is skipped and stays dead, a missing one is reported; nothing is admitted
nb=$(rcli XADD "sluice:{$qd}:dead" '*' id 1-1 m '' deliveries 5 consumer c reason gone)
expect 1 "1 have no body .* stay in the dead stream" -- admin dead replay "$qd"
grep -q "kept $nb" "$tmp/out" || fail "replay: letter with no body not listed: $(cat "$tmp/out")"
rc=0
admin dead replay "$qd" "$nb" 1-1 --json >"$tmp/j" 2>/dev/null || rc=$?
[ "$rc" = 1 ] || fail "replay of a body-less and a missing letter exited $rc, expected 1"
json "$tmp/j" 'j["replayed"]==0 and j["skipped_no_body"]==1 and j["not_found"]==1'
json "$tmp/j" 'j["kept"]==["'"$nb"'"]'
[ "$(rcli XLEN "sluice:{$qd}:dead")" = 1 ] || fail "the letter with no body left the dead stream"
[ "$(rcli XLEN "sluice:{$qd}:stream")" = 5 ] || fail "a letter with no body was admitted"
rcli XDEL "sluice:{$qd}:dead" "$nb" >/dev/null

# dead purge needs --yes; by id, then all
"$bin/sluice-worker" --redis "$url" --queue "$qd" --handler exec:false --max-messages 5 \
    --log-level error >/dev/null
expect 2 "would delete 5 dead letters.*--yes" -- admin dead purge "$qd"
[ "$(rcli XLEN "sluice:{$qd}:dead")" = 5 ] || fail "dead purge without --yes deleted"
one=$(rcli XRANGE "sluice:{$qd}:dead" - + COUNT 1 | head -1)
expect 0 "deleted 1 of 1" -- admin dead purge "$qd" "$one" --yes
expect 1 "deleted 0 of 1" -- admin dead purge "$qd" "$one" --yes
# dead delete: named letters, no --yes; found and not found are counted
two=$(rcli XRANGE "sluice:{$qd}:dead" - + COUNT 1 | head -1)
expect 2 "usage: dead delete QUEUE DEAD_ID" -- admin dead delete "$qd"
expect 2 '"nope" is not a dead-letter id' -- admin dead delete "$qd" nope
expect 1 "deleted 1 of 2 dead letters of .* \(1 not found\)" -- admin dead delete "$qd" "$two" "$one"
admin dead delete "$qd" "$two" --json >"$tmp/j" || true
json "$tmp/j" 'j["deleted"]==0 and j["not_found"]==1'
admin dead purge "$qd" --yes --json >"$tmp/j" && json "$tmp/j" 'j["deleted"]==3'
[ "$(rcli XLEN "sluice:{$qd}:dead")" = 0 ] || fail "dead purge left letters"

# ---- consumers and --prune: never orphan a pending entry ----
qp="$q-prune"
s="sluice:{$qp}:stream"
"$bin/sluice-enqueue" --redis "$url" --queue "$qp" e1 e2 e3 >/dev/null
rcli XGROUP CREATE "$s" workers 0 >/dev/null
rcli XREADGROUP GROUP workers gone COUNT 1 STREAMS "$s" '>' >/dev/null # gone holds e1
rcli XGROUP CREATECONSUMER "$s" workers empty >/dev/null
expect 0 "consumers of $qp .*: 2" -- admin consumers "$qp"
admin consumers "$qp" --json >"$tmp/j"
json "$tmp/j" 'sorted((c["name"],c["pending"]) for c in j["consumers"])==[("empty",0),("gone",1)]'
sleep 0.5
# no live consumer to take gone's entry: gone is kept, its entry still pending; empty is pruned
expect 1 "kept gone: 1 pending entry and no live consumer" -- admin consumers "$qp" --prune 300
grep -q "pruned empty" "$tmp/out" || fail "prune: empty was not pruned: $(cat "$tmp/out")"
[ "$(rcli XPENDING "$s" workers - + 10 gone | grep -c -- '-')" = 1 ] || fail "gone lost its entry"
# a live consumer takes it over (delivery count unchanged); then gone is deleted
rcli XREADGROUP GROUP workers live COUNT 1 STREAMS "$s" '>' >/dev/null
expect 0 "pruned gone: 1 pending entry moved to live" -- admin consumers "$qp" --prune 300
[ "$(rcli XINFO GROUPS "$s" | sed -n '/^pending$/{n;p}')" = 2 ] || fail "pending count changed"
rcli XPENDING "$s" workers - + 10 >"$tmp/p"
[ "$(grep -c '^live$' "$tmp/p")" = 2 ] || fail "entries not owned by live: $(cat "$tmp/p")"
[ "$(sed -n 4p "$tmp/p")" = 1 ] || fail "the moved entry's delivery count changed: $(cat "$tmp/p")"
expect 1 "no consumer of $qp has been idle" -- admin consumers "$qp" --prune 600000

# ---- the list backend: stats and consumers from the processing lists ----
ql="$q-list"
"$bin/sluice-enqueue" --redis "$url" --queue "$ql" --backend list l1 l2 l3 >/dev/null
rcli FCALL sluice_list_take 3 "sluice:{$ql}:list" "sluice:{$ql}:proc:w1" "sluice:{$ql}:procs" 1 \
    >/dev/null
admin stats "$ql" --sample 0 --json >"$tmp/j"
json "$tmp/j" 'j["backend"]=="list" and j["depth"]==3 and j["waiting"]==2 and j["pending"]==1'
json "$tmp/j" 'j["consumers"][0]["name"]=="w1" and j["consumers"][0]["pending"]==1'
expect 0 "w1 +1" -- admin consumers "$ql"
expect 2 "list backend" -- admin consumers "$ql" --prune 100
# replay onto the list backend: capacity from meta, depth in meta.list_depth
admin capacity "$ql" 4 >/dev/null
for _ in 1 2; do
    rcli XADD "sluice:{$ql}:dead" '*' id 9 m replayed-body deliveries 5 consumer w1 reason x \
        >/dev/null
done
expect 1 "replayed 1 dead letter into $ql \(depth 4 / capacity 4\)" -- admin dead replay "$ql"
grep -q "1 did not fit" "$tmp/out" || fail "list replay: $(cat "$tmp/out")"
[ "$(rcli LLEN "sluice:{$ql}:list")" = 3 ] || fail "list replay: not appended to the list"
[ "$(rcli HGET "sluice:{$ql}:meta" list_depth)" = 4 ] || fail "list replay: list_depth not 4"
rcli LRANGE "sluice:{$ql}:list" 0 0 | grep -qE '^[0-9]+:replayed-body$' ||
    fail "list replay: element is not SEQ:BODY"
[ "$(rcli XLEN "sluice:{$ql}:dead")" = 1 ] || fail "list replay: dead stream not 1"

# ---- a fair queue: capacity and stats give the depth admission compares with the capacity,
# the tenant lanes' entries with the stream's (sluice/figures.h) ----
qf="$q-fair"
admin fair "$qf" on >/dev/null
"$bin/sluice-enqueue" --redis "$url" --queue "$qf" --tenant A a1 a2 a3 >/dev/null
"$bin/sluice-enqueue" --redis "$url" --queue "$qf" s1 >/dev/null # no tenant: the stream
[ "$(rcli HGET "sluice:{$qf}:meta" lane_depth)" = 3 ] || fail "fair: 3 entries not in a lane"
expect 0 "capacity of $qf: 5 \(was not set; depth 4\)" -- admin capacity "$qf" 5
admin capacity "$qf" 5 --json >"$tmp/j" && json "$tmp/j" 'j["depth"] == 4'
expect 0 "depth +4 / 5" -- admin stats "$qf" --sample 0
admin stats "$qf" --sample 0 --json >"$tmp/j" && json "$tmp/j" 'j["depth"] == 4'
expect 1 "admitted=1 rejected=1 depth=5 capacity=5" -- \
    "$bin/sluice-enqueue" --redis "$url" --queue "$qf" --tenant B b1 b2
expect 0 "note: depth is above the new capacity" -- admin capacity "$qf" 4
admin purge "$qf" --yes >/dev/null

# ---- purge: only with --yes; every key of the queue, none of another ----
# an idempotency key record for purge to find (a stream producer on the list queue is refused
# by the server: SLUICECONFIG, exit 3)
rc=0
"$bin/sluice-enqueue" --redis "$url" --queue "$ql" --idempotency-key k1 x >/dev/null 2>&1 || rc=$?
[ "$rc" = 3 ] || fail "a stream producer on a list queue exited $rc, expected 3"
admin capacity "$q" 100 >/dev/null
"$bin/sluice-enqueue" --redis "$url" --queue "$q" --idempotency-key k1 x >/dev/null
[ "$(rcli EXISTS "sluice:{$q}:idem:k1")" = 1 ] || fail "no idempotency record to purge"
"$bin/sluice-enqueue" --redis "$url" --queue "$q-other" keep >/dev/null
expect 2 "would delete .* keys of queue $q.*--yes" -- admin purge "$q"
[ "$(rcli EXISTS "sluice:{$q}:stream")" = 1 ] || fail "purge without --yes deleted"
expect 0 "deleted [0-9]+ keys of queue $q" -- admin purge "$q" --yes
[ -z "$(rcli --scan --pattern "sluice:{$q}:*")" ] || fail "purge left keys of $q"
expect 1 "deleted 0 keys" -- admin purge "$q" --yes
admin purge "$ql" --yes --json >"$tmp/j" && json "$tmp/j" 'j["deleted"] >= 5'
[ -z "$(rcli --scan --pattern "sluice:{$ql}:*")" ] || fail "purge left list keys (proc lists?)"
[ "$(rcli XLEN "sluice:{$q-other}:stream")" = 1 ] || fail "purge touched another queue"
for x in "$qd" "$qp" "$q-other"; do admin purge "$x" --yes >/dev/null; done
echo "test_admin: ok"
