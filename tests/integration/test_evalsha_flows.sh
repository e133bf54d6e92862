#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Every server function through its EVALSHA script, as the binaries run them on a server
# without FUNCTION (its own redis-server with FUNCTION renamed away, so every connection of
# every binary takes that path). Each script carries only the modules of its "-- @needs" line;
# a module left out fails only when a call reaches it ("Script attempted to access nonexistent
# global variable"), so the main flows of each function run here: admission with a limit of
# every algorithm and scope on both backends (admit2, list_admit2, limits_config), the stream
# worker's read, ack, retry, dead letter and reclaim after a kill -9 (group, ack, retry, dead,
# reclaim, touch), the list worker's take, ack, dead letter and recovery (list_*), replay of
# both backends, a drain limit (take) and a fair queue with weights, reclaimed (fair_config,
# fair_take, lane_ack, lane_reclaim), consumers --prune (prune), and the standalone limiter.
# No line of any log may name a script error, and the counters must add up. Every function's
# script, as scripts/lua-script prints it, loads (compiles) on the server.
. "$(dirname "$0")/lib.sh"
src=${SLUICE_SOURCE_DIR:?run through ctest}
srv="$tmp/redis"
"$src/scripts/test-redis" start "$srv" --no-aof -- --rename-command FUNCTION '""' >/dev/null
pids+=("$(cat "$srv/pid")")
url=$(cat "$srv/url")
rcli FUNCTION LIST 2>&1 | grep -q "unknown command" || fail "FUNCTION is still there"
A() { "$bin/sluice-admin" --redis "$url" "$@"; }
E() { "$bin/sluice-enqueue" --redis "$url" "$@"; }
nw=0
# W ARGS...: a worker run to its --max-messages (30 s at most), its log kept for the checks
W() {
    nw=$((nw + 1))
    logs+=("$tmp/w$nw")
    timeout 30 "$bin/sluice-worker" --redis "$url" "$@" >/dev/null 2>"$tmp/w$nw" ||
        fail "sluice-worker $* exited $?: $(tail -3 "$tmp/w$nw")"
}
# K ARGS...: a worker in the background, to be killed with -9 (its pid in kpid)
K() {
    nw=$((nw + 1))
    logs+=("$tmp/w$nw")
    "$bin/sluice-worker" --redis "$url" "$@" >/dev/null 2>"$tmp/w$nw" &
    kpid=$!
    pids+=("$kpid")
}
kill9() {
    kill -KILL "$kpid"
    wait "$kpid" 2>/dev/null || true
}
stat() { rcli HGET "sluice:{$1}:stats" "$2"; }
logs=()

# ---- admission: a limit of each algorithm and scope, on both backends ----
for be in stream list; do
    for alg in gcra window log fixed gate; do
        for scope in queue tenant client; do
            q="ev-$be-$alg-$scope"
            run 0 "limit L on $q" A limit "$q" set L "$scope" 3/10s --algorithm "$alg"
            want=3
            [ "$alg" = gate ] && want=1
            run 1 "admitted=$want rejected=$((5 - want)) .*by L" \
                E --queue "$q" --backend "$be" --tenant acme a b c d e
        done
    done
done

# ---- the stream worker: acks, retries, dead letters ----
q=ev-stream
seq -f 'ok%g' 1 5 | E --queue "$q" >/dev/null
W --queue "$q" --max-messages 5
[ "$(stat "$q" acked)" = 5 ] || fail "stream: acked $(stat "$q" acked), expected 5"
E --queue "$q" bad1 bad2 >/dev/null
printf '#!/bin/sh\nexit 75\n' >"$tmp/retry.sh"
chmod +x "$tmp/retry.sh"
W --queue "$q" --handler "exec:$tmp/retry.sh" --max-deliveries 2 --retry-backoff 10 --max-messages 4
[ "$(stat "$q" dead)" = 2 ] && [ "$(stat "$q" retried)" -ge 2 ] ||
    fail "stream: dead $(stat "$q" dead) retried $(stat "$q" retried), expected 2 and >= 2"
# replay the dead letters, then drain them
run 0 "replayed 2" A dead replay "$q"
W --queue "$q" --max-messages 2
[ "$(stat "$q" acked)" = 7 ] || fail "stream replay: acked $(stat "$q" acked), expected 7"

# ---- reclaim after a kill -9 (touch keeps the entries of the long handler meanwhile) ----
q=ev-reclaim
E --queue "$q" r1 r2 r3 >/dev/null
K --queue "$q" --consumer dead1 --handler sleep:20000 --visibility-timeout 600
for _ in $(seq 1 50); do
    [ "$(rcli XPENDING "sluice:{$q}:stream" workers | head -1)" = 3 ] && break
    sleep 0.1
done
sleep 1 # the long handler's entries are touched while it runs
kill9
W --queue "$q" --consumer c2 --visibility-timeout 300 --max-messages 3
[ "$(stat "$q" acked)" = 3 ] && [ "$(stat "$q" reclaimed)" -ge 3 ] ||
    fail "reclaim: acked $(stat "$q" acked) reclaimed $(stat "$q" reclaimed), expected 3, >= 3"
run 0 "dead1" A consumers "$q" --prune 1

# ---- the list backend: take, ack, dead letters, recovery, replay ----
q=ev-list
E --queue "$q" --backend list l1 l2 l3 >/dev/null
K --queue "$q" --backend list --consumer c1 --handler sleep:20000
for _ in $(seq 1 50); do
    [ "$(rcli LLEN "sluice:{$q}:proc:c1")" = 3 ] && break
    sleep 0.1
done
kill9
W --queue "$q" --backend list --consumer c1 --handler exec:false --max-deliveries 1 \
    --max-messages 3
[ "$(stat "$q" dead)" = 3 ] || fail "list: dead $(stat "$q" dead), expected 3"
run 0 "replayed 3" A dead replay "$q" --backend list
W --queue "$q" --backend list --consumer c1 --max-messages 3
[ "$(stat "$q" acked)" = 3 ] || fail "list: acked $(stat "$q" acked), expected 3"

# ---- a drain limit (take) ----
q=ev-paced
run 0 "limit D on $q" A limit "$q" set D drain 50/1s
seq -f 'p%g' 1 5 | E --queue "$q" >/dev/null
W --queue "$q" --max-messages 5
[ "$(stat "$q" acked)" = 5 ] || fail "paced: acked $(stat "$q" acked), expected 5"

# ---- a fair queue with weights, a lane reclaimed after a kill -9 ----
q=ev-fair
run 0 "on" A fair "$q" on --weight a=3
run 0 "limit T on $q" A limit "$q" set T drain-tenant 100/1s
for t in a b; do E --queue "$q" --tenant "$t" "${t}1" "${t}2" "${t}3" >/dev/null; done
K --queue "$q" --consumer f1 --handler sleep:20000 --concurrency 2 --visibility-timeout 600
for _ in $(seq 1 50); do
    grep -q "event=redis_up conn=read" "$tmp/w$nw" && break
    sleep 0.1
done
sleep 1
kill9
W --queue "$q" --consumer f2 --visibility-timeout 300 --max-messages 6
[ "$(stat "$q" acked)" = 6 ] || fail "fair: acked $(stat "$q" acked), expected 6"

# ---- the standalone limiter (sluice_limit), as the C limiter calls it ----
script=$("$src/scripts/lua-script" "$SLUICE_BIN_DIR/../common/sluice_lua.c.lua" limit)
lk="ev-lim"
r=$(for _ in 1 2 3; do rcli EVAL "$script" 1 "$lk" 1 gcra:2:10000 | head -1; done | paste -sd' ')
[ "$r" = "1 1 0" ] || fail "sluice_limit: allowed '$r', expected '1 1 0'"

# ---- the scripts the clients sent are those scripts/lua-script prints (two builders of one
# text: common/src/scripts.c and the script); checked before anything else loads them ----
lib="$SLUICE_BIN_DIR/../common/sluice_lua.c.lua"
for f in admit2 ack take lane_ack list_take; do
    sha=$("$src/scripts/lua-script" "$lib" "$f" | sha1sum | cut -d' ' -f1)
    [ "$(rcli SCRIPT EXISTS "$sha")" = 1 ] ||
        fail "the clients did not send the script scripts/lua-script prints for $f ($sha)"
done

# ---- every function's script compiles on the server (as scripts/lua-script prints it) ----
for f in $(sed -n 's/^-- @needs \([a-z_0-9]*\):.*/\1/p' "$lib"); do
    sha=$("$src/scripts/lua-script" "$lib" "$f" | rcli -x SCRIPT LOAD 2>&1)
    [[ "$sha" =~ ^[0-9a-f]{40}$ ]] || fail "the EVALSHA script of $f does not load: $sha"
done
v=$(sed -n "s/^local VERSION = '\([^']*\)'.*/\1/p" "$lib")
[ "$(rcli EVAL "$("$src/scripts/lua-script" "$lib" version)" 0)" = "$v" ] ||
    fail "the version script does not answer $v"

# ---- every log: the EVALSHA mode, and no script error ----
for f in "${logs[@]}"; do
    grep -q "mode=evalsha" "$f" || fail "$f: no connection in EVALSHA mode: $(head -5 "$f")"
    if grep -iE "nonexistent global|script|level=error" "$f"; then
        fail "$f: a script error (above)"
    fi
done
echo "test_evalsha_flows: ok"
