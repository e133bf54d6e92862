#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# sluice-admin consumers on a fair queue: what a consumer holds in the tenant lanes is counted
# (a stopped worker holding lane entries does not show 0), and --prune moves its lane entries to
# a live worker of the lane before deleting it, so they are processed: nothing lost, each once.
. "$(dirname "$0")/lib.sh"
q="admin-lanes-$$"
A() { "$bin/sluice-admin" --redis "$url" "$@"; }
E() { "$bin/sluice-enqueue" --redis "$url" --capacity 1000 "$@"; }
worker=("$bin/sluice-worker" --redis "$url" --log-level error) # started directly: $! is its PID
trap 'for x in "" -ghost; do A purge "$q$x" --yes >/dev/null 2>&1 || true; done; lib_cleanup' EXIT
lanes_in_flight() { # the entries delivered and not settled, over the three lanes
    local n=0 t p
    for t in t1 t2 t3; do
        p=$(rcli XPENDING "sluice:{$q}:lane:$t" workers 2>/dev/null | head -n 1)
        case "$p" in '' | *[!0-9]*) ;; *) n=$((n + p)) ;; esac
    done
    echo "$n"
}
json() { python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); sys.exit(0 if eval(sys.argv[2]) else 1)' "$@"; }
held_field() { # FIELD of consumer held in `consumers --json`
    A consumers "$q" --json >"$tmp/j"
    python3 -c 'import json,sys
j=json.load(open(sys.argv[1]))
print(next((c[sys.argv[2]] for c in j["consumers"] if c["name"]=="held"), -1))' "$tmp/j" "$1"
}

run 0 'fair .*: on' A fair "$q" on
for t in t1 t2 t3; do E --queue "$q" --tenant "$t" "$t-a" "$t-b" >/dev/null; done

# held takes 3 lane entries and keeps them (its handler sleeps a minute), then stops
"${worker[@]}" --queue "$q" --consumer held --handler sleep:60000 --concurrency 3 >/dev/null &
hpid=$!
pids+=("$hpid")
for i in $(seq 1 100); do
    [ "$(lanes_in_flight)" -ge 3 ] && break
    sleep 0.1
done
kill -STOP "$hpid"
[ "$(lanes_in_flight)" = 3 ] || fail "held took $(lanes_in_flight) lane entries, expected 3"

# consumers counts them: 3 pending, all in lanes
run 0 'held +3 +3 ' A consumers "$q"
A consumers "$q" --json >"$tmp/j"
json "$tmp/j" '[(c["pending"],c["stream_pending"],c["lane_pending"]) for c in j["consumers"]
    if c["name"]=="held"]==[(3,0,3)] and j["lanes_walked"]==3 and not j["lanes_cut"]'
kill -KILL "$hpid"
for i in $(seq 1 100); do # held idle 1 s at least
    [ "$(held_field idle_ms)" -ge 1000 ] && break
    sleep 0.1
done
# no live consumer to take them: held is kept, its lane entries stay its own
run 1 'kept held: holds 3 entries in [1-3] lanes?; not pruned' A consumers "$q" --prune 500
[ "$(held_field lane_pending)" = 3 ] || fail "held after a refused prune: $(cat "$tmp/j")"

# live: its visibility timeout (12 s) keeps it from reclaiming held's entries before the prune
"${worker[@]}" --queue "$q" --consumer live --handler noop --concurrency 2 \
    --visibility-timeout 12000 --record "$tmp/r" >/dev/null &
pids+=("$!")
wait_lines "$tmp/r" 3 10
[ "$(wc -l <"$tmp/r")" = 3 ] || fail "live processed $(wc -l <"$tmp/r") of the 3 waiting"
for i in $(seq 1 100); do # held idle 2.5 s at least
    [ "$(held_field idle_ms)" -ge 2500 ] && break
    sleep 0.1
done
E --queue "$q" --tenant t1 t1-c >/dev/null # live reads again: it is the live consumer
wait_lines "$tmp/r" 4 10
run 0 'pruned held: 3 entries in lanes moved to live consumers' A consumers "$q" --prune 2000
grep -q 'pruned 1, kept 0, moved 3 pending entries' "$tmp/out" || fail "tally: $(cat "$tmp/out")"
for t in t1 t2 t3; do
    if rcli XPENDING "sluice:{$q}:lane:$t" workers - + 10 2>/dev/null | grep -qx held; then
        fail "lane $t: held still owns an entry"
    fi
done
[ "$(lanes_in_flight)" = 3 ] || fail "in flight after the prune: $(lanes_in_flight), expected 3"
[ "$(held_field pending)" = -1 ] || fail "held is still a consumer: $(cat "$tmp/j")"

# live's reclaim pass takes them once idle 12 s (their idle time moved with them)
wait_lines "$tmp/r" 7 25
cut -d' ' -f2 "$tmp/r" | sort >"$tmp/got"
printf '%s\n' t1-a t1-b t1-c t2-a t2-b t3-a t3-b >"$tmp/want"
cmp -s "$tmp/got" "$tmp/want" || fail "processed: $(paste -sd' ' "$tmp/got")"
for i in $(seq 1 50); do
    [ "$(rcli HGET "sluice:{$q}:stats" acked)" = 7 ] && break
    sleep 0.1
done
[ "$(rcli HGET "sluice:{$q}:stats" acked)" = 7 ] || fail "acked $(rcli HGET "sluice:{$q}:stats" acked)"
run 0 'depth +0 ' A stats "$q" --sample 0

# a consumer that holds lane entries but is not in the stream's group is listed too
qg="$q-ghost"
run 0 'fair .*: on' A fair "$qg" on
E --queue "$qg" --tenant t9 g1 >/dev/null
rcli XGROUP CREATE "sluice:{$qg}:lane:t9" workers 0 >/dev/null 2>&1 || true
rcli XREADGROUP GROUP workers ghost COUNT 1 STREAMS "sluice:{$qg}:lane:t9" '>' >/dev/null
run 0 'ghost +1 +1 ' A consumers "$qg"
A purge "$qg" --yes >/dev/null

# the walk over the lanes stops at 10,000 and says so
qc="$q-cut"
keys+=("sluice:{$qc}:lanes")
seq 1 10001 | sed 's/.*/t& 1/' | tr '\n' ' ' | xargs redis-cli -u "$url" HSET "sluice:{$qc}:lanes" >/dev/null
run 0 'note: only the first 10000 tenant lanes were looked in' A consumers "$qc"
A consumers "$qc" --json >"$tmp/j"
json "$tmp/j" 'j["lanes_walked"]==10000 and j["lanes_cut"]'
echo "ok: consumers counts lane entries (10,000 lanes at most, said); --prune moves them to a live worker: all processed once"
